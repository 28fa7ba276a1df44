//! `compactd handoff FILE --goal`: the draft printed and the new session written, redacted.

use serde_json::{Value, json};

use crate::service::cli::{compactd, fixture_path, temp_dir};
use crate::threads::handoff::draft_paths;

/// `compactd handoff FILE --goal`: the draft printed, the new session written next to FILE with
/// FILE as its parent and the prompt as its first user message; never over an existing file.
#[test]
fn handoff_writes_a_new_session_and_prints_its_draft() {
    let dir = temp_dir("handoff");
    let file = dir.join("before.jsonl");
    std::fs::copy(fixture_path("before-compaction.jsonl"), &file).unwrap();
    let goal = "Fix the bash execution queueing in agent-session.ts";
    let (code, draft, err) = compactd(&["handoff", file.to_str().unwrap(), "--goal", goal], None);
    assert_eq!(code, 0, "{err}");
    let prompt = draft["prompt"].as_str().unwrap();
    assert!(prompt.starts_with(goal), "{prompt}");
    let named = draft_paths(&draft);
    assert!(
        named.iter().any(|p| p.ends_with("agent-session.ts")),
        "{named:?}"
    );
    assert!(
        !draft["leftOut"]["files"].as_array().unwrap().is_empty(),
        "{draft}"
    );
    let written = std::path::PathBuf::from(draft["session"].as_str().unwrap());
    assert_eq!(written.parent(), Some(dir.as_path()));
    let text = std::fs::read_to_string(&written).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    let parent = std::fs::canonicalize(&file).unwrap();
    assert_eq!(lines[0]["parentSession"], parent.to_str().unwrap());
    assert_eq!(lines[1]["message"]["content"][0]["text"], prompt);
    // The original is untouched, and an existing file is never overwritten.
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(fixture_path("before-compaction.jsonl")).unwrap()
    );
    let (code, _, err) = compactd(
        &[
            "handoff",
            file.to_str().unwrap(),
            "--goal",
            goal,
            "--out",
            written.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(code, 2);
    assert!(err.contains("cannot write"), "{err}");
    let (code, _, err) = compactd(&["handoff", file.to_str().unwrap(), "--goal", " "], None);
    assert_eq!(code, 2);
    assert!(err.contains("--goal"), "{err}");
}

/// `compactd handoff` prints and writes its draft redacted (issue 64): the token a user turn
/// named is in neither the printed draft nor the new session's file.
#[test]
fn handoff_prints_and_writes_no_secret() {
    let dir = temp_dir("handoff-secret");
    let file = dir.join("lexer.jsonl");
    let token = "ghp_R2k9vQx7LmN4pZ8tW1yB6cH3jD5fG0sK2aE9";
    let lines = [
        json!({"type": "session", "version": 3, "id": "lexer", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"}),
        json!({"type": "message", "id": "u1", "parentId": null, "timestamp": "2026-11-22T10:00:00.000Z",
            "message": {"role": "user", "timestamp": 1,
                "content": format!("Fix tab handling in src/lexer.rs with token {token}")}}),
        json!({"type": "message", "id": "a1", "parentId": "u1", "timestamp": "2026-11-22T10:00:01.000Z",
            "message": {"role": "assistant", "timestamp": 2, "provider": "p", "model": "m", "stopReason": "toolUse",
                "content": [{"type": "toolCall", "id": "c1", "name": "edit",
                    "arguments": {"path": "src/lexer.rs", "oldText": "a", "newText": "b"}}]}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let (code, draft, err) = compactd(
        &[
            "handoff",
            file.to_str().unwrap(),
            "--goal",
            "Finish tab handling",
        ],
        None,
    );
    assert_eq!(code, 0, "{err}");
    let printed = draft.to_string();
    assert!(printed.contains("src/lexer.rs"), "{printed}");
    assert!(printed.contains("[REDACTED:"), "{printed}");
    assert!(!printed.contains(token), "{printed}");
    let written = std::fs::read_to_string(draft["session"].as_str().unwrap()).unwrap();
    assert!(!written.contains(token), "{written}");
    std::fs::remove_dir_all(&dir).unwrap();
}
