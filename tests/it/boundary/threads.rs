//! The agent-session record behind the gateway and the bodies it reads (issue 64), on both
//! stores: the latest request of an agent session always wins — one compactd refused (over the
//! body limit) leaves no older request standing for it; one tenant's many sessions never evict
//! another tenant's thread; a zstd body is every frame of it, and bytes after the last frame
//! are refused.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::recall::endpoint::mcp;
use crate::support::FakeProvider;
use crate::support::gateway::{gateway_config, summarizer_model};
use crate::support::{TestApp, tenant_keys};

on_both_backends!(
    the_latest_request_of_an_agent_session_wins_and_tenants_keep_their_own,
    a_zstd_body_is_read_frame_by_frame_and_nothing_after,
);

/// A Claude Code turn of session `session` naming `file`.
fn turn(file: &str) -> Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": false, "messages": [
        {"role": "user", "content": format!("Fix the bug in {file}.")},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Edit",
            "input": {"file_path": file, "old_string": "a", "new_string": "b"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]})
}

async fn send_turn(
    app: &TestApp,
    key: &str,
    session: &str,
    body: impl Into<reqwest::Body>,
) -> StatusCode {
    app.client
        .post(format!("{}/v1/messages", app.url))
        .header("x-compactd-key", key)
        .header("x-api-key", "sk-ant-provider")
        .header("anthropic-version", "2023-06-01")
        .header("x-claude-code-session-id", session)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
        .status()
}

/// What MCP `handoff {goal}` without a thread answers for `key` as Claude Code: the draft, or
/// the tool's error.
async fn handoff_current(app: &TestApp, key: &str) -> Result<Value, String> {
    let client = mcp(&app.url, key).await.unwrap();
    let result = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("handoff").with_arguments(
                json!({"goal": "Finish the bug fix"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    client.cancel().await.unwrap();
    match result {
        Ok(result) if result.is_error != Some(true) => {
            let text = result.content[0].as_text().unwrap().text.clone();
            Ok(serde_json::from_str(&text).unwrap())
        }
        Ok(result) => Err(format!("{:?}", result.content)),
        Err(error) => Err(error.to_string()),
    }
}

async fn the_latest_request_of_an_agent_session_wins_and_tenants_keep_their_own(
    store: Arc<dyn Store>,
) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config.http.max_body_bytes = 1 << 20;
    let app = TestApp::with_store(config, store.clone()).await;
    let keys = tenant_keys(store.as_ref(), &["alice", "bob"]).await;
    let (alice, bob) = (&keys[0], &keys[1]);

    // Alice's session: a turn naming the second file, then one over the body limit (refused)
    // naming the third. The older request must not stand for the session.
    let second = turn("src/alice_second.rs").to_string();
    assert_eq!(send_turn(&app, alice, "a-1", second).await, StatusCode::OK);
    let drafted = handoff_current(&app, alice).await.unwrap();
    assert!(
        drafted["prompt"]
            .as_str()
            .unwrap()
            .contains("src/alice_second.rs"),
        "{drafted}"
    );
    let mut third = turn("src/alice_third.rs");
    third["metadata"] = json!({"padding": "x".repeat(2 << 20)});
    assert_eq!(
        send_turn(&app, alice, "a-1", third.to_string()).await,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    match handoff_current(&app, alice).await {
        Err(error) => assert!(error.contains("no thread"), "{error}"),
        Ok(drafted) => panic!("a stale request answered: {drafted}"),
    }

    // Bob's thread stays his however many sessions Alice opens.
    assert_eq!(
        send_turn(&app, bob, "b-1", turn("src/bob.rs").to_string()).await,
        StatusCode::OK
    );
    for n in 0..300 {
        let body = turn(&format!("src/alice_{n}.rs")).to_string();
        assert_eq!(
            send_turn(&app, alice, &format!("a-{n}"), body).await,
            StatusCode::OK
        );
    }
    let bobs = handoff_current(&app, bob).await.unwrap();
    assert!(
        bobs["prompt"].as_str().unwrap().contains("src/bob.rs"),
        "{bobs}"
    );
    let alices = handoff_current(&app, alice).await.unwrap();
    assert!(
        alices["prompt"]
            .as_str()
            .unwrap()
            .contains("src/alice_299.rs"),
        "{alices}"
    );
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

async fn a_zstd_body_is_read_frame_by_frame_and_nothing_after(store: Arc<dyn Store>) {
    let app = TestApp::with_store(crate::support::config(), store).await;
    let body = json!({"goal": "Finish tab handling", "messages": [
        {"role": "user", "content": "Fix tab handling in src/lexer.rs"}]})
    .to_string();
    let (head, tail) = body.split_at(body.len() / 2);
    let mut two_frames = zstd(head.as_bytes());
    two_frames.extend(zstd(tail.as_bytes()));
    let post = |bytes: Vec<u8>| {
        app.client
            .post(format!("{}/v1/handoff", app.url))
            .header("content-type", "application/json")
            .header("content-encoding", "zstd")
            .body(bytes)
    };
    let answered = app.send(post(two_frames)).await;
    assert_eq!(answered.status(), StatusCode::OK);
    let draft: Value = answered.json().await.unwrap();
    assert!(
        draft["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Finish tab handling")
    );
    let mut trailing = zstd(body.as_bytes());
    trailing.extend(b"{\"goal\":\"ignored\"}");
    let refused = app.send(post(trailing)).await;
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
    let error: Value = refused.json().await.unwrap();
    assert_eq!(
        error["error"]["code"], "invalid_content_encoding",
        "{error}"
    );
}
