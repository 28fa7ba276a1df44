//! Pins carried verbatim across compactions, whatever the model writes, and only for the
//! session's tenant.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::fidelity::LOSSY;
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

on_both_backends!(
    pins_survive_three_compactions_verbatim,
    pins_belong_to_the_sessions_tenant
);

/// `turns` user/assistant pairs after `parent`, with ids unique to `round`.
fn turns_after(parent: &str, round: usize, turns: usize) -> (String, String) {
    let mut lines = String::new();
    let mut parent = parent.to_owned();
    for i in 0..turns * 2 {
        let id = format!("r{round}{i:06x}");
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": format!("round {round} request {i}: {}", "u".repeat(300)), "timestamp": 1})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": "a".repeat(300)}],
                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2})
        };
        lines.push_str(
            &json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message})
                .to_string(),
        );
        lines.push('\n');
        parent = id;
    }
    (lines, parent)
}

async fn pins_survive_three_compactions_verbatim(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let header = json!({"type": "session", "version": 3, "id": "pinned", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let (turns, _) = turns_after("", 0, 10);
    let turns = turns.replacen(r#""parentId":"""#, r#""parentId":null"#, 1);
    let session: Value = app
        .upload(format!("{header}\n{turns}"))
        .await
        .json()
        .await
        .unwrap();
    let id = session["id"].as_str().unwrap().to_owned();
    let pins = [
        "Deploy only from the `release` branch — never on Fridays.",
        "The staging database is `pg-staging-02`; **do not** point tests at production.",
    ];
    for pin in pins {
        let response = app
            .post(&format!("/v1/sessions/{id}/pins"), &json!({"text": pin}))
            .await;
        assert_eq!(response.status(), StatusCode::CREATED);
    }
    for round in 1..=3 {
        let compacted = app
            .compact_session(&id, &json!({"keepRecentTokens": 300}))
            .await;
        assert_eq!(compacted.status(), StatusCode::CREATED, "round {round}");
        let compacted: Value = compacted.json().await.unwrap();
        let summary = compacted["entry"]["summary"].as_str().unwrap();
        let pinned = summary
            .split("## Pinned\n")
            .nth(1)
            .unwrap_or_else(|| panic!("{summary}"));
        for pin in pins {
            assert_eq!(
                summary.matches(pin).count(),
                1,
                "round {round}: {pin}\n{summary}"
            );
            assert!(pinned.contains(&format!("- {pin}\n")) || pinned.contains(&format!("- {pin}")));
        }
        // More work after the compaction, for the next one.
        let leaf = compacted["entry"]["id"].as_str().unwrap();
        let (more, _) = turns_after(leaf, round, 10);
        let appended = app.append(&id, more).await;
        assert_eq!(appended.status(), StatusCode::OK, "round {round}");
    }
    // An unpinned text is no longer carried.
    let listed: Value = app
        .get(&format!("/v1/sessions/{id}/pins"))
        .await
        .json()
        .await
        .unwrap();
    let first = listed["pins"][0]["id"].as_str().unwrap();
    assert_eq!(
        app.delete(&format!("/v1/sessions/{id}/pins/{first}"))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
    let compacted: Value = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await
        .json()
        .await
        .unwrap();
    let summary = compacted["entry"]["summary"].as_str().unwrap();
    assert!(summary.contains(pins[1]));
    // The previous summary still held it; the model's lossy answer does not, nor does the gate.
    assert!(!summary.contains(pins[0]), "{summary}");
}

async fn pins_belong_to_the_sessions_tenant(store: Arc<dyn Store>) {
    let mut keys = Vec::new();
    for tenant in ["a", "b"] {
        let (key, record) = compactd::access::new_key(tenant, None, compactd_store::now_ms());
        store.create_key(&record).await.unwrap();
        keys.push(key);
    }
    let app = TestApp::handlers_with_store(crate::support::config(), store);
    let as_key = |key: &str, request: reqwest::RequestBuilder| request.bearer_auth(key);
    let header = json!({"type": "session", "version": 3, "id": "s", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let session: Value = app
        .send(as_key(
            &keys[0],
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(format!("{header}\n")),
        ))
        .await
        .json()
        .await
        .unwrap();
    let pins_url = format!(
        "{}/v1/sessions/{}/pins",
        app.url,
        session["id"].as_str().unwrap()
    );
    let pin = |key: &str, text: &str| {
        as_key(key, app.client.post(&pins_url).json(&json!({"text": text})))
    };
    let first = app.send(pin(&keys[0], "  keep me  ")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first: Value = first.json().await.unwrap();
    assert_eq!(first["text"], "keep me", "trimmed");
    let again = app.send(pin(&keys[0], "keep me")).await;
    assert_eq!(
        again.status(),
        StatusCode::OK,
        "the same text is the same pin"
    );
    assert_eq!(again.json::<Value>().await.unwrap()["id"], first["id"]);
    // Another tenant sees no such session.
    let theirs = app.send(pin(&keys[1], "mine now")).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    let listed = app.send(as_key(&keys[1], app.client.get(&pins_url))).await;
    assert_eq!(listed.status(), StatusCode::NOT_FOUND);
    // Bad pins say what is wrong.
    for (text, status) in [
        ("   ", StatusCode::UNPROCESSABLE_ENTITY),
        (&"x".repeat(2001) as &str, StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let response = app.send(pin(&keys[0], text)).await;
        assert_eq!(response.status(), status);
        assert_eq!(
            response.json::<Value>().await.unwrap()["error"]["param"],
            "text"
        );
    }
    for i in 1..50 {
        assert_eq!(
            app.send(pin(&keys[0], &format!("pin {i}"))).await.status(),
            StatusCode::CREATED
        );
    }
    let over = app.send(pin(&keys[0], "one too many")).await;
    assert_eq!(over.status(), StatusCode::CONFLICT);
    assert_eq!(
        over.json::<Value>().await.unwrap()["error"]["code"],
        "too_many_pins"
    );
    let gone = format!("{pins_url}/nope");
    assert_eq!(
        app.send(as_key(&keys[0], app.client.delete(&gone)))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}
