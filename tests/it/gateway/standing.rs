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

use crate::summaries::standing_chain::{LOSSY, assert_rules_carried, user_turns};
use crate::support::gateway::{Recorded, recorded, streamed_text};
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

/// What the agent's model said after each turn.
const RESPONSE_TEXT: &str = "Done. I split the module and ran the tests; all of them pass.";

/// compactd as the gateway, summarizing with `spec` (`extractive`, or the lossy model).
async fn gateway(spec: &str) -> (TestApp, FakeProvider, FakeProvider) {
    let model = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let provider = FakeProvider::wires().await;
    let mut config = chain_config(&model, spec, false);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    (TestApp::spawn(config).await, model, provider)
}

/// A recorded compaction request of `fixture`.
fn compaction(fixture: &'static str, seq: u64) -> Recorded {
    recorded(fixture)
        .into_iter()
        .find(|r| r.seq == seq && r.compaction)
        .unwrap()
}

/// The message in which `fixture`'s agent handed over the fake's summary after its compaction
/// (recorded request `seq`, the text holding `marker`), around `summary` instead.
fn handover(fixture: &'static str, seq: u64, marker: &str, summary: &str) -> String {
    fn texts(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::String(text) => out.push(text.clone()),
            Value::Array(items) => items.iter().for_each(|v| texts(v, out)),
            Value::Object(fields) => fields.values().for_each(|v| texts(v, out)),
            _ => {}
        }
    }
    let request = recorded(fixture)
        .into_iter()
        .find(|r| r.seq == seq)
        .unwrap();
    let mut all = Vec::new();
    texts(&request.body.unwrap(), &mut all);
    let text = all.into_iter().find(|t| t.contains(marker)).unwrap();
    // Claude Code keeps what is inside the fake's tags; Codex the tags too.
    let fake = "FAKE SUMMARY: the user asked for small edits; all done.";
    let tagged = format!("<summary>\n{fake}\n</summary>");
    match text.contains(&tagged) {
        true => text.replace(&tagged, summary),
        false => text.replace(fake, summary),
    }
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
        let continuation = handover(
            template.fixture,
            7,
            "being continued from a previous",
            summary,
        );
        first.push(json!({"type": "text", "text": continuation}));
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
        out.push(user(handover(
            template.fixture,
            5,
            "Another language model",
            summary,
        )));
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
        provider.received().is_empty(),
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
