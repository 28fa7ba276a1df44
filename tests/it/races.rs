//! Limits the README promises, under concurrency: pins per session, daily budgets. Both stores.

use std::sync::Arc;

use compactd::store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, config};

on_both_backends!(pins_hold_their_limit_and_uniqueness_under_concurrent_adds);

const SESSION: &str = "{\"type\":\"session\",\"version\":3,\"id\":\"s\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/w\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";

async fn pins_hold_their_limit_and_uniqueness_under_concurrent_adds(store: Arc<dyn Store>) {
    let app = Arc::new(TestApp::with_store(config(), store.clone()).await);
    let id = app
        .post_raw("/v1/sessions", SESSION)
        .await
        .json::<Value>()
        .await
        .unwrap()["id"]
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
