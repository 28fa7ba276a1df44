//! Standing rules through the gateway (issue 28): Claude Code and Codex carry a compaction's
//! summary into their next requests inside a user message, not in a field of its own. Six
//! compactions in a chain, each request built from the agent's recorded compaction request
//! (`tests/fixtures/agent-requests/`) with the stretch of work since the last one and, after the
//! first, the summary compactd answered where the agent puts it: every rule stated in the first
//! stretch is in the sixth summary's Constraints section, the withdrawn one is replaced by its
//! withdrawal, and neither one-off request became a rule — with the extractive summarizer and
//! behind a model that writes no rule at all. Old user turns are not resent (as when the agent
//! keeps none of them), so what survives was carried by the summaries.

use serde_json::{Value, json};

use crate::gateway_support::{Provider, Recorded, recorded, streamed_text};
use crate::standing_chain::{LOSSY, assert_rules_carried, user_turns};
use crate::support::{FakeUpstream, Reply, TestApp, chain_config};

/// What the agent's model said after each turn.
const RESPONSE_TEXT: &str = "Done. I split the module and ran the tests; all of them pass.";

/// compactd as the gateway, summarizing with `spec` (`extractive`, or the lossy model).
async fn gateway(spec: &str) -> (TestApp, FakeUpstream, Provider) {
    let model = FakeUpstream::start(vec![], Reply::openai(LOSSY)).await;
    let provider = Provider::start().await;
    let mut config = chain_config(&model, spec, false);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.server.uri().parse().unwrap();
    config.gateway.openai_upstream = format!("{}/v1", provider.server.uri()).parse().unwrap();
    (TestApp::spawn(config).await, model, provider)
}

/// A recorded compaction request of `fixture`.
fn compaction(fixture: &'static str, seq: u64) -> Recorded {
    recorded(fixture)
        .into_iter()
        .find(|r| r.seq == seq && r.compaction)
        .unwrap()
}

/// Claude Code's continuation message around `summary`, as 2.1.330 writes it (recorded seq 7).
fn claude_continuation(template: &Recorded, summary: &str) -> String {
    let recorded = recorded(template.fixture)
        .into_iter()
        .find(|r| r.seq == 7)
        .unwrap();
    let text = recorded.body.unwrap()["messages"][0]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str())
        .find(|text| text.contains("being continued from a previous conversation"))
        .unwrap()
        .to_owned();
    text.replace(
        "FAKE SUMMARY: the user asked for small edits; all done.",
        summary,
    )
}

/// Claude Code's request for compaction `round`: its first user message (the recorded reminders,
/// then the previous summary's continuation), the stretch's turns, its summary instruction.
fn claude_body(template: &Recorded, round: usize, previous: Option<&str>) -> Value {
    let mut body = template.body.clone().unwrap();
    let messages = body["messages"].as_array().unwrap();
    let reminder = messages[0]["content"][0].clone();
    let instruction = messages.last().unwrap().clone();
    let mut first = vec![reminder];
    if let Some(summary) = previous {
        first.push(json!({"type": "text", "text": claude_continuation(template, summary)}));
    }
    let mut turns = user_turns(round).into_iter().enumerate();
    let (_, opening) = turns.next().unwrap();
    first.push(json!({"type": "text", "text": opening}));
    let mut out = vec![json!({"role": "user", "content": first})];
    out.push(json!({"role": "assistant", "content": [{"type": "text", "text": RESPONSE_TEXT}]}));
    for (_, text) in turns {
        out.push(json!({"role": "user", "content": text}));
        out.push(
            json!({"role": "assistant", "content": [{"type": "text", "text": RESPONSE_TEXT}]}),
        );
    }
    out.push(instruction);
    body["messages"] = Value::from(out);
    body
}

/// Codex's request for compaction `round` (local compaction, custom provider): its developer
/// prompt, the summary handed over from the last compaction, the stretch, its compaction prompt.
fn codex_body(template: &Recorded, round: usize, previous: Option<&str>) -> Value {
    let mut body = template.body.clone().unwrap();
    let input = body["input"].as_array().unwrap();
    let developer = input[0].clone();
    let prompt = input.last().unwrap().clone();
    let user = |text: String| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]});
    let mut out = vec![developer];
    if let Some(summary) = previous {
        out.push(user(format!("Another language model started to solve this problem and produced a summary of its thinking process. You also have access to the state of the tools that were used by that language model. Use this to build on the work that has already been done and avoid duplicating work. Here is the summary produced by the other language model, use the information in this summary to assist with your own analysis:\n{summary}")));
    }
    for text in user_turns(round) {
        out.push(user(text));
        out.push(
            json!({"type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": RESPONSE_TEXT, "annotations": []}]}),
        );
    }
    out.push(prompt);
    body["input"] = Value::from(out);
    body
}

/// Six compactions through the gateway; the last summary as the agent keeps it.
async fn six_agent_compactions(
    app: &TestApp,
    template: &Recorded,
    body: fn(&Recorded, usize, Option<&str>) -> Value,
) -> String {
    let mut previous: Option<String> = None;
    for round in 0..6 {
        let sent = serde_json::to_vec(&body(template, round, previous.as_deref())).unwrap();
        let response = template
            .request_with_body(&app.client, &app.url, sent)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "round {round}");
        let text = streamed_text(template, &response.text().await.unwrap());
        // Claude Code keeps what is inside the tags; Codex the whole text.
        let summary = match (text.find("<summary>"), text.rfind("</summary>")) {
            (Some(open), Some(close)) => text[open + "<summary>".len()..close].trim(),
            _ => text.trim(),
        };
        previous = Some(summary.to_owned());
    }
    previous.unwrap()
}

async fn rules_survive(fixture: &'static str, seq: u64, spec: &str) {
    let (app, model, provider) = gateway(spec).await;
    let template = compaction(fixture, seq);
    let body = match template.path_and_query.starts_with("/v1/messages") {
        true => claude_body,
        false => codex_body,
    };
    let summary = six_agent_compactions(&app, &template, body).await;
    assert_rules_carried(&summary);
    assert!(
        provider.received().await.is_empty(),
        "compactd answered every compaction"
    );
    if spec != "extractive" {
        assert!(
            summary.starts_with("## Goal\nKeep improving the project."),
            "the model wrote it: {summary}"
        );
        // The model was shown the carried summary as the previous one.
        let shown = model.received();
        assert!(
            shown.iter().any(|r| r.body["messages"][1]["content"]
                .as_str()
                .is_some_and(|p| p.contains("<previous-summary>\n## Goal"))),
            "no request showed the previous summary"
        );
    } else {
        assert!(model.received().is_empty());
    }
}

#[tokio::test]
async fn rules_survive_six_claude_code_compactions_with_the_extractive_summarizer() {
    rules_survive("claude-code-2.1.330", 6, "extractive").await;
}

#[tokio::test]
async fn rules_survive_six_claude_code_compactions_behind_a_lossy_model() {
    rules_survive("claude-code-2.1.330", 6, "openai:gpt-test").await;
}

#[tokio::test]
async fn rules_survive_six_codex_compactions_with_the_extractive_summarizer() {
    rules_survive("codex-0.169.0-custom-provider", 4, "extractive").await;
}

#[tokio::test]
async fn rules_survive_six_codex_compactions_behind_a_lossy_model() {
    rules_survive("codex-0.169.0-custom-provider", 4, "openai:gpt-test").await;
}
