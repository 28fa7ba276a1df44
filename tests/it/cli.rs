//! `compactd plan` and `compactd context` as a user runs them.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn compactd(args: &[&str], stdin: Option<&[u8]>) -> (i32, Value, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_compactd"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(bytes) = stdin {
        input.write_all(bytes).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (
        out.status.code().unwrap(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn fixture_path(name: &str) -> String {
    format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn plan_prints_the_plan_of_a_fixture() {
    let (code, json, _) = compactd(&["plan", &fixture_path("large-session.jsonl")], None);
    assert_eq!(code, 0);
    let plan = &json["plan"];
    assert_eq!(plan["firstKeptPathIndex"], 837);
    assert_eq!(plan["turnStartPathIndex"], 834);
    assert_eq!(plan["isSplitTurn"], true);
    assert_eq!(plan["tokensBefore"], 177_657);
    assert_eq!(plan["messagesToSummarize"], 730);
    assert_eq!(plan["turnPrefixMessages"], 3);
    assert_eq!(plan["previousSummary"], Value::Null);
    assert_eq!(plan["entryTokens"].as_object().unwrap().len(), 914);
    let keys: Vec<&str> = json["plan"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "firstKeptEntryId",
            "firstKeptPathIndex",
            "isSplitTurn",
            "turnStartPathIndex",
            "tokensBefore",
            "previousSummary",
            "messagesToSummarize",
            "turnPrefixMessages",
            "readFiles",
            "modifiedFiles",
            "conversation",
            "turnPrefixConversation",
            "entryTokens"
        ]
    );
}

#[test]
fn plan_reads_standard_input_and_honours_the_settings_and_leaf() {
    let bytes = std::fs::read(fixture_path("before-compaction.jsonl")).unwrap();
    let (code, json, _) = compactd(&["plan", "-", "--keep-recent-tokens", "2000"], Some(&bytes));
    assert_eq!(code, 0);
    assert_eq!(json["plan"]["firstKeptPathIndex"], 1000);
    assert_eq!(json["plan"]["turnPrefixConversation"], "");

    // Planning from an earlier leaf: the path ends there. Migrated v1 ids are random on every
    // read, so plan over the migrated (v3) text, whose ids are fixed.
    let session = compactd::session::Session::parse(&bytes, Default::default()).unwrap();
    let bytes = session.to_jsonl().into_bytes();
    let leaf = &session.entries[700].id;
    let (code, json, _) = compactd(&["plan", "-", "--leaf", leaf], Some(&bytes));
    assert_eq!(code, 0);
    let messages_up_to_leaf = session.entries[..=700]
        .iter()
        .filter(|e| e.entry_type() == "message")
        .count();
    assert_eq!(
        json["plan"]["entryTokens"].as_object().unwrap().len(),
        messages_up_to_leaf
    );
    assert!(
        json["plan"]["entryTokens"].get(leaf).is_some()
            || session.entries[700].entry_type() != "message"
    );
    assert!(
        json["plan"]["entryTokens"]
            .get(&session.entries[701].id)
            .is_none()
    );
}

#[test]
fn plan_is_null_with_a_reason_when_there_is_nothing_to_compact() {
    let text = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
    );
    let (code, json, _) = compactd(&["plan", "-"], Some(text.as_bytes()));
    assert_eq!(code, 0);
    assert_eq!(json["plan"], Value::Null);
    assert!(
        json["reason"]
            .as_str()
            .unwrap()
            .contains("nothing to summarize")
    );
}

#[test]
fn bad_input_exits_with_status_2_and_names_the_line() {
    let text = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi"}}"#,
        "\n",
        "{broken\n",
    );
    let (code, json, stderr) = compactd(&["plan", "-"], Some(text.as_bytes()));
    assert_eq!((code, json), (2, Value::Null));
    assert!(stderr.contains("line 3: not valid JSON"), "{stderr}");

    let (code, json, stderr) = compactd(&["plan", "-", "--lenient"], Some(text.as_bytes()));
    assert_eq!(code, 0);
    assert!(json.get("plan").is_some());
    assert!(stderr.contains("skipped 1 malformed line"), "{stderr}");

    let (code, _, stderr) = compactd(&["context", "-", "--leaf", "nope"], Some(text.as_bytes()));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("line 3"),
        "strict reading fails first: {stderr}"
    );

    let (code, _, stderr) = compactd(&["plan", "/definitely/not/here.jsonl"], None);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read"), "{stderr}");

    let (code, _, _) = compactd(
        &["plan", "-", "--keep-recent-tokens", "-5"],
        Some(text.as_bytes()),
    );
    assert_eq!(code, 2);
}

#[test]
fn context_prints_the_llm_facing_messages() {
    let (code, json, _) = compactd(&["context", &fixture_path("before-compaction.jsonl")], None);
    assert_eq!(code, 0);
    let messages = json.as_array().unwrap();
    assert_eq!(messages.len(), 446);
    assert_eq!(messages[0]["role"], "user");
    assert!(
        messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>\n# Context Checkpoint")
    );
    // bashExecution messages arrive as user messages.
    assert!(messages.iter().any(|m| {
        m["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("Ran `"))
    }));
    assert!(
        messages
            .iter()
            .all(|m| ["user", "assistant", "toolResult"].contains(&m["role"].as_str().unwrap()))
    );

    let (code, _, stderr) = compactd(
        &[
            "context",
            &fixture_path("large-session.jsonl"),
            "--leaf",
            "nope",
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(stderr.contains("no entry with id \"nope\""), "{stderr}");
}
