//! Reading, migration and linking tests (spec §1; reference tests 55–57, 60–61 of §11).

use serde_json::{Value, json};

use super::*;
use crate::testkit::SessionBuilder;

mod large;

const HEADER_V3: &str =
    r#"{"type":"session","version":3,"id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#;

fn strict(text: &str) -> Result<Session, ParseError> {
    Session::parse(text.as_bytes(), ParseOptions::default())
}

fn lenient(text: &str) -> Session {
    Session::parse(
        text.as_bytes(),
        ParseOptions {
            lenient: true,
            ..Default::default()
        },
    )
    .unwrap()
}

fn line(id: &str, parent: Option<&str>) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z",
           "message":{"role":"user","content":"hi","timestamp":1}})
    .to_string()
}

fn file(lines: &[String]) -> String {
    lines.iter().map(|l| format!("{l}\n")).collect()
}

#[track_caller]
fn expect_error(text: &str, line: Option<usize>, kind: ParseErrorKind) -> ParseError {
    let err = strict(text).unwrap_err();
    assert_eq!((err.line, err.kind), (line, kind), "{err}");
    err
}

#[test]
fn a_v3_file_round_trips_byte_for_byte_including_unknown_fields_and_types() {
    let mut b = SessionBuilder::new();
    let u = b.message(json!({"role":"user","content":"hé 😀","timestamp":1.0,"futureField":{"z":1,"a":[1.50,2e3]}}));
    b.entry("ttsr_injection", json!({"injectedRules": ["x"], "n": 1.0}));
    b.message(json!({"role":"fileMention","files":["a"]}));
    b.entry("label", json!({"targetId": u, "label": "mark"}));
    // Non-canonical JSON spacing and number forms survive too: they are never re-printed.
    let text = format!(
        "{}{}\n",
        b.jsonl(),
        r#"{ "type" : "custom", "id":"c1" ,"parentId":"e0000004","data":{"k":1.0} }"#
    );
    let session = strict(&text).unwrap();
    assert_eq!(session.source_version, 3);
    assert_eq!(session.to_jsonl(), text);
    assert_eq!(session.entries[1].entry_type().as_str(), "ttsr_injection");
    assert_eq!(
        session.entries[2].stored_message().unwrap().role(),
        "fileMention"
    );
}

#[test]
fn blank_lines_and_crlf_endings_are_accepted() {
    let text = format!("{HEADER_V3}\r\n\n{}\r\n\n", line("a", None));
    let session = strict(&text).unwrap();
    assert_eq!(session.entries.len(), 1);
    assert_eq!(session.entries[0].line, 3);
}

#[test]
fn an_empty_file_is_an_error() {
    expect_error("", None, ParseErrorKind::Empty);
    expect_error("\n  \n", None, ParseErrorKind::Empty);
}

#[test]
fn a_line_that_is_not_json_names_its_line_number() {
    let text = file(&[HEADER_V3.into(), line("a", None), "{not json".into()]);
    let err = expect_error(&text, Some(3), ParseErrorKind::InvalidJson);
    assert!(
        err.to_string().starts_with("line 3: not valid JSON"),
        "{err}"
    );
}

#[test]
fn a_truncated_line_is_invalid_json() {
    let full = line("a", None);
    let text = file(&[HEADER_V3.into(), full[..full.len() / 2].to_owned()]);
    expect_error(&text, Some(2), ParseErrorKind::InvalidJson);
}

#[test]
fn invalid_utf8_names_its_line() {
    let mut bytes = format!("{HEADER_V3}\n").into_bytes();
    bytes.extend_from_slice(b"{\"type\":\"x\",\"id\":\"\xff\xfe\"}\n");
    let err = Session::parse(&bytes, ParseOptions::default()).unwrap_err();
    assert_eq!((err.line, err.kind), (Some(2), ParseErrorKind::InvalidUtf8));
}

#[test]
fn an_entry_without_type_or_id_is_an_error() {
    let text = file(&[HEADER_V3.into(), r#"{"id":"a","parentId":null}"#.into()]);
    expect_error(&text, Some(2), ParseErrorKind::MissingType);
    let text = file(&[
        HEADER_V3.into(),
        r#"{"type":"label","parentId":null}"#.into(),
    ]);
    expect_error(&text, Some(2), ParseErrorKind::MissingId);
    let text = file(&[
        HEADER_V3.into(),
        r#"{"type":"message","id":"a","parentId":null}"#.into(),
    ]);
    expect_error(&text, Some(2), ParseErrorKind::MissingMessage);
}

#[test]
fn a_wrongly_typed_field_is_named_with_its_column() {
    let text = file(&[
        HEADER_V3.into(),
        r#"{"type":"compaction","id":"a","summary":5}"#.into(),
    ]);
    let err = expect_error(&text, Some(2), ParseErrorKind::InvalidField);
    assert!(err.message.contains("invalid type: integer `5`"), "{err}");
    assert!(err.message.contains("column"), "{err}");
}

#[test]
fn a_line_that_is_not_an_object_is_an_error() {
    let text = file(&[HEADER_V3.into(), "[1,2]".into()]);
    expect_error(&text, Some(2), ParseErrorKind::NotAnObject);
}

#[test]
fn a_missing_or_wrong_header_is_an_error() {
    expect_error(
        &file(&[line("a", None)]),
        Some(1),
        ParseErrorKind::InvalidHeader,
    );
    expect_error(
        &file(&[r#"{"type":"session"}"#.into()]),
        Some(1),
        ParseErrorKind::InvalidHeader,
    );
    expect_error(
        &file(&[r#"{"type":"session","id":7}"#.into()]),
        Some(1),
        ParseErrorKind::InvalidHeader,
    );
}

#[test]
fn a_dangling_parent_is_an_error_and_lenient_reading_makes_it_a_root() {
    let text = file(&[HEADER_V3.into(), line("a", None), line("b", Some("ghost"))]);
    let err = expect_error(&text, Some(3), ParseErrorKind::DanglingParent);
    assert!(err.message.contains("\"ghost\""), "{err}");
    let session = lenient(&text);
    assert_eq!(session.repairs.len(), 1);
    assert_eq!(session.path(1).len(), 1);
}

#[test]
fn duplicate_ids_are_an_error_and_lenient_reading_lets_the_later_line_win() {
    let text = file(&[
        HEADER_V3.into(),
        line("a", None),
        line("b", Some("a")),
        line("a", Some("b")),
    ]);
    let err = expect_error(&text, Some(4), ParseErrorKind::DuplicateId);
    assert!(err.message.contains("line 2"), "{err}");
    let session = lenient(&text);
    assert_eq!(session.index_of("a"), Some(2));
}

#[test]
fn parent_cycles_are_an_error_and_lenient_reading_cuts_them() {
    let text = file(&[
        HEADER_V3.into(),
        line("a", Some("c")),
        line("b", Some("a")),
        line("c", Some("b")),
    ]);
    expect_error(&text, Some(2), ParseErrorKind::ParentCycle);
    let session = lenient(&text);
    assert_eq!(session.repairs.len(), 1);
    let path: Vec<&str> = session
        .active_path(None)
        .unwrap()
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    assert_eq!(path, ["a", "b", "c"]);

    let own_parent = file(&[HEADER_V3.into(), line("a", Some("a"))]);
    expect_error(&own_parent, Some(2), ParseErrorKind::ParentCycle);
    assert_eq!(lenient(&own_parent).active_path(None).unwrap().len(), 1);
}

#[test]
fn lenient_reading_skips_malformed_lines_and_counts_them() {
    let text = file(&[
        "garbage before the header".into(),
        HEADER_V3.into(),
        line("a", None),
        "{oops".into(),
        r#"{"id":"no-type"}"#.into(),
        line("b", Some("a")),
    ]);
    expect_error(&text, Some(1), ParseErrorKind::InvalidJson);
    let session = lenient(&text);
    assert_eq!(session.entries.len(), 2);
    let skipped: Vec<usize> = session.skipped.iter().map(|s| s.line).collect();
    assert_eq!(skipped, [1, 4, 5]);
}

#[test]
fn a_title_slot_before_the_header_is_kept() {
    let title = format!(
        r#"{{"type":"title","v":1,"title":"Fix the bug","source":"auto","updatedAt":1,"pad":"{}"}}"#,
        " ".repeat(20)
    );
    let text = file(&[title.clone(), HEADER_V3.into(), line("a", None)]);
    let session = strict(&text).unwrap();
    assert_eq!(session.title.as_deref(), Some(title.as_str()));
    assert_eq!(session.header.line, 2);
    assert_eq!(session.to_jsonl(), text);
}

#[test]
fn reference_55_v1_entries_get_hex_ids_and_a_linear_chain_in_pi_key_order() {
    let text = file(&[
        r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","provider":"p","modelId":"m"}"#.into(),
        r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#.into(),
        r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"x","arguments":{"b":1.0,"1":2}}],"usage":{"input":1.5e21}}}"#.into(),
        r#"{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"S","firstKeptEntryIndex":2,"tokensBefore":9}"#.into(),
        r#"{"type":"thinking_level_change","timestamp":"2025-01-01T00:00:04.000Z","thinkingLevel":"high"}"#.into(),
    ]);
    let session = strict(&text).unwrap();
    assert_eq!(session.source_version, 1);
    assert_eq!(session.header.version, 3);
    assert_eq!(
        &*session.header.raw,
        r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w","provider":"p","modelId":"m","version":3}"#
    );
    let ids: Vec<&str> = session.entries.iter().map(|e| e.id.as_str()).collect();
    for id in &ids {
        assert!(
            id.len() == 8
                && id
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
            "{id}"
        );
    }
    assert_eq!(session.entries[0].parent_id, None);
    for pair in session.entries.windows(2) {
        assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
    }
    // Added keys go last, as JavaScript assignment appends them; numbers print as JavaScript does.
    assert_eq!(
        &*session.entries[1].raw,
        format!(
            r#"{{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{{"role":"assistant","content":[{{"type":"toolCall","id":"t","name":"x","arguments":{{"1":2,"b":1}}}}],"usage":{{"input":1.5e+21}}}},"id":"{}","parentId":"{}"}}"#,
            ids[1], ids[0]
        )
    );
    // firstKeptEntryIndex 2 counts the header as 0: it names the second entry.
    assert_eq!(
        &*session.entries[2].raw,
        format!(
            r#"{{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"S","tokensBefore":9,"id":"{}","parentId":"{}","firstKeptEntryId":"{}"}}"#,
            ids[2], ids[1], ids[1]
        )
    );
    // The migrated file reads back as v3 with the same ids (idempotent, reference test 56).
    let again = strict(&session.to_jsonl()).unwrap();
    assert_eq!(again.source_version, 3);
    assert_eq!(again.to_jsonl(), session.to_jsonl());
}

#[test]
fn a_v1_index_at_the_header_or_past_the_end_leaves_first_kept_missing() {
    for index in [0, 99] {
        let text = file(&[
            r#"{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00.000Z"}"#.into(),
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"q"}}"#.into(),
            format!(r#"{{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"S","firstKeptEntryIndex":{index},"tokensBefore":9}}"#),
        ]);
        let session = strict(&text).unwrap();
        let raw: Value = serde_json::from_str(&session.entries[1].raw).unwrap();
        assert!(
            raw.get("firstKeptEntryId").is_none() && raw.get("firstKeptEntryIndex").is_none(),
            "{raw}"
        );
    }
}

#[test]
fn v2_hook_messages_become_custom_and_ids_are_kept() {
    let text = file(&[
        r#"{"type":"session","version":2,"id":"s","timestamp":"2025-01-01T00:00:00.000Z"}"#.into(),
        r#"{"type":"message","id":"abc","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"hookMessage","customType":"h","content":"ctx","display":true}}"#.into(),
    ]);
    let session = strict(&text).unwrap();
    assert_eq!(session.source_version, 2);
    assert_eq!(session.entries[0].id, "abc");
    assert_eq!(
        session.entries[0].stored_message().unwrap().role(),
        "custom"
    );
    assert!(session.header.raw.contains(r#""version":3"#));
}

#[test]
fn reference_61_the_path_runs_from_the_root_to_the_leaf_and_only_through_ancestors() {
    let text = file(&[
        HEADER_V3.into(),
        line("a", None),
        line("b", Some("a")),
        line("c", Some("a")),
        line("d", Some("b")),
    ]);
    let session = strict(&text).unwrap();
    let ids = |leaf: Option<&str>| -> Vec<String> {
        session
            .active_path(leaf)
            .unwrap()
            .iter()
            .map(|e| e.id.clone())
            .collect()
    };
    assert_eq!(ids(None), ["a", "b", "d"]);
    assert_eq!(ids(Some("c")), ["a", "c"]);
    assert!(
        strict(&file(&[HEADER_V3.into()]))
            .unwrap()
            .active_path(None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn oh_my_pi_model_changes_are_read_from_the_combined_field() {
    let text = file(&[
        HEADER_V3.into(),
        r#"{"type":"model_change","id":"m","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","model":"openai/gpt-5.1","role":"default"}"#.into(),
    ]);
    let session = strict(&text).unwrap();
    assert_eq!(
        session.entries[0].kind,
        EntryKind::ModelChange {
            provider: Some("openai".into()),
            model_id: Some("gpt-5.1".into())
        }
    );
}

#[test]
fn new_entry_ids_avoid_the_ids_in_use() {
    let mut taken = std::collections::HashSet::new();
    for _ in 0..2000 {
        let id = new_entry_id(&taken);
        assert_eq!(id.len(), 8);
        assert!(taken.insert(id));
    }
}

/// A tool result as pi writes it after cutting `"x".repeat(1999) + "😀"` at 2000 UTF-16 units:
/// `JSON.stringify` prints the half emoji as the escape `\ud83d`.
const JS_TRUNCATED_RESULT: &str = r#"{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"XXXX\ud83d"}],"isError":false,"timestamp":1767225603000}}"#;

#[test]
fn lines_with_lone_surrogates_as_javascript_writes_them_are_read_and_kept_byte_for_byte() {
    let result = JS_TRUNCATED_RESULT.replace("XXXX", &"x".repeat(1999));
    let text = format!(
        "{HEADER_V3}\n{}\n{}\n{result}\n",
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"lone low \ude00 here","timestamp":1}}"#,
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"cat \ud83d"}}],"timestamp":2}}"#,
    );
    let session = strict(&text).unwrap();
    assert_eq!(session.to_jsonl(), text, "raw lines keep the escapes");
    let Some(Message::ToolResult { content }) = session.entries[2].stored_message() else {
        panic!("a tool result")
    };
    let decoded = content.joined_text();
    assert_eq!(decoded, format!("{}\u{FFFD}", "x".repeat(1999)));
    // One UTF-16 unit like the lone surrogate: 2000 units, the estimate pi makes, no truncation.
    assert_eq!(
        crate::compaction::estimate_tokens(session.entries[2].stored_message().unwrap()),
        500
    );
    let conversation = crate::compaction::serialize_conversation(
        session.entries.iter().filter_map(|e| e.stored_message()),
    );
    assert!(conversation.contains("[User]: lone low \u{FFFD} here"));
    assert!(conversation.contains("bash(command=\"cat \u{FFFD}\")"));
    assert!(!conversation.contains("more characters truncated"));
    // An appended line is read the same way.
    let entry = parse_entry_line(1, result.as_bytes()).unwrap();
    assert_eq!(&*entry.raw, result);
}

#[test]
fn migration_prints_lone_surrogates_and_doubles_as_javascript_prints_them() {
    // A v1 file: no ids; a cost that is not the shortest decimal of its nearest double's neighbour.
    let text = concat!(
        r#"{"type":"session","id":"s1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"cut \ud83d","timestamp":1767225601000}}"#,
        "\n",
        r#"{"type":"message","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{"input":1,"output":2,"cost":{"input":0.0009562500000000001,"total":0.0009562500000000001}},"stopReason":"stop","timestamp":1767225602000}}"#,
        "\n"
    );
    let session = strict(text).unwrap();
    assert_eq!(session.source_version, 1);
    assert!(
        session.entries[0].raw.contains(r#""content":"cut \ud83d""#),
        "{}",
        session.entries[0].raw
    );
    assert!(
        session.entries[1]
            .raw
            .contains(r#""cost":{"input":0.0009562500000000001,"total":0.0009562500000000001}"#),
        "{}",
        session.entries[1].raw
    );
    let Some(Message::User { content }) = session.entries[0].stored_message() else {
        panic!("a user message")
    };
    assert_eq!(content.joined_text(), "cut \u{FFFD}");
    // The migrated file reads back as v3 unchanged.
    let again = strict(&session.to_jsonl()).unwrap();
    assert_eq!(again.to_jsonl(), session.to_jsonl());
}
