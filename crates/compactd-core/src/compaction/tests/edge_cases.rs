//! Every edge case of spec §4.9, numbered as there.

use serde_json::json;

use super::*;
use crate::compaction::*;
use crate::testkit::{SessionBuilder, chars};

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
