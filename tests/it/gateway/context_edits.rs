//! Claude Code's clearing edits in front of an upstream that does not apply them: compactd takes
//! them out. A turn whose edits clear nothing (Claude Code's `keep: "all"`, every turn) reaches
//! the provider as the agent wrote it but for that one member, JavaScript's lone surrogates
//! included; and the conversation is read as JavaScript wrote it, so that a compaction holding a
//! lone surrogate is still compactd's to answer.

use reqwest::StatusCode;
use serde_json::Value;

use crate::support::TestApp;
use crate::support::fake_provider::FakeProvider;
use crate::support::gateway::{
    MODEL_SUMMARY, Recorded, gateway_config, recorded, streamed_text, summarizer_model,
};

/// The recordings of Claude Code: by hand (2.1.330), and a whole session (2.1.332).
const CLAUDE_CODE: [&str; 2] = ["claude-code-2.1.330", "sessions/claude-code-2.1.332"];
/// Where the test writes half an emoji, as JavaScript's `JSON.stringify` does after a cut.
const CUT: &str = "CUT-EMOJI-HERE";

/// The body of `recorded` with half an emoji at the end of its first user message, as bytes.
fn with_lone_surrogate(recorded: &Recorded, without: &[&str]) -> Vec<u8> {
    let mut body = recorded.body.clone().unwrap();
    let content = body.pointer_mut("/messages/0/content").expect("a message");
    let text = match content {
        Value::String(_) => content,
        _ => content
            .as_array_mut()
            .and_then(|blocks| blocks.iter_mut().rev().find(|b| b["type"] == "text"))
            .map(|block| &mut block["text"])
            .expect("a user text"),
    };
    *text = format!("{}{CUT}", text.as_str().unwrap()).into();
    for key in without {
        body.as_object_mut().unwrap().shift_remove(*key);
    }
    body.to_string().replace(CUT, r"\ud83d").into_bytes()
}

/// compactd applying the clearing edits itself (the fake provider is not Anthropic's API: `auto`
/// would choose the same); the summarizer's model is held with them.
async fn compactd_applying_edits() -> (FakeProvider, TestApp, FakeProvider) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.context_edits = compactd::config::ContextEdits::Compactd;
    let app = TestApp::spawn(config).await;
    (provider, app, model)
}

#[tokio::test]
async fn a_turn_whose_edits_clear_nothing_reaches_the_provider_as_written_but_for_them() {
    let (provider, app, _model) = compactd_applying_edits().await;
    let turns: Vec<Recorded> = CLAUDE_CODE
        .into_iter()
        .flat_map(recorded)
        .filter(|r| !r.compaction && r.body.is_some())
        .collect();
    assert!(turns.len() >= 5);
    for turn in &turns {
        assert!(
            turn.body.as_ref().unwrap()["context_management"].is_object(),
            "Claude Code asks for its edits on every turn"
        );
        let sent = with_lone_surrogate(turn, &[]);
        let response = turn
            .request_with_body(&app.client, &app.url, sent)
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{} seq {}",
            turn.fixture,
            turn.seq
        );
        let received = provider.received();
        let seen = &received.last().unwrap().bytes;
        assert!(
            *seen == with_lone_surrogate(turn, &["context_management"]),
            "{} seq {}: the provider got another body ({} bytes, its edits {})",
            turn.fixture,
            turn.seq,
            seen.len(),
            if String::from_utf8_lossy(seen).contains("context_management") {
                "kept"
            } else {
                "out"
            },
        );
    }
}

#[tokio::test]
async fn a_compaction_holding_a_lone_surrogate_is_answered_by_compactd() {
    let (provider, app, _model) = compactd_applying_edits().await;
    let compaction = recorded(CLAUDE_CODE[1])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    let sent = with_lone_surrogate(&compaction, &[]);
    let response = compaction
        .request_with_body(&app.client, &app.url, sent)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.text().await.unwrap();
    assert!(
        streamed_text(&compaction, &body).contains(MODEL_SUMMARY),
        "{body}"
    );
    assert!(provider.received().is_empty(), "the provider was not asked");
}
