//! The newest paths bound their work (issue 64): a handoff of a thread of thousands of turns that
//! share hundreds of words with the goal answers by the request's deadline — its draft, or a 503
//! with Retry-After — instead of minutes later (its cost grew faster than quadratically); a
//! thread read behind a model that asks forty searches a step follows a few of them, off the
//! runtime. `/healthz` answers throughout, on both stores.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, config, secs, tenant_keys};

on_both_backends!(
    a_huge_handoff_answers_by_the_deadline_and_the_service_stays_up,
    a_model_asking_forty_searches_a_step_gets_a_few_and_the_service_stays_up,
);

/// `turns` user requests (each sharing `shared` words with [`goal`]) with an edit each, as a pi
/// v3 session file, and the same conversation as chat messages.
fn thread(turns: usize, shared: usize) -> (String, Vec<Value>) {
    let words: Vec<String> = (0..shared).map(|i| format!("k{i}q")).collect();
    let header = json!({"type": "session", "version": 3, "id": "huge", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/repo"});
    let mut file = format!("{header}\n");
    let mut messages = Vec::new();
    let mut parent: Option<String> = None;
    for turn in 0..turns {
        let request = format!("Turn {turn}: {}", words.join(" "));
        let path = format!("src/module{}.rs", turn % 50);
        for (id, message) in [
            (
                format!("u{turn}"),
                json!({"role": "user", "content": request, "timestamp": 1}),
            ),
            (
                format!("a{turn}"),
                json!({"role": "assistant", "content": [{"type": "toolCall", "id": format!("c{turn}"), "name": "edit",
                    "arguments": {"path": path, "oldText": "a", "newText": "b"}}],
                    "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 2}),
            ),
            (
                format!("r{turn}"),
                json!({"role": "toolResult", "toolCallId": format!("c{turn}"), "toolName": "edit",
                    "content": [{"type": "text", "text": "Edited."}], "isError": false, "timestamp": 3}),
            ),
        ] {
            let entry = json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message});
            file.push_str(&entry.to_string());
            file.push('\n');
            parent = Some(id);
        }
        messages.push(json!({"role": "user", "content": request}));
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": format!("c{turn}"), "type": "function",
            "function": {"name": "edit", "arguments": json!({"path": path}).to_string()}}]}));
        messages.push(
            json!({"role": "tool", "tool_call_id": format!("c{turn}"), "content": "Edited."}),
        );
    }
    (file, messages)
}

fn goal(shared: usize) -> String {
    let words: Vec<String> = (0..shared).map(|i| format!("k{i}q")).collect();
    format!("Finish {}", words.join(" "))
}

/// `work`'s output, and the longest `/healthz` took to answer while it ran (asked one after
/// another, for as long as it runs).
async fn while_health_is_asked<F: std::future::Future>(
    url: &str,
    work: F,
) -> (F::Output, Duration) {
    let done = AtomicBool::new(false);
    let client = reqwest::Client::new();
    let health = async {
        let mut worst = Duration::ZERO;
        while !done.load(Ordering::Acquire) {
            let asked = Instant::now();
            let status = client
                .get(format!("{url}/healthz"))
                .send()
                .await
                .unwrap()
                .status();
            assert_eq!(status, StatusCode::OK);
            worst = worst.max(asked.elapsed());
        }
        worst
    };
    let work = async {
        let output = work.await;
        done.store(true, Ordering::Release);
        output
    };
    tokio::join!(work, health)
}

/// A draft, or a 503 with Retry-After: never a 5xx else, never after the deadline's slack.
async fn drafted_or_unavailable(response: reqwest::Response, created: StatusCode) {
    match response.status() {
        status if status == created => {
            let draft: Value = response.json().await.unwrap();
            assert!(draft["prompt"].as_str().unwrap().starts_with("Finish"));
        }
        StatusCode::SERVICE_UNAVAILABLE => {
            assert!(response.headers().contains_key("retry-after"));
        }
        other => panic!("{other}: {}", response.text().await.unwrap()),
    }
}

async fn a_huge_handoff_answers_by_the_deadline_and_the_service_stays_up(store: Arc<dyn Store>) {
    let mut config = config();
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    config.summarizers.deadline = secs(1.0);
    config.http.max_body_bytes = 64 << 20;
    let app = TestApp::with_store(config, store.clone()).await;
    let key = &tenant_keys(store.as_ref(), &["alice"]).await[0];
    // 2,000 turns sharing 570 words with the goal (~10 MB): minutes of work before the change.
    let (file, messages) = thread(2000, 570);
    let uploaded = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(key)
                .header("content-type", "application/x-ndjson")
                .body(file),
        )
        .await;
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    let id = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let goal = goal(570);
    let started = Instant::now();
    let ((stored, posted), worst) = while_health_is_asked(&app.url, async {
        let stored = app
            .client
            .post(format!("{}/v1/sessions/{id}/handoff", app.url))
            .bearer_auth(key)
            .json(&json!({"goal": goal}))
            .send();
        let posted = app
            .client
            .post(format!("{}/v1/handoff", app.url))
            .bearer_auth(key)
            .json(&json!({"goal": goal, "messages": messages}))
            .send();
        let (stored, posted) = tokio::join!(stored, posted);
        (stored.unwrap(), posted.unwrap())
    })
    .await;
    let took = started.elapsed();
    drafted_or_unavailable(stored, StatusCode::CREATED).await;
    drafted_or_unavailable(posted, StatusCode::OK).await;
    // The deadline, and the moments it takes to answer after it (reading 10 MB of JSON).
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
}

async fn a_model_asking_forty_searches_a_step_gets_a_few_and_the_service_stays_up(
    store: Arc<dyn Store>,
) {
    use crate::support::fake_provider::{FakeProvider, Reply};
    let asks: String = (0..40).map(|i| format!("SEARCH: k{i}q turn\n")).collect();
    let fake = FakeProvider::start(vec![], Reply::openai(&asks)).await;
    let mut config = crate::support::chain_config(&fake, "openai:gpt-test", true);
    config.http.max_body_bytes = 64 << 20;
    let app = TestApp::with_store(config, store.clone()).await;
    let key = &tenant_keys(store.as_ref(), &["alice"]).await[0];
    // ~3.5 MB of thread.
    let (file, _) = thread(1200, 300);
    let uploaded = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(key)
                .header("content-type", "application/x-ndjson")
                .body(file),
        )
        .await;
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    let id = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = |question: &'static str| {
        app.client
            .post(format!("{}/v1/threads/read", app.url))
            .bearer_auth(key)
            .json(&json!({"thread": id, "question": question}))
            .send()
    };
    let ((first, second), worst) = while_health_is_asked(&app.url, async {
        tokio::join!(
            read("Which module holds k7q?"),
            read("When did k3q change?")
        )
    })
    .await;
    for response in [first.unwrap(), second.unwrap()] {
        assert_eq!(response.status(), StatusCode::OK);
        let answer: Value = response.json().await.unwrap();
        // A model that only ever asks: four calls, then the ranked quotes.
        assert_eq!(answer["answeredBy"], "extractive", "{answer}");
    }
    let received = fake.received();
    assert_eq!(received.len(), 8, "four calls a read");
    for request in &received {
        let prompt = request.body["messages"].to_string();
        let asked = prompt.matches("- SEARCH: ").count();
        // At most four asks followed a step, three steps asked.
        assert!(asked <= 12, "{asked} asks followed");
    }
    assert!(worst < Duration::from_secs(1), "/healthz took {worst:?}");
}
