//! Planner and context tests: every edge case of spec §4.9 and the pure reference tests of §11
//! (numbers in the test names refer to those lists).

use serde_json::json;

use super::*;
use crate::session::{Entry, Message, Session};
use crate::testkit::{SessionBuilder, chars};

fn path_of(session: &Session) -> Vec<&Entry> {
    session.active_path(None).unwrap()
}

fn cut(session: &Session, keep: u64) -> CutPoint {
    let path = path_of(session);
    find_cut_point(&path, 0, path.len(), keep)
}

fn settings(keep: u64) -> CompactionSettings {
    CompactionSettings {
        keep_recent_tokens: keep,
        ..CompactionSettings::default()
    }
}

fn roles(messages: &[&Message]) -> Vec<String> {
    messages.iter().map(|m| m.role().to_owned()).collect()
}

fn texts(context: &SessionContext<'_>) -> Vec<String> {
    context
        .messages()
        .iter()
        .map(|m| match m {
            Message::CompactionSummary { summary, .. } => format!("summary:{summary}"),
            Message::BranchSummary { summary, .. } => format!("branch:{summary}"),
            Message::User { content } => content.joined_text().into_owned(),
            Message::Assistant { content, .. } => {
                crate::session::joined_text_blocks(content).into_owned()
            }
            other => other.role().to_owned(),
        })
        .collect()
}

// ---- §4.9 edge cases -------------------------------------------------------------------------

#[test]
fn edge_1_an_empty_path_has_nothing_to_compact() {
    let session = SessionBuilder::new().session();
    assert_eq!(
        prepare_compaction(&path_of(&session), &settings(20_000)).unwrap_err(),
        NothingToCompact::EmptySession
    );
}

#[test]
fn edge_2_a_path_ending_in_a_compaction_is_already_compacted() {
    let mut b = SessionBuilder::new();
    let u = b.user("hello");
    b.assistant("hi");
    b.compaction("S", &u, 10);
    let session = b.session();
    assert_eq!(
        prepare_compaction(&path_of(&session), &settings(1)).unwrap_err(),
        NothingToCompact::AlreadyCompacted
    );
    let outcome = PlanOutcome::for_path(&path_of(&session), &settings(1));
    assert!(outcome.plan.is_none());
    assert_eq!(outcome.nothing, Some(NothingReason::AlreadyCompacted));
}

#[test]
fn edge_3_no_cut_point_in_range_keeps_from_the_boundary_and_summarizes_nothing() {
    let mut b = SessionBuilder::new();
    b.user("u1");
    b.tool_call("read", json!({"path": "a"}));
    // firstKeptEntryId that is not on the path: the boundary falls back to just after it.
    b.compaction("S", "missing", 10);
    b.tool_result("only tool results after the compaction");
    b.thinking_level("high");
    let session = b.session();
    let path = path_of(&session);
    let prep = prepare_compaction(&path, &settings(1)).unwrap();
    assert_eq!(prep.boundary_start, 3);
    assert_eq!(prep.cut.first_kept_entry_index, 3);
    assert!(!prep.cut.is_split_turn);
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(prep.previous_summary, Some("S"));
    // compactd answers "nothing to summarize" instead of summarizing an empty conversation.
    assert_eq!(
        PlanOutcome::for_path(&path, &settings(1)).nothing,
        Some(NothingReason::NothingToSummarize)
    );
}

#[test]
fn edge_4_when_everything_fits_the_first_cut_point_is_kept_with_leading_metadata() {
    let mut b = SessionBuilder::new();
    b.thinking_level("high");
    b.model_change("openai", "gpt");
    for i in 0..2 {
        b.user(&format!("question {i}"));
        b.assistant(&format!("answer {i}"));
    }
    let session = b.session();
    // Four small messages with keep 50000: the cut point is the first user message (index 2),
    // and the metadata before it is pulled in down to the boundary.
    let c = cut(&session, 50_000);
    assert_eq!(c.first_kept_entry_index, 0);
    assert!(!c.is_split_turn);
    let prep = prepare_compaction(&path_of(&session), &settings(50_000)).unwrap();
    assert!(prep.is_empty());
}

#[test]
fn edge_4_reference_vector_four_small_messages_keep_everything() {
    let mut b = SessionBuilder::new();
    b.user("1");
    b.assistant("2");
    b.user("3");
    b.assistant("4");
    assert_eq!(cut(&b.session(), 50_000).first_kept_entry_index, 0);
}

#[test]
fn edge_5_a_cut_at_the_first_entry_summarizes_nothing() {
    let mut b = SessionBuilder::new();
    b.user(&chars(400));
    b.assistant("ok");
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(50)).unwrap();
    assert_eq!(prep.cut.first_kept_entry_index, 0);
    assert!(prep.is_empty());
}

#[test]
fn edge_6_budget_reached_on_trailing_tool_results_keeps_everything() {
    let mut b = SessionBuilder::new();
    b.user("u");
    b.tool_call("read", json!({"path": "x"}));
    b.tool_result(&chars(4000));
    let c = cut(&b.session(), 100);
    assert_eq!(c.first_kept_entry_index, 0);
    assert!(!c.is_split_turn);
}

#[test]
fn edge_7_budget_reached_on_a_tool_result_moves_the_cut_forward_and_splits() {
    let mut b = SessionBuilder::new();
    b.user("u");
    b.tool_call("read", json!({"path": "src/a.rs"}));
    b.tool_result(&chars(4000));
    b.assistant("done");
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(100)).unwrap();
    assert_eq!(prep.cut.first_kept_entry_index, 3);
    assert_eq!(prep.cut.turn_start_index, Some(0));
    assert!(prep.cut.is_split_turn);
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(
        roles(&prep.turn_prefix_messages),
        ["user", "assistant", "toolResult"]
    );
    // File operations of the prefix count when the turn is split.
    assert_eq!(prep.file_ops.lists().read_files, ["src/a.rs"]);
}

#[test]
fn edge_8_and_reference_11_a_cut_inside_turn_two_splits_it_at_its_user_message() {
    let mut b = SessionBuilder::new();
    b.user("u");
    b.assistant("a");
    b.user("u2");
    b.assistant(&chars(4000));
    b.assistant(&chars(4000));
    b.assistant(&chars(4000));
    let c = cut(&b.session(), 1500);
    assert_eq!(c.first_kept_entry_index, 4);
    assert_eq!(c.turn_start_index, Some(2));
    assert!(c.is_split_turn);
}

#[test]
fn edge_9_a_cut_at_a_bash_execution_is_flagged_split_with_an_empty_prefix() {
    let mut b = SessionBuilder::new();
    b.user(&chars(4000));
    b.assistant(&chars(4000));
    b.bash("ls", &chars(400));
    b.assistant("ok");
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(50)).unwrap();
    assert_eq!(prep.cut.first_kept_entry_index, 2);
    assert_eq!(prep.cut.turn_start_index, Some(2));
    assert!(prep.cut.is_split_turn);
    assert!(prep.turn_prefix_messages.is_empty());
    assert_eq!(roles(&prep.messages_to_summarize), ["user", "assistant"]);
}

#[test]
fn edge_9_a_cut_pulled_onto_a_custom_message_is_split_with_an_empty_prefix() {
    let mut b = SessionBuilder::new();
    b.user(&chars(4000));
    b.assistant(&chars(4000));
    b.custom_message("extension context");
    b.assistant(&chars(400));
    let c = cut(&b.session(), 50);
    assert_eq!(c.first_kept_entry_index, 2);
    assert_eq!(c.turn_start_index, Some(2));
    assert!(c.is_split_turn);
}

#[test]
fn edge_10_metadata_before_a_user_cut_makes_the_previous_turn_the_prefix() {
    // The verified example: [u1(400), a1(400), thinking_change, u2(400), a2(400)], keep 150.
    let mut b = SessionBuilder::new();
    b.user(&chars(400));
    b.assistant(&chars(400));
    b.thinking_level("high");
    b.user(&chars(400));
    b.assistant(&chars(400));
    let session = b.session();
    let c = cut(&session, 150);
    assert_eq!(
        c,
        CutPoint {
            first_kept_entry_index: 2,
            turn_start_index: Some(0),
            is_split_turn: true
        }
    );
    let prep = prepare_compaction(&path_of(&session), &settings(150)).unwrap();
    assert!(prep.messages_to_summarize.is_empty());
    assert_eq!(roles(&prep.turn_prefix_messages), ["user", "assistant"]);
}

#[test]
fn edge_11_a_split_turn_with_no_history_still_reports_the_previous_summary() {
    let mut b = SessionBuilder::new();
    let u1 = b.user("u1");
    b.assistant("a1");
    b.compaction("previous", &u1, 10);
    b.assistant(&chars(4000));
    b.assistant(&chars(4000));
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(500)).unwrap();
    assert_eq!(prep.boundary_start, 0);
    assert!(prep.cut.is_split_turn);
    assert_eq!(prep.cut.turn_start_index, Some(0));
    assert!(prep.messages_to_summarize.is_empty());
    // The old compaction entry is not fed back as conversation.
    assert_eq!(
        roles(&prep.turn_prefix_messages),
        ["user", "assistant", "assistant"]
    );
    assert_eq!(prep.previous_summary, Some("previous"));
}

#[test]
fn edge_12_large_custom_messages_count_nothing_in_the_walk() {
    let mut b = SessionBuilder::new();
    b.user("u");
    b.assistant("a");
    b.custom_message(&chars(8000));
    b.user("u2");
    b.assistant("a2");
    assert_eq!(cut(&b.session(), 100).first_kept_entry_index, 0);

    // The same text as a user message reaches the budget and moves the cut.
    let mut b = SessionBuilder::new();
    b.user("u");
    b.assistant("a");
    b.user(&chars(8000));
    b.user("u2");
    b.assistant("a2");
    assert_eq!(cut(&b.session(), 100).first_kept_entry_index, 2);
}

#[test]
fn edge_13_a_second_compaction_starts_at_the_previous_first_kept_entry() {
    let mut b = SessionBuilder::new();
    b.user(&chars(400));
    b.assistant(&chars(400));
    let u2 = b.user(&chars(400));
    b.assistant(&chars(400));
    b.compaction("first summary", &u2, 500);
    b.user(&chars(400));
    b.assistant(&chars(400));
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(150)).unwrap();
    // PI-NEXT: u2 and a2, kept by the first compaction, are summarized now instead of lost.
    assert_eq!(prep.boundary_start, 2);
    assert_eq!(prep.cut.first_kept_entry_index, 5);
    assert_eq!(roles(&prep.messages_to_summarize), ["user", "assistant"]);
    assert_eq!(prep.previous_summary, Some("first summary"));
}

#[test]
fn edge_13_the_previous_compaction_carries_its_file_lists_over() {
    let mut b = SessionBuilder::new();
    let u1 = b.user("u1");
    b.entry(
        "compaction",
        json!({"summary":"S","firstKeptEntryId":u1,"tokensBefore":1,
               "details":{"readFiles":["r.md", 5],"modifiedFiles":["m.rs"]}}),
    );
    b.user(&chars(400));
    b.tool_call("write", json!({"path": "r.md", "content": "x"}));
    b.user(&chars(400));
    b.assistant(&chars(400));
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(150)).unwrap();
    let lists = prep.file_ops.lists();
    assert!(
        lists.read_files.is_empty(),
        "r.md was written since, so it counts as modified"
    );
    assert_eq!(lists.modified_files, ["m.rs", "r.md"]);

    // A compaction made by an extension (fromHook) carries nothing over.
    let mut b = SessionBuilder::new();
    let u1 = b.user("u1");
    b.entry(
        "compaction",
        json!({"summary":"S","firstKeptEntryId":u1,"tokensBefore":1,"fromHook":true,
               "details":{"readFiles":["r.md"],"modifiedFiles":["m.rs"]}}),
    );
    b.user(&chars(400));
    b.user(&chars(400));
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(150)).unwrap();
    assert_eq!(prep.file_ops.lists(), FileLists::default());
}

#[test]
fn tokens_before_is_the_estimate_over_the_rebuilt_context() {
    let mut b = SessionBuilder::new();
    let u1 = b.user(&chars(4000));
    b.assistant_with_usage("a1", 5000);
    b.compaction(&chars(40), &u1, 999);
    b.user(&chars(40));
    b.assistant_with_usage("a2", 7000);
    b.user(&chars(400));
    let session = b.session();
    let prep = prepare_compaction(&path_of(&session), &settings(10)).unwrap();
    // Last valid usage (7000) plus the trailing user message (100).
    assert_eq!(prep.tokens_before, 7100.0);
}

// ---- §11 reference tests ---------------------------------------------------------------------

#[test]
fn reference_3_to_5_last_assistant_usage_skips_aborted_messages() {
    let mut b = SessionBuilder::new();
    b.user("u");
    b.assistant_with_usage("a", 100);
    b.assistant_with_usage("b", 200);
    let session = b.session();
    let path = path_of(&session);
    assert_eq!(last_assistant_usage(&path).unwrap().input, 200.0);

    let mut b = SessionBuilder::new();
    b.assistant_with_usage("a", 100);
    b.message(
        json!({"role":"assistant","content":[],"stopReason":"aborted",
        "usage":{"input":300,"output":0,"cacheRead":0,"cacheWrite":0}}),
    );
    let session = b.session();
    assert_eq!(
        last_assistant_usage(&path_of(&session)).unwrap().input,
        100.0
    );

    let mut b = SessionBuilder::new();
    b.user("only a user");
    let session = b.session();
    assert!(last_assistant_usage(&path_of(&session)).is_none());
}

#[test]
fn reference_8_ten_pairs_with_keep_2500_cut_at_a_user_or_assistant_message() {
    let mut b = SessionBuilder::new();
    for i in 0..10 {
        b.user(&format!("{i} {}", chars(1000)));
        b.assistant(&format!("{i} {}", chars(1000)));
    }
    let session = b.session();
    let path = path_of(&session);
    let c = find_cut_point(&path, 0, path.len(), 2500);
    assert!(c.first_kept_entry_index > 0);
    assert!(matches!(
        path[c.first_kept_entry_index].stored_message(),
        Some(Message::User { .. } | Message::Assistant { .. })
    ));
}

#[test]
fn reference_9_and_10_a_single_assistant_or_a_small_session_keeps_everything() {
    let mut b = SessionBuilder::new();
    b.assistant("only");
    assert_eq!(cut(&b.session(), 1000).first_kept_entry_index, 0);
}

#[test]
fn reference_12_46_47_context_without_compaction() {
    let empty = build_session_context(&[]);
    assert!(empty.entries.is_empty());
    assert_eq!(empty.thinking_level.as_deref(), Some("off"));
    assert_eq!(empty.model, None);

    let mut b = SessionBuilder::new();
    b.user("q1");
    b.assistant("r1");
    b.user("q2");
    b.assistant("r2");
    let session = b.session();
    let context = build_session_context(&path_of(&session));
    assert_eq!(texts(&context), ["q1", "r1", "q2", "r2"]);
    assert_eq!(context.thinking_level.as_deref(), Some("off"));
    assert_eq!(
        context.model,
        Some(ModelRef {
            provider: Some("anthropic".into()),
            model_id: Some("claude".into())
        })
    );
}

#[test]
fn reference_16_48_a_later_assistant_overrides_a_model_change_and_thinking_changes_apply() {
    let mut b = SessionBuilder::new();
    b.model_change("openai", "gpt-5");
    b.thinking_level("high");
    b.user("q");
    let session = b.session();
    let context = build_session_context(&path_of(&session));
    assert_eq!(
        context.model.as_ref().unwrap().model_id.as_deref(),
        Some("gpt-5")
    );
    assert_eq!(context.thinking_level.as_deref(), Some("high"));
    assert_eq!(context.entries.len(), 1);

    b.assistant("r");
    let session = b.session();
    let context = build_session_context(&path_of(&session));
    assert_eq!(
        context.model.as_ref().unwrap().model_id.as_deref(),
        Some("claude")
    );
    assert_eq!(context.entries.len(), 2);
}

#[test]
fn reference_13_49_a_compaction_leads_with_its_summary_then_kept_and_newer_messages() {
    let mut b = SessionBuilder::new();
    b.user("u1");
    b.assistant("a1");
    let u2 = b.user("u2");
    b.assistant("a2");
    b.compaction("the summary", &u2, 100);
    b.user("u3");
    b.assistant("a3");
    let session = b.session();
    let context = build_session_context(&path_of(&session));
    assert_eq!(
        texts(&context),
        ["summary:the summary", "u2", "a2", "u3", "a3"]
    );
}

#[test]
fn reference_14_15_50_only_the_latest_compaction_counts() {
    let mut b = SessionBuilder::new();
    let u1 = b.user("u1");
    b.assistant("a1");
    b.compaction("First summary", &u1, 100);
    b.user("u2");
    b.assistant("b");
    let session = b.session();
    assert_eq!(build_session_context(&path_of(&session)).entries.len(), 5);

    let u3 = b.user("u3");
    b.assistant("c");
    b.compaction("Second summary", &u3, 200);
    b.user("u4");
    b.assistant("d");
    let session = b.session();
    let context = build_session_context(&path_of(&session));
    assert_eq!(
        texts(&context),
        ["summary:Second summary", "u3", "c", "u4", "d"]
    );
}

#[test]
fn a_compaction_whose_first_kept_entry_is_gone_keeps_nothing_before_it() {
    let mut b = SessionBuilder::new();
    b.user("u1");
    b.compaction("S", "not-on-path", 1);
    b.user("u2");
    let session = b.session();
    assert_eq!(
        texts(&build_session_context(&path_of(&session))),
        ["summary:S", "u2"]
    );
}

#[test]
fn reference_51_52_53_65_the_leaf_chooses_the_branch_and_branch_summaries_show_up() {
    // The tree example of spec §8.3: 1→2→3→4→C5(keep 3)→6→7, a branch 3→8→9, a branch summary 10
    // under 3, and 11 after 10.
    let mut b = SessionBuilder::new();
    b.user("start");
    b.assistant("r1");
    let three = b.user("q2");
    b.assistant("r2");
    b.compaction("compacted", &three, 10);
    b.user("q3");
    let seven = b.assistant("r3");
    b.branch_from(Some(&three));
    b.assistant("wrong approach");
    let nine = b.user("abandoned");
    b.branch_from(Some(&three));
    b.branch_summary("tried something else");
    let eleven = b.assistant("better approach");
    let session = b.session();

    let leaf7 = session.active_path(Some(&seven)).unwrap();
    assert_eq!(
        texts(&build_session_context(&leaf7)),
        ["summary:compacted", "q2", "r2", "q3", "r3"]
    );
    let leaf11 = session.active_path(Some(&eleven)).unwrap();
    assert_eq!(
        texts(&build_session_context(&leaf11)),
        [
            "start",
            "r1",
            "q2",
            "branch:tried something else",
            "better approach"
        ]
    );
    let leaf9 = session.active_path(Some(&nine)).unwrap();
    assert_eq!(
        texts(&build_session_context(&leaf9)),
        ["start", "r1", "q2", "wrong approach", "abandoned"]
    );
    // The default leaf is the last entry in the file.
    assert_eq!(
        session.active_path(None).unwrap().last().unwrap().id,
        eleven
    );
}

#[test]
fn an_empty_branch_summary_is_not_part_of_the_context() {
    let mut b = SessionBuilder::new();
    b.user("q");
    b.branch_summary("");
    b.assistant("r");
    let session = b.session();
    assert_eq!(
        texts(&build_session_context(&path_of(&session))),
        ["q", "r"]
    );
}

#[test]
fn reference_54_63_an_unknown_leaf_is_an_error_and_an_orphan_is_its_own_root() {
    let mut b = SessionBuilder::new();
    b.user("q");
    let session = b.session();
    assert_eq!(
        session.active_path(Some("nope")).unwrap_err().to_string(),
        "no entry with id \"nope\" in this session"
    );

    let text = format!(
        "{}{}\n",
        SessionBuilder::new().jsonl(),
        json!({"type":"message","id":"orphan","parentId":"missing","timestamp":"2026-01-01T00:00:00.000Z",
               "message":{"role":"user","content":"alone"}})
    );
    let session = Session::parse(
        text.as_bytes(),
        crate::session::ParseOptions {
            lenient: true,
            ..Default::default()
        },
    )
    .unwrap();
    let context = build_session_context(&path_of(&session));
    assert_eq!(texts(&context), ["alone"]);
}

#[test]
fn reference_67_68_labels_custom_entries_and_unknown_types_are_on_the_path_but_not_in_the_context()
{
    let mut b = SessionBuilder::new();
    let q = b.user("q");
    b.entry("label", json!({"targetId": q, "label": "important"}));
    b.entry("custom", json!({"customType": "state", "data": {"x": 1}}));
    b.entry("session_info", json!({"name": "my session"}));
    b.entry("ttsr_injection", json!({"injectedRules": ["r"]}));
    b.message(json!({"role":"fileMention","files":["a.rs"]}));
    b.assistant("r");
    let session = b.session();
    let path = path_of(&session);
    assert_eq!(path.len(), 7);
    let context = build_session_context(&path);
    // buildSessionContext copies unknown-role messages; convertToLlm drops them.
    assert_eq!(context.entries.len(), 3);
    assert_eq!(context.llm_json().len(), 2);
    // Unknown entries and unknown roles are never cut points.
    assert_eq!(find_valid_cut_points(&path, 0, path.len()), [0, 6]);
}

#[test]
fn llm_json_passes_native_messages_through_and_converts_the_rest() {
    let mut b = SessionBuilder::new();
    let u = b.message(json!({"role":"user","content":"q","timestamp":1,"extra":{"kept":true}}));
    b.bash("ls", "a.txt");
    b.custom_message("from an extension");
    b.compaction("S", &u, 1);
    let session = b.session();
    let json = build_session_context(&path_of(&session)).llm_json();
    assert_eq!(json.len(), 4);
    assert_eq!(json[0]["role"], "user");
    assert!(
        json[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>\nS\n</summary>")
    );
    assert_eq!(
        json[1],
        json!({"role":"user","content":"q","timestamp":1,"extra":{"kept":true}})
    );
    assert_eq!(
        json[2],
        json!({"role":"user","content":[{"type":"text","text":"Ran `ls`\n```\na.txt\n```"}],"timestamp":4.0})
    );
    assert_eq!(
        json[3]["content"],
        json!([{"type":"text","text":"from an extension"}])
    );
    // The entry's ISO timestamp becomes epoch milliseconds.
    assert!(json[3]["timestamp"].as_f64().unwrap() > 1.7e12);
}

#[test]
fn the_plan_reports_every_message_entry_estimate_in_path_order() {
    let mut b = SessionBuilder::new();
    let u = b.user(&chars(4000));
    let a = b.assistant(&chars(4000));
    let thinking = b.thinking_level("low");
    let u2 = b.user(&chars(40));
    let session = b.session();
    let outcome = PlanOutcome::for_path(&path_of(&session), &settings(5));
    let plan = outcome.plan.unwrap();
    assert_eq!(plan.entry_tokens, [(u, 1000), (a, 1000), (u2, 10)]);
    assert_eq!(plan.first_kept_entry_id, thinking);
    // Metadata before a user cut: the §4.9-10 quirk, kept for parity.
    assert_eq!(plan.first_kept_path_index, 2);
    assert!(plan.is_split_turn);
    assert_eq!(plan.turn_start_path_index, Some(0));
    let json =
        serde_json::to_value(PlanOutcome::for_path(&path_of(&session), &settings(5))).unwrap();
    assert_eq!(json["plan"]["tokensBefore"], json!(2010));
    assert!(json.get("reason").is_none());
}
