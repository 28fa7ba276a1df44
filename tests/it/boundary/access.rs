//! Access: API keys and tenants, keys in the path for the summarization endpoints, anonymous
//! access only on loopback, per-key limits, and keys kept out of logs, metrics and errors.

use crate::support::binary::{Served, compactd};
use std::sync::Arc;
use std::time::Duration;

use compactd::access::new_key;
use compactd_store::{SqliteStore, Store, now_ms};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body, config,
};

async fn store() -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(2))
            .await
            .unwrap(),
    )
}

async fn key(store: &Arc<dyn Store>, tenant: &str) -> String {
    let (text, record) = new_key(tenant, None, now_ms());
    store.create_key(&record).await.unwrap();
    text
}

/// A configuration listening beyond loopback: anonymous callers are refused.
fn exposed() -> compactd::config::ServeConfig {
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config
}

async fn call(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    key: Option<&str>,
    body: Option<String>,
) -> (StatusCode, Value) {
    let mut request = app.client.request(method, format!("{}{path}", app.url));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        // Only session files are posted here.
        request = request
            .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
            .body(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

const SESSION: &str = "{\"type\":\"session\",\"version\":3,\"id\":\"s\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n";

#[tokio::test]
async fn sessions_belong_to_the_tenant_of_the_key_that_uploaded_them() {
    let store = store().await;
    let (a, b) = (key(&store, "team-a").await, key(&store, "team-b").await);
    let app = TestApp::with_store(exposed(), store.clone()).await;
    use reqwest::Method;

    let (status, created) = call(
        &app,
        Method::POST,
        "/v1/sessions",
        Some(&a),
        Some(SESSION.into()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        call(
            &app,
            Method::GET,
            &format!("/v1/sessions/{id}"),
            Some(&a),
            None
        )
        .await
        .0,
        StatusCode::OK
    );
    for path in [
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/entries"),
        format!("/v1/sessions/{id}/plan"),
        format!("/v1/sessions/{id}/context"),
        format!("/v1/sessions/{id}/compactions"),
    ] {
        let (status, body) = call(&app, Method::GET, &path, Some(&b), None).await;
        assert_eq!(
            status,
            StatusCode::NOT_FOUND,
            "{path}: another tenant's session is not found"
        );
        assert_eq!(body["error"]["code"], "not_found");
    }
    assert_eq!(
        call(
            &app,
            Method::DELETE,
            &format!("/v1/sessions/{id}"),
            Some(&b),
            None
        )
        .await
        .0,
        StatusCode::NOT_FOUND
    );
    let (_, listed) = call(&app, Method::GET, "/v1/sessions", Some(&b), None).await;
    assert_eq!(listed["sessions"], json!([]));
    let (_, listed) = call(&app, Method::GET, "/v1/sessions", Some(&a), None).await;
    assert_eq!(listed["sessions"][0]["id"], id);

    let (status, body) = call(&app, Method::GET, "/v1/sessions", None, None).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("missing_api_key"))
    );
    let (status, body) = call(
        &app,
        Method::GET,
        "/v1/sessions",
        Some("cmpd_not-a-key"),
        None,
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("invalid_api_key"))
    );
    let (status, _) = call(
        &app,
        Method::GET,
        "/v1/sessions",
        Some("sk-provider-key"),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A revoked key is refused.
    let (text, record) = new_key("team-c", None, now_ms());
    store.create_key(&record).await.unwrap();
    store.revoke_key(&record.key_id, now_ms()).await.unwrap();
    assert_eq!(
        call(&app, Method::GET, "/v1/sessions", Some(&text), None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    // Health and metrics need no key.
    assert_eq!(app.get("/healthz").await.status(), StatusCode::OK);
    assert_eq!(app.get("/metrics").await.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_summarization_endpoints_take_the_key_in_the_path() {
    let store = store().await;
    let a = key(&store, "team-a").await;
    let app = TestApp::with_store(exposed(), store.clone()).await;
    let ok = app
        .post(&format!("/k/{a}/v1/compact"), &compact_body(PROMPT))
        .await;
    assert_eq!(ok.status(), StatusCode::OK);
    // The agent reads a 401 or 403 as its provider credential failing: a key in the URL is a
    // capability, and an unknown or revoked one is a URL that does not exist.
    let bad = app
        .post("/k/cmpd_wrong/v1/compact", &compact_body(PROMPT))
        .await;
    assert_eq!(bad.status(), StatusCode::NOT_FOUND);
    let body: serde_json::Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_api_key");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("unknown or revoked")
    );
    let (revoked, record) = new_key("team-r", None, now_ms());
    store.create_key(&record).await.unwrap();
    store.revoke_key(&record.key_id, now_ms()).await.unwrap();
    let response = app
        .post(
            &format!("/k/{revoked}/v1/chat/completions"),
            &json!({"messages": [{"role": "user", "content": PROMPT}]}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let missing = app.compact(&compact_body(PROMPT)).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let body: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(body["error"]["code"], "missing_api_key");
    // A trailing slash is accepted (oh-my-pi accepts `…/chat/completions/`).
    let slash = app
        .post(
            &format!("/k/{a}/v1/chat/completions/"),
            &json!({"messages": [{"role": "user", "content": PROMPT}]}),
        )
        .await;
    assert_eq!(slash.status(), StatusCode::OK);
    assert_eq!(
        app.post(&format!("/k/{a}/v1/compact/"), &compact_body(PROMPT))
            .await
            .status(),
        StatusCode::OK
    );
    // Chat clients send their own provider key as Bearer: ignored, the path key counts.
    let chat = json!({"messages": [{"role": "user", "content": PROMPT}]});
    let response = app
        .client
        .post(format!("{}/k/{a}/v1/chat/completions", app.url))
        .bearer_auth("sk-provider-secret")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let response = app
        .client
        .post(format!("{}/v1/chat/completions", app.url))
        .bearer_auth("sk-provider-secret")
        .json(&chat)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // Not even a compactd key that is wrong makes a 401 on the agent wires.
    let response = app
        .client
        .post(format!("{}/v1/compact", app.url))
        .bearer_auth("cmpd_0000")
        .json(&compact_body(PROMPT))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    // A compactd key as Bearer works on the summarization endpoints too.
    let response = app
        .client
        .post(format!("{}/v1/compact", app.url))
        .bearer_auth(&a)
        .json(&compact_body(PROMPT))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[tokio::test]
async fn anonymous_callers_are_served_on_loopback_only_unless_allowed() {
    let on_loopback = TestApp::with_store(config(), store().await).await;
    assert_eq!(
        on_loopback.compact(&compact_body(PROMPT)).await.status(),
        StatusCode::OK
    );
    let mut allowed = exposed();
    allowed.access.allow_anonymous = true;
    let anywhere = TestApp::with_store(allowed, store().await).await;
    assert_eq!(
        anywhere.compact(&compact_body(PROMPT)).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn each_key_has_a_request_rate_and_a_summarization_cap() {
    let store = store().await;
    let (a, b) = (key(&store, "a").await, key(&store, "b").await);
    let mut config = exposed();
    config.access.rate_limit_per_minute = 3;
    let app = TestApp::with_store(config, store.clone()).await;
    for _ in 0..3 {
        assert_eq!(
            call(&app, reqwest::Method::GET, "/v1/sessions", Some(&a), None)
                .await
                .0,
            StatusCode::OK
        );
    }
    let response = app
        .client
        .get(format!("{}/v1/sessions", app.url))
        .bearer_auth(&a)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((15..=20).contains(&wait), "{wait}");
    assert_eq!(
        call(&app, reqwest::Method::GET, "/v1/sessions", Some(&b), None)
            .await
            .0,
        StatusCode::OK
    );

    let fake = FakeProvider::start(
        vec![],
        Reply::openai(&answer("slow")).after(Duration::from_millis(800)),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config.summarizers.max_concurrent_per_key = 1;
    let app = Arc::new(TestApp::with_store(config, store).await);
    let first = tokio::spawn({
        let (app, a) = (app.clone(), a.clone());
        async move {
            app.post(&format!("/k/{a}/v1/compact"), &compact_body(PROMPT))
                .await
                .status()
        }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let second = app
        .post(&format!("/k/{a}/v1/compact"), &compact_body(PROMPT))
        .await;
    assert_eq!(second.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        app.post(&format!("/k/{b}/v1/compact"), &compact_body(PROMPT))
            .await
            .status(),
        StatusCode::OK,
        "other keys are not held up"
    );
    assert_eq!(first.await.unwrap(), StatusCode::OK);
}

#[test]
fn beyond_loopback_without_keys_compactd_refuses_to_start() {
    let dir = std::env::temp_dir().join(format!("compactd-exposure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("db.sqlite").display());
    let env = [
        ("DATABASE_URL", url.as_str()),
        ("COMPACTD_LISTEN", "0.0.0.0:0"),
    ];
    let out = compactd(&["serve"], &env).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no API key") && stderr.contains("COMPACTD_ALLOW_ANONYMOUS"),
        "{stderr}"
    );
    // With a key it starts (and is stopped here at once).
    let created = compactd(&["keys", "create", "--tenant", "ops"], &env)
        .output()
        .unwrap();
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let served = Served::start(&env);
    assert!(
        served.base.starts_with("http://0.0.0.0:"),
        "{}",
        served.base
    );
    served.kill_9();
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn keys_stay_out_of_logs_metrics_and_errors() {
    let dir = std::env::temp_dir().join(format!("compactd-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("db.sqlite").display());
    let env = [("DATABASE_URL", url.as_str()), ("COMPACTD_LOG", "trace")];
    let created = compactd(
        &["keys", "create", "--tenant", "ops", "--name", "laptop"],
        &env,
    )
    .output()
    .unwrap();
    let key: Value = serde_json::from_slice(&created.stdout).unwrap();
    let key = key["key"].as_str().unwrap().to_owned();
    let listed = compactd(&["keys", "list"], &env).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&listed.stdout).contains(&key),
        "keys list shows no key"
    );

    let served = Served::start(&env);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let bodies = runtime.block_on(async {
        let client = reqwest::Client::new();
        let base = &served.base;
        let mut bodies = String::new();
        for request in [
            client
                .post(format!("{base}/k/{key}/v1/compact"))
                .json(&compact_body(PROMPT)),
            client
                .post(format!("{base}/k/{key}x/v1/compact"))
                .json(&compact_body(PROMPT)),
            client.get(format!("{base}/v1/sessions")).bearer_auth(&key),
            client
                .get(format!("{base}/v1/sessions"))
                .bearer_auth(format!("{key}x")),
            client
                .post(format!("{base}/k/{key}/v1/chat/completions"))
                .bearer_auth("sk-provider-secret")
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body("{bad"),
            // Paths that do not begin with `/k/`, or do not spell it in lower case.
            client
                .post(format!("{base}//k/{key}/v1/compact"))
                .json(&compact_body(PROMPT)),
            client
                .post(format!("{base}/K/{key}/v1/compact"))
                .json(&compact_body(PROMPT)),
            client.get(format!("{base}/v1/{key}/compact")),
        ] {
            bodies.push_str(&request.send().await.unwrap().text().await.unwrap());
        }
        bodies.push_str(
            &client
                .get(format!("{base}/metrics"))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap(),
        );
        bodies
    });
    let logs = served.kill_9();
    assert!(
        logs.contains("/k/<redacted>/v1/compact"),
        "requests are logged:\n{logs}"
    );
    let secret = &key[compactd::access::KEY_PREFIX.len()..];
    assert!(!logs.contains(secret), "a key reached the logs");
    assert!(
        !logs.contains("sk-provider-secret"),
        "a provider key reached the logs"
    );
    assert!(
        !bodies.contains(secret),
        "a key reached a response or the metrics"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
