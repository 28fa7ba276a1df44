//! The golden values of spec Appendix A, computed from the shared fixtures, and reference tests
//! 17–21 of §11 that use them. Migrated v1 ids are random, so entries are named by position.

use compactd_core::compaction::{
    CompactionSettings, CutPoint, Preparation, build_session_context, estimate_tokens,
    find_cut_point, prepare_compaction, serialize_conversation,
};
use compactd_core::session::{Entry, EntryKind, Message, ParseOptions, Session};
use sha2::{Digest, Sha256};

use crate::fixture;

fn load(name: &str) -> Session {
    Session::parse(&fixture(name), ParseOptions::default()).expect("fixture parses strictly")
}

fn sha256(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn units(text: &str) -> usize {
    text.encode_utf16().count()
}

fn role_counts(messages: &[&Message]) -> [usize; 5] {
    let mut counts = [0; 5];
    for m in messages {
        let slot = match m {
            Message::User { .. } => 0,
            Message::Assistant { .. } => 1,
            Message::ToolResult { .. } => 2,
            Message::BashExecution(_) => 3,
            _ => 4,
        };
        counts[slot] += 1;
    }
    counts
}

fn message_entries<'a>(path: &[&'a Entry]) -> Vec<&'a Message> {
    path.iter().filter_map(|e| e.stored_message()).collect()
}

/// The session with a pi-shaped compaction entry appended at the leaf, as a client would write it.
fn with_compaction(session: &Session, prep: &Preparation<'_>) -> Session {
    let leaf = &session.entries[session.leaf().unwrap()];
    let entry = serde_json::json!({
        "type": "compaction", "id": "c0mpac7d", "parentId": leaf.id,
        "timestamp": "2026-03-01T12:00:00.000Z", "summary": "SUMMARY",
        "firstKeptEntryId": prep.first_kept_entry_id, "tokensBefore": prep.tokens_before,
        "details": {"readFiles": [], "modifiedFiles": []}, "fromHook": false
    });
    let text = format!("{}{entry}\n", session.to_jsonl());
    Session::parse(text.as_bytes(), ParseOptions::default()).unwrap()
}

#[test]
fn large_session_migrates_and_rebuilds_its_context() {
    let session = load("large-session.jsonl");
    assert_eq!(session.source_version, 1);
    assert_eq!(session.entries.len(), 1018);
    let path = session.active_path(None).unwrap();
    assert_eq!(path.len(), 1018, "v1 migration makes one linear chain");
    let messages = message_entries(&path);
    assert_eq!(messages.len(), 914);
    assert_eq!(role_counts(&messages), [88, 453, 373, 0, 0]);
    let kinds = |t: &str| {
        session
            .entries
            .iter()
            .filter(|e| e.entry_type().as_str() == t)
            .count()
    };
    assert_eq!(
        (kinds("thinking_level_change"), kinds("model_change")),
        (103, 1)
    );

    // Reference tests 17 and 19, with the exact values.
    let context = build_session_context(&path);
    assert_eq!(context.messages().len(), 914);
    assert_eq!(context.thinking_level.as_deref(), Some("off"));
    let model = context.model.unwrap();
    assert_eq!(
        (model.provider.as_deref(), model.model_id.as_deref()),
        (Some("anthropic"), Some("claude-sonnet-4-5"))
    );
    assert_eq!(
        messages.iter().map(|m| estimate_tokens(m)).sum::<u64>(),
        124_661
    );
}

#[test]
fn large_session_plans_the_reference_cut_and_conversation() {
    let session = load("large-session.jsonl");
    let path = session.active_path(None).unwrap();
    let cut = find_cut_point(&path, 0, path.len(), 20_000);
    assert_eq!(
        cut,
        CutPoint {
            first_kept_entry_index: 837,
            turn_start_index: Some(834),
            is_split_turn: true
        }
    );
    // Reference test 18: the cut entry is a user or assistant message (here an assistant).
    assert!(matches!(
        path[837].kind,
        EntryKind::Message(Message::Assistant { .. })
    ));

    let prep = prepare_compaction(&path, &CompactionSettings::default()).unwrap();
    assert_eq!(prep.tokens_before, 177_657.0);
    assert_eq!(prep.messages_to_summarize.len(), 730);
    assert_eq!(
        role_counts(&prep.messages_to_summarize),
        [69, 361, 300, 0, 0]
    );
    assert_eq!(role_counts(&prep.turn_prefix_messages), [1, 1, 1, 0, 0]);
    let lists = prep.file_ops.lists();
    assert_eq!(
        (lists.read_files.len(), lists.modified_files.len()),
        (7, 20)
    );
    assert_eq!(lists.read_files[0], "AGENTS.md");
    assert!(
        lists
            .modified_files
            .iter()
            .any(|f| f == "~/.pi/agent/themes/nord.json")
    );

    let conversation = serialize_conversation(prep.messages_to_summarize.iter().copied());
    assert_eq!(
        (units(&conversation), conversation.len()),
        (337_644, 337_863)
    );
    assert_eq!(
        conversation.matches(" more characters truncated]").count(),
        20
    );
    assert_eq!(
        sha256(&conversation),
        "864ed812bed0c5005a7eab209858687b8cf14e60ff553796be7901885fa53d8f"
    );
    let prefix = serialize_conversation(prep.turn_prefix_messages.iter().copied());
    assert_eq!((units(&prefix), prefix.len()), (3_081, 3_429));
    assert_eq!(
        sha256(&prefix),
        "31285046fc881ba2d99886f38b7875ba002cd1c409ef9bdfe59526a3b9d14fe9"
    );

    let small = find_cut_point(&path, 0, path.len(), 2_000);
    assert_eq!(
        small,
        CutPoint {
            first_kept_entry_index: 1007,
            turn_start_index: Some(986),
            is_split_turn: true
        }
    );
}

#[test]
fn large_session_context_after_a_compaction_starts_with_the_summary() {
    // Reference tests 20–21 without a model: the entry is what compactd would append.
    let session = load("large-session.jsonl");
    let path = session.active_path(None).unwrap();
    let prep = prepare_compaction(&path, &CompactionSettings::default()).unwrap();
    let compacted = with_compaction(&session, &prep);
    let context = build_session_context(&compacted.active_path(None).unwrap());
    let messages = context.messages();
    assert_eq!(messages.len(), 182);
    assert!(
        matches!(messages[0], Message::CompactionSummary { summary, .. } if summary == "SUMMARY")
    );
    // A second plan on the compacted session has nothing new to compact right away.
    let again = prepare_compaction(
        &compacted.active_path(None).unwrap(),
        &CompactionSettings::default(),
    );
    assert!(again.is_err(), "the leaf is the compaction itself");
}

#[test]
fn before_compaction_resolves_its_v1_compaction_indices() {
    let session = load("before-compaction.jsonl");
    assert_eq!(session.entries.len(), 1002);
    let first_kept = |index: usize| match &session.entries[index].kind {
        EntryKind::Compaction {
            first_kept_entry_id: Some(id),
            message: Message::CompactionSummary { tokens_before, .. },
            ..
        } => (session.index_of(id).unwrap(), *tokens_before),
        other => panic!("entry {index} is not a compaction: {other:?}"),
    };
    assert_eq!(first_kept(358), (292, 175_004.0));
    assert_eq!(first_kept(627), (550, 185_014.0));

    let path = session.active_path(None).unwrap();
    let messages = message_entries(&path);
    assert_eq!(
        messages.iter().map(|m| estimate_tokens(m)).sum::<u64>(),
        375_427
    );
    let context = build_session_context(&path);
    let context_messages = context.messages();
    assert_eq!(context_messages.len(), 446);
    assert_eq!(role_counts(&context_messages), [31, 219, 192, 3, 1]);
    assert!(matches!(
        context_messages[0],
        Message::CompactionSummary { .. }
    ));
    assert_eq!(context.thinking_level.as_deref(), Some("off"));
    assert_eq!(
        context.model.unwrap().model_id.as_deref(),
        Some("claude-opus-4-5")
    );
}

#[test]
fn before_compaction_plans_with_pi_next_semantics() {
    let session = load("before-compaction.jsonl");
    let path = session.active_path(None).unwrap();
    let prep = prepare_compaction(&path, &CompactionSettings::default()).unwrap();
    assert_eq!(prep.previous_compaction_index, Some(627));
    assert_eq!(
        prep.boundary_start, 550,
        "PI-NEXT starts at the previous first kept entry"
    );
    assert_eq!(
        prep.cut,
        CutPoint {
            first_kept_entry_index: 946,
            turn_start_index: Some(939),
            is_split_turn: true
        }
    );
    assert_eq!(prep.tokens_before, 180_820.0);
    assert_eq!(prep.messages_to_summarize.len(), 383);
    assert_eq!(prep.turn_prefix_messages.len(), 7);
    assert!(
        prep.previous_summary
            .is_some_and(|s| s.starts_with("# Context Checkpoint"))
    );
    let lists = prep.file_ops.lists();
    assert_eq!(lists.modified_files.len(), 12);

    let conversation = serialize_conversation(prep.messages_to_summarize.iter().copied());
    assert_eq!(units(&conversation), 344_968);
    assert_eq!(
        sha256(&conversation),
        "60e27c0f419474b1795c74e0fd6151f868a16a2165619d2c81536e72020a24bd"
    );
    let prefix = serialize_conversation(prep.turn_prefix_messages.iter().copied());
    assert_eq!(units(&prefix), 5_574);
    assert_eq!(
        sha256(&prefix),
        "67947131b8b07bb68fa1817e3d0292c0001dd8a78e685d762bb0cf3b3719bf0c"
    );

    let compacted = with_compaction(&session, &prep);
    assert_eq!(
        build_session_context(&compacted.active_path(None).unwrap())
            .messages()
            .len(),
        56
    );

    // §4.9-9 on real data: with keep 2000 the cut is at a bashExecution, flagged split with an
    // empty prefix.
    let small = find_cut_point(&path, 0, path.len(), 2_000);
    assert_eq!(
        small,
        CutPoint {
            first_kept_entry_index: 1000,
            turn_start_index: Some(1000),
            is_split_turn: true
        }
    );
    assert!(matches!(
        path[1000].kind,
        EntryKind::Message(Message::BashExecution(_))
    ));
}

#[test]
fn migrated_fixtures_round_trip_as_v3() {
    for name in ["large-session.jsonl", "before-compaction.jsonl"] {
        let session = load(name);
        let text = session.to_jsonl();
        let again = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
        assert_eq!(again.source_version, 3);
        assert_eq!(
            again.to_jsonl(),
            text,
            "{name}: a v3 file comes back byte for byte"
        );
        assert_eq!(again.entries, session.entries);
    }
}

#[test]
fn the_thinking_code_fixture_serializes_its_blocks_in_order() {
    let message: Message =
        serde_json::from_slice(&fixture("assistant-message-with-thinking-code.json")).unwrap();
    let raw: serde_json::Value =
        serde_json::from_slice(&fixture("assistant-message-with-thinking-code.json")).unwrap();
    let field = |kind: &str, key: &str| -> Vec<String> {
        raw["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == kind)
            .map(|b| b[key].as_str().unwrap().to_owned())
            .collect()
    };
    let (thinking, text) = (field("thinking", "thinking"), field("text", "text"));
    assert!(!thinking.is_empty() && !text.is_empty());
    let expected = format!(
        "[Assistant thinking]: {}\n\n[Assistant]: {}",
        thinking.join("\n"),
        text.join("\n")
    );
    assert_eq!(serialize_conversation([&message]), expected);
    let chars: usize = thinking.iter().chain(&text).map(|t| units(t)).sum();
    assert_eq!(estimate_tokens(&message), chars.div_ceil(4) as u64);
}
