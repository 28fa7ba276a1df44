//! Recall of stored sessions (issue 27): the entries a session compaction summarized are
//! searchable by the session's id through the MCP tools and the REST API, a tool result is read
//! back whole (the summarizer saw it cut at 2,000 characters) with its secret redacted, later
//! compactions add to the same recall, and it goes with the session — on both stores.

use std::sync::Arc;

use compactd::access::new_key;
use compactd_store::{Store, now_ms};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::recall::endpoint::{call, mcp};
use crate::support::{TestApp, config};

on_both_backends!(a_sessions_compacted_entries_are_searchable_until_it_is_deleted);

/// What only the end of a long tool result says, past the summarizer's cut.
const NEEDLE: &str = "QUOLL-4412";
const LATER: &str = "NUMBAT-9031";
const SECRET: &str = "ghp_Xk3Lm9Pq2Rs7Tv4Wy8Za1Bc5De6Fg0Hj2Kl4";

/// A long tool result as pi writes it: 300 lines, then the needle, a secret, half an emoji.
fn tool_output() -> String {
    let lines: String = (0..300).map(|i| format!("ok blob {i:03}\n")).collect();
    format!("{lines}checksum mismatch ({NEEDLE})\nGITHUB_TOKEN={SECRET}\nhalf \u{FFFD} an emoji")
}

/// pi v3 lines, each after the one before; JavaScript's escape for the lone surrogate.
fn lines(start: usize, parent: Option<String>, messages: Vec<Value>) -> (String, String) {
    let mut out = String::new();
    let mut parent = parent;
    for (i, message) in messages.into_iter().enumerate() {
        let id = format!("e{}", start + i);
        let line = json!({"type": "message", "id": id, "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z", "message": message});
        out.push_str(&line.to_string().replace('\u{FFFD}', "\\ud83d"));
        out.push('\n');
        parent = Some(id);
    }
    (out, parent.unwrap())
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text, "timestamp": 1})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": [{"type": "text", "text": text}],
        "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2})
}

/// Ordinary work after the blob check, long enough to be kept while the check is summarized.
fn work(round: usize, extra: &str) -> Vec<Value> {
    (0..4)
        .flat_map(|i| {
            [
                user(&format!(
                    "Round {round} step {i}: tidy module m{i}. {extra} {}",
                    "It has grown. ".repeat(20)
                )),
                assistant(&format!("Tidied m{i}. {}", "Tests pass. ".repeat(20))),
            ]
        })
        .collect()
}

pub async fn key(store: &Arc<dyn Store>, tenant: &str) -> String {
    let (text, record) = new_key(tenant, None, now_ms());
    store.create_key(&record).await.unwrap();
    text
}

/// A request with a key, its status and JSON body.
async fn send(app: &TestApp, request: reqwest::RequestBuilder, key: &str) -> (StatusCode, Value) {
    let response = app.send(request.bearer_auth(key)).await;
    (
        response.status(),
        response.json().await.unwrap_or(Value::Null),
    )
}

async fn compact(app: &TestApp, key: &str, id: &str) -> Value {
    let (status, body) = send(
        app,
        app.client
            .post(format!("{}/v1/sessions/{id}/compactions", app.url))
            .json(&json!({"keepRecentTokens": 400})),
        key,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

async fn a_sessions_compacted_entries_are_searchable_until_it_is_deleted(store: Arc<dyn Store>) {
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    config.summarizers.stages.recall_footer = true;
    let app = TestApp::with_store(config, store.clone()).await;
    let alice = key(&store, "alice").await;
    let bob = key(&store, "bob").await;

    let (session, leaf) = upload_a_session(&app, &alice).await;
    let (recall, compacted) = compacted_with_its_recall_named(&app, &alice, &session).await;
    found_by_the_session_alone(&app, (&alice, &bob), &session, &recall).await;
    compacted_again_into_the_same_recall(&app, &alice, (&session, &leaf, &compacted), &recall)
        .await;
    deleted_with_the_session(&app, &alice, &session, &recall).await;
}

/// A session whose tool output runs past what the summarizer sees; its id and leaf.
async fn upload_a_session(app: &TestApp, alice: &str) -> (String, String) {
    let header = json!({"type": "session", "version": 3, "id": "blobs", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let mut messages = vec![
        user("Verify the vendored blobs."),
        json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "read",
            "arguments": {"path": "vendor/blob.bin"}}], "provider": "p", "model": "m",
            "stopReason": "toolUse", "timestamp": 2}),
        json!({"role": "toolResult", "toolCallId": "c1", "toolName": "read",
            "content": [{"type": "text", "text": tool_output()}], "isError": false, "timestamp": 3}),
        assistant("One blob differs; I will re-download it."),
    ];
    messages.extend(work(0, ""));
    let (body, leaf) = lines(0, None, messages);
    let (status, uploaded) = send(
        app,
        app.client
            .post(format!("{}/v1/sessions", app.url))
            .header("content-type", "application/x-ndjson")
            .body(format!("{header}\n{body}")),
        alice,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{uploaded}");
    let session = uploaded["id"].as_str().unwrap().to_owned();

    (session, leaf)
}

/// The compaction names the session's recall, in its answer and on the summary's last line
/// before the file lists (which stay last, where pi reads them). The recall id, and the
/// compaction's entry.
async fn compacted_with_its_recall_named(
    app: &TestApp,
    alice: &str,
    session: &str,
) -> (String, String) {
    let first = compact(app, alice, session).await;
    let recall = first["recallId"].as_str().unwrap().to_owned();
    let summary = first["entry"]["summary"].as_str().unwrap();
    let footer = format!("recall_search in compactd (MCP at /mcp), id {recall}\n\n<read-files>");
    assert!(summary.contains(&footer), "{summary}");
    assert!(summary.ends_with("</read-files>"), "{summary}");

    (recall, first["entry"]["id"].as_str().unwrap().to_owned())
}

/// Found by the session's id, past the 2,000 characters the summarizer saw; read back whole; the
/// secret nowhere; no other session's or tenant's search finds it.
async fn found_by_the_session_alone(
    app: &TestApp,
    (alice, bob): (&str, &str),
    session: &str,
    recall: &str,
) {
    let client = mcp(&app.url, alice).await.unwrap();
    let found = call(
        &client,
        "recall_search",
        json!({"query": NEEDLE, "session_id": session}),
    )
    .await;
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    assert_eq!(
        (
            &hits[0]["recallId"],
            &hits[0]["sessionId"],
            &hits[0]["role"],
            &hits[0]["tool"]
        ),
        (
            &json!(recall),
            &json!(session),
            &json!("tool"),
            &json!("read")
        )
    );
    // Its seq is the entry's position in the session.
    assert_eq!(hits[0]["seq"], 2);
    let read = call(
        &client,
        "recall_read",
        json!({"recall_id": recall, "from": 2}),
    )
    .await;
    let expected = tool_output().replace(SECRET, "[REDACTED:github-pat:1]");
    assert!(expected.len() > 2_000);
    assert_eq!(read["turns"][0]["text"].as_str(), Some(expected.as_str()));
    let secret = call(&client, "recall_search", json!({"query": SECRET})).await;
    assert_eq!(secret["hits"].as_array().unwrap().len(), 0);
    let elsewhere = call(
        &client,
        "recall_search",
        json!({"query": NEEDLE, "session_id": "another-session"}),
    )
    .await;
    assert_eq!(elsewhere["hits"].as_array().unwrap().len(), 0);
    client.cancel().await.unwrap();
    let (_, theirs) = send(
        app,
        app.client
            .get(format!("{}/v1/recall/search?q={NEEDLE}", app.url)),
        bob,
    )
    .await;
    assert_eq!(theirs["hits"].as_array().unwrap().len(), 0);
}

/// More work, compacted again: the same recall, with the newly summarized entries added.
async fn compacted_again_into_the_same_recall(
    app: &TestApp,
    alice: &str,
    (session, leaf, leaf_now): (&str, &str, &str),
    recall: &str,
) {
    assert_ne!(leaf_now, leaf);
    let (more, _) = lines(100, Some(leaf_now.to_owned()), work(1, LATER));
    let (status, _) = send(
        app,
        app.client
            .post(format!("{}/v1/sessions/{session}/entries", app.url))
            .header("content-type", "application/x-ndjson")
            .body(more),
        alice,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let second = compact(app, alice, session).await;
    assert_eq!(second["recallId"], recall);
    let second_summary = second["entry"]["summary"].as_str().unwrap();
    assert_eq!(
        second_summary.matches("recall_search in compactd").count(),
        1
    );
    for word in [NEEDLE, LATER] {
        let (_, found) = send(
            app,
            app.client.get(format!(
                "{}/v1/recall/search?q={word}&session={session}",
                app.url
            )),
            alice,
        )
        .await;
        assert!(
            found["hits"]
                .as_array()
                .unwrap()
                .iter()
                .all(|h| h["recallId"] == recall),
            "{found}"
        );
        assert!(
            !found["hits"].as_array().unwrap().is_empty(),
            "{word}: {found}"
        );
    }
}

/// Deleted with the session: found no more, read no more.
async fn deleted_with_the_session(app: &TestApp, alice: &str, session: &str, recall: &str) {
    let (status, _) = send(
        app,
        app.client
            .delete(format!("{}/v1/sessions/{session}", app.url)),
        alice,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, gone) = send(
        app,
        app.client
            .get(format!("{}/v1/recall/search?q={NEEDLE}", app.url)),
        alice,
    )
    .await;
    assert_eq!(gone["hits"].as_array().unwrap().len(), 0);
    let (status, _) = send(
        app,
        app.client
            .get(format!("{}/v1/recall/{recall}/turns", app.url)),
        alice,
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
