//! Operations: health and readiness (through a real PostgreSQL outage), metrics, the OpenAPI
//! document, request ids, graceful shutdown.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::owned_pg::OwnedPostgres;
use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, chain_config, compact_body, config, metric_sample, secs,
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
    assert_eq!(app.upload(session).await.status(), StatusCode::CREATED);

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
    let listing = app.sessions().await;
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
    let upload = app.upload(session).await;
    assert_eq!(upload.status(), StatusCode::SERVICE_UNAVAILABLE);
    // The remote-summarizer endpoint needs no storage.
    let compact = app.compact(&compact_body(PROMPT)).await;
    assert_eq!(compact.status(), StatusCode::OK);

    postgres.resume();
    wait_for(&app, "/readyz", StatusCode::OK, Duration::from_secs(15)).await;
    let listing: Value = app.sessions().await.json().await.unwrap();
    assert_eq!(
        listing["sessions"].as_array().unwrap().len(),
        1,
        "recovered without a restart"
    );
}

/// The value of one sample line of a Prometheus exposition, `0` when absent.
#[tokio::test]
async fn metrics_count_requests_upstream_calls_tokens_and_fallbacks() {
    let fake = FakeProvider::start(vec![], Reply::json(500, json!({}))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;
    assert_eq!(
        app.compact(&compact_body(PROMPT)).await.status(),
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
    let fake = FakeProvider::start(
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
    let id = app.upload(session).await.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let compaction = tokio::spawn({
        let app = app.clone();
        async move { app.compact_session(&id, &json!({})).await.status() }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Both slots of the split-turn compaction are in use or queued: the next call is refused.
    let refused = app.compact(&compact_body(PROMPT)).await;
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
