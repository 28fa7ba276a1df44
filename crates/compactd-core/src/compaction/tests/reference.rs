//! The pure reference tests of spec §11, numbered as there.

use serde_json::json;

use super::*;
use crate::compaction::*;
use crate::session::{Message, Session};
use crate::testkit::{SessionBuilder, chars};

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
        json!({"role":"user","content":[{"type":"text","text":"Ran `ls`\n```\na.txt\n```"}],"timestamp":4})
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

#[test]
fn a_long_paths_estimates_measured_in_two_halves_keep_path_order() {
    // Over a megabyte of entries, so that the estimates are measured on two threads; lengths that
    // differ per entry, so that a half out of place or measured twice shows.
    let mut b = SessionBuilder::new();
    let mut expected = Vec::new();
    for i in 0..600u64 {
        let text = chars(2000 + 4 * i as usize);
        let id = if i % 2 == 0 {
            b.user(&text)
        } else {
            b.assistant(&text)
        };
        expected.push((id, 500 + i));
        if i == 300 {
            b.thinking_level("low");
        }
    }
    let session = b.session();
    let path = path_of(&session);
    assert!(path.iter().map(|e| e.raw.len()).sum::<usize>() > 1 << 20);
    let plan = PlanOutcome::for_path(&path, &settings(5)).plan.unwrap();
    assert_eq!(plan.entry_tokens, expected);
}

#[test]
fn converted_messages_carry_integer_timestamps_as_pi_does() {
    let mut b = SessionBuilder::new();
    b.user("hi");
    b.custom_message("from an extension");
    b.branch_summary("what the branch did");
    let session = b.session();
    let path = path_of(&session);
    let messages = build_session_context(&path).llm_json();
    // Entry timestamps are ISO strings; the messages made from them carry epoch milliseconds.
    for converted in &messages[1..] {
        let ts = &converted["timestamp"];
        assert!(ts.is_i64(), "{converted}");
        assert_eq!(ts.to_string(), ts.as_i64().unwrap().to_string());
    }
    assert_eq!(messages[1]["timestamp"], 1_767_225_602_000i64);
}
