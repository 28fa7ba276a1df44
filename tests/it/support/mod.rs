//! Test support: compactd on a real socket, and the settings tests start from. The one fake
//! model provider is in `fake_provider/`.

// Helpers only: what the tests share (fake providers, real agents' set-ups, the binary, the browser).
pub mod agent_player;
pub mod agent_scenario;
pub mod binary;
pub mod browser;
pub mod console_page;
pub mod fake_provider;
pub mod gateway;
pub mod owned_pg;
pub mod pi15_sessions;
mod verbs;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compactd::config::ServeConfig;
use compactd::http::{AppState, serve};
use compactd_store::Store;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tower::ServiceExt;

pub use crate::support::fake_provider::{FakeProvider, Reply};

/// How requests reach compactd.
enum Transport {
    /// Its own connection loop on a socket on 127.0.0.1, as the binary runs it.
    Socket,
    /// The router itself (`app(state).oneshot(…)`): for handlers that need no socket.
    Router(axum::Router),
}

/// compactd with `config`, on a socket or in process.
pub struct TestApp {
    /// Where requests go (in process: a name no request leaves for).
    pub url: String,
    transport: Transport,
    pub client: reqwest::Client,
    /// The documented responses this app gave, as checked.
    checked: Mutex<Vec<crate::service::conformance::Checked>>,
}

/// compactd's logs in the tests when `TEST_LOG` names a filter (`TEST_LOG=compactd=debug cargo
/// test …`), captured per test as its output is; none otherwise, so a passing run prints nothing.
fn logs() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Ok(filter) = std::env::var("TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
    });
}

impl TestApp {
    /// compactd with its own store as configured (an in-memory SQLite database by default).
    pub async fn spawn(config: ServeConfig) -> TestApp {
        config.validate().expect("test configuration is valid");
        let state = AppState::from_config(&config).await.unwrap();
        TestApp::serve(state).await
    }

    /// compactd on the given store.
    pub async fn with_store(config: ServeConfig, store: Arc<dyn Store>) -> TestApp {
        TestApp::serve(AppState::with_store(&config, store).unwrap()).await
    }

    /// compactd's router in process, with its own store as configured: handler tests that need
    /// no socket.
    pub async fn handlers(config: ServeConfig) -> TestApp {
        config.validate().expect("test configuration is valid");
        TestApp::in_process(AppState::from_config(&config).await.unwrap())
    }

    /// compactd's router in process, on the given store.
    pub fn handlers_with_store(config: ServeConfig, store: Arc<dyn Store>) -> TestApp {
        TestApp::in_process(AppState::with_store(&config, store).unwrap())
    }

    /// compactd's router in process, on a state the test holds too.
    pub fn in_process(state: AppState) -> TestApp {
        TestApp {
            url: "http://in-process.compactd.invalid".into(),
            transport: Transport::Router(compactd::http::app(state)),
            client: reqwest::Client::new(),
            checked: Mutex::default(),
        }
    }

    async fn serve(state: AppState) -> TestApp {
        logs();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // compactd's own connection loop, as the binary runs it.
        tokio::spawn(async move {
            serve(
                listener,
                state,
                std::future::pending(),
                Duration::from_secs(1),
            )
            .await
            .unwrap()
        });
        TestApp {
            url,
            transport: Transport::Socket,
            client: reqwest::Client::new(),
            checked: Mutex::default(),
        }
    }

    /// Sends a request to compactd and checks the response against `/openapi.json`
    /// (`conformance.rs`): every test's answers are checked against the documentation.
    pub async fn send(&self, request: reqwest::RequestBuilder) -> reqwest::Response {
        let request = request.build().unwrap();
        let method = request.method().to_string();
        let url = request.url();
        let path = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let (status, headers, version, body) = match &self.transport {
            Transport::Socket => {
                let response = self.client.execute(request).await.unwrap();
                let (status, headers) = (response.status(), response.headers().clone());
                let version = response.version();
                (status, headers, version, response.bytes().await.unwrap())
            }
            Transport::Router(router) => {
                let request: axum::http::Request<reqwest::Body> = request.try_into().unwrap();
                let response = router
                    .clone()
                    .oneshot(request.map(axum::body::Body::new))
                    .await
                    .unwrap();
                let (parts, body) = response.into_parts();
                let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
                (parts.status, parts.headers, parts.version, body)
            }
        };
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        match crate::service::conformance::check(
            &method,
            &path,
            status.as_u16(),
            content_type,
            &body,
        ) {
            Ok(checked) => self.checked.lock().unwrap().extend(checked),
            Err(mismatch) => panic!("the answer does not match /openapi.json: {mismatch}"),
        }
        let mut rebuilt = axum::http::Response::new(body);
        *rebuilt.status_mut() = status;
        *rebuilt.headers_mut() = headers;
        *rebuilt.version_mut() = version;
        reqwest::Response::from(rebuilt)
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.send(self.client.post(format!("{}{path}", self.url)).json(body))
            .await
    }

    /// Posts a session file or lines of one, as NDJSON.
    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.post_typed(path, "application/x-ndjson", body).await
    }

    /// Posts text as a JSON body, well-formed or not.
    pub async fn post_json_text(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.post_typed(path, "application/json", body).await
    }

    /// Posts `body` with this `Content-Type`.
    pub async fn post_typed(
        &self,
        path: &str,
        content_type: &str,
        body: impl Into<reqwest::Body>,
    ) -> reqwest::Response {
        self.send(
            self.client
                .post(format!("{}{path}", self.url))
                .header(reqwest::header::CONTENT_TYPE, content_type)
                .body(body),
        )
        .await
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.send(self.client.get(format!("{}{path}", self.url)))
            .await
    }

    /// The documented responses this app gave so far: `(method, route, status)`.
    pub fn checked(&self) -> Vec<crate::service::conformance::Checked> {
        self.checked.lock().unwrap().clone()
    }

    /// The value of one sample of `/metrics` (`name` or `name{labels}`); 0 when absent.
    pub async fn metric(&self, sample: &str) -> f64 {
        let text = self.get("/metrics").await.text().await.unwrap();
        metric_sample(&text, sample)
    }

    /// Polls `/metrics` until `sample` reaches `value`: synchronization on compactd's own state
    /// (a request queued, a call in flight) instead of a guess at how long it takes.
    pub async fn wait_for_metric(&self, sample: &str, value: f64) {
        let started = Instant::now();
        while self.metric(sample).await < value {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "{sample} did not reach {value}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.send(self.client.delete(format!("{}{path}", self.url)))
            .await
    }
}

/// Defaults with fast retries, for tests.
pub fn config() -> ServeConfig {
    let mut config = ServeConfig::defaults();
    config.summarizers.backoff = std::time::Duration::from_millis(10);
    config.summarizers.first_token_timeout = secs(5.0);
    config.summarizers.deadline = secs(20.0);
    config.storage.database_url = Some(compactd::config::Secret::new("sqlite::memory:"));
    // The name in-process requests are sent to (see `TestApp::in_process`).
    config.access.allowed_hosts = vec!["in-process.compactd.invalid".into()];
    // Tests compare summaries exactly; recall's line is tested where it is the subject.
    config.summarizers.stages.recall_footer = false;
    config
}

/// A configuration whose chain is the given models against `fake`, without the extractive
/// fallback unless `extractive` is set.
pub fn chain_config(fake: &FakeProvider, models: &str, extractive: bool) -> ServeConfig {
    let mut config = config();
    config.summarizers.models = models.split(',').map(|m| m.parse().unwrap()).collect();
    config.summarizers.extractive_fallback = extractive;
    config.summarizers.openai_base_url = (format!("{}/v1", fake.url)).parse().unwrap();
    config.summarizers.openai_api_key = Some(compactd::config::Secret::new("sk-configured"));
    config.summarizers.anthropic_base_url = (fake.url.clone()).parse().unwrap();
    config.summarizers.anthropic_api_key = Some(compactd::config::Secret::new("ant-configured"));
    config
}

/// An upstream answer to [`PROMPT`] that keeps what its anchors need (its latest request), so
/// that the fidelity gate has nothing to repair: `## Goal\nfix src/lib.rs: TEXT`.
pub fn answer(text: &str) -> String {
    format!("## Goal\nfix src/lib.rs: {text}")
}

/// The body of a `/v1/compact` request as pi-family agents send it.
pub fn compact_body(prompt: &str) -> Value {
    json!({"systemPrompt": "You summarize.", "prompt": prompt})
}

pub const PROMPT: &str = "<conversation>\n[User]: fix src/lib.rs\n\n[Tool result]: error: it broke\n</conversation>\n\n## Critical Context";

/// A number of seconds as a setting takes it.
pub fn secs(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds)
}

/// One sample of a Prometheus text exposition (`name` or `name{labels}`); 0 when absent.
pub fn metric_sample(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| {
            line.strip_prefix(name_and_labels)
                .filter(|rest| rest.starts_with(' '))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0.0)
}

/// Node 22 and the reference MCP SDK's `node_modules`, as `scripts/agents.sh install` puts them
/// (in `COMPACTD_AGENTS_BIN` or `target/agents/bin`).
pub fn node_with_mcp_sdk() -> (std::path::PathBuf, std::path::PathBuf) {
    let bin = compactd_testkit::agents_bin();
    (bin.join("node22"), bin.join("mcp-node-modules"))
}

/// Polls `check` until it answers `Some` (every 20 ms, for at most 10 s): for what compactd writes
/// behind the response (recall's conversations).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not happen within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A key of each of `tenants`, stored in `store`, in order.
pub async fn tenant_keys(store: &dyn compactd_store::Store, tenants: &[&str]) -> Vec<String> {
    let mut keys = Vec::new();
    for tenant in tenants {
        let (key, record) = compactd::access::new_key(tenant, None, compactd_store::now_ms());
        store.create_key(&record).await.unwrap();
        keys.push(key);
    }
    keys
}
