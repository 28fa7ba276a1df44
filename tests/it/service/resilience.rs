//! The HTTP service when its upstream misbehaves: retries after a 429 or a server error, a hang
//! cut at the first-token timeout, fallback along the chain to the extractive summary, the
//! overall deadline, an overflow turned into context_length_exceeded or folded to the window.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::json;

use crate::service::remote_endpoint::json_of;
use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body, secs,
};

#[tokio::test]
async fn a_429_is_retried_after_the_time_it_asks_for() {
    let fake = FakeProvider::start(
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

    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
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
        let fake = FakeProvider::start(vec![failure], Reply::openai(&answer("recovered"))).await;
        let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
        let response = app.compact(&compact_body(PROMPT)).await;
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
    let fake = FakeProvider::start(
        vec![Reply::Hang(Duration::from_secs(30))],
        Reply::openai(&answer("second try")),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.first_token_timeout = secs(1.0);
    let app = TestApp::spawn(config).await;

    let started = Instant::now();
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
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
    let fake = FakeProvider::start(
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
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
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
    let fake = FakeProvider::start(vec![], Reply::json(503, json!({}))).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", true)).await;
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
    assert_eq!(body["model"], "extractive");
    assert!(body["summary"].as_str().unwrap().contains("src/lib.rs"));
}

#[tokio::test]
async fn a_rejected_key_moves_on_without_retrying() {
    let fake = FakeProvider::start(
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
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
    assert_eq!(body["summary"], answer("ok"));
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn when_every_model_fails_the_client_gets_a_503_with_retry_after() {
    let fake = FakeProvider::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.compact(&compact_body(PROMPT)).await;
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
    let fake = FakeProvider::start(vec![], Reply::Hang(Duration::from_secs(60))).await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.deadline = secs(2.0);
    config.summarizers.first_token_timeout = secs(30.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let response = app.compact(&compact_body(PROMPT)).await;
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
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
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
        let fake = FakeProvider::start(vec![], reply).await;
        let app = TestApp::spawn(chain_config(&fake, models, false)).await;
        let response = app.compact(&compact_body(PROMPT)).await;
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
async fn a_429_storm_ends_in_the_fallback_or_a_clear_error_within_the_deadline() {
    let storm = Reply::json(429, json!({"error": {"type": "rate_limit_error"}}))
        .with_header("retry-after", "1");
    let fake = FakeProvider::start(vec![], storm).await;
    let mut config = chain_config(&fake, "openai:gpt-test", true);
    config.summarizers.deadline = secs(4.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let body = json_of(app.compact(&compact_body(PROMPT)).await).await;
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
    let response = app.compact(&compact_body(PROMPT)).await;
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
    let fake = FakeProvider::start(vec![overflow.clone()], Reply::openai("## Goal\nfolded")).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let body = json_of(app.compact(&compact_body(&prompt)).await).await;
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
        let tokens = compactd_core::transcript::estimate_tokens(window)
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
    let fake = FakeProvider::start(vec![], overflow).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.compact(&compact_body(&prompt)).await;
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
