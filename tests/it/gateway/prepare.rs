//! Zero-wait compaction (issue 67): the agents' recorded sessions replayed through the gateway
//! with a low preparation share, so that their turns pass it. The summary is prepared while the
//! agent works, and its compaction answered from it without a model call; what changed since is
//! merged in (the latest request verbatim, the files, the rules); a changed prefix, a focus and a
//! tenant that turned it off take the normal path.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::gateway::{
    FIXTURES, MODEL_SUMMARY, Recorded, gateway_config, recorded, streamed_text, summarizer_model,
};
use crate::support::{FakeProvider, TestApp};

/// A share every recorded turn passes (their bodies hold the agents' system prompts and tools,
/// 40 kB and more) but that the agents' small side requests do not.
const LOW_SHARE: f64 = 0.02;

pub(crate) fn config(
    model: &FakeProvider,
    provider: &FakeProvider,
) -> compactd::config::ServeConfig {
    let mut config = gateway_config(model, provider);
    config.gateway.prepare_at = LOW_SHARE;
    config
}

/// How many prepared summaries had `outcome` (prepared, refreshed, used, wasted, failed).
pub(crate) async fn prepared_outcome(app: &TestApp, outcome: &str) -> f64 {
    app.metric(&format!(
        r#"compactd_prepared_summaries_total{{outcome="{outcome}"}}"#
    ))
    .await
}

/// Waits until no preparation is running (each is counted before its turn is answered).
pub(crate) async fn settled(app: &TestApp) {
    let started = Instant::now();
    while app.metric("compactd_preparing").await > 0.0 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a preparation never ended"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn send(app: &TestApp, recorded: &Recorded) -> (StatusCode, String) {
    let response = recorded
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

/// Every recorded session of Claude Code and Codex: each compaction after a prepared turn is
/// answered from the prepared summary, with no model call while the agent waits.
#[tokio::test]
async fn recorded_sessions_get_their_compactions_answered_from_the_prepared_summary() {
    let mut answered_at_once = 0;
    for fixture in FIXTURES {
        let model = summarizer_model().await;
        let provider = FakeProvider::wires().await;
        let app = TestApp::spawn(config(&model, &provider)).await;
        let mut prepared_since_compaction = false;
        for recorded in recorded(fixture) {
            if recorded.body.is_none() {
                continue;
            }
            let calls = model.received().len();
            let (status, body) = send(&app, &recorded).await;
            assert_eq!(status, StatusCode::OK, "{fixture} seq {}", recorded.seq);
            if !recorded.compaction {
                settled(&app).await;
                prepared_since_compaction |= model.received().len() > calls;
                continue;
            }
            if prepared_since_compaction {
                assert_eq!(
                    model.received().len(),
                    calls,
                    "{fixture} seq {}: the model was asked while the agent waited",
                    recorded.seq
                );
                let text = if body.starts_with("event:") || body.starts_with("data:") {
                    streamed_text(&recorded, &body)
                } else {
                    body.clone()
                };
                assert!(
                    text.contains(MODEL_SUMMARY.lines().nth(1).unwrap())
                        || body.contains("compactd.v2."),
                    "{fixture} seq {}: {text}",
                    recorded.seq
                );
                answered_at_once += 1;
            }
            prepared_since_compaction = false;
        }
        let used = prepared_outcome(&app, "used").await;
        eprintln!("{fixture}: {used} compactions answered from a prepared summary");
        assert!(used > 0.0, "{fixture}");
        // The preparations are in the call log as what they are.
        let calls: Value = app.get("/v1/calls?limit=100").await.json().await.unwrap();
        let endpoints: Vec<&str> = calls["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["endpoint"].as_str())
            .collect();
        assert!(endpoints.contains(&"gateway:prepared"), "{endpoints:?}");
    }
    assert!(answered_at_once >= 8, "{answered_at_once}");
}

/// A conversation with a standing rule, an edited file, a long tool output and, after the
/// prepared part, more work and a multi-line latest request.
pub(crate) fn messages(latest: &str) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": "Never push to main without a review. Fix the unary minus in src/parser.rs."}),
        json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Edit",
             "input": {"file_path": "src/parser.rs", "old_string": "a", "new_string": "b"}}]}),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "x".repeat(40_000)}]}),
        json!({"role": "assistant", "content": "Fixed in src/parser.rs."}),
        json!({"role": "user", "content": latest}),
    ]
}

pub(crate) fn claude_turn(messages: &[Value]) -> Value {
    json!({"model": "claude-sonnet-4-6", "max_tokens": 1000, "messages": messages})
}

/// Claude Code's compaction of `messages`: its instruction appended as the last user message.
pub(crate) fn claude_compaction(messages: &[Value], focus: Option<&str>) -> Value {
    let compaction = recorded(FIXTURES[0])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    let recorded_messages = compaction.body.as_ref().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    let mut instruction = recorded_messages.last().unwrap().clone();
    if let Some(focus) = focus {
        let text = instruction["content"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(|| {
                instruction["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            });
        instruction["content"] = json!(format!("{text}\n\nAdditional Instructions:\n{focus}"));
    }
    let mut all = messages.to_vec();
    all.push(json!({"role": "assistant", "content": "Writing the test now."}));
    all.push(instruction);
    json!({"model": "claude-sonnet-4-6", "max_tokens": 20000, "messages": all})
}

pub(crate) async fn post_as(app: &TestApp, session: &str, body: &Value) -> (StatusCode, String) {
    let response = app
        .client
        .post(format!("{}/v1/messages", app.url))
        .header("x-claude-code-session-id", session)
        .json(body)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test]
async fn the_answer_merges_what_came_after_the_prepared_part_and_a_changed_prefix_takes_the_normal_path()
 {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(config(&model, &provider)).await;
    let early = messages("Now add a regression test for unary minus.");
    post_as(&app, "s1", &claude_turn(&early)).await;
    settled(&app).await;
    let prepared = model.received().len();
    // One call: the model's summary lacks the rule and the file, and a summary prepared ahead is
    // not repaired by a second call (the gate appends them, and checks them again when it answers).
    assert_eq!(prepared, 1, "prepared with one model call");

    // More work, then a compaction: answered at once, the later request kept whole.
    let mut later = early.clone();
    later.push(json!({"role": "assistant", "content": [
        {"type": "tool_use", "id": "t2", "name": "Write",
         "input": {"file_path": "tests/unary.rs", "content": "#[test] fn neg() {}"}}]}));
    later.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t2", "content": "wrote tests/unary.rs"}]}));
    let latest = "Next:\n1. run the tests\n2. open a pull request for review";
    later.push(json!({"role": "user", "content": latest}));
    let (status, answer) = post_as(&app, "s1", &claude_compaction(&later, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        model.received().len(),
        prepared,
        "no model call while the agent waited"
    );
    let summary: Value = serde_json::from_str(&answer).unwrap();
    let text = summary["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("<summary>"), "{text}");
    for kept in [
        MODEL_SUMMARY.lines().nth(1).unwrap(),
        "tests/unary.rs",
        "2. open a pull request for review",
        "Never push to main without a review",
    ] {
        assert!(text.contains(kept), "{kept}: {text}");
    }
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);

    // Prepared again, then the conversation rewound and edited: never the stale summary.
    post_as(&app, "s1", &claude_turn(&early)).await;
    settled(&app).await;
    let prepared = model.received().len();
    let mut edited = early.clone();
    edited[0] =
        json!({"role": "user", "content": "Fix the binary minus in src/parser.rs instead."});
    let (status, answer) = post_as(&app, "s1", &claude_compaction(&edited, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        model.received().len() > prepared,
        "the normal path: the model wrote it"
    );
    assert!(answer.contains("SUMMARY BY COMPACTD"), "{answer}");
    assert_eq!(prepared_outcome(&app, "wasted").await, 1.0);

    // A focus of its own takes the normal path too.
    post_as(&app, "s2", &claude_turn(&early)).await;
    settled(&app).await;
    let prepared = model.received().len();
    let focused = claude_compaction(&early, Some("Keep only the parser work."));
    post_as(&app, "s2", &focused).await;
    assert!(model.received().len() > prepared, "the normal path");
}

#[tokio::test]
async fn a_tenant_that_turned_it_off_gets_no_work_done_ahead() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = config(&model, &provider);
    // The anonymous tenant, as the setting names it.
    config.gateway.prepare_off_tenants = vec!["-".into()];
    let app = TestApp::spawn(config).await;
    let early = messages("Now add a regression test for unary minus.");
    post_as(&app, "s1", &claude_turn(&early)).await;
    settled(&app).await;
    assert!(model.received().is_empty(), "nothing prepared");
    post_as(&app, "s1", &claude_compaction(&early, None)).await;
    assert!(!model.received().is_empty(), "summarized when asked");
}

/// OpenAI's `responses.compact` (oh-my-pi's first lane on GPT models, the SDK's) is answered from
/// the prepared summary too.
#[tokio::test]
async fn responses_compact_is_answered_from_the_prepared_summary() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(config(&model, &provider)).await;
    let mut input = vec![
        json!({"role": "user", "content": "Always run cargo fmt. Fix the lexer in src/lexer.rs."}),
        json!({"type": "function_call", "call_id": "c1", "name": "shell",
               "arguments": "{\"command\":\"cat src/lexer.rs\"}"}),
        json!({"type": "function_call_output", "call_id": "c1", "output": "y".repeat(40_000)}),
        json!({"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "The lexer drops tabs."}]}),
        json!({"role": "user", "content": "Fix it."}),
    ];
    let turn = json!({"model": "gpt-5.2", "input": input, "stream": true});
    let sent = app
        .client
        .post(format!("{}/v1/responses", app.url))
        .header("session-id", "codex-1")
        .json(&turn)
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), StatusCode::OK);
    sent.text().await.unwrap();
    settled(&app).await;
    let prepared = model.received().len();
    assert!(prepared > 0);
    input.push(json!({"role": "user", "content": "Then add a test for tabs in tests/lexer.rs."}));
    let compacted = app
        .client
        .post(format!("{}/v1/responses/compact", app.url))
        .header("session-id", "codex-1")
        .json(&json!({"model": "gpt-5.2", "input": input}))
        .send()
        .await
        .unwrap();
    assert_eq!(compacted.status(), StatusCode::OK);
    let compacted: Value = compacted.json().await.unwrap();
    assert_eq!(compacted["object"], "response.compaction");
    assert_eq!(model.received().len(), prepared, "answered at once");
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
}

/// A compaction that comes while its session's summary is still being prepared waits for that
/// (most of the way done) rather than starting over: the model is asked once.
#[tokio::test]
async fn a_compaction_during_the_preparation_waits_for_it_instead_of_starting_over() {
    use crate::support::Reply;
    let slow = Reply::openai(MODEL_SUMMARY).after(Duration::from_millis(800));
    let model = FakeProvider::start(vec![], slow).await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(config(&model, &provider)).await;
    let early = messages("Now add a regression test for unary minus.");
    post_as(&app, "s1", &claude_turn(&early)).await;
    // No wait: the compaction comes while the preparation runs.
    let (status, answer) = post_as(&app, "s1", &claude_compaction(&early, None)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(answer.contains("SUMMARY BY COMPACTD"), "{answer}");
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
    let asked = model.received().len();
    settled(&app).await;
    assert_eq!(model.received().len(), asked, "nothing asked after");
    assert!(
        asked <= 2,
        "one summarization (and its repair), not two: {asked}"
    );
}

/// A conversation of about `kib` KiB with an unlisted model (a 128,000-token window).
pub(crate) fn local_turn(kib: usize) -> Value {
    let mut all = messages("Now add a regression test for unary minus.");
    all[2]["content"][0]["content"] = json!("x".repeat(kib * 1024));
    json!({"model": "qwen3-coder", "max_tokens": 1000, "messages": all})
}

/// A session that grows faster than a summary is written is prepared before the share (here
/// 60 % of 128,000 tokens, ~300 KiB), never under half of it; one seen once is not.
#[tokio::test]
async fn a_session_growing_fast_is_prepared_before_the_share() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.prepare_at = 0.6;
    let app = TestApp::spawn(config).await;

    // Seen once at 45 % of the window: its pace is not known, so it waits for the share.
    post_as(&app, "slow", &local_turn(230)).await;
    settled(&app).await;
    assert!(
        model.received().is_empty(),
        "nothing prepared at first sight"
    );

    // Seen at 20 %, then at once at 35 %: at that pace the agent would compact before a summary
    // started at 60 % is ready.
    post_as(&app, "fast", &local_turn(100)).await;
    settled(&app).await;
    assert!(model.received().is_empty(), "under half the share");
    post_as(&app, "fast", &local_turn(180)).await;
    settled(&app).await;
    assert_eq!(model.received().len(), 1, "prepared at 35 % of its window");
    assert_eq!(prepared_outcome(&app, "prepared").await, 1.0);

    // A session without a header, known by the opening of its conversation: the same.
    let headerless = |body: Value| {
        let mut messages = body["messages"].as_array().unwrap().clone();
        messages[0]["content"] = json!("Fix the lexer's handling of unary minus in src/lexer.rs.");
        let body = json!({"model": "qwen3-coder", "max_tokens": 1000, "messages": messages});
        app.client
            .post(format!("{}/v1/messages", app.url))
            .json(&body)
            .send()
    };
    headerless(local_turn(100)).await.unwrap();
    settled(&app).await;
    headerless(local_turn(180)).await.unwrap();
    settled(&app).await;
    assert_eq!(
        model.received().len(),
        2,
        "prepared at 35 % without a header"
    );
}

/// A local model's window is the one the operator set for models compactd does not know.
#[tokio::test]
async fn an_unknown_models_window_is_the_configured_one() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.prepare_at = 0.6;
    config.summarizers.context_window = std::num::NonZeroU64::new(32_768).unwrap();
    let app = TestApp::spawn(config).await;
    // ~100 KiB: a fifth of 128,000 tokens, three quarters of 32,768.
    post_as(&app, "local", &local_turn(100)).await;
    settled(&app).await;
    assert_eq!(
        model.received().len(),
        1,
        "prepared past the share of its window"
    );
}

/// A provider whose answers report `input_tokens` for every turn (Anthropic's shape: most of it
/// cache reads).
async fn reporting_provider(tokens: u64) -> wiremock::MockServer {
    let server = wiremock::MockServer::start().await;
    let answer = json!({"id": "msg", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": tokens - 10, "output_tokens": 1}});
    wiremock::Mock::given(wiremock::matchers::any())
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(answer))
        .mount(&server)
        .await;
    server
}

/// The size the provider reports is the session's measure: a 200 KiB conversation is 40 % of a
/// 128,000-token window at compactd's four bytes a token, 80 % at the two its provider counts.
#[tokio::test]
async fn the_size_the_provider_reports_is_the_sessions_measure() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.prepare_at = 0.6;
    let body = local_turn(200);
    let bytes = body.to_string().len() as u64;
    let reporting = reporting_provider(bytes / 2).await;
    config.gateway.anthropic_upstream = reporting.uri().parse().unwrap();
    let app = TestApp::spawn(config).await;
    post_as(&app, "measured", &body).await;
    settled(&app).await;
    assert!(model.received().is_empty(), "40 % at four bytes a token");
    post_as(&app, "measured", &body).await;
    settled(&app).await;
    assert_eq!(model.received().len(), 1, "80 % as the provider counts it");
}
