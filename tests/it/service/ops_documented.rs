//! Every operation docs/operations.md documents answers as it says, and request ids go round as
//! they are documented.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, PROMPT, Reply, TestApp, chain_config, compact_body, config};

#[tokio::test]
async fn every_documented_operation_answers_as_its_documentation_says() {
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nDocumented.")).await;
    let provider = crate::support::FakeProvider::wires().await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    config.gateway.codex_upstream = provider.url.parse().unwrap();
    let app = TestApp::spawn(config).await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(doc["info"]["title"], "compactd");

    // One pass over the whole API, as a client uses it. Every answer is checked against the
    // document by `TestApp::send` (status documented, body valid, no undocumented field).
    let id = sessions_threads_and_pins(&app).await;
    summaries_health_and_the_gateway(&app).await;
    recall_calls_and_the_providers_wires(&app, &id).await;
    every_operation_answered(&app);
    the_document_holds_together(&doc);
}

/// A session's life: upload, read, append, plan, pins, compactions, a branch summary, a fork, a
/// handoff, a thread read and map. The session's id.
async fn sessions_threads_and_pins(app: &TestApp) -> String {
    let fixture = crate::fixture("large-session.jsonl");
    let uploaded: Value = app.upload(fixture.clone()).await.json().await.unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let leaf = uploaded["leafId"].as_str().unwrap().to_owned();
    app.sessions().await;
    app.session(&id).await;
    let entries = app.entries(&id).await.text().await.unwrap();
    let target = entries
        .lines()
        .nth(20)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
        .unwrap();
    let line = json!({"type": "message", "id": "d0c5d0c5", "parentId": leaf, "timestamp": "2026-11-21T10:00:00.000Z",
        "message": {"role": "user", "content": "and the docs", "timestamp": 1_795_000_000_000_u64}});
    let appended = app.append(&id, format!("{line}\n")).await;
    assert_eq!(appended.status(), StatusCode::OK);
    app.plan(&id, "").await;
    app.context(&id).await;
    app.plan_file("", fixture).await;
    let pinned: Value = app
        .post(
            &format!("/v1/sessions/{id}/pins"),
            &json!({"text": "Ship on Fridays."}),
        )
        .await
        .json()
        .await
        .unwrap();
    let pin_id = pinned["id"].as_str().unwrap().to_owned();
    // The same text again is the pin that exists, answered 200.
    let repeated = app
        .post(
            &format!("/v1/sessions/{id}/pins"),
            &json!({"text": "Ship on Fridays."}),
        )
        .await;
    assert_eq!(repeated.status(), StatusCode::OK);
    app.post(
        &format!("/v1/sessions/{id}/pins"),
        &json!({"text": "Drop me."}),
    )
    .await;
    app.get(&format!("/v1/sessions/{id}/pins")).await;
    let created = app
        .compact_session(&id, &json!({"leafId": "d0c5d0c5"}))
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let again = app
        .compact_session(&id, &json!({"leafId": "d0c5d0c5"}))
        .await;
    assert_eq!(again.status(), StatusCode::OK);
    app.compactions(&id).await;
    let branch = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": target, "fromLeafId": leaf}),
        )
        .await;
    assert_eq!(branch.status(), StatusCode::CREATED);
    let forked = app
        .post(
            &format!("/v1/sessions/{id}/fork"),
            &json!({"entryId": "d0c5d0c5"}),
        )
        .await;
    assert_eq!(forked.status(), StatusCode::CREATED);
    let handed = app
        .post(
            &format!("/v1/sessions/{id}/handoff"),
            &json!({"goal": "Update the docs."}),
        )
        .await;
    assert_eq!(handed.status(), StatusCode::CREATED);
    let answered = app
        .post(
            "/v1/threads/read",
            &json!({"thread": id, "question": "What about the docs?"}),
        )
        .await;
    assert_eq!(answered.status(), StatusCode::OK);
    let map = app.get(&format!("/v1/sessions/{id}/threads")).await;
    assert_eq!(map.status(), StatusCode::OK);
    let drafted = app
        .post(
            "/v1/handoff",
            &json!({"goal": "Update the docs.", "prompt": "[User]: Update the docs in README.md."}),
        )
        .await;
    assert_eq!(drafted.status(), StatusCode::OK);
    assert_eq!(
        app.delete(&format!("/v1/sessions/{id}/pins/{pin_id}"))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
    id
}

/// The summarization endpoints, health and metrics, and the gateway's routes: an agent's
/// compaction and an ordinary turn of each wire.
async fn summaries_health_and_the_gateway(app: &TestApp) {
    app.compact(&compact_body(PROMPT)).await;
    let chat = json!({"model": "compactd", "messages": [{"role": "user", "content": PROMPT}]});
    app.chat(&chat).await;
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    app.chat(&streamed).await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        app.get(path).await;
    }
    use crate::support::gateway::{FIXTURES, recorded};
    for fixture in FIXTURES {
        for request in recorded(fixture)
            .into_iter()
            .filter(|r| r.method == "POST")
            .take(3)
        {
            let answered = app.send(request.request(&app.client, &app.url)).await;
            assert_eq!(
                answered.status(),
                StatusCode::OK,
                "{fixture} seq {}",
                request.seq
            );
        }
    }
}

/// Recall, the call log, the providers' wires, deletion, and documented errors.
async fn recall_calls_and_the_providers_wires(app: &TestApp, id: &str) {
    // Recall: a wire summary's conversation, searched and read.
    let kept: Value = app
        .compact(
            &json!({"prompt": "<conversation>\n[User]: the kiwi parser fails\n</conversation>"}),
        )
        .await
        .json()
        .await
        .unwrap();
    let recall_id = kept["recallId"].as_str().unwrap();
    crate::support::eventually("the conversation kept", || async {
        let found: Value = app
            .get("/v1/recall/search?q=kiwi")
            .await
            .json()
            .await
            .ok()?;
        (!found["hits"].as_array()?.is_empty()).then_some(())
    })
    .await;
    app.get(&format!("/v1/recall/{recall_id}/turns?limit=5"))
        .await;
    app.get("/v1/recall/search?q=%20").await;
    app.get("/v1/recall/r_none/turns").await;
    app.get("/v1/calls?limit=5").await;
    app.get("/v1/calls?before=x").await;
    let count =
        json!({"model": "claude-opus-5-5", "messages": [{"role": "user", "content": "hi"}]});
    app.post("/v1/messages/count_tokens", &count).await;
    app.send(app.client.get(format!("{}/v1/responses", app.url)))
        .await;
    let compact = json!({"model": "gpt-5.2", "input": "the kiwi parser fails; fix src/kiwi.rs"});
    app.post("/v1/responses/compact", &compact).await;
    app.post("/codex/responses/compact", &compact).await;
    app.send(app.client.get(format!("{}/codex/responses", app.url)))
        .await;
    let turn = json!({"model": "gpt-5.5", "input": "hi", "stream": true});
    app.post("/codex/responses", &turn).await;
    assert_eq!(
        app.delete(&format!("/v1/sessions/{id}")).await.status(),
        StatusCode::NO_CONTENT
    );
    // Errors are documented and shaped as documented too.
    app.session(id).await;
    app.compact(&json!({"prompt": 5})).await;
}

/// Every documented operation answered through the router, with each of its success statuses.
fn every_operation_answered(app: &TestApp) {
    let checked = app.checked();
    for (method, route, status) in crate::service::conformance::documented() {
        if (200..300).contains(&status) {
            assert!(
                checked.contains(&(method.clone(), route.clone(), status)),
                "{method} {route} never answered {status}"
            );
        }
    }
    for (method, route, status) in [
        ("get", "/v1/sessions/{id}", 404),
        ("post", "/v1/compact", 422),
    ] {
        assert!(checked.contains(&(method.into(), route.into(), status)));
    }
}

/// Tags on every operation, path parameters as the templates say, every `$ref` resolved.
fn the_document_holds_together(doc: &Value) {
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            assert!(
                operation["tags"].as_array().is_some_and(|t| !t.is_empty()),
                "{method} {path}"
            );
            // Route templates and declared path parameters agree.
            let declared: Vec<&str> = operation["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str())
                .collect();
            assert_eq!(
                declared.contains(&"id"),
                path.contains("{id}"),
                "{method} {path}"
            );
        }
    }
    // Every $ref names a schema that exists.
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut refs = Vec::new();
    collect_refs(doc, &mut refs);
    assert!(!refs.is_empty());
    for reference in refs {
        let name = reference
            .strip_prefix("#/components/schemas/")
            .unwrap_or_else(|| panic!("{reference}"));
        assert!(schemas.contains_key(name), "{reference} does not resolve");
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                out.push(reference.clone());
            }
            map.values().for_each(|v| collect_refs(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

#[tokio::test]
async fn request_ids_are_taken_from_the_client_echoed_and_made_when_missing_or_bad() {
    let app = TestApp::spawn(config()).await;
    let with = |id: Option<&str>| {
        let mut request = app.client.get(format!("{}/healthz", app.url));
        if let Some(id) = id {
            request = request.header("x-request-id", id);
        }
        request.send()
    };
    let echoed = with(Some("agent-42.retry:1")).await.unwrap();
    assert_eq!(echoed.headers()["x-request-id"], "agent-42.retry:1");
    let made = with(None).await.unwrap().headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(uuid::Uuid::parse_str(&made).is_ok(), "{made}");
    for bad in ["has spaces in it", &"x".repeat(200), "new\u{7f}line"] {
        let response = with(Some(bad)).await;
        let Ok(response) = response else { continue };
        let id = response.headers()["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_ne!(id, bad);
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
    }
    // Errors carry it too.
    let missing = app
        .client
        .get(format!("{}/v1/sessions/x", app.url))
        .header("x-request-id", "r1")
        .send()
        .await
        .unwrap();
    assert_eq!(missing.headers()["x-request-id"], "r1");
}
