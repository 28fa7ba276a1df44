//! Thread references (issue 57): `POST /v1/threads/read {thread, question}` on a session longer
//! than a model's window, where a decision was made and later reverted: the answer puts the later
//! one first and cites its entry, names the earlier as superseded, says which tool call failed,
//! and stays within its budget; another tenant's thread is 404.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

on_both_backends!(a_thread_read_answers_with_the_later_decision_and_cites_it);
on_both_backends!(a_model_reads_the_thread_in_a_few_steps_within_the_budget);

/// The session's messages: the decision, a thousand turns of other work, its reversal, a tool
/// call that failed, more work.
pub fn session() -> (String, usize) {
    let mut messages = vec![
        json!({"role": "user", "content": "For the job queue, use PostgreSQL with SKIP LOCKED."}),
        json!({"role": "assistant", "content": [{"type": "text", "text": "OK: the job queue will use PostgreSQL with SKIP LOCKED."}]}),
    ];
    let filler = |messages: &mut Vec<Value>, from: usize, to: usize| {
        for i in from..to {
            messages.push(json!({"role": "user", "content": format!("Refactor the module m{i} of the renderer and report what changed. {}", "The renderer has grown over the years. ".repeat(4))}));
            messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("Split m{i} into two files. {}", "The tests pass after the split. ".repeat(8))}]}));
        }
    };
    filler(&mut messages, 0, 1000);
    messages.push(json!({"role": "user", "content": "Actually, revert that: the job queue should use Redis streams instead of PostgreSQL."}));
    messages.push(json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "cargo add redis --features streams"}}]}));
    messages.push(json!({"role": "toolResult", "toolCallId": "c1", "toolName": "bash", "content": [{"type": "text", "text": "error: network unreachable"}], "isError": true}));
    filler(&mut messages, 1000, 1200);
    let header = json!({"type": "session", "version": 3, "id": "queue", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let mut file = format!("{header}\n");
    let mut parent: Option<String> = None;
    for (i, message) in messages.iter().enumerate() {
        let id = format!("e{i:05}");
        file.push_str(&json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message}).to_string());
        file.push('\n');
        parent = Some(id);
    }
    (file, messages.len())
}

async fn a_thread_read_answers_with_the_later_decision_and_cites_it(store: Arc<dyn Store>) {
    let keys = crate::support::tenant_keys(store.as_ref(), &["a", "b"]).await;
    let app = TestApp::with_store(crate::support::config(), store).await;
    let (file, count) = session();
    // Larger than a model's window: ~150k tokens at 4 characters a token.
    assert!(file.len() > 600_000, "{}", file.len());
    let id = upload(&app, &keys[0], file).await;
    let id = id.as_str();
    let read = |key: &str, body: Value| {
        app.client
            .post(format!("{}/v1/threads/read", app.url))
            .bearer_auth(key)
            .json(&body)
    };
    let question = "Which backend does the job queue use?";
    let response = app
        .send(read(&keys[0], json!({"thread": id, "question": question})))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["searched"], count);
    let text = answer["answer"].as_str().unwrap();
    assert!(text.chars().count() <= 4000, "within its budget");
    // The reversal (entry 2002) is what holds, cited first; the decision it reverted is cited as
    // superseded.
    let cited: Vec<&str> = answer["citations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(cited.first(), Some(&"e02002"), "{answer:#}");
    assert!(
        text.starts_with("- The thread's latest on this — entry e02002"),
        "{text}"
    );
    assert!(text.contains("Redis streams"), "{text}");
    let hits = answer["hits"].as_array().unwrap();
    let decision = hits
        .iter()
        .find(|h| h["entryId"] == "e00000")
        .expect("the decision is found");
    assert!(decision["revisedBy"].is_string(), "{decision}");
    assert!(cited.contains(&"e00000"));
    // A call is trusted only when its result shows it worked.
    if let Some(call) = hits.iter().find(|h| h["entryId"] == "e02003") {
        assert_eq!(call["failed"], true, "{call}");
    }

    over_mcp_too(&app, &keys, id, question, &answer).await;

    // Another tenant's thread is no thread; a question must say something.
    let theirs = app
        .send(read(&keys[1], json!({"thread": id, "question": question})))
        .await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    for body in [
        json!({"thread": id, "question": "  "}),
        json!({"thread": id, "question": "x".repeat(2001)}),
    ] {
        let response = app.send(read(&keys[0], body)).await;
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["param"],
            "question"
        );
    }
}

/// The same read over MCP (the tools Claude Code, Codex and OpenCode are given), and a handoff;
/// refused to the other tenant (`keys[1]`).
async fn over_mcp_too(app: &TestApp, keys: &[String], id: &str, question: &str, answer: &Value) {
    let client = crate::recall::endpoint::mcp(&app.url, &keys[0])
        .await
        .unwrap();
    let over_mcp = crate::recall::endpoint::call(
        &client,
        "read_thread",
        json!({"thread": id, "question": question}),
    )
    .await;
    assert_eq!(over_mcp["citations"], answer["citations"]);
    let handed = crate::recall::endpoint::call(
        &client,
        "handoff",
        json!({"thread": id, "goal": "Move the job queue to Redis streams"}),
    )
    .await;
    assert!(
        handed["prompt"]
            .as_str()
            .unwrap()
            .starts_with("Move the job queue to Redis streams"),
        "{handed}"
    );
    assert!(handed["session"].is_string());
    client.cancel().await.unwrap();
    let client = crate::recall::endpoint::mcp(&app.url, &keys[1])
        .await
        .unwrap();
    let refused = client
        .call_tool(
            rmcp::model::CallToolRequestParams::new("read_thread").with_arguments(
                json!({"thread": id, "question": question})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await;
    assert!(refused.is_err() || refused.unwrap().is_error == Some(true));
    client.cancel().await.unwrap();
}

/// Stores the session for `key`: its id.
pub async fn upload(app: &TestApp, key: &str, file: String) -> String {
    let uploaded: Value = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(key)
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(file),
        )
        .await
        .json()
        .await
        .unwrap();
    uploaded["id"].as_str().unwrap().to_owned()
}

/// Behind a model, on the same session longer than its window: it asks to search, then to read
/// the reversal with its neighbours, then answers citing entries. Each step's prompt stays
/// within the budget and shows what it asked for; a model that never stops asking gets the
/// ranked quotes after four calls. A recall id is a thread too, its turns cited by their place.
async fn a_model_reads_the_thread_in_a_few_steps_within_the_budget(store: Arc<dyn Store>) {
    use crate::support::fake_provider::{FakeProvider, Reply};
    let keys = crate::support::tenant_keys(store.as_ref(), &["a", "b"]).await;
    let (file, _) = session();
    let answer = "The job queue uses Redis streams [e02002]; PostgreSQL with SKIP LOCKED [e00000] \
                  was reverted. Adding the redis crate failed [e02003, e02004].";
    let fake = FakeProvider::start(
        vec![
            Reply::openai("SEARCH: PostgreSQL SKIP LOCKED"),
            Reply::openai("READ: e02002"),
            Reply::openai(answer),
        ],
        Reply::openai("SEARCH: renderer"),
    )
    .await;
    let app = TestApp::handlers_with_store(
        crate::support::chain_config(&fake, "openai:gpt-test", true),
        store.clone(),
    );
    let id = upload(&app, &keys[0], file.clone()).await;
    let read = |question: &str| {
        app.client
            .post(format!("{}/v1/threads/read", app.url))
            .bearer_auth(&keys[0])
            .json(&json!({"thread": id, "question": question}))
    };
    let response: Value = app
        .send(read("Which backend does the job queue use?"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["answeredBy"], "openai:gpt-test", "{response:#}");
    assert_eq!(response["modelSteps"], 3);
    assert_eq!(response["answer"], answer);
    assert_eq!(
        response["citations"],
        json!(["e02002", "e00000", "e02003", "e02004"])
    );
    each_step_within_the_budget_shows_what_it_asked(&fake.received());
    // A model that only ever asks: four calls, then the ranked quotes.
    let response: Value = app
        .send(read("What did the renderer's m17 split into?"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(response["answeredBy"], "extractive", "{response:#}");
    assert_eq!(fake.received().len(), 3 + 4);
    assert!(response["citations"][0].as_str().unwrap().starts_with('e'));

    a_recall_id_is_a_thread_too(store, &keys, &id).await;
}

/// Each step's prompt stays within the budget, holds the question, and shows what the steps
/// before it asked for and found.
fn each_step_within_the_budget_shows_what_it_asked(
    received: &[crate::support::fake_provider::Received],
) {
    let prompts: Vec<String> = received
        .iter()
        .map(|r| {
            r.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect();
    assert_eq!(prompts.len(), 3);
    for prompt in &prompts {
        // ~6k tokens, against a thread of ~150k.
        assert!(prompt.chars().count() < 26_000, "{}", prompt.len());
        assert!(prompt.contains("Which backend does the job queue use?"));
    }
    // Read with its neighbours two either side: the failed result two entries on.
    assert!(!prompts[1].contains("[e02004]"), "{}", prompts[1]);
    assert!(
        prompts[2].contains("[e02004] toolResult (failed): error: network unreachable"),
        "{}",
        prompts[2]
    );
    assert!(prompts[0].contains("[e02002] user: Actually, revert that"));
    // Each step sees what it asked: a search that found nothing new is not asked blindly again.
    assert!(prompts[1].contains("- SEARCH: PostgreSQL SKIP LOCKED (0 more entries)"));
    assert!(
        prompts[2].contains("- READ: e02002 (2 more entries)"),
        "{}",
        prompts[2]
    );
}

/// A recall id: compacted without the model, then read by the ranked quotes of its turns; not by
/// another tenant.
async fn a_recall_id_is_a_thread_too(store: Arc<dyn Store>, keys: &[String], id: &str) {
    let extractive = TestApp::handlers_with_store(crate::support::config(), store);
    let compacted: Value = extractive
        .send(
            extractive
                .client
                .post(format!("{}/v1/sessions/{id}/compactions", extractive.url))
                .bearer_auth(&keys[0])
                .json(&json!({"keepRecentTokens": 2000})),
        )
        .await
        .json()
        .await
        .unwrap();
    let recall = compacted["recallId"]
        .as_str()
        .expect("a recall id")
        .to_owned();
    let by_recall = |key: &str| {
        extractive
            .client
            .post(format!("{}/v1/threads/read", extractive.url))
            .bearer_auth(key)
            .json(&json!({"thread": recall, "question": "Which backend does the job queue use?"}))
    };
    let response: Value = extractive
        .send(by_recall(&keys[0]))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        response["citations"][0],
        format!("{recall}#2002"),
        "{response:#}"
    );
    assert!(
        response["answer"]
            .as_str()
            .unwrap()
            .contains("Redis streams")
    );
    let theirs = extractive.send(by_recall(&keys[1])).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
}
