//! Zero-wait for sessions that stop short of their trigger (issue 67): a session past half the
//! share with no summary kept is prepared once it has been idle, whether its agent names it by a
//! session header or not (then it is known by the opening of its conversation); a session that
//! compacted meanwhile is not, whatever named its compaction.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::prepare::{claude_compaction, local_turn, post_as, prepared_outcome, settled};
use crate::support::FakeProvider;
use crate::support::TestApp;
use crate::support::gateway::{gateway_config, summarizer_model};
use compactd_core::transcript::{Dialect, write};
use compactd_core::wire::Wire;

const PREPARED: &str = r#"compactd_prepared_summaries_total{outcome="prepared"}"#;

/// Sessions idle after `idle` past half of a 60 % share.
async fn idle_app(idle: Duration) -> (crate::support::FakeProvider, FakeProvider, TestApp) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.prepare_at = 0.6;
    config.gateway.prepare_idle = idle;
    let app = TestApp::spawn(config).await;
    (model, provider, app)
}

/// A turn at 45 % of the window (half the share and more, under it), its conversation opening
/// with `opening`.
fn turn_opening(opening: &str) -> Value {
    let mut turn = local_turn(230);
    turn["messages"][0]["content"] = json!(opening);
    turn
}

/// The compaction of `turn`'s conversation, after one more answer.
fn compaction_of(turn: &Value) -> Value {
    claude_compaction(&turn["messages"].as_array().unwrap()[..5], None)
}

/// Posts `body` naming no session.
async fn post_bare(app: &TestApp, body: &Value) -> StatusCode {
    let response = app
        .client
        .post(format!("{}/v1/messages", app.url))
        .json(body)
        .send()
        .await
        .unwrap();
    response.status()
}

/// A session that stops past half the share, with no summary kept, is prepared once idle.
#[tokio::test]
async fn a_session_idle_past_half_the_share_is_prepared() {
    let (model, _provider, app) = idle_app(Duration::from_secs(2)).await;
    let started = Instant::now();
    post_as(&app, "idle", &local_turn(230)).await;
    if started.elapsed() < Duration::from_secs(2) {
        assert!(model.received().is_empty(), "not before it is idle");
    }
    app.wait_for_metric(PREPARED, 1.0).await;
    assert_eq!(model.received().len(), 1);
    // Its compaction is answered from it.
    let (status, _) = post_as(&app, "idle", &compaction_of(&local_turn(230))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
}

/// The same for a session that names no session header, once seen on a second turn (a request
/// made once is not prepared for): it is known by its conversation's opening while it waits, and
/// its compaction finds the summary by it.
#[tokio::test]
async fn a_session_without_a_header_idle_past_half_the_share_is_prepared() {
    let (model, _provider, app) = idle_app(Duration::from_secs(1)).await;
    let once = turn_opening("Explain what src/lexer.rs does, once.");
    assert_eq!(post_bare(&app, &once).await, StatusCode::OK);
    let turn = turn_opening("Fix the lexer's handling of unary minus in src/lexer.rs.");
    for _ in 0..2 {
        assert_eq!(post_bare(&app, &turn).await, StatusCode::OK);
    }
    app.wait_for_metric(PREPARED, 1.0).await;
    settled(&app).await;
    assert_eq!(
        prepared_outcome(&app, "prepared").await,
        1.0,
        "not the request made once"
    );
    assert_eq!(model.received().len(), 1);
    assert_eq!(post_bare(&app, &compaction_of(&turn)).await, StatusCode::OK);
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
    assert_eq!(model.received().len(), 1, "answered without a model call");
}

/// A session without a header that compacts before its idle time is not prepared after it
/// (its held turn is of a conversation that no longer is); another, idle, is.
#[tokio::test]
async fn a_session_compacted_before_its_idle_time_is_not_prepared_after_it() {
    let (model, _provider, app) = idle_app(Duration::from_secs(3)).await;
    let compacted = turn_opening("Session one: fix the unary minus in src/lexer.rs.");
    for _ in 0..2 {
        assert_eq!(post_bare(&app, &compacted).await, StatusCode::OK);
    }
    assert_eq!(
        post_bare(&app, &compaction_of(&compacted)).await,
        StatusCode::OK
    );
    let calls = model.received().len();
    assert!(calls > 0, "compacted on the normal path");
    // Another session idle after it: its timer ends after the first's.
    let idle = turn_opening("Session two: document the --strict flag in README.md.");
    for _ in 0..2 {
        assert_eq!(post_bare(&app, &idle).await, StatusCode::OK);
    }
    app.wait_for_metric(PREPARED, 1.0).await;
    settled(&app).await;
    assert_eq!(prepared_outcome(&app, "prepared").await, 1.0);
    let received = model.received();
    assert_eq!(
        received.len(),
        calls + 1,
        "one preparation, the idle session's"
    );
    let asked = received.last().unwrap().body.to_string();
    assert!(asked.contains("Session two"), "{asked:.300}");
    assert!(!asked.contains("Session one"));
}

/// A session whose turns carry a header and whose compaction names none (a pi-family agent's
/// remote endpoint, `POST /v1/compact`, the conversation written into its prompt) is not
/// prepared after that compaction either: the compaction is known by the conversation's
/// opening, and so is the held turn.
#[tokio::test]
async fn a_session_compacted_by_its_remote_endpoint_is_not_prepared_after_it() {
    let (model, _provider, app) = idle_app(Duration::from_secs(3)).await;
    let compacted = turn_opening("Session one: fix the unary minus in src/lexer.rs.");
    post_as(&app, "remote-one", &compacted).await;
    let conversation = compacted["messages"].as_array().unwrap();
    let typed = Wire::AnthropicMessages.messages(conversation).messages;
    let prompt = format!(
        "<conversation>\n{}\n</conversation>\n\nSummarize the conversation above.\n\n## Goal\n[goals]",
        write(Dialect::Anthropic, &typed)
    );
    let response = app
        .compact(&json!({"systemPrompt": "You summarize coding sessions.", "prompt": prompt}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let calls = model.received().len();
    assert!(calls > 0, "compacted on the normal path");
    // Another session idle after it: its timer ends after the first's.
    let idle = turn_opening("Session two: document the --strict flag in README.md.");
    post_as(&app, "remote-two", &idle).await;
    app.wait_for_metric(PREPARED, 1.0).await;
    settled(&app).await;
    assert_eq!(prepared_outcome(&app, "prepared").await, 1.0);
    let received = model.received();
    assert_eq!(received.len(), calls + 1, "one preparation, the second's");
    let asked = received.last().unwrap().body.to_string();
    assert!(asked.contains("Session two"), "{asked:.300}");
}
