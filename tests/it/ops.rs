//! Operations: health and readiness (through a real PostgreSQL outage), metrics, the OpenAPI
//! document, request ids, graceful shutdown.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::owned_pg::OwnedPostgres;
use crate::support::{
    FakeUpstream, PROMPT, Reply, TestApp, chain_config, compact_body, config, metric_sample, secs,
};

async fn wait_for(app: &TestApp, path: &str, status: StatusCode, within: Duration) -> Value {
    let started = Instant::now();
    loop {
        let response = app.get(path).await;
        if response.status() == status {
            return response.json().await.unwrap();
        }
        assert!(
            started.elapsed() < within,
            "{path} did not become {status} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn readiness_follows_the_database_and_compact_keeps_serving_without_it() {
    compactd_testkit::needs!(PostgresServer);
    let postgres = OwnedPostgres::start();
    let mut config = config();
    config.storage.database_url = Some(compactd::config::Secret::new(postgres.url()));
    config.storage.db_acquire_timeout = secs(1.0);
    let app = TestApp::spawn(config).await;

    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    let ready = wait_for(&app, "/readyz", StatusCode::OK, Duration::from_secs(5)).await;
    assert_eq!(ready["storage"]["backend"], "postgres");
    assert_eq!(ready["summarizers"]["chain"], json!(["extractive"]));
    let session = "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n{\"type\":\"label\",\"id\":\"a\",\"parentId\":null}\n";
    assert_eq!(
        app.post_raw("/v1/sessions", session).await.status(),
        StatusCode::CREATED
    );

    postgres.stop();
    let not_ready = wait_for(
        &app,
        "/readyz",
        StatusCode::SERVICE_UNAVAILABLE,
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(not_ready["storage"]["ok"], false);
    assert_eq!(
        app.get("/healthz").await.status(),
        StatusCode::OK,
        "alive while not ready"
    );
    let started = Instant::now();
    let listing = app.get("/v1/sessions").await;
    assert_eq!(listing.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered in {:?}",
        started.elapsed()
    );
    assert!(listing.headers().get("retry-after").is_some());
    assert_eq!(
        listing.json::<Value>().await.unwrap()["error"]["code"],
        "storage_unavailable"
    );
    let upload = app.post_raw("/v1/sessions", session).await;
    assert_eq!(upload.status(), StatusCode::SERVICE_UNAVAILABLE);
    // The remote-summarizer endpoint needs no storage.
    let compact = app.post("/v1/compact", &compact_body(PROMPT)).await;
    assert_eq!(compact.status(), StatusCode::OK);

    postgres.resume();
    wait_for(&app, "/readyz", StatusCode::OK, Duration::from_secs(15)).await;
    let listing: Value = app.get("/v1/sessions").await.json().await.unwrap();
    assert_eq!(
        listing["sessions"].as_array().unwrap().len(),
        1,
        "recovered without a restart"
    );
}

/// The value of one sample line of a Prometheus exposition, `0` when absent.
#[tokio::test]
async fn metrics_count_requests_upstream_calls_tokens_and_fallbacks() {
    let fake = FakeUpstream::start(vec![], Reply::json(500, json!({}))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;
    assert_eq!(
        app.post("/v1/compact", &compact_body(PROMPT))
            .await
            .status(),
        StatusCode::OK
    );
    assert_eq!(
        app.get("/v1/sessions/nope").await.status(),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        app.get("/no/such/route").await.status(),
        StatusCode::NOT_FOUND
    );

    let response = app.get("/metrics").await;
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let metrics = response.text().await.unwrap();
    let expect = |line: &str, value: f64| {
        assert_eq!(metric_sample(&metrics, line), value, "{line}\n{metrics}")
    };
    expect(
        r#"compactd_http_requests_total{method="POST",route="/v1/compact",status="200"}"#,
        1.0,
    );
    expect(
        r#"compactd_http_requests_total{method="GET",route="/v1/sessions/{id}",status="404"}"#,
        1.0,
    );
    expect(
        r#"compactd_http_requests_total{method="GET",route="unmatched",status="404"}"#,
        1.0,
    );
    expect(
        r#"compactd_http_request_duration_seconds_count{method="POST",route="/v1/compact",status="200"}"#,
        1.0,
    );
    expect(
        r#"compactd_upstream_calls_total{model="openai:gpt-test",outcome="server_error"}"#,
        3.0,
    );
    expect(
        r#"compactd_upstream_calls_total{model="extractive",outcome="ok"}"#,
        1.0,
    );
    expect(
        r#"compactd_upstream_call_duration_seconds_count{model="extractive",outcome="ok"}"#,
        1.0,
    );
    expect(
        r#"compactd_fallbacks_total{from_model="openai:gpt-test"}"#,
        1.0,
    );
    assert!(
        metric_sample(
            &metrics,
            r#"compactd_upstream_tokens_total{direction="output",model="extractive"}"#
        ) > 0.0
    );
    for name in [
        "compactd_summarizer_queue_depth",
        "compactd_summarizer_in_flight",
        "compactd_summarizer_rejections_total",
        "compactd_compaction_tokens_saved_total",
        "compactd_compactions_total",
        "compactd_call_log_dropped_total",
    ] {
        assert!(
            metrics.contains(&format!("# TYPE {name} ")),
            "{name} is exposed"
        );
    }
}

#[tokio::test]
async fn metrics_count_compactions_savings_and_rejections() {
    let fake = FakeUpstream::start(
        vec![],
        Reply::openai("## Goal\nshort").after(Duration::from_millis(300)),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.max_concurrent = std::num::NonZeroUsize::new(1).unwrap();
    config.summarizers.max_queue = 0;
    let app = std::sync::Arc::new(TestApp::spawn(config).await);
    let session = std::fs::read(format!(
        "{}/tests/fixtures/large-session.jsonl",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let id = app
        .post_raw("/v1/sessions", session)
        .await
        .json::<Value>()
        .await
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let compaction = tokio::spawn({
        let app = app.clone();
        async move {
            app.post(&format!("/v1/sessions/{id}/compactions"), &json!({}))
                .await
                .status()
        }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Both slots of the split-turn compaction are in use or queued: the next call is refused.
    let refused = app.post("/v1/compact", &compact_body(PROMPT)).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(compaction.await.unwrap(), StatusCode::CREATED);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metric_sample(&metrics, "compactd_summarizer_rejections_total") >= 1.0,
        "{metrics}"
    );
    assert_eq!(
        metric_sample(
            &metrics,
            "compactd_compactions_total{agent=\"pi\",wire=\"session\"}"
        ),
        1.0
    );
    assert!(
        metric_sample(&metrics, "compactd_compaction_tokens_saved_total") > 100_000.0,
        "{metrics}"
    );
}

#[tokio::test]
async fn every_documented_operation_answers_as_its_documentation_says() {
    let fake = FakeUpstream::start(vec![], Reply::openai("## Goal\nDocumented.")).await;
    let provider = crate::gateway_support::Provider::start().await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.server.uri().parse().unwrap();
    config.gateway.openai_upstream = format!("{}/v1", provider.server.uri()).parse().unwrap();
    let app = TestApp::spawn(config).await;
    let doc: Value = app.get("/openapi.json").await.json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    assert_eq!(doc["info"]["title"], "compactd");

    // One pass over the whole API, as a client uses it. Every answer is checked against the
    // document by `TestApp::send` (status documented, body valid, no undocumented field).
    let fixture = crate::fixture("large-session.jsonl");
    let uploaded: Value = app
        .post_raw("/v1/sessions", fixture.clone())
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let leaf = uploaded["leafId"].as_str().unwrap().to_owned();
    app.get("/v1/sessions").await;
    app.get(&format!("/v1/sessions/{id}")).await;
    let entries = app
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    let target = entries
        .lines()
        .nth(20)
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["id"].clone())
        .unwrap();
    let line = json!({"type": "message", "id": "d0c5d0c5", "parentId": leaf, "timestamp": "2026-11-21T10:00:00.000Z",
        "message": {"role": "user", "content": "and the docs", "timestamp": 1_795_000_000_000_u64}});
    let appended = app
        .post_raw(&format!("/v1/sessions/{id}/entries"), format!("{line}\n"))
        .await;
    assert_eq!(appended.status(), StatusCode::OK);
    app.get(&format!("/v1/sessions/{id}/plan")).await;
    app.get(&format!("/v1/sessions/{id}/context")).await;
    app.post_raw("/v1/plan", fixture).await;
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
        .post(
            &format!("/v1/sessions/{id}/compactions"),
            &json!({"leafId": "d0c5d0c5"}),
        )
        .await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let again = app
        .post(
            &format!("/v1/sessions/{id}/compactions"),
            &json!({"leafId": "d0c5d0c5"}),
        )
        .await;
    assert_eq!(again.status(), StatusCode::OK);
    app.get(&format!("/v1/sessions/{id}/compactions")).await;
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
    app.post("/v1/compact", &compact_body(PROMPT)).await;
    let chat = json!({"model": "compactd", "messages": [{"role": "user", "content": PROMPT}]});
    app.post("/v1/chat/completions", &chat).await;
    let mut streamed = chat.clone();
    streamed["stream"] = json!(true);
    app.post("/v1/chat/completions", &streamed).await;
    for path in ["/healthz", "/readyz", "/metrics"] {
        app.get(path).await;
    }
    // The gateway's routes: an agent's compaction and an ordinary turn of each wire.
    use crate::gateway_support::{FIXTURES, recorded};
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
    // Recall: a wire summary's conversation, searched and read.
    let kept: Value = app
        .post(
            "/v1/compact",
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
    assert_eq!(
        app.delete(&format!("/v1/sessions/{id}")).await.status(),
        StatusCode::NO_CONTENT
    );
    // Errors are documented and shaped as documented too.
    app.get(&format!("/v1/sessions/{id}")).await;
    app.post("/v1/compact", &json!({"prompt": 5})).await;

    // Every documented operation answered through the router, with each of its success statuses.
    let checked = app.checked();
    for (method, route, status) in crate::conformance::documented() {
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
    collect_refs(&doc, &mut refs);
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
