//! Upstream answers are streamed and timed the way slow models need: a limit for the first token
//! and for pauses between tokens, no limit on a model that keeps writing (before the deadline).
//! And every server's way of saying "the prompt is too long" is handled as an overflow: the
//! prompt is fitted to the window the server named, and never sent larger than a known window.

use std::time::{Duration, Instant};

use compactd_core::transcript::estimate_tokens;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config, compact_body, secs};

async fn summary_of(app: &TestApp, prompt: &str) -> Value {
    let response = app.compact(&compact_body(prompt)).await;
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// A prompt whose conversation is `turns` turns of about 100 characters.
fn long_prompt(turns: usize) -> String {
    let conversation: Vec<String> = (0..turns)
        .map(|i| {
            format!(
                "[User]: step {i}: change src/file{i}.rs so that it {}",
                "does more ".repeat(7)
            )
        })
        .collect();
    format!(
        "<conversation>\n{}\n</conversation>\n\nSummarize. ## Critical Context",
        conversation.join("\n\n")
    )
}

fn timed(
    fake: &FakeProvider,
    models: &str,
    first_token: f64,
    idle: f64,
) -> compactd::config::ServeConfig {
    let mut config = chain_config(fake, models, false);
    config.summarizers.first_token_timeout = secs(first_token);
    config.summarizers.idle_timeout = secs(idle);
    config.summarizers.deadline = secs(20.0);
    config
}

#[tokio::test]
async fn a_model_that_keeps_writing_is_not_cut_off() {
    // Twelve pieces, 400 ms apart: the answer takes ~5 s, far past the first-token and idle
    // limits, and is taken whole.
    let pieces: Vec<String> = (0..12).map(|i| format!("part{i} ")).collect();
    let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    let fake = FakeProvider::start(
        vec![],
        Reply::openai_stream(&pieces, Duration::from_millis(400)),
    )
    .await;
    let app = TestApp::spawn(timed(&fake, "openai:m", 1.0, 1.0)).await;
    let started = Instant::now();
    let body = summary_of(
        &app,
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarize.",
    )
    .await;
    assert!(started.elapsed() > Duration::from_secs(4));
    assert_eq!(body["summary"], pieces.concat());
    assert_eq!(
        body["usage"],
        json!({"inputTokens": 300, "outputTokens": 20})
    );
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn a_model_that_stops_writing_is_cut_at_the_idle_limit_and_asked_again() {
    let stalls = Reply::Stream(vec![
        (
            Duration::ZERO,
            "data: {\"choices\":[{\"delta\":{\"content\":\"## Goal\"}}]}\n\n".into(),
        ),
        (Duration::from_secs(30), String::new()),
    ]);
    let never_starts = Reply::Stream(vec![(Duration::from_secs(30), String::new())]);
    let fake = FakeProvider::start(
        vec![stalls, never_starts],
        Reply::openai_stream(&["## Goal\n", "done"], Duration::from_millis(10)),
    )
    .await;
    let app = TestApp::spawn(timed(&fake, "openai:m", 1.0, 1.0)).await;
    let started = Instant::now();
    let body = summary_of(
        &app,
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarize.",
    )
    .await;
    assert_eq!(body["summary"], "## Goal\ndone");
    assert_eq!(
        fake.received().len(),
        3,
        "the stalled answer and the silent one were retried"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed > Duration::from_secs(2) && elapsed < Duration::from_secs(8),
        "idle and first-token limits of 1 s: {elapsed:?}"
    );
}

#[tokio::test]
async fn reasoning_tokens_keep_a_model_alive() {
    let mut events: Vec<(Duration, String)> = (0..6)
        .map(|_| {
            (
                Duration::from_millis(500),
                "data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hmm \"}}]}\n\n".to_owned(),
            )
        })
        .collect();
    events.push((
        Duration::from_millis(500),
        "data: {\"choices\":[{\"delta\":{\"content\":\"## Goal\\nthe answer\"}}]}\n\ndata: [DONE]\n\n".into(),
    ));
    let fake = FakeProvider::start(vec![], Reply::Stream(events)).await;
    let app = TestApp::spawn(timed(&fake, "openai:m", 1.0, 1.0)).await;
    let body = summary_of(
        &app,
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarize.",
    )
    .await;
    assert_eq!(
        body["summary"], "## Goal\nthe answer",
        "reasoning is not part of the summary"
    );
    assert_eq!(fake.received().len(), 1);
}

#[tokio::test]
async fn errors_inside_a_stream_are_classified() {
    // OpenAI-compatible servers put an error object in a data line; Anthropic sends an `error`
    // event (overloaded in the middle of an answer).
    let openai_error = Reply::Stream(vec![(
        Duration::ZERO,
        "data: {\"error\":{\"message\":\"The server is overloaded\",\"type\":\"server_error\",\"code\":503}}\n\n".into(),
    )]);
    let fake = FakeProvider::start(
        vec![openai_error],
        Reply::openai_stream(&["recovered"], Duration::ZERO),
    )
    .await;
    let app = TestApp::spawn(timed(&fake, "openai:m", 5.0, 5.0)).await;
    let body = summary_of(
        &app,
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarize.",
    )
    .await;
    assert_eq!(body["summary"], "recovered");
    assert_eq!(fake.received().len(), 2);

    let event =
        |name: &str, data: Value| (Duration::ZERO, format!("event: {name}\ndata: {data}\n\n"));
    let overloaded = Reply::Stream(vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 40}}}),
        ),
        event(
            "error",
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]);
    let answer = Reply::Stream(vec![
        event(
            "message_start",
            json!({"type": "message_start", "message": {"usage": {"input_tokens": 41, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "let me see"}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        ),
        event("ping", json!({"type": "ping"})),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "part one"}}),
        ),
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
        ),
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "part two"}}),
        ),
        event(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}),
        ),
        event("message_stop", json!({"type": "message_stop"})),
    ]);
    let fake = FakeProvider::start(vec![overloaded], answer).await;
    let app = TestApp::spawn(timed(&fake, "anthropic:c", 5.0, 5.0)).await;
    let body = summary_of(
        &app,
        "<conversation>\n[User]: hi\n</conversation>\n\nSummarize.",
    )
    .await;
    assert_eq!(body["summary"], "part one\npart two");
    assert_eq!(body["usage"], json!({"inputTokens": 41, "outputTokens": 9}));
    assert_eq!(
        fake.received().len(),
        2,
        "the overloaded answer was retried"
    );
}

/// The prompts the fake received, by attempt.
fn prompts(fake: &FakeProvider) -> Vec<String> {
    fake.received()
        .iter()
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn every_servers_overflow_is_handled_as_an_overflow() {
    // Real bodies (see src/summarizer/overflow.rs for where each comes from).
    let cases = [
        (
            "llama.cpp",
            400,
            r#"{"error":{"code":400,"message":"request (95416 tokens) exceeds the available context size (16384 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":95416,"n_ctx":16384}}"#,
            Some(16384u64),
        ),
        (
            "llama-cpp-python",
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 12041 tokens (12031 in the messages, 10 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            Some(8192),
        ),
        (
            "vLLM",
            400,
            r#"{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 1000 output tokens and your prompt contains at least 12001 input tokens, for a total of at least 13001 tokens. Please reduce the length of the input prompt or the number of requested output tokens.","type":"BadRequestError","param":null,"code":400}}"#,
            Some(4096),
        ),
        (
            "LM Studio",
            400,
            r#"{"error":"Trying to keep the first 12269 tokens when context the overflows. However, the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}"#,
            Some(4096),
        ),
        (
            "Ollama",
            500,
            r#"{"error":{"message":"the input length exceeds the context length","type":"api_error","param":null,"code":null}}"#,
            None,
        ),
        (
            "OpenAI",
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 12500 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
            Some(8192),
        ),
    ];
    // About 10 000 tokens by the reference's estimate; the servers' own counts (in the bodies)
    // are higher, as real tokenizers count code.
    let prompt = long_prompt(400);
    for (server, status, body, window) in cases {
        let fake = FakeProvider::start(
            vec![Reply::raw("application/json", body).with_status(status)],
            Reply::openai_stream(&["## Goal\nfitted"], Duration::ZERO),
        )
        .await;
        let app = TestApp::spawn(timed(&fake, "openai:m", 5.0, 5.0)).await;
        let answer = summary_of(&app, &prompt).await;
        let summary = answer["summary"].as_str().unwrap();
        assert!(
            summary.starts_with("## Goal\nfitted"),
            "{server}: {summary}"
        );
        assert!(
            summary.contains("step 399:"),
            "{server}: the latest request is kept"
        );
        let sent = prompts(&fake);
        // The whole prompt, then its windows (and the gate's repair request).
        let windows: Vec<&String> = sent[1..]
            .iter()
            .filter(|p| p.starts_with("<conversation>"))
            .collect();
        assert!(
            windows.len() >= 2,
            "{server}: folded, not given up as a rejection"
        );
        assert!(
            windows.iter().all(|w| w.len() < sent[0].len()),
            "{server}: every window is smaller"
        );
        assert!(
            windows[0].contains("step 0:") && windows.last().unwrap().contains("step 399:"),
            "{server}: the first window opens, the last one ends the conversation"
        );
        if let Some(window) = window {
            // Fitted to the window the server named, output cap included.
            for (prompt, request) in sent.iter().zip(fake.received()).skip(1) {
                let max_tokens = request.body["max_tokens"].as_u64().unwrap();
                assert!(max_tokens <= window / 4, "{server}: {max_tokens}");
                assert!(estimate_tokens(prompt) + max_tokens <= window, "{server}");
            }
        }
    }
}

#[tokio::test]
async fn a_silent_stream_is_asked_again_without_streaming() {
    // llama-cpp-python answers an overflowing streamed request with a 200 and an empty stream;
    // asked without streaming, it says why.
    let silent = Reply::Stream(vec![]);
    let overflow = Reply::json(
        400,
        json!({"error":{"message":"This model's maximum context length is 8192 tokens. However, you requested 40000 tokens (39990 in the messages, 10 in the completion). Please reduce the length of the messages or completion.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}),
    );
    let fake = FakeProvider::start(
        vec![silent, overflow],
        Reply::openai_stream(&["## Goal\nok"], Duration::ZERO),
    )
    .await;
    let app = TestApp::spawn(timed(&fake, "openai:m", 5.0, 5.0)).await;
    let answer = summary_of(&app, &long_prompt(400)).await;
    assert!(
        answer["summary"]
            .as_str()
            .unwrap()
            .starts_with("## Goal\nok")
    );
    let received = fake.received();
    assert!(received.len() >= 4, "{}", received.len());
    assert_eq!(received[0].body["stream"], true);
    assert_eq!(received[1].body["stream"], false);
    // Then folded to the window the unstreamed answer named, streaming again.
    for request in &received[2..] {
        assert_eq!(request.body["stream"], true);
        assert!(estimate_tokens(request.body["messages"][1]["content"].as_str().unwrap()) < 8192);
    }
}

#[tokio::test]
async fn a_known_window_is_never_exceeded_and_options_are_sent() {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai_stream(&["## Goal\nsmall"], Duration::ZERO),
    )
    .await;
    let mut config = timed(&fake, "openai:qwen2.5-coder:0.5b@4096", 5.0, 5.0);
    config.summarizers.model_options = serde_json::from_str(r#"{"openai:qwen2.5-coder:0.5b": {"temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.1}, "*": {"seed": 7}}"#).unwrap();
    let app = TestApp::spawn(config).await;
    let prompt = long_prompt(600);
    assert!(
        estimate_tokens(&prompt) > 4 * 4096,
        "the prompt is far over the window"
    );
    summary_of(&app, &prompt).await;
    let received = fake.received();
    // Folded before sending (no overflow to learn from): at least four windows.
    assert!(received.len() >= 4, "{}", received.len());
    assert!(
        received[0].body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("step 0:")
    );
    for request in &received {
        let sent = &request.body;
        assert_eq!(sent["model"], "qwen2.5-coder:0.5b");
        let max_tokens = sent["max_tokens"].as_u64().unwrap();
        let prompt_sent = sent["messages"][1]["content"].as_str().unwrap();
        assert!(
            estimate_tokens(prompt_sent) + max_tokens <= 4096,
            "{}",
            estimate_tokens(prompt_sent)
        );
        assert_eq!(
            (sent["temperature"].as_f64(), sent["top_p"].as_f64()),
            (Some(0.7), Some(0.8))
        );
        assert_eq!(sent["repeat_penalty"].as_f64(), Some(1.1));
        assert_eq!(sent["seed"], 7);
    }
}
