//! Recall's boundaries under hostile sizes and inputs (issue 52), on both stores: one very large
//! turn is kept whole and indexed as far as fits, and takes no other conversation (of any
//! tenant) with it; a NUL in a filter is the caller's mistake (400), never a storage error;
//! paging by `next` reaches a stored session's last turn however its entries are numbered; a
//! lone surrogate escape in an MCP call is read as everywhere else.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::recall::endpoint::{call, get, mcp};
use crate::recall::sessions::key;
use crate::support::{TestApp, compact_body, config, eventually};

on_both_backends!(
    a_huge_turn_is_kept_whole_and_takes_no_other_conversation_with_it,
    a_nul_in_a_recall_filter_is_a_400,
    paging_by_next_reaches_a_sessions_last_turn,
);

async fn recall_app(store: Arc<dyn Store>) -> TestApp {
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    config.summarizers.stages.recall_footer = true;
    TestApp::with_store(config, store).await
}

/// Uploads a session of `lines` for `key`, compacts it, and answers the compaction.
async fn upload_and_compact(app: &TestApp, key: &str, lines: &[String]) -> Value {
    let uploaded = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(key)
                .header("content-type", "application/x-ndjson")
                .body(lines.join("\n") + "\n"),
        )
        .await;
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    let session = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let compacted = app
        .send(
            app.client
                .post(format!("{}/v1/sessions/{session}/compactions", app.url))
                .bearer_auth(key)
                .json(&json!({"keepRecentTokens": 400})),
        )
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    compacted.json().await.unwrap()
}

/// The recall id a summary's last line names.
fn recall_id(summary: &str) -> String {
    summary
        .rsplit_once(", id ")
        .map(|(_, id)| id.split_whitespace().next().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no recall id in {summary}"))
}

/// `n` random lowercase words (a seeded generator: the same text each run).
fn random_words(n: usize, seed: u64) -> Vec<String> {
    let mut rng = fastrand::Rng::with_seed(seed);
    (0..n)
        .map(|_| {
            let len = rng.usize(3..=10);
            (0..len).map(|_| rng.lowercase()).collect()
        })
        .collect()
}

async fn a_huge_turn_is_kept_whole_and_takes_no_other_conversation_with_it(store: Arc<dyn Store>) {
    let app = recall_app(store.clone()).await;
    let (alice, bob) = (key(&store, "alice").await, key(&store, "bob").await);
    let mut words = random_words(120_000, 52);
    words[0] = "headmarker".into();
    *words.last_mut().unwrap() = "tailmarker".into();
    let huge = words.join(" ");
    assert!(huge.len() > 700_000);
    let prompt = format!(
        "<conversation>\n[User]: {huge}\n\n[Assistant]: Noted.\n\n[User]: now fix src/lib.rs\n</conversation>\n\n## Goal"
    );
    let post = |key: &str, body: Value| {
        app.send(
            app.client
                .post(format!("{}/v1/compact", app.url))
                .bearer_auth(key)
                .json(&body),
        )
    };
    let response = post(&alice, compact_body(&prompt)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let big_id = recall_id(
        response.json::<Value>().await.unwrap()["summary"]
            .as_str()
            .unwrap(),
    );
    // Another tenant's small compactions, at once, into the same write batches.
    let small: Vec<_> = (0..40)
        .map(|i| {
            post(
                &bob,
                compact_body(&format!(
                    "<conversation>\n[User]: bob's task {i}: rename otter{i}\n</conversation>\n\n## Goal"
                )),
            )
        })
        .collect();
    let mut small_ids = Vec::new();
    for response in futures_util::future::join_all(small).await {
        assert_eq!(response.status(), StatusCode::OK);
        small_ids.push(recall_id(
            response.json::<Value>().await.unwrap()["summary"]
                .as_str()
                .unwrap(),
        ));
    }
    // Every id a summary named answers, the huge turn whole.
    let turns = eventually("the huge conversation is kept", || async {
        let (status, body) = get(&app, &alice, &format!("/v1/recall/{big_id}/turns")).await;
        (status == StatusCode::OK).then_some(body)
    })
    .await;
    assert_eq!(
        turns["turns"][0]["text"].as_str().map(str::len),
        Some(huge.len())
    );
    for id in &small_ids {
        eventually("bob's conversation is kept", || async {
            let (status, _) = get(&app, &bob, &format!("/v1/recall/{id}/turns")).await;
            (status == StatusCode::OK).then_some(())
        })
        .await;
    }
    // Indexed as far as fits: its head and its tail.
    for word in ["headmarker", "tailmarker"] {
        let (status, found) = get(&app, &alice, &format!("/v1/recall/search?q={word}")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            found["hits"][0]["recallId"],
            json!(big_id),
            "{word}: {found}"
        );
    }
    let (_, bobs) = get(&app, &bob, "/v1/recall/search?q=otter17").await;
    assert_eq!(bobs["hits"].as_array().unwrap().len(), 1, "{bobs}");
    a_stored_session_with_a_huge_tool_result_is_kept_too(&app, &alice, &huge).await;
}

/// A stored session whose tool result is `huge` is kept for recall too.
async fn a_stored_session_with_a_huge_tool_result_is_kept_too(
    app: &TestApp,
    alice: &str,
    huge: &str,
) {
    let header = json!({"type": "session", "version": 3, "id": "huge", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let messages = [
        json!({"role": "user", "content": "Run the generator.", "timestamp": 1}),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash",
            "arguments": {"command": "./gen"}}], "provider": "p", "model": "m",
            "stopReason": "toolUse", "timestamp": 2}),
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash",
            "content": [{"type": "text", "text": huge}], "isError": false, "timestamp": 3}),
    ];
    let mut lines = vec![header.to_string()];
    let mut parent: Option<String> = None;
    let later = (0..8).flat_map(|i| {
        [
            json!({"role": "user", "content": format!("step {i}: {}", "more work ".repeat(40)), "timestamp": 4}),
            json!({"role": "assistant", "content": [{"type": "text", "text": "done ".repeat(40)}],
                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 5}),
        ]
    });
    for (i, message) in messages.into_iter().chain(later).enumerate() {
        let id = format!("e{i}");
        lines.push(
            json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z", "message": message})
            .to_string(),
        );
        parent = Some(id);
    }
    let compacted = upload_and_compact(app, alice, &lines).await;
    assert!(
        compacted["recallId"].is_string(),
        "{}",
        compacted["recallId"]
    );
}

async fn a_nul_in_a_recall_filter_is_a_400(store: Arc<dyn Store>) {
    let app = recall_app(store.clone()).await;
    let alice = key(&store, "alice").await;
    for path in [
        "/v1/recall/search?q=x&role=%00",
        "/v1/recall/search?q=x&path=a%00b",
        "/v1/recall/search?q=x&tool=%00",
        "/v1/recall/search?q=x%00y",
        "/v1/recall/search?q=x&id=r_%00",
        "/v1/recall/search?q=x&session=s%00",
        "/v1/recall/r_%00x/turns",
    ] {
        let (status, body) = get(&app, &alice, path).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains("NUL"),
            "{body}"
        );
    }
    let client = mcp(&app.url, &alice).await.unwrap();
    for args in [
        json!({"query": "x", "role": "\u{0}"}),
        json!({"query": "x", "path": "a\u{0}b"}),
    ] {
        let refused = client
            .call_tool(
                rmcp::model::CallToolRequestParams::new("recall_search")
                    .with_arguments(args.as_object().unwrap().clone()),
            )
            .await
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("NUL") && !refused.contains("storage"),
            "{refused}"
        );
    }
    client.cancel().await.unwrap();
}

async fn paging_by_next_reaches_a_sessions_last_turn(store: Arc<dyn Store>) {
    let app = recall_app(store.clone()).await;
    let alice = key(&store, "alice").await;
    let header = json!({"type": "session", "version": 3, "id": "paged", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let mut lines = vec![header.to_string()];
    let mut parent: Option<String> = None;
    let mut push = |entry: Value, lines: &mut Vec<String>| {
        let id = format!("e{}", lines.len());
        let mut entry = entry;
        entry["id"] = json!(id);
        entry["parentId"] = json!(parent);
        entry["timestamp"] = json!("2026-01-01T00:00:01.000Z");
        lines.push(entry.to_string());
        parent = Some(id);
    };
    for i in 0..30 {
        push(
            json!({"type": "message", "message": {"role": "user",
            "content": format!("task {i}: {}", "words here ".repeat(30)), "timestamp": 1}}),
            &mut lines,
        );
        // Entries between the messages that are no turns of their own.
        push(
            json!({"type": "model_change", "provider": "p", "modelId": format!("m{i}")}),
            &mut lines,
        );
        push(
            json!({"type": "thinking_level_change", "thinkingLevel": "high"}),
            &mut lines,
        );
        push(
            json!({"type": "message", "message": {"role": "assistant",
            "content": [{"type": "text", "text": format!("done {i}. {}", "ok ".repeat(30))}],
            "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}}),
            &mut lines,
        );
    }
    let compacted = upload_and_compact(&app, &alice, &lines).await;
    let id = compacted["recallId"].as_str().unwrap().to_owned();
    // REST, then MCP: follow `next` from the start, a few turns a page.
    let mut seen = Vec::new();
    let mut from = Some(0);
    let mut total = 0;
    while let Some(at) = from {
        let (status, page) = get(
            &app,
            &alice,
            &format!("/v1/recall/{id}/turns?from={at}&limit=4"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        total = page["total"].as_i64().unwrap();
        seen.extend(
            page["turns"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["seq"].as_i64().unwrap()),
        );
        from = page["next"].as_i64();
        assert!(seen.len() <= total as usize + 1, "paging loops");
    }
    assert!(total > 24, "{total}");
    assert_eq!(seen.len() as i64, total, "every turn, once: {seen:?}");
    let client = mcp(&app.url, &alice).await.unwrap();
    let mut via_mcp = 0;
    let mut from = Some(0);
    while let Some(at) = from {
        let page = call(
            &client,
            "recall_read",
            json!({"recall_id": id, "from": at, "limit": 5}),
        )
        .await;
        via_mcp += page["turns"].as_array().unwrap().len() as i64;
        from = page["next"].as_i64();
    }
    assert_eq!(via_mcp, total);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_lone_surrogate_escape_in_an_mcp_call_is_read_as_everywhere() {
    let app = TestApp::spawn(config()).await;
    let initialize = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"recall_search","arguments":{"query":"fix \ud83d"}}}"#;
    for body in [initialize, call] {
        let response = app
            .client
            .post(format!("{}/mcp", app.url))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{body}");
        let answer: Value = response.json().await.unwrap();
        assert!(answer.get("result").is_some(), "{answer}");
    }
}
