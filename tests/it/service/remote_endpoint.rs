//! The HTTP service against a fake upstream: the wire contract of `/v1/compact` and
//! `/v1/chat/completions`, `maxTokens`, bad requests, oversized bodies and back-pressure.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body, config, secs,
};

pub async fn json_of(response: reqwest::Response) -> Value {
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    assert_eq!(
        content_type.as_deref(),
        Some("application/json"),
        "JSON content type"
    );
    response.json().await.unwrap()
}

#[tokio::test]
async fn compact_answers_with_the_openai_summary_model_and_usage() {
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("ship it"))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;

    let response = app
        .compact(&json!({"systemPrompt": "SYS", "prompt": PROMPT, "maxTokens": 777, "extra": 1}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = json_of(response).await;
    // The conversation was kept for recall, under an id of its own.
    let recall_id = body.as_object_mut().unwrap().remove("recallId").unwrap();
    assert!(recall_id.as_str().unwrap().starts_with("r_"), "{recall_id}");
    assert_eq!(
        body,
        json!({"summary": answer("ship it"), "model": "openai:gpt-test",
        "usage": {"inputTokens": 120, "outputTokens": 7},
        // The latest request is kept; the error at the end of the span is not.
        "fidelity": {"anchors": 2, "kept": 1, "repaired": 0, "appended": 0, "repairCall": false,
            "missing": [{"kind": "unresolved_error", "text": "error: it broke"}], "dialect": "pi"},
        "cached": false, "loop": false, "budgetExhausted": false, "redactions": 0})
    );

    let sent = &fake.received()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), Some("Bearer sk-configured"));
    assert_eq!(
        sent.body,
        json!({"model": "gpt-test", "messages": [
        {"role": "system", "content": "SYS"}, {"role": "user", "content": PROMPT}],
        "max_tokens": 777, "stream": true, "stream_options": {"include_usage": true}})
    );
}

#[tokio::test]
async fn compact_speaks_the_anthropic_messages_api() {
    let fake = FakeProvider::start(
        vec![],
        Reply::anthropic(&["## Goal\nfix src/lib.rs", "part two"]),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "anthropic:claude-test", false)).await;

    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
    assert_eq!(body["summary"], "## Goal\nfix src/lib.rs\npart two");
    assert_eq!(body["model"], "anthropic:claude-test");
    assert_eq!(
        body["usage"],
        json!({"inputTokens": 200, "outputTokens": 9})
    );

    let sent = &fake.received()[0];
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some("ant-configured"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(
        sent.body,
        json!({"model": "claude-test", "max_tokens": 13107,
        "messages": [{"role": "user", "content": PROMPT}], "stream": true,
        "system": [{"type": "text", "text": "You summarize.", "cache_control": {"type": "ephemeral"}}]})
    );
}

#[tokio::test]
async fn past_the_queue_requests_get_429_with_retry_after() {
    let fake = FakeProvider::start(vec![], Reply::Hang(Duration::from_secs(3))).await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.max_concurrent = std::num::NonZeroUsize::new(1).unwrap();
    config.summarizers.max_queue = 1;
    config.summarizers.first_token_timeout = secs(2.0);
    let app = std::sync::Arc::new(TestApp::spawn(config).await);

    // One running, one waiting: the third is refused at once.
    let running = tokio::spawn({
        let app = app.clone();
        async move { app.compact(&compact_body(PROMPT)).await.status() }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = tokio::spawn({
        let app = app.clone();
        async move { app.compact(&compact_body(PROMPT)).await.status() }
    });
    app.wait_for_metric("compactd_summarizer_queue_depth", 1.0)
        .await;
    let started = Instant::now();
    let refused = app.compact(&compact_body(PROMPT)).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused without waiting"
    );
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(refused.headers().get("retry-after").unwrap(), "2");
    assert_eq!(
        json_of(refused).await["error"]["code"],
        "rate_limit_exceeded"
    );

    // The two admitted requests finish (the hang times out, then extractive answers).
    assert_eq!(running.await.unwrap(), StatusCode::OK);
    assert_eq!(waiting.await.unwrap(), StatusCode::OK);
}

#[tokio::test]
async fn max_tokens_defaults_and_caps() {
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("ok"))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let short = "<conversation>\n[User]: x\n</conversation>\n\n<previous-summary>\n## Goal\ny\n</previous-summary>\n\nIn 2-3 sentences, describe the changes as a pull request would.";
    for (body, expected) in [
        (json!({"prompt": PROMPT}), 13_107),
        (json!({"prompt": PROMPT, "maxTokens": 16384}), 16_384),
        (json!({"prompt": PROMPT, "maxTokens": 10_000_000}), 32_000),
        (json!({"prompt": short}), 512),
    ] {
        assert_eq!(app.compact(&body).await.status(), StatusCode::OK);
        assert_eq!(
            fake.received().last().unwrap().body["max_tokens"],
            expected,
            "{body}"
        );
    }
    // Without a system prompt compactd sends its own.
    assert!(
        fake.received()[0].body["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("summar")
    );
}

#[tokio::test]
async fn chat_completions_answers_as_an_openai_completion() {
    let fake = FakeProvider::start(vec![], Reply::openai("the summary of part A part B")).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let request = json!({"model": "claude-sonnet-4-5", "stream": false, "max_tokens": 900, "messages": [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": [{"type": "text", "text": "part A "}, {"type": "text", "text": "part B"}]}]});
    let response = app
        .client
        .post(format!("{}/v1/chat/completions", app.url))
        .bearer_auth("agent-provider-key")
        .json(&request)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // OpenAI's body has no room for the fidelity report: a header carries it.
    assert_eq!(
        response.headers()["x-compactd-fidelity"],
        "anchors=1; kept=1; repaired=0; appended=0; missing=0; repair-call=false"
    );
    let body = json_of(response).await;
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(
        body["choices"][0],
        json!({"index": 0, "message": {"role": "assistant", "content": "the summary of part A part B"}, "finish_reason": "stop"})
    );
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127})
    );
    assert!(body["id"].as_str().unwrap().starts_with("chatcmpl-"));

    let sent = &fake.received()[0];
    assert_eq!(
        sent.body["messages"],
        json!([{"role": "system", "content": "SYS"}, {"role": "user", "content": "part A part B"}])
    );
    assert_eq!(sent.body["max_tokens"], 900);
    // The agent's own provider key is never forwarded.
    assert_eq!(sent.header("authorization"), Some("Bearer sk-configured"));
}

#[tokio::test]
async fn chat_completions_streams_openai_chunks() {
    let summary = answer(&"x".repeat(2500)) + "😀 end";
    let fake = FakeProvider::start(vec![], Reply::openai(&summary)).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app
        .chat(&json!({"stream": true, "messages": [{"role": "user", "content": PROMPT}]}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .collect();
    assert_eq!(*data.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(
        chunks
            .iter()
            .all(|c| c["object"] == "chat.completion.chunk")
    );
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let content: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(content, summary);
    assert!(chunks.len() >= 4, "the content came in several chunks");
    assert_eq!(
        chunks.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn bad_requests_get_clear_json_errors() {
    let app = TestApp::spawn(config()).await;
    let cases: Vec<(&str, reqwest::Body, StatusCode, &str, Option<&str>)> = vec![
        (
            "/v1/compact",
            "{not json".into(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
            None,
        ),
        (
            "/v1/compact",
            "{}".into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("prompt"),
        ),
        (
            "/v1/compact",
            r#"{"prompt": 5}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("prompt"),
        ),
        (
            "/v1/compact",
            r#"{"prompt": "  "}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("prompt"),
        ),
        (
            "/v1/compact",
            r#"{"prompt": "x", "maxTokens": -1}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("maxTokens"),
        ),
        (
            "/v1/compact",
            r#"{"prompt": "x", "maxTokens": "many"}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("maxTokens"),
        ),
        (
            "/v1/compact",
            r#"{"prompt": "x"} trailing"#.into(),
            StatusCode::BAD_REQUEST,
            "invalid_json",
            None,
        ),
        (
            "/v1/chat/completions",
            r#"{"messages": []}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("messages"),
        ),
        (
            "/v1/chat/completions",
            r#"{"messages": [{"role": "user", "content": 7}]}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("messages[0].content"),
        ),
        (
            "/v1/chat/completions",
            r#"{"messages": [{"content": "x"}]}"#.into(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_value",
            Some("messages[0].role"),
        ),
        (
            "/v1/nothing",
            "{}".into(),
            StatusCode::NOT_FOUND,
            "not_found",
            None,
        ),
    ];
    for (path, body, status, code, param) in cases {
        let response = app.post_json_text(path, body).await;
        assert_eq!(response.status(), status, "{path} {code}");
        let json = json_of(response).await;
        assert_eq!(json["error"]["code"], code, "{json}");
        if let Some(param) = param {
            assert_eq!(json["error"]["param"], param, "{json}");
        }
        assert!(!json["error"]["message"].as_str().unwrap().is_empty());
    }
}

#[tokio::test]
async fn an_oversized_body_is_refused_with_413_naming_the_limit() {
    let mut config = config();
    config.http.max_body_bytes = 4096;
    let app = TestApp::spawn(config).await;
    let response = app.compact(&json!({"prompt": "x".repeat(10_000)})).await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = json_of(response).await;
    assert_eq!(body["error"]["code"], "request_too_large");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("4096"),
        "{body}"
    );
}
