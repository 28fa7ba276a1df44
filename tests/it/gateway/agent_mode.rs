//! The gateway's `agent` mode (`COMPACTD_GATEWAY_SUMMARIZER=agent`): the agent's own model
//! writes the summary, through the agent's upstream with the agent's own credentials — but as
//! compactd asks for it (compactd's prompt, not the agent's tools and system blocks), and through
//! every stage; compactd's configured model is not asked.

use serde_json::Value;

use crate::support::gateway::{
    FIXTURES, agent_of, events, gateway_config, recorded, streamed_text, summarizer_model,
};
use crate::support::{FakeProvider, Reply, TestApp};

const AGENT_MODEL_SUMMARY: &str = "## Objective\nWRITTEN BY THE AGENT'S OWN MODEL about calc.py";

#[tokio::test]
async fn in_agent_mode_the_agents_own_model_writes_the_summary_with_its_own_credentials() {
    let model = summarizer_model().await;
    let provider = FakeProvider::start(vec![], Reply::Says(AGENT_MODEL_SUMMARY)).await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.summarizer = compactd::config::GatewaySummarizer::Agent;
    let app = TestApp::spawn(config).await;
    for fixture in FIXTURES {
        let compaction = recorded(fixture)
            .into_iter()
            .find(|r| r.compaction)
            .unwrap();
        let before = provider.received().len();
        let response = compaction
            .request(&app.client, &app.url)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), reqwest::StatusCode::OK, "{fixture}");
        let body = response.text().await.unwrap();
        let asked = provider.received();
        let call = &asked[before];
        let sent: Value = serde_json::from_slice(&call.bytes).unwrap();
        let agent_body = compaction.body.as_ref().unwrap();
        // The agent's model, asked by compactd: not the agent's request passed on.
        assert_eq!(sent["model"], agent_body["model"], "{fixture}");
        assert!(
            sent.get("tools").is_none() && sent.get("input").is_none(),
            "{fixture}"
        );
        assert!(
            sent.to_string().contains("calc.py"),
            "{fixture}: the history is summarized"
        );
        // With the agent's own credentials, as it sent them.
        let credential = |name: &str| call.header(name).map(str::to_owned);
        match agent_of(fixture) {
            "claude-code" => {
                assert_eq!(call.path.as_str(), "/v1/messages");
                assert_eq!(credential("x-api-key").as_deref(), Some("***"));
                let beta = compaction
                    .headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case("anthropic-beta"));
                assert_eq!(
                    credential("anthropic-beta").as_deref(),
                    beta.map(|(_, v)| v.as_str())
                );
            }
            _ => {
                assert_eq!(call.path.as_str(), "/v1/chat/completions");
                assert_eq!(credential("authorization").as_deref(), Some("Bearer ***"));
            }
        }
        // The agent gets that model's summary in its wire.
        let text = match agent_of(fixture) {
            "codex-openai" => {
                let item = events(&body)
                    .into_iter()
                    .find(|e| e["type"] == "response.output_item.done")
                    .unwrap();
                assert_eq!(item["item"]["type"], "compaction");
                continue;
            }
            _ => streamed_text(&compaction, &body),
        };
        assert!(
            text.contains("WRITTEN BY THE AGENT'S OWN MODEL"),
            "{fixture}: {text}"
        );
    }
    assert!(
        model.received().is_empty(),
        "compactd's own model is not asked in agent mode"
    );
}

/// An agent that sends no `anthropic-version` gets compactd's (here the test's own, to tell it
/// apart) on `agent` mode's call, never a version of the gateway's own.
#[tokio::test]
async fn in_agent_mode_compactds_anthropic_version_goes_when_the_agent_sends_none() {
    let model = summarizer_model().await;
    let provider = FakeProvider::start(vec![], Reply::Says(AGENT_MODEL_SUMMARY)).await;
    let mut config = gateway_config(&model, &provider);
    config.gateway.summarizer = compactd::config::GatewaySummarizer::Agent;
    config.summarizers.anthropic_version = "2099-01-01".into();
    let app = TestApp::spawn(config).await;
    let mut compaction = recorded(FIXTURES[0])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    compaction
        .headers
        .retain(|(n, _)| !n.eq_ignore_ascii_case("anthropic-version"));
    let response = compaction
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::OK);
    let asked = provider.received();
    assert_eq!(asked[0].header("anthropic-version"), Some("2099-01-01"));
}
