//! The summarizer's view of messages (spec §6.1) and the LLM-facing conversion.

use super::*;

fn msg(json: &str) -> Message {
    serde_json::from_str(json).unwrap()
}

#[test]
fn long_tool_results_are_cut_with_the_reference_marker() {
    // Reference tests 22 and 23.
    let long = msg(&format!(
        r#"{{"role":"toolResult","content":[{{"type":"text","text":"{}"}}]}}"#,
        "x".repeat(5000)
    ));
    assert_eq!(
        serialize_conversation([&long]),
        format!(
            "[Tool result]: {}\n\n[... 3000 more characters truncated]",
            "x".repeat(2000)
        )
    );
    let short = msg(&format!(
        r#"{{"role":"toolResult","content":[{{"type":"text","text":"{}"}}]}}"#,
        "y".repeat(1500)
    ));
    assert_eq!(
        serialize_conversation([&short]),
        format!("[Tool result]: {}", "y".repeat(1500))
    );
    let exact = msg(&format!(
        r#"{{"role":"toolResult","content":"{}"}}"#,
        "z".repeat(2000)
    ));
    assert_eq!(
        serialize_conversation([&exact]),
        format!("[Tool result]: {}", "z".repeat(2000))
    );
}

#[test]
fn a_surrogate_pair_cut_in_half_is_dropped_and_the_count_stays_length_minus_2000() {
    // 1999 ASCII units, then an emoji (units 2000 and 2001), then 9 more: length 2010.
    let text = format!("{}😀{}", "a".repeat(1999), "b".repeat(9));
    let m = msg(&format!(r#"{{"role":"toolResult","content":"{text}"}}"#));
    assert_eq!(
        serialize_conversation([&m]),
        format!(
            "[Tool result]: {}\n\n[... 10 more characters truncated]",
            "a".repeat(1999)
        )
    );
}

/// Over crate::parallel::SPLIT_MIN_BYTES in all, with parts the LLM never sees and empty parts around
/// the middle (and around every piece that is written apart), so that joins must put back exactly
/// one blank line.
fn long_conversation() -> Vec<Message> {
    let text = "é😀 line\\n".repeat(40);
    let mut messages = Vec::new();
    for i in 0..3000 {
        messages.push(match i % 5 {
            0 => msg(&format!(r#"{{"role":"user","content":"{i} {text}"}}"#)),
            1 => msg(&format!(
                r#"{{"role":"assistant","content":[{{"type":"text","text":"{text}"}},{{"type":"toolCall","name":"read","arguments":{{"path":"f{i}"}}}}]}}"#
            )),
            2 => msg(&format!(
                r#"{{"role":"toolResult","content":"{}"}}"#,
                "r".repeat(i)
            )),
            3 => msg(r#"{"role":"bashExecution","command":"ls","output":"","excludeFromContext":true}"#),
            _ => msg(r#"{"role":"user","content":""}"#),
        });
    }
    messages
}

#[test]
fn a_long_conversation_written_on_two_threads_is_the_one_written_on_one() {
    let messages = long_conversation();
    let all: Vec<&Message> = messages.iter().collect();
    let one_thread = |messages: &[&Message]| {
        let mut out = String::new();
        write_parts(&mut out, messages);
        out
    };
    assert!(all.iter().map(|m| size_hint(m)).sum::<usize>() >= crate::parallel::SPLIT_MIN_BYTES);
    assert_eq!(
        serialize_conversation(all.iter().copied()),
        one_thread(&all)
    );
    // The second half holds nothing the LLM sees: no blank line after the first.
    let mut tail: Vec<&Message> = all.clone();
    tail.extend(std::iter::repeat_n(all[3], 200_000));
    assert_eq!(
        serialize_conversation(tail.iter().copied()),
        one_thread(&all)
    );
}

#[test]
fn a_conversation_streamed_as_json_is_the_serialized_one_escaped() {
    let messages = long_conversation();
    let all: Vec<&Message> = messages.iter().collect();
    let streamed = |messages: &[&Message]| {
        let mut out = Vec::new();
        write_conversation_json(&mut out, messages.iter().copied()).unwrap();
        String::from_utf8(out).unwrap()
    };
    let escaped = |messages: &[&Message]| {
        serde_json::to_string(&serialize_conversation(messages.iter().copied())).unwrap()
    };
    // Nothing the LLM sees at the start, at the end, or in a whole half; a short conversation on
    // one thread; none at all.
    let nothing = std::iter::repeat_n(all[3], 100_000);
    let mut cases: Vec<Vec<&Message>> = vec![all.clone(), all[..40].to_vec(), Vec::new()];
    cases.push(nothing.clone().chain(all.iter().copied()).collect());
    cases.push(all.iter().copied().chain(nothing.clone()).collect());
    cases.push(all[..7].iter().copied().chain(nothing).collect());
    for (i, case) in cases.iter().enumerate() {
        assert!(streamed(case) == escaped(case), "case {i}");
    }
}

#[test]
fn user_and_assistant_text_is_never_truncated() {
    // Reference test 24.
    let long = "w".repeat(5000);
    let u = msg(&format!(r#"{{"role":"user","content":"{long}"}}"#));
    let a = msg(&format!(
        r#"{{"role":"assistant","content":[{{"type":"text","text":"{long}"}}]}}"#
    ));
    assert_eq!(
        serialize_conversation([&u, &a]),
        format!("[User]: {long}\n\n[Assistant]: {long}")
    );
}

#[test]
fn assistant_parts_come_in_fixed_order() {
    let a = msg(r#"{"role":"assistant","content":[
          {"type":"toolCall","name":"read","arguments":{"path":"src/a.ts","limit":10.0}},
          {"type":"text","text":"one"},
          {"type":"thinking","thinking":"t1"},
          {"type":"text","text":""},
          {"type":"thinking","thinking":"t2"},
          {"type":"toolCall","name":"bash","arguments":{"command":"ls -la","timeout":30,"1":"x"}}
        ]}"#);
    assert_eq!(
        serialize_conversation([&a]),
        "[Assistant thinking]: t1\nt2\n\n[Assistant]: one\n\n\n\
         [Assistant tool calls]: read(path=\"src/a.ts\", limit=10); bash(1=\"x\", command=\"ls -la\", timeout=30)"
    );
    let empty_text = msg(r#"{"role":"assistant","content":[{"type":"text","text":""}]}"#);
    assert_eq!(serialize_conversation([&empty_text]), "[Assistant]: ");
    let nothing = msg(r#"{"role":"assistant","content":[]}"#);
    assert_eq!(serialize_conversation([&nothing]), "");
}

#[test]
fn bash_custom_and_summaries_become_user_parts() {
    let bash = msg(
        r#"{"role":"bashExecution","command":"make","output":"boom","exitCode":2,"cancelled":false,"truncated":true,"fullOutputPath":"/tmp/out"}"#,
    );
    let quiet = msg(
        r#"{"role":"bashExecution","command":"true","output":"","exitCode":0,"cancelled":true,"truncated":false}"#,
    );
    let hidden = msg(
        r#"{"role":"bashExecution","command":"secret","output":"x","excludeFromContext":true}"#,
    );
    let custom = msg(
        r#"{"role":"custom","customType":"note","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"display":true}"#,
    );
    let branch = msg(r#"{"role":"branchSummary","summary":"S","fromId":"x"}"#);
    let unknown = msg(r#"{"role":"fileMention","files":[]}"#);
    assert_eq!(
        serialize_conversation([&bash, &quiet, &hidden, &custom, &branch, &unknown]),
        format!(
            "[User]: Ran `make`\n```\nboom\n```\n\nCommand exited with code 2\n\n[Output truncated. Full output: /tmp/out]\n\n\
             [User]: Ran `true`\n(no output)\n\n(command cancelled)\n\n\
             [User]: ab\n\n\
             [User]: {BRANCH_SUMMARY_PREFIX}S{BRANCH_SUMMARY_SUFFIX}"
        )
    );
}

#[test]
fn summary_wrappers_have_the_shape_the_spec_describes() {
    assert!(COMPACTION_SUMMARY_PREFIX.ends_with("\n\n<summary>\n"));
    assert_eq!(COMPACTION_SUMMARY_SUFFIX, "\n</summary>");
    assert!(BRANCH_SUMMARY_PREFIX.ends_with("\n\n<summary>\n"));
    assert_eq!(BRANCH_SUMMARY_SUFFIX, "</summary>");
    // One sentence before the blank line.
    for prefix in [COMPACTION_SUMMARY_PREFIX, BRANCH_SUMMARY_PREFIX] {
        let sentence = prefix.split("\n\n").next().unwrap();
        assert_eq!(sentence.matches(". ").count(), 0, "{sentence}");
        assert!(sentence.ends_with('.'));
    }
}
