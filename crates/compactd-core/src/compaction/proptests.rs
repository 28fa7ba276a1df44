//! Property tests: on random sessions (branches, earlier compactions, every entry kind, text
//! with multi-unit characters) the planner never panics and keeps its invariants.

use proptest::prelude::*;
use serde_json::json;

use super::*;
use crate::session::{Entry, EntryKind, Message, ParseOptions, Session};
use crate::testkit::SessionBuilder;

#[derive(Debug, Clone)]
enum Op {
    User(String),
    Assistant {
        text: String,
        read: Option<u8>,
        write: Option<u8>,
        usage: Option<u32>,
        aborted: bool,
    },
    ToolResult(String),
    Bash(String),
    CustomMessage(String),
    BranchSummary(String),
    ThinkingLevel,
    Label,
    Unknown,
    UnknownRole,
    /// A compaction keeping from the n-th entry written so far (or from a missing id).
    Compaction(Option<usize>),
    /// Move the leaf to the n-th entry written so far, as `/tree` navigation does.
    Branch(usize),
}

fn text() -> impl Strategy<Value = String> {
    // Lengths up to a few thousand UTF-16 units, with characters of one and two units.
    (
        0usize..2500,
        prop::sample::select(vec!["a", "é", "😀", "\n", "\"", "x y "]),
    )
        .prop_map(|(n, piece)| piece.repeat(n / piece.len().max(1)))
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => text().prop_map(Op::User),
        4 => (text(), prop::option::of(0u8..6), prop::option::of(0u8..6), prop::option::of(0u32..200_000), any::<bool>())
            .prop_map(|(text, read, write, usage, aborted)| Op::Assistant { text, read, write, usage, aborted }),
        3 => text().prop_map(Op::ToolResult),
        1 => text().prop_map(Op::Bash),
        1 => text().prop_map(Op::CustomMessage),
        1 => text().prop_map(Op::BranchSummary),
        1 => Just(Op::ThinkingLevel),
        1 => Just(Op::Label),
        1 => Just(Op::Unknown),
        1 => Just(Op::UnknownRole),
        1 => prop::option::of(0usize..1000).prop_map(Op::Compaction),
        1 => (0usize..1000).prop_map(Op::Branch),
    ]
}

fn build(ops: &[Op]) -> Session {
    let mut b = SessionBuilder::new();
    let mut ids: Vec<String> = Vec::new();
    for op in ops {
        let id = match op {
            Op::User(t) => b.user(t),
            Op::Assistant {
                text,
                read,
                write,
                usage,
                aborted,
            } => {
                let mut content = vec![
                    json!({"type":"thinking","thinking":text}),
                    json!({"type":"text","text":text}),
                ];
                for (name, file) in [("read", read), ("write", write)] {
                    if let Some(f) = file {
                        content.push(json!({"type":"toolCall","id":"c","name":name,"arguments":{"path":format!("src/{f}.rs"),"n":1.5}}));
                    }
                }
                let mut message = json!({"role":"assistant","content":content,"provider":"p","model":"m",
                    "stopReason": if *aborted { "aborted" } else { "stop" }});
                if let Some(u) = usage {
                    message["usage"] = json!({"input":u,"output":1,"cacheRead":0,"cacheWrite":0});
                }
                b.message(message)
            }
            Op::ToolResult(t) => b.tool_result(t),
            Op::Bash(t) => b.bash("cmd", t),
            Op::CustomMessage(t) => b.custom_message(t),
            Op::BranchSummary(t) => b.branch_summary(t),
            Op::ThinkingLevel => b.thinking_level("high"),
            Op::Label => b.entry("label", json!({"targetId":"x","label":"l"})),
            Op::Unknown => b.entry("mode_change", json!({"mode":"plan"})),
            Op::UnknownRole => b.message(json!({"role":"fileMention","files":[]})),
            Op::Compaction(keep) => {
                let first_kept = match keep {
                    Some(n) if !ids.is_empty() => ids[n % ids.len()].clone(),
                    _ => "missing".to_owned(),
                };
                b.compaction("earlier summary", &first_kept, 1)
            }
            Op::Branch(n) => {
                if !ids.is_empty() {
                    b.branch_from(Some(&ids[n % ids.len()]));
                }
                continue;
            }
        };
        ids.push(id);
    }
    b.session()
}

/// The messages (by address) that the path range contributes when summarizing or keeping.
fn range_messages(path: &[&Entry]) -> Vec<*const Message> {
    path.iter()
        .filter(|e| !e.is_compaction())
        .filter_map(|e| e.as_message())
        .map(|m| m as *const Message)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn the_planner_keeps_its_invariants(ops in prop::collection::vec(op(), 0..60), keep in 0u64..3000, leaf in any::<prop::sample::Index>()) {
        let session = build(&ops);
        prop_assert_eq!(Session::parse(session.to_jsonl().as_bytes(), ParseOptions::default()).unwrap().to_jsonl(), session.to_jsonl());
        let leaf = (!session.entries.is_empty()).then(|| leaf.index(session.entries.len()));
        let path = leaf.map(|l| session.path(l)).unwrap_or_default();
        let settings = CompactionSettings { keep_recent_tokens: keep, ..CompactionSettings::default() };

        let outcome = PlanOutcome::for_path(&path, &settings);
        serde_json::to_string(&outcome).unwrap();
        let Ok(prep) = prepare_compaction(&path, &settings) else {
            prop_assert!(outcome.plan.is_none());
            return Ok(());
        };
        let (start, end) = (prep.boundary_start, path.len());
        let cut = prep.cut;
        prop_assert!(start <= cut.first_kept_entry_index && cut.first_kept_entry_index < end);

        // Never cut at a tool result (when the range has any cut point at all).
        let is_tool_result = |i: usize| matches!(path[i].kind, EntryKind::Message(Message::ToolResult { .. }));
        if !find_valid_cut_points(&path, start, end).is_empty() {
            prop_assert!(!is_tool_result(cut.first_kept_entry_index));
        }
        if outcome.plan.is_some() {
            prop_assert!(!is_tool_result(cut.first_kept_entry_index));
        }
        if let Some(turn_start) = cut.turn_start_index {
            prop_assert!(cut.is_split_turn && start <= turn_start && turn_start <= cut.first_kept_entry_index);
        }

        // Summarized + prefix + kept cover the boundary range exactly once, in order.
        let kept = range_messages(&path[cut.first_kept_entry_index..]);
        let covered: Vec<*const Message> = prep.messages_to_summarize.iter().chain(&prep.turn_prefix_messages)
            .map(|m| *m as *const Message)
            .chain(kept)
            .collect();
        prop_assert_eq!(covered, range_messages(&path[start..]));

        // Appending the compaction leaves exactly the kept suffix in the context, after the summary.
        let leaf_id = &path[end - 1].id;
        let entry = json!({"type":"compaction","id":"zzzzzzzz","parentId":leaf_id,"timestamp":"2026-02-01T00:00:00.000Z",
            "summary":"new","firstKeptEntryId":prep.first_kept_entry_id,"tokensBefore":prep.tokens_before});
        let compacted = Session::parse(format!("{}{entry}\n", session.to_jsonl()).as_bytes(), ParseOptions::default()).unwrap();
        let context = build_session_context(&compacted.active_path(Some("zzzzzzzz")).unwrap());
        let context_ids: Vec<&str> = context.entries.iter().map(|e| e.id.as_str()).collect();
        let expected: Vec<&str> = std::iter::once("zzzzzzzz")
            .chain(path[cut.first_kept_entry_index..].iter()
                .filter(|e| match &e.kind {
                    EntryKind::Message(_) | EntryKind::CustomMessage { .. } => true,
                    EntryKind::BranchSummary { .. } => e.summary().is_some_and(|s| !s.is_empty()),
                    _ => false,
                })
                .map(|e| e.id.as_str()))
            .collect();
        prop_assert_eq!(context_ids, expected);
    }

    #[test]
    fn reading_arbitrary_lines_never_panics(lines in prop::collection::vec(
        prop_oneof![
            Just(r#"{"type":"session","version":3,"id":"s"}"#.to_owned()),
            Just(r#"{"type":"session","id":"s"}"#.to_owned()),
            Just(r#"{"type":"message","id":"a","parentId":"b","message":{"role":"user","content":"x"}}"#.to_owned()),
            Just(r#"{"type":"message","id":"b","parentId":"a","message":{"role":"assistant","content":[{"type":"toolCall","name":"read","arguments":[1,{"2":3}]}]}}"#.to_owned()),
            Just(r#"{"type":"compaction","firstKeptEntryIndex":1,"summary":"s"}"#.to_owned()),
            Just(r#"{"type":"message","message":{"role":"hookMessage","content":[{"type":"image"}]}}"#.to_owned()),
            ".{0,40}",
        ], 0..12), lenient in any::<bool>()) {
        let text = lines.join("\n");
        match Session::parse(text.as_bytes(), ParseOptions { lenient, ..Default::default() }) {
            Ok(session) => {
                let path = session.active_path(None).unwrap();
                let outcome = PlanOutcome::for_path(&path, &CompactionSettings { keep_recent_tokens: 1, ..Default::default() });
                serde_json::to_string(&outcome).unwrap();
                build_session_context(&path).llm_json();
            }
            Err(e) => prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= lines.len())),
        }
    }
}
