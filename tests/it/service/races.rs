//! Limits the README promises, under concurrency: pins per session, daily budgets. Both stores.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config, compact_body, config};

on_both_backends!(
    pins_hold_their_limit_and_uniqueness_under_concurrent_adds,
    a_budget_with_one_token_left_lets_one_call_through
);

const SESSION: &str = "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";

async fn pins_hold_their_limit_and_uniqueness_under_concurrent_adds(store: Arc<dyn Store>) {
    let app = Arc::new(TestApp::with_store(config(), store.clone()).await);
    let id = app.upload(SESSION).await.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let pins = format!("/v1/sessions/{id}/pins");

    // A JSON array is not a pin (serde would read it as the object's fields in order).
    let array = app.post_json_text(&pins, r#"["an array"]"#).await;
    assert_eq!(array.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        array.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_json"
    );

    // 40 then 30 distinct texts at once, and 12 adds of one text, all concurrent.
    let mut tasks = Vec::new();
    for batch in [40, 30] {
        for n in 0..batch {
            let (app, pins) = (app.clone(), pins.clone());
            tasks.push(tokio::spawn(async move {
                app.post(&pins, &json!({"text": format!("rule {batch}-{n}")}))
                    .await
                    .status()
            }));
        }
    }
    let mut same = Vec::new();
    for _ in 0..12 {
        let (app, pins) = (app.clone(), pins.clone());
        same.push(tokio::spawn(async move {
            let response = app
                .post(&pins, &json!({"text": "deploy from main only"}))
                .await;
            (response.status(), response.json::<Value>().await.unwrap())
        }));
    }
    let mut statuses = Vec::new();
    for task in tasks {
        statuses.push(task.await.unwrap());
    }
    let mut same_ids = Vec::new();
    for task in same {
        let (status, body) = task.await.unwrap();
        if status.is_success() {
            same_ids.push(body["id"].as_str().unwrap().to_owned());
        }
    }
    same_ids.sort();
    same_ids.dedup();
    let listed = app.get(&pins).await.json::<Value>().await.unwrap();
    let stored = listed["pins"].as_array().unwrap();
    assert_eq!(stored.len(), 50, "at most 50 pins: {statuses:?}");
    let repeated = stored
        .iter()
        .filter(|p| p["text"] == "deploy from main only")
        .count();
    assert!(repeated <= 1, "one text pinned {repeated} times");
    assert!(
        same_ids.len() <= 1,
        "adds of the same text answered with different pins: {same_ids:?}"
    );
    assert!(statuses.contains(&StatusCode::CONFLICT));
    assert!(statuses.iter().all(|s| matches!(
        *s,
        StatusCode::CREATED | StatusCode::CONFLICT | StatusCode::SERVICE_UNAVAILABLE
    )));
}

/// A tenant one token short of its daily budget, and eight compactions at once: at most one
/// reaches the model (the budget is exceeded by at most one call's estimate); the others are
/// answered by the extractive summarizer and say so.
async fn a_budget_with_one_token_left_lets_one_call_through(store: Arc<dyn Store>) {
    // The model takes a moment, so the eight overlap.
    let fake = FakeProvider::start(
        vec![],
        Reply::openai(&crate::support::answer("done")).after(std::time::Duration::from_millis(300)),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.stages.cache_bytes = 0;
    let app = Arc::new(TestApp::with_store(config, store.clone()).await);
    store.set_budget("", Some(1000), 1).await.unwrap();
    let spent = compactd_store::CallRecord {
        endpoint: "/v1/compact".into(),
        tenant: String::new(),
        purpose: "prompt".into(),
        session_id: None,
        model: Some("openai:gpt-test".into()),
        outcome: "ok".into(),
        status: 200,
        prompt_bytes: 10,
        summary_bytes: 10,
        input_tokens: 900,
        output_tokens: 99,
        latency_ms: 1,
        prompt: None,
        summary: None,
        created_at_ms: compactd_store::now_ms(),
        cached: false,
        cached_input_tokens: 0,
        summary_fingerprint: None,
        loop_detected: false,
        budget_exhausted: false,
        agent: "pi-family".into(),
        wire: "remote-endpoint".into(),
        tokens_before: 900,
        tokens_after: 99,
        anchors: None,
        anchors_kept: None,
        call_id: 0,
    };
    store.log_calls(&[spent]).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            // The same prompt (the cache is off): the model's answer keeps its anchors, so no
            // repair call is made.
            let answer: Value = app
                .compact(&compact_body(crate::support::PROMPT))
                .await
                .json()
                .await
                .unwrap();
            answer
        }));
    }
    let mut exhausted = 0;
    for task in tasks {
        let answer = task.await.unwrap();
        if answer["budgetExhausted"] == true {
            assert_eq!(answer["model"], "extractive", "{answer}");
            exhausted += 1;
        }
    }
    assert!(
        fake.received().len() <= 1,
        "{} calls reached the model with one token left",
        fake.received().len()
    );
    assert!(exhausted >= 7, "{exhausted}");
}

/// When the store cannot say what a tenant used, COMPACTD_BUDGET_WHEN_STORE_DOWN decides, and
/// each unchecked budget is counted.
async fn budgets_follow_the_setting_when_the_store_is_down(
    store: Arc<dyn Store>,
    close: impl AsyncFnOnce(),
) {
    use compactd::config::WhenStoreDown;
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nfix src/lib.rs")).await;
    store.set_budget("", Some(1_000_000), 1).await.unwrap();
    let app_with = |when| {
        let mut config = chain_config(&fake, "openai:gpt-test", true);
        config.summarizers.stages.cache_bytes = 0;
        config.summarizers.stages.budget_when_store_down = when;
        TestApp::handlers_with_store(config, store.clone())
    };
    let (open, closed) = (
        app_with(WhenStoreDown::Open),
        app_with(WhenStoreDown::Closed),
    );
    close().await;
    let prompt = "<conversation>\n[User]: fix src/lib.rs\n</conversation>";
    let answer: Value = open
        .compact(&compact_body(prompt))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["model"], "openai:gpt-test", "{answer}");
    assert_eq!(answer["budgetExhausted"], false);
    assert_eq!(open.metric("compactd_budget_unchecked_total").await, 1.0);
    let answer: Value = closed
        .compact(&compact_body(prompt))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answer["model"], "extractive", "{answer}");
    assert_eq!(answer["budgetExhausted"], true);
    assert_eq!(closed.metric("compactd_budget_unchecked_total").await, 1.0);
}

compactd_testkit::postgres_test! {
    async fn budgets_when_the_store_is_down_postgres(pool: sqlx::PgPool) {
        let store = Arc::new(
            compactd_store::PgStore::from_pool(pool.clone())
                .await
                .unwrap(),
        );
        budgets_follow_the_setting_when_the_store_is_down(store, async move || pool.close().await)
            .await;
    }
}

#[sqlx::test(migrations = false)]
async fn budgets_when_the_store_is_down_sqlite(pool: sqlx::SqlitePool) {
    let store = Arc::new(
        compactd_store::SqliteStore::from_pool(pool.clone())
            .await
            .unwrap(),
    );
    budgets_follow_the_setting_when_the_store_is_down(store, async move || pool.close().await)
        .await;
}
