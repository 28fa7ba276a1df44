//! The providers' own compaction APIs at the gateway (issue 66): OpenAI's
//! `POST /v1/responses/compact` answered by compactd in the API's shape, its compaction item opened
//! into compactd's summary when a later turn sends it back, and what compactd cannot answer (its
//! models down, history only the upstream can read) going to the upstream as it came.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::fake_provider::PROVIDER_COMPACTION;
use crate::support::gateway::{MODEL_SUMMARY, gateway_config, summarizer_model};
use crate::support::{FakeProvider, Reply, TestApp};

/// A Responses conversation as a client compacts it: user turns, the model's answers, a tool call.
fn conversation() -> Value {
    json!([
        {"type": "message", "role": "user", "content": "What does calc.py do? Keep answers short."},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "It parses arithmetic; let me read it."}]},
        {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": "{\"path\":\"calc.py\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "def parse(s): ..."},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "calc.py parses and evaluates expressions."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Now add tests for parse."}]},
    ])
}

#[tokio::test]
async fn responses_compact_is_answered_by_compactd_and_its_item_opens_in_the_next_turn() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let response = app
        .post(
            "/v1/responses/compact",
            &json!({"model": "gpt-5.2", "input": conversation()}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let compacted: Value = response.json().await.unwrap();
    assert_eq!(compacted["object"], "response.compaction");
    assert!(compacted["id"].as_str().unwrap().starts_with("resp"));
    let output = compacted["output"].as_array().unwrap();
    // Every user message, in order, then one compaction item.
    let users: Vec<&Value> = output.iter().filter(|i| i["role"] == "user").collect();
    assert_eq!(users.len(), 2, "{compacted}");
    assert_eq!(
        users[0]["content"][0],
        json!({"type": "input_text", "text": "What does calc.py do? Keep answers short."})
    );
    assert_eq!(users[1]["content"][0]["text"], "Now add tests for parse.");
    let item = output.last().unwrap();
    assert_eq!(item["type"], "compaction");
    assert_eq!(output.len(), 3);
    let sealed = item["encrypted_content"].as_str().unwrap();
    assert!(
        !sealed.contains("calc.py") && !sealed.contains("SUMMARY"),
        "the item is sealed"
    );
    assert!(compacted["usage"]["input_tokens"].as_u64().unwrap() > 0);
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    assert!(
        provider.received().is_empty(),
        "the upstream never saw the compaction"
    );

    // The next turn sends the compacted output back: the upstream reads compactd's summary.
    let mut input = output.clone();
    input.push(json!({"role": "user", "content": "Go on."}));
    let response = app
        .client
        .post(format!("{}/v1/responses", app.url))
        .json(&json!({"model": "gpt-5.2", "input": input, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = provider.received().pop().unwrap();
    let seen: Value = serde_json::from_slice(&seen.bytes).unwrap();
    assert!(!seen.to_string().contains("compactd.v2."), "{seen}");
    assert!(
        seen.to_string()
            .contains(MODEL_SUMMARY.split('\n').nth(1).unwrap())
    );
}

#[tokio::test]
async fn a_compaction_compactd_cannot_answer_is_the_upstreams() {
    // compactd's model is down: the upstream compacts, and its answer comes back as it wrote it.
    let down = FakeProvider::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&down, &provider)).await;
    let body = json!({"model": "gpt-5.2", "input": conversation()});
    let response = app.post("/v1/responses/compact", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), PROVIDER_COMPACTION);
    let seen = provider.received();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path.as_str(), "/v1/responses/compact");
    assert_eq!(
        serde_json::from_slice::<Value>(&seen[0].bytes).unwrap(),
        body
    );

    // History only the upstream can read goes to it without asking compactd's model.
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut theirs = conversation();
    theirs.as_array_mut().unwrap().insert(
        0,
        json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAB-openai-sealed"}),
    );
    for body in [
        json!({"model": "gpt-5.2", "input": theirs}),
        json!({"model": "gpt-5.2", "previous_response_id": "resp_earlier"}),
        json!({"model": "gpt-5.2", "previous_response_id": "resp_earlier", "input": "and this"}),
    ] {
        let before = provider.received().len();
        let response = app.post("/v1/responses/compact", &body).await;
        assert_eq!(response.status(), StatusCode::OK, "{body}");
        let seen = provider.received();
        assert_eq!(seen.len(), before + 1, "{body}");
        assert_eq!(
            serde_json::from_slice::<Value>(&seen[before].bytes).unwrap(),
            body
        );
    }
    assert!(
        model.received().is_empty(),
        "compactd's model was not asked"
    );
}

/// The ChatGPT backend's Codex path (oh-my-pi's `openai-codex` provider, its v1 lane): answered as
/// `/v1/responses/compact` is, and what compactd does not answer goes to the Codex upstream.
#[tokio::test]
async fn the_codex_paths_compact_and_forward_to_the_codex_upstream() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let body = json!({"model": "gpt-5.5", "input": conversation()});
    let response = app.post("/codex/responses/compact", &body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let compacted: Value = response.json().await.unwrap();
    assert_eq!(compacted["object"], "response.compaction");
    assert_eq!(
        compacted["output"].as_array().unwrap().last().unwrap()["type"],
        "compaction"
    );
    assert!(provider.received().is_empty());

    let theirs = json!({"model": "gpt-5.5", "previous_response_id": "resp_earlier"});
    let response = app.post("/codex/responses/compact", &theirs).await;
    assert_eq!(response.text().await.unwrap(), PROVIDER_COMPACTION);
    let turn = json!({"model": "gpt-5.5", "input": "hello", "stream": true});
    let response = app.post("/codex/responses", &turn).await;
    assert_eq!(response.status(), StatusCode::OK);
    let seen = provider.received();
    let paths: Vec<&str> = seen.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/codex/responses/compact", "/codex/responses"]);
    // The WebSocket handshake is told to use HTTP.
    let socket = app.get("/codex/responses").await;
    assert_eq!(socket.status(), StatusCode::UPGRADE_REQUIRED);
}

#[tokio::test]
async fn a_bad_compaction_request_is_a_4xx_naming_what_is_wrong() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let cases: [(&str, StatusCode, &str); 3] = [
        ("{\"model\": ", StatusCode::BAD_REQUEST, "body"),
        ("[1, 2]", StatusCode::BAD_REQUEST, "body"),
        (
            "{\"model\": \"gpt-5.2\"}",
            StatusCode::UNPROCESSABLE_ENTITY,
            "input",
        ),
    ];
    for (body, status, param) in cases {
        let response = app.post_json_text("/v1/responses/compact", body).await;
        assert_eq!(response.status(), status, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["param"], param, "{body}: {error}");
    }
    assert!(provider.received().is_empty());
    assert!(model.received().is_empty());
}

/// A tenant that chose the providers' own compaction APIs (`COMPACTD_GATEWAY_NATIVE_TENANTS`):
/// each of them reaches the upstream byte for byte, and compactd's model is never asked.
#[tokio::test]
async fn a_tenant_that_chose_the_providers_compaction_gets_it_byte_for_byte() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.native_tenants = vec!["-".into()];
    config.gateway.context_edits = compactd::config::ContextEdits::Compactd;
    let app = TestApp::spawn(config).await;
    let long = "word ".repeat(5_000);
    let messages = json!([{"role": "user", "content": long}, {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Now add tests for parse."}]);
    let calls = [
        (
            "/v1/responses/compact",
            json!({"model": "gpt-5.2", "input": conversation()}),
        ),
        (
            "/v1/responses",
            json!({"model": "gpt-5.2", "input": conversation(),
            "context_management": [{"type": "compaction", "compact_threshold": 1000}]}),
        ),
        (
            "/v1/messages",
            json!({"model": "claude-sonnet-4-6", "max_tokens": 100,
            "messages": messages, "compaction": {"type": "summarize"}}),
        ),
        (
            "/v1/messages",
            json!({"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": messages,
            "context_management": {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}},
                {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}]}}),
        ),
        (
            "/v1/messages",
            json!({"model": "claude-sonnet-4-6", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}],
            "context_management": {"edits": [{"type": "compact_20260112"}]}}),
        ),
    ];
    for (path, body) in calls {
        let bytes = serde_json::to_vec(&body).unwrap();
        let before = provider.received().len();
        let response = app
            .client
            .post(format!("{}{path}", app.url))
            .header("content-type", "application/json")
            .body(bytes.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        let seen = provider.received();
        assert_eq!(seen.len(), before + 1, "{path}: {body}");
        assert_eq!(seen[before].bytes, bytes, "{path}: byte for byte");
    }
    assert!(
        model.received().is_empty(),
        "compactd's model was not asked"
    );
}

/// An item compactd minted while one upstream served the tenant opens for another: a replica on
/// the same store pointed at a different provider reads it, and its provider gets the summary.
#[tokio::test]
async fn an_item_minted_for_one_upstream_opens_for_another() {
    let store: std::sync::Arc<dyn compactd_store::Store> = std::sync::Arc::new(
        compactd_store::SqliteStore::connect_url(
            "sqlite::memory:",
            std::time::Duration::from_secs(5),
        )
        .await
        .unwrap(),
    );
    let model = summarizer_model().await;
    let first = FakeProvider::wires().await;
    let app = TestApp::with_store(gateway_config(&model, &first), store.clone()).await;
    let compacted: Value = app
        .post(
            "/v1/responses/compact",
            &json!({"model": "gpt-5.2", "input": conversation()}),
        )
        .await
        .json()
        .await
        .unwrap();
    let mut input = compacted["output"].as_array().unwrap().clone();
    input.push(json!({"role": "user", "content": "Go on."}));

    let second = FakeProvider::wires().await;
    let other = TestApp::with_store(gateway_config(&model, &second), store).await;
    let response = other
        .post(
            "/v1/responses",
            &json!({"model": "gpt-5.2", "input": input, "stream": true}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(first.received().is_empty());
    let seen = second.received();
    let seen = String::from_utf8_lossy(&seen[0].bytes).into_owned();
    assert!(!seen.contains("compactd.v2."), "{seen}");
    assert!(
        seen.contains(MODEL_SUMMARY.split('\n').nth(1).unwrap()),
        "{seen}"
    );
}
