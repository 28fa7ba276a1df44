//! JSON as JavaScript writes it. pi and oh-my-pi cut tool output at 2000 UTF-16 units, which
//! splits emoji, and `JSON.stringify` writes the half as an escape (`node -e
//! 'console.log(JSON.stringify("a😀".slice(0,2)))'` prints `"a\ud83d"`). Every JSON input takes
//! such text: both summarization wires, uploads, appends, `/v1/plan`, compaction and the CLI.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::dialects::recorded;
use crate::support::{TestApp, config};

/// A recorded oh-my-pi request body, serialized, with a tool output cut mid-emoji the way the
/// agent cuts and `JSON.stringify` writes it.
fn body_with_a_lone_surrogate() -> String {
    let r = recorded("before.jsonl")
        .into_iter()
        .find(|r| r.model == "qwen3-coder" && r.call == "history")
        .unwrap();
    let text = serde_json::to_string(&r.request).unwrap();
    let at = text.find("<tool_response>\\n").unwrap() + "<tool_response>\\n".len();
    format!("{}fixed 🐛 and \\ud83d{}", &text[..at], &text[at..])
}

#[tokio::test]
async fn both_wires_take_prompts_with_lone_surrogates() {
    let app = TestApp::handlers(config()).await;
    let body = body_with_a_lone_surrogate();
    assert!(
        serde_json::from_str::<Value>(&body).is_err(),
        "serde_json alone refuses it"
    );
    let response = app
        .send(
            app.client
                .post(format!("{}/v1/compact", app.url))
                .header("content-type", "application/json")
                .body(body.clone()),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let summary: Value = response.json().await.unwrap();
    assert!(summary["summary"].as_str().unwrap().contains("## Progress"));

    // The chat wire: the same prompt as a user message, as oh-my-pi's JSON.stringify writes it.
    let request: Value = compactd_core::js_json::from_str(&body).unwrap();
    let chat = format!(
        r#"{{"model":"qwen3-coder","messages":[{{"role":"system","content":{}}},{{"role":"user","content":"<conversation>\n<|im_start|>user\nfix it \ud83d<|im_end|>\n</conversation>\n\nSummarize. ## Critical Context"}}],"stream":false,"max_tokens":512}}"#,
        serde_json::to_string(&request["systemPrompt"]).unwrap()
    );
    let response = app
        .send(
            app.client
                .post(format!("{}/v1/chat/completions", app.url))
                .bearer_auth("sk-provider")
                .header("content-type", "application/json")
                .body(chat),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let completion: Value = response.json().await.unwrap();
    let content = completion["choices"][0]["message"]["content"]
        .as_str()
        .unwrap();
    assert!(content.contains("fix it \u{FFFD}"), "{content}");
}

/// A v3 session as pi writes it, with a tool result cut mid-emoji.
fn session_file() -> String {
    let cut = format!("{}\\ud83d", "x".repeat(1999));
    [
        r#"{"type":"session","version":3,"id":"js","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#.to_owned(),
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"show the log","timestamp":1767225601000}}"#.to_owned(),
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"cat log"}}],"stopReason":"toolUse","timestamp":1767225602000}}"#.to_owned(),
        format!(r#"{{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{{"type":"text","text":"{cut}"}}],"isError":false,"timestamp":1767225603000}}}}"#),
        r#"{"type":"message","id":"a2","parentId":"t1","timestamp":"2026-01-01T00:00:04.000Z","message":{"role":"assistant","content":[{"type":"text","text":"The log ends with \ud83d"}],"stopReason":"stop","timestamp":1767225604000}}"#.to_owned(),
        r#"{"type":"message","id":"u2","parentId":"a2","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"ok, go on","timestamp":1767225605000}}"#.to_owned(),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect()
}

#[tokio::test]
async fn sessions_with_lone_surrogates_upload_plan_append_and_compact() {
    let app = TestApp::handlers(config()).await;
    let file = session_file();
    // Planned without storing.
    let response = app
        .post_raw("/v1/plan?keepRecentTokens=10", file.clone())
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let plan: Value = response.json().await.unwrap();
    let planned = format!(
        "{}{}",
        plan["plan"]["conversation"].as_str().unwrap(),
        plan["plan"]["turnPrefixConversation"].as_str().unwrap()
    );
    assert!(
        planned.contains(&format!("{}\u{FFFD}", "x".repeat(1999))),
        "{planned}"
    );
    // Stored and read back byte for byte.
    let response = app.upload(file.clone()).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let entries = format!("/v1/sessions/{id}/entries");
    assert_eq!(app.get(&entries).await.text().await.unwrap(), file);
    // Appended, and idempotently re-sent.
    let line = r#"{"type":"message","id":"u3","parentId":"u2","timestamp":"2026-01-01T00:00:06.000Z","message":{"role":"user","content":"\ude00 and more","timestamp":1767225606000}}"#;
    for appended in [1, 0] {
        let response = app.post_raw(&entries, format!("{line}\n")).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.json::<Value>().await.unwrap()["appended"],
            appended
        );
    }
    // Compacted; the context reads.
    let response = app
        .compact_session(&id, &json!({"keepRecentTokens": 5}))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let context: Value = app.context(&id).await.json().await.unwrap();
    assert!(context["messages"].as_array().unwrap().len() >= 2);
    assert!(
        app.get(&entries)
            .await
            .text()
            .await
            .unwrap()
            .starts_with(&format!("{file}{line}\n"))
    );
}

#[test]
fn the_cli_plans_and_compacts_files_with_lone_surrogates() {
    let dir = std::env::temp_dir().join(format!("compactd-js-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    std::fs::write(&path, session_file()).unwrap();
    for args in [
        vec!["plan", "--keep-recent-tokens", "10"],
        vec!["context"],
        vec!["compact", "--keep-recent-tokens", "10", "--write"],
    ] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_compactd"))
            .args(&args)
            .arg(&path)
            .env("COMPACTD_MODELS", "extractive")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written.starts_with(&session_file()),
        "the file's lines are kept as written"
    );
    assert!(
        written
            .lines()
            .last()
            .unwrap()
            .starts_with(r#"{"type":"compaction""#)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
