//! Boundaries a fleet's compactd holds at the gateway (issue 52): compactd's own key never leaves
//! it, whichever header carried it; a request whose only provider header carried it is refused,
//! not guessed at; a request naming its host twice or not at all is refused; and a Codex
//! compaction item made for one tenant is opaque to every other.

use std::sync::Arc;
use std::time::Duration;

use compactd::access::new_key;
use compactd_store::{Store, now_ms};
use reqwest::StatusCode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::FakeProvider;
use crate::support::TestApp;
use crate::support::gateway::{
    MODEL_SUMMARY, Recorded, codex_trigger_and_next, compaction_item, gateway_config, recorded,
    summarizer_model, with_item,
};

on_both_backends!(
    a_compactd_key_never_reaches_the_provider_whichever_header_carried_it,
    a_codex_item_opens_only_for_the_tenant_and_key_it_was_made_for,
);

/// A recorded request without the credentials it was recorded with.
fn bare(recorded: &Recorded) -> Recorded {
    let mut bare = recorded.clone();
    bare.headers.retain(|(name, _)| {
        !matches!(
            name.to_ascii_lowercase().as_str(),
            "authorization" | "x-api-key"
        )
    });
    bare
}

fn first_turn(fixture: &'static str) -> Recorded {
    bare(
        &recorded(fixture)
            .into_iter()
            .find(|r| !r.compaction && r.method == "POST")
            .unwrap(),
    )
}

fn first_compaction(fixture: &'static str) -> Recorded {
    bare(
        &recorded(fixture)
            .into_iter()
            .find(|r| r.compaction)
            .unwrap(),
    )
}

/// compactd as a keyed gateway (beyond loopback, where a key is the only way in) on `store`.
async fn keyed_gateway(
    store: Arc<dyn Store>,
    tenants: &[&str],
) -> (TestApp, FakeProvider, Vec<(String, String)>) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let mut keys = Vec::new();
    for tenant in tenants {
        let (key, record) = new_key(tenant, None, now_ms());
        store.create_key(&record).await.unwrap();
        keys.push((key, record.key_id));
    }
    // The model must outlive the test's requests.
    std::mem::forget(model);
    (TestApp::with_store(config, store).await, provider, keys)
}

async fn a_compactd_key_never_reaches_the_provider_whichever_header_carried_it(
    store: Arc<dyn Store>,
) {
    let (app, provider, keys) = keyed_gateway(store, &["fleet"]).await;
    let key = keys[0].0.clone();
    the_providers_credential_goes_on_alone(&app, &provider, &key).await;
    one_header_for_both_is_refused_unless_compactd_answers(&app, &provider, &key).await;
}

/// The recorded first turns of Claude Code, Codex and OpenCode.
fn first_turns() -> [Recorded; 3] {
    [
        first_turn("claude-code-2.1.330"),
        first_turn("codex-0.169.0-custom-provider"),
        first_turn("opencode-1.18.33"),
    ]
}

/// Whichever header carried compactd's key, the provider gets its own credential and never
/// compactd's.
async fn the_providers_credential_goes_on_alone(app: &TestApp, provider: &FakeProvider, key: &str) {
    let bearer = format!("Bearer {key}");
    let [claude, codex, opencode] = first_turns();
    let keyed = format!("{}/k/{key}", app.url);
    // Anthropic's wire: the provider's key is in x-api-key, compactd's in Authorization.
    let cases: Vec<(&str, reqwest::RequestBuilder, &str)> = vec![
        (
            "messages, compactd's key as the bearer",
            claude
                .request(&app.client, &app.url)
                .header("authorization", &bearer)
                .header("x-api-key", "sk-ant-provider"),
            "sk-ant-provider",
        ),
        (
            "messages, compactd's key in X-Compactd-Key",
            claude
                .request(&app.client, &app.url)
                .header("x-compactd-key", key)
                .header("x-api-key", "sk-ant-provider"),
            "sk-ant-provider",
        ),
        (
            "responses, compactd's key in X-Compactd-Key",
            codex
                .request(&app.client, &app.url)
                .header("x-compactd-key", key)
                .header("authorization", "Bearer sk-openai-provider"),
            "Bearer sk-openai-provider",
        ),
        (
            "chat completions, compactd's key in the URL",
            opencode
                .request(&app.client, &keyed)
                .header("authorization", "Bearer sk-openai-provider"),
            "Bearer sk-openai-provider",
        ),
        (
            "chat completions, compactd's key in the URL and again as a header",
            opencode
                .request(&app.client, &keyed)
                .header("x-compactd-key", key)
                .header("authorization", "Bearer sk-openai-provider"),
            "Bearer sk-openai-provider",
        ),
    ];
    for (what, request, credential) in cases {
        let before = provider.received().len();
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{what}");
        response.bytes().await.unwrap();
        let seen = provider.received();
        assert_eq!(seen.len(), before + 1, "{what}: forwarded once");
        let last = seen.last().unwrap();
        let values: Vec<String> = last
            .headers
            .iter()
            .map(|(n, v)| format!("{n}: {v}"))
            .collect();
        assert!(
            values.iter().any(|v| v.ends_with(credential)),
            "{what}: the provider's credential goes on: {values:?}"
        );
        assert!(
            !format!("{values:?} {}", last.path_and_query()).contains(key),
            "{what}: compactd's key reached the provider: {values:?}"
        );
        assert!(last.header("x-compactd-key").is_none(), "{what}");
    }
}

/// OpenAI's wires carry both credentials in one header: compactd's key there leaves none for the
/// provider, and the request is refused, never forwarded; a compaction, compactd's to answer, is
/// answered.
async fn one_header_for_both_is_refused_unless_compactd_answers(
    app: &TestApp,
    provider: &FakeProvider,
    key: &str,
) {
    let bearer = format!("Bearer {key}");
    let [claude, codex, opencode] = first_turns();
    // OpenAI's wires carry both credentials in one header: compactd's key there leaves none for
    // the provider, and the request is refused, never forwarded with it or without it.
    let before = provider.received().len();
    for (what, recorded) in [("responses", &codex), ("chat completions", &opencode)] {
        let response = app
            .send(
                recorded
                    .request(&app.client, &app.url)
                    .header("authorization", &bearer),
            )
            .await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{what}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "ambiguous_credentials", "{what}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("X-Compactd-Key") && message.contains("/k/"),
            "{message}"
        );
        assert!(!message.contains(key));
    }
    // Anthropic's wire with nothing but compactd's key in Authorization: the same.
    let response = app
        .send(
            claude
                .request(&app.client, &app.url)
                .header("authorization", &bearer),
        )
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(provider.received().len(), before, "none was forwarded");

    // A compaction is compactd's to answer: the same bearer is no ambiguity there.
    let compaction = first_compaction("opencode-1.18.33");
    let response = compaction
        .request(&app.client, &app.url)
        .header("authorization", &bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("SUMMARY BY COMPACTD")
    );
    assert_eq!(provider.received().len(), before);
}

/// A raw HTTP/1.1 request to compactd and the status line of its answer.
async fn raw_status(url: &str, head: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .expect("compactd answers")
            .unwrap();
        answer.extend_from_slice(&chunk[..n]);
        if n == 0 || answer.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_request_with_two_hosts_or_none_is_refused_and_not_forwarded() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let body = r#"{"model":"claude","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}"#;
    let local = app.url.trim_start_matches("http://").to_owned();
    let request = |hosts: &str| {
        format!(
            "POST /v1/messages HTTP/1.1\r\n{hosts}content-type: application/json\r\nx-api-key: sk-ant-1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    let twice = request(&format!("host: {local}\r\nhost: evil.example\r\n"));
    assert!(raw_status(&app.url, &twice).await.contains(" 400 "));
    let twice_same = request(&format!("host: {local}\r\nhost: {local}\r\n"));
    assert!(raw_status(&app.url, &twice_same).await.contains(" 400 "));
    let none = request("");
    assert!(raw_status(&app.url, &none).await.contains(" 400 "));
    assert!(provider.received().is_empty(), "none was forwarded");
    // One Host is served.
    let once = request(&format!("host: {local}\r\n"));
    assert!(raw_status(&app.url, &once).await.contains(" 200 "));
    assert_eq!(provider.received().len(), 1);
}

async fn a_codex_item_opens_only_for_the_tenant_and_key_it_was_made_for(store: Arc<dyn Store>) {
    let (app, provider, keys) = keyed_gateway(store.clone(), &["tenant-a", "tenant-b"]).await;
    let (key_a, key_b) = (&keys[0].0, &keys[1].0);
    let (other_key_a, record) = new_key("tenant-a", None, now_ms());
    store.create_key(&record).await.unwrap();
    let (trigger, after) = codex_trigger_and_next();
    let (trigger, after) = (bare(&trigger), bare(&after));
    let base = |key: &str| format!("{}/k/{key}", app.url);
    let body = trigger
        .request(&app.client, &base(key_a))
        .header("authorization", "Bearer sk-openai-a")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let item = compaction_item(&body);
    let sealed = item["encrypted_content"].as_str().unwrap().to_owned();
    assert!(sealed.starts_with("compactd.v2."));
    assert!(
        !String::from_utf8_lossy(&base64_decode(&sealed["compactd.v2.".len()..]))
            .contains("SUMMARY BY COMPACTD"),
        "the payload is sealed, not encoded"
    );
    let next = with_item(&after, &item);
    let send = |key: &str| {
        after
            .request_with_body(&app.client, &base(key), next.clone())
            .header("authorization", "Bearer sk-openai")
            .send()
    };
    // Tenant B, and tenant A with another key: the item goes on as it came, unread.
    for key in [key_b, &other_key_a] {
        let response = send(key).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        response.bytes().await.unwrap();
        let seen = provider.received().pop().unwrap();
        assert!(seen.bytes == next, "opaque to anyone but its maker");
        assert!(!String::from_utf8_lossy(&seen.bytes).contains(MODEL_SUMMARY));
    }
    // Tenant A with the key that asked: the summary, for the provider to read.
    let response = send(key_a).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.bytes().await.unwrap();
    let seen = provider.received().pop().unwrap();
    let seen = String::from_utf8_lossy(&seen.bytes).into_owned();
    assert!(seen.contains("SUMMARY BY COMPACTD") && !seen.contains(&sealed));
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .unwrap()
}
