//! The HTTP service against a fake upstream: the wire contract of `/v1/compact` and
//! `/v1/chat/completions`, retries, fallback, deadlines, the overflow error and back-pressure.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    FakeUpstream, PROMPT, Reply, TestApp, answer, chain_config, compact_body, config, secs,
};

async fn json_of(response: reqwest::Response) -> Value {
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
    let fake = FakeUpstream::start(vec![], Reply::openai(&answer("ship it"))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;

    let response = app
        .post(
            "/v1/compact",
            &json!({"systemPrompt": "SYS", "prompt": PROMPT, "maxTokens": 777, "extra": 1}),
        )
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
    let fake = FakeUpstream::start(
        vec![],
        Reply::anthropic(&["## Goal\nfix src/lib.rs", "part two"]),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "anthropic:claude-test", false)).await;

    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
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
async fn a_429_is_retried_after_the_time_it_asks_for() {
    let fake = FakeUpstream::start(
        vec![
            Reply::json(
                429,
                json!({"error": {"type": "rate_limit_error", "message": "slow down"}}),
            )
            .with_header("retry-after", "1"),
        ],
        Reply::openai(&answer("after the wait")),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;

    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["summary"], answer("after the wait"));
    let received = fake.received();
    assert_eq!(received.len(), 2);
    let waited = received[1].at - received[0].at;
    assert!(
        waited >= Duration::from_millis(950),
        "retried after {waited:?}, Retry-After said 1 s"
    );
}

#[tokio::test]
async fn server_errors_resets_garbage_and_empty_completions_are_retried() {
    for (name, failure) in [
        (
            "500",
            Reply::json(500, json!({"error": {"message": "internal"}})),
        ),
        ("reset", Reply::Reset),
        ("garbage", Reply::garbage()),
        ("empty completion", Reply::openai("   ")),
        (
            "529 overloaded",
            Reply::json(
                529,
                json!({"type": "error", "error": {"type": "overloaded_error"}}),
            ),
        ),
    ] {
        let fake = FakeUpstream::start(vec![failure], Reply::openai(&answer("recovered"))).await;
        let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
        let response = app.post("/v1/compact", &compact_body(PROMPT)).await;
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        assert_eq!(
            json_of(response).await["summary"],
            answer("recovered"),
            "{name}"
        );
        assert_eq!(fake.received().len(), 2, "{name}: one failure, one retry");
    }
}

#[tokio::test]
async fn a_hang_past_the_first_token_timeout_is_cut_and_retried() {
    let fake = FakeUpstream::start(
        vec![Reply::Hang(Duration::from_secs(30))],
        Reply::openai(&answer("second try")),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.first_token_timeout = secs(1.0);
    let app = TestApp::spawn(config).await;

    let started = Instant::now();
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["summary"], answer("second try"));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(10),
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn the_chain_falls_back_to_the_next_model_and_finally_to_extractive() {
    // OpenAI always fails; Anthropic answers.
    let fake = FakeUpstream::start(
        vec![
            Reply::json(500, json!({})),
            Reply::json(500, json!({})),
            Reply::json(500, json!({})),
        ],
        Reply::anthropic(&[&answer("from anthropic")]),
    )
    .await;
    let app = TestApp::spawn(chain_config(
        &fake,
        "openai:gpt-test,anthropic:claude-test",
        false,
    ))
    .await;
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["model"], "anthropic:claude-test");
    let paths: Vec<String> = fake.received().iter().map(|r| r.path.clone()).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/messages"
        ]
    );

    // Every model fails: the extractive summarizer still answers.
    let fake = FakeUpstream::start(vec![], Reply::json(503, json!({}))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["model"], "extractive");
    assert!(body["summary"].as_str().unwrap().contains("src/lib.rs"));
}

#[tokio::test]
async fn a_rejected_key_moves_on_without_retrying() {
    let fake = FakeUpstream::start(
        vec![Reply::json(
            401,
            json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key"}}),
        )],
        Reply::anthropic(&[&answer("ok")]),
    )
    .await;
    let app = TestApp::spawn(chain_config(
        &fake,
        "openai:gpt-test,anthropic:claude-test",
        false,
    ))
    .await;
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["summary"], answer("ok"));
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn when_every_model_fails_the_client_gets_a_503_with_retry_after() {
    let fake = FakeUpstream::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.post("/v1/compact", &compact_body(PROMPT)).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().get("retry-after").is_some());
    let body = json_of(response).await;
    assert_eq!(body["error"]["code"], "upstream_unavailable");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("HTTP 500"),
        "{body}"
    );
    assert_eq!(fake.received().len(), 3, "first attempt and two retries");
}

#[tokio::test]
async fn the_overall_deadline_bounds_a_hanging_upstream() {
    let fake = FakeUpstream::start(vec![], Reply::Hang(Duration::from_secs(60))).await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.deadline = secs(2.0);
    config.summarizers.first_token_timeout = secs(30.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let response = app.post("/v1/compact", &compact_body(PROMPT)).await;
    let elapsed = started.elapsed();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        elapsed < Duration::from_secs(6),
        "answered after {elapsed:?} with a 2 s deadline"
    );

    // With the extractive fallback the same hang still ends in a summary within the deadline.
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.deadline = secs(2.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(body["model"], "extractive");
    assert!(started.elapsed() < Duration::from_secs(6));
}

#[tokio::test]
async fn an_upstream_overflow_becomes_context_length_exceeded() {
    let openai_overflow = Reply::json(
        400,
        json!({"error": {
        "message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error",
        "param": "messages", "code": "context_length_exceeded"}}),
    );
    let anthropic_overflow = Reply::json(
        400,
        json!({"type": "error", "error": {
        "type": "invalid_request_error", "message": "prompt is too long: 212000 tokens > 200000 maximum"}}),
    );
    for (models, reply) in [
        ("openai:gpt-test", openai_overflow),
        ("anthropic:claude-test", anthropic_overflow),
    ] {
        let fake = FakeUpstream::start(vec![], reply).await;
        let app = TestApp::spawn(chain_config(&fake, models, false)).await;
        let response = app.post("/v1/compact", &compact_body(PROMPT)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{models}");
        let body = json_of(response).await;
        assert_eq!(body["error"]["code"], "context_length_exceeded", "{models}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        assert_eq!(
            fake.received().len(),
            1,
            "{models}: an overflow is not retried"
        );
    }
}

#[tokio::test]
async fn past_the_queue_requests_get_429_with_retry_after() {
    let fake = FakeUpstream::start(vec![], Reply::Hang(Duration::from_secs(3))).await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.max_concurrent = std::num::NonZeroUsize::new(1).unwrap();
    config.summarizers.max_queue = 1;
    config.summarizers.first_token_timeout = secs(2.0);
    let app = std::sync::Arc::new(TestApp::spawn(config).await);

    // One running, one waiting: the third is refused at once.
    let running = tokio::spawn({
        let app = app.clone();
        async move {
            app.post("/v1/compact", &compact_body(PROMPT))
                .await
                .status()
        }
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiting = tokio::spawn({
        let app = app.clone();
        async move {
            app.post("/v1/compact", &compact_body(PROMPT))
                .await
                .status()
        }
    });
    app.wait_for_metric("compactd_summarizer_queue_depth", 1.0)
        .await;
    let started = Instant::now();
    let refused = app.post("/v1/compact", &compact_body(PROMPT)).await;
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
    let fake = FakeUpstream::start(vec![], Reply::openai(&answer("ok"))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let short = "<conversation>\n[User]: x\n</conversation>\n\n<previous-summary>\n## Goal\ny\n</previous-summary>\n\nIn 2-3 sentences, describe the changes as a pull request would.";
    for (body, expected) in [
        (json!({"prompt": PROMPT}), 13_107),
        (json!({"prompt": PROMPT, "maxTokens": 16384}), 16_384),
        (json!({"prompt": PROMPT, "maxTokens": 10_000_000}), 32_000),
        (json!({"prompt": short}), 512),
    ] {
        assert_eq!(
            app.post("/v1/compact", &body).await.status(),
            StatusCode::OK
        );
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
    let fake = FakeUpstream::start(vec![], Reply::openai("the summary of part A part B")).await;
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
    let fake = FakeUpstream::start(vec![], Reply::openai(&summary)).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app
        .post(
            "/v1/chat/completions",
            &json!({"stream": true, "messages": [{"role": "user", "content": PROMPT}]}),
        )
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
    let response = app
        .post("/v1/compact", &json!({"prompt": "x".repeat(10_000)}))
        .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body = json_of(response).await;
    assert_eq!(body["error"]["code"], "request_too_large");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("4096"),
        "{body}"
    );
}

#[tokio::test]
async fn a_429_storm_ends_in_the_fallback_or_a_clear_error_within_the_deadline() {
    let storm = Reply::json(429, json!({"error": {"type": "rate_limit_error"}}))
        .with_header("retry-after", "1");
    let fake = FakeUpstream::start(vec![], storm).await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.deadline = secs(4.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let body = json_of(app.post("/v1/compact", &compact_body(PROMPT)).await).await;
    assert_eq!(
        body["model"], "extractive",
        "the storm ends in the built-in summarizer"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        fake.received().len(),
        3,
        "every retry waited for Retry-After"
    );

    // Without the fallback: a 503 with Retry-After, still within the deadline.
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.deadline = secs(4.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let response = app.post("/v1/compact", &compact_body(PROMPT)).await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(response.headers().get("retry-after").is_some());
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_overflowing_prompt_is_folded_to_the_window_the_model_named() {
    let overflow = Reply::json(
        400,
        json!({"error": {"message": "maximum context length is 8192 tokens",
        "type": "invalid_request_error", "code": "context_length_exceeded"}}),
    );
    let parts: Vec<String> = (0..400)
        .map(|i| format!("[User]: request number {i} {}", "x".repeat(100)))
        .collect();
    let prompt = format!(
        "<conversation>\n{}\n</conversation>\n\n## Goal",
        parts.join("\n\n")
    );

    // Too long once: the model named its window, and the conversation is folded into it.
    let fake = FakeUpstream::start(vec![overflow.clone()], Reply::openai("## Goal\nfolded")).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let body = json_of(app.post("/v1/compact", &compact_body(&prompt)).await).await;
    assert_eq!(body["model"], "openai:gpt-test");
    let received = fake.received();
    let sent: Vec<&str> = received
        .iter()
        .map(|r| r.body["messages"][1]["content"].as_str().unwrap())
        .collect();
    assert_eq!(sent[0], prompt);
    let windows: Vec<&str> = sent[1..]
        .iter()
        .copied()
        .filter(|p| p.starts_with("<conversation>"))
        .collect();
    assert!(windows.len() >= 3, "{} windows", windows.len());
    for (window, request) in windows.iter().zip(&received[1..]) {
        let tokens = compactd::summarizer::estimate_tokens(window)
            + request.body["max_tokens"].as_u64().unwrap();
        assert!(tokens <= 8192, "a window of {tokens} tokens");
    }
    // Nothing left out: every request is in exactly one window, in order.
    for i in 0..400 {
        let needle = format!("[User]: request number {i} ");
        assert_eq!(
            windows
                .iter()
                .map(|w| w.matches(&needle).count())
                .sum::<usize>(),
            1,
            "{needle}"
        );
    }
    assert!(windows[0].contains("request number 0 ") && !windows[0].contains("<previous-summary>"));
    assert!(windows[1].contains("<previous-summary>\n## Goal\nfolded\n</previous-summary>"));
    // The summary keeps the latest request (the gate put it back).
    assert!(
        body["summary"]
            .as_str()
            .unwrap()
            .contains("request number 399 "),
        "{body}"
    );

    // Always too long: folded once more to the window it named, then the overflow error.
    let fake = FakeUpstream::start(vec![], overflow).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.post("/v1/compact", &compact_body(&prompt)).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(
        json_of(response).await["error"]["code"],
        "context_length_exceeded"
    );
    let sizes: Vec<usize> = fake
        .received()
        .iter()
        .map(|r| r.body["messages"][1]["content"].as_str().unwrap().len())
        .collect();
    assert_eq!(sizes.len(), 2, "the whole prompt, then its first window");
    assert!(sizes[1] < sizes[0] / 2, "{sizes:?}");
}
