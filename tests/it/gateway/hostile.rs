//! The gateway under streaming and hostile use: a stream's first byte reaches the agent while
//! the provider is still writing; an agent that hangs up cancels the provider's request; a
//! provider that hangs ends in a 502; bodies are bounded; only the configured upstream is ever
//! called, whatever the request names; compactd's own failures send the agent's compaction to
//! the provider; keys in the URL work and are not passed on; no credential reaches the log.

use std::sync::Arc;
use std::time::Duration;

use compactd::access::new_key;
use compactd_store::{SqliteStore, Store, now_ms};

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use crate::support::binary::Served;
use crate::support::fake_provider::provider_answer;
use crate::support::gateway::{
    FIXTURES, MODEL_SUMMARY, gateway_config, recorded, summarizer_model,
};
use crate::support::{FakeProvider, Reply, TestApp};

/// How long a test waits for what must happen before it calls it a failure.
const PATIENCE: Duration = Duration::from_secs(15);

/// A provider on a raw socket: reads one request, answers with SSE headers and a first event,
/// then runs `then` on the connection.
async fn raw_provider<F, Fut>(then: F) -> String
where
    F: FnOnce(TcpStream) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        read_request(&mut stream).await;
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            .await
            .unwrap();
        write_chunk(&mut stream, b"event: ping\ndata: {\"type\":\"ping\"}\n\n")
            .await
            .unwrap();
        then(stream).await;
    });
    url
}

async fn read_request(stream: &mut TcpStream) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        let n = stream.read(&mut chunk).await.unwrap();
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buffer.len() >= end + 4 + length || n == 0 {
                return;
            }
        }
    }
}

async fn write_chunk(stream: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    stream
        .write_all(format!("{:x}\r\n", data.len()).as_bytes())
        .await?;
    stream.write_all(data).await?;
    stream.write_all(b"\r\n").await?;
    stream.flush().await
}

/// An ordinary Claude Code turn, as recorded.
fn claude_turn() -> crate::support::gateway::Recorded {
    recorded(FIXTURES[0]).into_iter().next().unwrap()
}

fn claude_compaction() -> crate::support::gateway::Recorded {
    recorded(FIXTURES[0])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap()
}

#[tokio::test]
async fn the_first_byte_of_a_stream_reaches_the_agent_while_the_provider_still_writes() {
    let (release, released) = oneshot::channel::<()>();
    let upstream = raw_provider(|mut stream| async move {
        // The rest only after the agent has the first event: were compactd buffering, it
        // never would.
        let _ = released.await;
        let _ = write_chunk(
            &mut stream,
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        )
        .await;
        let _ = stream.write_all(b"0\r\n\r\n").await;
    })
    .await;
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.anthropic_upstream = upstream.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    let app = TestApp::spawn(config).await;
    let mut response = claude_turn()
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let first = tokio::time::timeout(PATIENCE, response.chunk())
        .await
        .expect("the first event arrives before the provider finishes")
        .unwrap()
        .unwrap();
    assert_eq!(&first[..], b"event: ping\ndata: {\"type\":\"ping\"}\n\n");
    release.send(()).unwrap();
    let rest = response.text().await.unwrap();
    assert!(rest.contains("message_stop"));
}

#[tokio::test]
async fn an_agent_that_hangs_up_cancels_the_providers_request() {
    let (closed, mut told) = mpsc::channel::<()>(1);
    let upstream = raw_provider(move |mut stream| async move {
        // An endless stream: only the other side closing it ends the writes.
        let event = b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\"}\n\n";
        while write_chunk(&mut stream, event).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let _ = closed.send(()).await;
    })
    .await;
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.anthropic_upstream = upstream.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    let app = TestApp::spawn(config).await;
    let mut response = claude_turn()
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap();
    response.chunk().await.unwrap().unwrap();
    drop(response);
    tokio::time::timeout(PATIENCE, told.recv())
        .await
        .expect("the provider's connection is closed once the agent hangs up");
}

#[tokio::test]
async fn a_provider_that_hangs_ends_in_a_502_naming_it() {
    let hanging = FakeProvider::start(vec![], Reply::Hang(Duration::from_secs(60))).await;
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.anthropic_upstream = hanging.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.idle_timeout = Duration::from_millis(300);
    let app = TestApp::spawn(config).await;
    let response = tokio::time::timeout(
        PATIENCE,
        claude_turn().request(&app.client, &app.url).send(),
    )
    .await
    .expect("the idle timeout ends the wait")
    .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "upstream_unreachable");
    assert_eq!(body["type"], "error", "in the shape Anthropic clients read");
}

#[tokio::test]
async fn oversized_bodies_are_refused_before_anything_goes_upstream() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.http.max_body_bytes = 64 * 1024;
    let app = TestApp::spawn(config).await;
    let turn = claude_turn();
    let mut body = turn.body.clone().unwrap();
    body["messages"][0]["content"] = json!("x".repeat(100_000));
    let response = turn
        .request_with_body(&app.client, &app.url, serde_json::to_vec(&body).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let error: Value = response.json().await.unwrap();
    assert!(
        error.to_string().contains("COMPACTD_MAX_BODY_BYTES") || error["error"]["code"].is_string()
    );
    assert!(provider.received().is_empty());
}

#[tokio::test]
async fn only_the_configured_upstream_is_ever_called_whatever_the_request_names() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let elsewhere = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let turn = claude_turn();
    let other = elsewhere.url.trim_start_matches("http://").to_owned();
    // Headers that name another host, as some proxies honour them.
    let named = turn
        .request(&app.client, &app.url)
        .header("x-forwarded-host", &other)
        .header("forwarded", format!("host={other}"))
        .header("x-upstream", format!("http://{other}"))
        .send()
        .await
        .unwrap();
    assert_eq!(named.status(), StatusCode::OK);
    // A request line in absolute form naming the other host.
    let address = app.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let body = turn.body_bytes();
    let head = format!(
        "POST http://{other}/v1/messages HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(PATIENCE, stream.read_to_end(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(
        elsewhere.received().is_empty(),
        "nothing reached a host a request named"
    );
    assert!(!provider.received().is_empty());
}

#[tokio::test]
async fn when_compactd_cannot_summarize_the_agents_own_compaction_goes_to_the_provider() {
    // compactd's only model is down and there is no extractive fallback.
    let down = FakeProvider::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&down, &provider)).await;
    for fixture in FIXTURES {
        let compaction = recorded(fixture)
            .into_iter()
            .find(|r| r.compaction)
            .unwrap();
        let response = compaction
            .request(&app.client, &app.url)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{fixture}");
        let body = response.text().await.unwrap();
        assert_eq!(
            body,
            provider_answer(&compaction.path_and_query),
            "{fixture}"
        );
        let seen = provider.received().pop().unwrap();
        assert!(
            seen.bytes == compaction.body_bytes(),
            "{fixture}: the agent's own request, unchanged"
        );
    }
    assert!(
        !down.received().is_empty(),
        "compactd tried its model first"
    );
}

#[tokio::test]
async fn a_key_in_the_url_admits_the_agent_and_is_not_passed_on() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    // Beyond loopback, where a key is the only way in.
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(2))
            .await
            .unwrap(),
    );
    let (key, record) = new_key("team-gw", None, now_ms());
    store.create_key(&record).await.unwrap();
    let app = TestApp::with_store(config, store).await;
    let turn = claude_turn();
    let keyed = format!("{}/k/{key}", app.url);
    let response = turn.request(&app.client, &keyed).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = provider.received().pop().unwrap();
    assert_eq!(seen.path.as_str(), "/v1/messages");
    assert!(
        !format!("{seen:?}").contains(&key),
        "the compactd key stays with compactd"
    );
    let compaction = claude_compaction();
    let body = compaction
        .request(&app.client, &keyed)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("SUMMARY BY COMPACTD"));
    // An unknown key is no way in, and never a 401 the agent would take for its provider's.
    let unknown = turn
        .request(&app.client, &format!("{}/k/cpd_unknown", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn with_the_gateway_off_its_routes_do_not_exist() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.enabled = false;
    let app = TestApp::spawn(config).await;
    for path in ["/v1/messages", "/v1/messages/count_tokens", "/v1/responses"] {
        let response = app
            .client
            .post(format!("{}{path}", app.url))
            .json(&json!({"model": "m", "messages": []}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
    }
    assert!(provider.received().is_empty());
}

#[tokio::test]
async fn no_credential_the_agent_sends_reaches_the_log() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    // A port nothing listens on (wiremock's servers live on in a pool when dropped).
    let gone = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("compactd-gateway-log-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let database_url = format!("sqlite:{}", dir.join("db.sqlite").display());
    let served = Served::start(&[
        ("DATABASE_URL", &database_url),
        ("COMPACTD_LOG", "debug"),
        ("COMPACTD_GATEWAY", "on"),
        ("COMPACTD_GATEWAY_ANTHROPIC_UPSTREAM", &provider.url),
        (
            "COMPACTD_GATEWAY_OPENAI_UPSTREAM",
            &format!("http://{gone}/v1"),
        ),
        ("COMPACTD_MODELS", "openai:compactd-summarizer"),
        ("COMPACTD_OPENAI_BASE_URL", &format!("{}/v1", model.url)),
        ("OPENAI_API_KEY", "sk-compactd-own-key"),
    ]);
    let client = reqwest::Client::new();
    const SECRET: &str = "sk-ant-agents-secret-0123456789";
    for recorded in [claude_turn(), claude_compaction()] {
        let response = recorded
            .request(&client, &served.base)
            .header("x-api-key", SECRET)
            .header("authorization", format!("Bearer {SECRET}"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.bytes().await.unwrap();
    }
    // And a request to an upstream that is gone, whose error is logged.
    let codex = recorded(FIXTURES[1]).into_iter().next().unwrap();
    let response = codex
        .request(&client, &served.base)
        .header("authorization", format!("Bearer {SECRET}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
    let seen = provider.received();
    let keys: Vec<&str> = seen[0]
        .headers
        .iter()
        .filter(|(name, _)| name.eq_ignore_ascii_case("x-api-key"))
        .map(|(_, value)| value.as_str())
        .collect();
    assert!(
        keys.contains(&SECRET),
        "the provider gets the agent's key: {keys:?}"
    );
    let logs = served.kill_9();
    assert!(
        logs.contains("gateway"),
        "the gateway logged what it did: {logs}"
    );
    for secret in [SECRET, "sk-compactd-own-key", MODEL_SUMMARY] {
        assert!(!logs.contains(secret), "{secret} is in the log");
    }
}
