//! The gateway replayed with what the real agents sent (`tests/fixtures/agent-requests/`,
//! recorded from Claude Code 2.1.330, Codex 0.169.0 and OpenCode 1.18.33): every ordinary request
//! reaches the provider byte for byte with its headers, and its answer comes back as the provider
//! wrote it; every compaction is answered by compactd in the agent's wire, written by compactd's
//! model (the provider never sees it), logged in the call log under the agent's name; Codex's
//! remote compaction item comes back and is expanded before the provider sees it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd_store::{CallRecord, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::FakeProvider;
use crate::support::TestApp;
use crate::support::fake_provider::provider_answer;
use crate::support::gateway::{
    FIXTURES, MODEL_SUMMARY, Recorded, agent_of, codex_trigger_and_next, compaction_item,
    connection_header, events, gateway_config, recorded, streamed_text, summarizer_model,
    with_item,
};

on_both_backends!(
    every_fixture_compaction_is_logged_under_its_agent,
    past_the_budget_every_compaction_goes_to_the_agents_provider_unsummarized,
);

#[tokio::test]
async fn ordinary_requests_reach_the_provider_byte_for_byte_and_come_back_untouched() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut passed = 0;
    for fixture in FIXTURES {
        for recorded in recorded(fixture).into_iter().filter(|r| !r.compaction) {
            let before = provider.received().len();
            let sent = recorded.body_bytes();
            let response = recorded
                .request(&app.client, &app.url)
                .send()
                .await
                .unwrap();
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.text().await.unwrap();
            let received = provider.received();
            if recorded.method == "GET" {
                // Codex's WebSocket attempt: refused by compactd itself with the answer that makes
                // Codex fall back to HTTP at once (a 404 it retries for seconds).
                assert_eq!(status, StatusCode::UPGRADE_REQUIRED);
                assert_eq!(received.len(), before);
                continue;
            }
            assert_eq!(received.len(), before + 1, "{fixture} seq {}", recorded.seq);
            let seen = received.last().unwrap();
            // The provider sees exactly what the agent sent: method, path, query, body, headers
            // (credentials included).
            assert_eq!(seen.method.as_str(), recorded.method);
            assert_eq!(seen.path_and_query(), recorded.path_and_query);
            assert!(
                seen.bytes == sent,
                "{fixture} seq {}: body changed",
                recorded.seq
            );
            for (name, value) in recorded
                .headers
                .iter()
                .filter(|(n, _)| !connection_header(n))
            {
                let got = seen.header(name);
                assert_eq!(
                    got,
                    Some(value.as_str()),
                    "{fixture} seq {}: {name}",
                    recorded.seq
                );
            }
            // The agent sees exactly what the provider answered.
            assert_eq!(status, StatusCode::OK);
            assert_eq!(body, provider_answer(&recorded.path_and_query));
            assert_eq!(headers["x-provider-request-id"], "req_provider_1");
            passed += 1;
        }
    }
    // 25 recorded by hand, 58 in the recorded sessions.
    assert_eq!(passed, 83, "every ordinary POST of the recordings");
    assert!(
        model.received().is_empty(),
        "no ordinary turn reached compactd's model"
    );
}

/// The request compactd's model received for a compaction: the agent's history, without the
/// agent's system prompt, tools or credentials.
fn assert_summarized_history(recorded: &Recorded, sent: &Value) {
    let text = sent.to_string();
    // What the user asked about, or (after an earlier compaction) the summary that holds it.
    let history = text.contains("calc.py") || text.contains("FAKE SUMMARY");
    assert!(
        history,
        "{} seq {}: the history is summarized",
        recorded.fixture, recorded.seq
    );
    for not_there in [
        "dummy",
        "Bearer ***",
        "x-anthropic-billing-header",
        "\"tools\"",
    ] {
        assert!(
            !text.contains(not_there),
            "{} seq {}: {not_there} went to compactd's model",
            recorded.fixture,
            recorded.seq
        );
    }
}

#[tokio::test]
async fn every_recorded_compaction_is_answered_by_compactd_in_the_agents_wire() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut answered = 0;
    for fixture in FIXTURES {
        for recorded in recorded(fixture).into_iter().filter(|r| r.compaction) {
            let asked = model.received().len();
            let response = recorded
                .request(&app.client, &app.url)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            assert!(
                response.headers()["content-type"]
                    .to_str()
                    .unwrap()
                    .starts_with("text/event-stream"),
                "{fixture} seq {}: every recorded compaction streams",
                recorded.seq
            );
            let body = response.text().await.unwrap();
            assert!(
                !body.contains("PROVIDER SAYS OK"),
                "{fixture} seq {}: went to the provider",
                recorded.seq
            );
            let calls = model.received();
            // The summary, and the gate's repair call when it asked for one.
            assert!(
                calls.len() > asked,
                "{fixture} seq {}: compactd's model wrote it",
                recorded.seq
            );
            assert_summarized_history(&recorded, &calls[asked].body);
            let events = events(&body);
            match agent_of(fixture) {
                "claude-code" => {
                    let text = streamed_text(&recorded, &body);
                    // In tags, so Claude Code takes it without asking again.
                    assert!(
                        text.starts_with("<summary>\n") && text.ends_with("\n</summary>"),
                        "{text}"
                    );
                    assert!(text.contains(MODEL_SUMMARY));
                    assert_eq!(events.last().unwrap()["type"], "message_stop");
                    assert!(events[0].pointer("/message/usage/input_tokens").is_some());
                }
                "codex-openai" => {
                    let items: Vec<&Value> = events
                        .iter()
                        .filter(|e| e["type"] == "response.output_item.done")
                        .collect();
                    assert_eq!(items.len(), 1, "exactly one item, as Codex demands");
                    assert_eq!(items[0]["item"]["type"], "compaction");
                    let sealed = items[0]["item"]["encrypted_content"].as_str().unwrap();
                    assert!(sealed.starts_with("compactd.v2."));
                    assert_eq!(events.last().unwrap()["type"], "response.completed");
                }
                "codex-custom" => {
                    assert!(streamed_text(&recorded, &body).contains(MODEL_SUMMARY));
                    assert_eq!(events.last().unwrap()["type"], "response.completed");
                    assert!(
                        events
                            .last()
                            .unwrap()
                            .pointer("/response/usage/output_tokens")
                            .is_some()
                    );
                }
                _ => {
                    assert!(streamed_text(&recorded, &body).contains(MODEL_SUMMARY));
                    assert!(body.ends_with("data: [DONE]\n\n"));
                    assert!(events.last().unwrap()["usage"]["completion_tokens"].is_u64());
                }
            }
            answered += 1;
        }
    }
    // 8 recorded by hand, 4 + 6 + 6 + 4 in the recorded sessions.
    assert_eq!(answered, 28, "every compaction of the recordings");
    assert!(
        provider.received().is_empty(),
        "no compaction reached the provider"
    );
}

#[tokio::test]
async fn codex_gets_its_compaction_item_back_as_the_summary_and_a_forged_one_stays_opaque() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let (trigger, after) = codex_trigger_and_next();
    let body = trigger
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let item = compaction_item(&body);

    // The next turn echoes the item back, as Codex does, in place of the fake's.
    let with_item = |item: &Value| with_item(&after, item);
    let response = after
        .request_with_body(&app.client, &app.url, with_item(&item))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let seen = provider.received().pop().unwrap();
    let seen: Value = serde_json::from_slice(&seen.bytes).unwrap();
    let text = seen.to_string();
    assert!(
        !text.contains("compactd.v2."),
        "the provider cannot read compactd's item"
    );
    let expanded = seen["input"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|i| {
            i.pointer("/content/0/text")
                .and_then(Value::as_str)
                .filter(|t| t.contains(MODEL_SUMMARY))
        })
        .expect("the summary is in the input");
    assert!(expanded.starts_with("Another language model started to solve this problem"));

    // An item someone changed is not compactd's: it goes on untouched.
    let mut forged = item.clone();
    let sealed = forged["encrypted_content"].as_str().unwrap().to_owned();
    let mut content = base64_decode(sealed.trim_start_matches("compactd.v2."));
    let last = content.len() - 1;
    content[last] ^= 0x20;
    forged["encrypted_content"] = json!(format!("compactd.v2.{}", base64_url(&content)));
    let sent = with_item(&forged);
    after
        .request_with_body(&app.client, &app.url, sent.clone())
        .send()
        .await
        .unwrap();
    let seen = provider.received().pop().unwrap();
    assert!(seen.bytes == sent, "a forged item is passed on as it came");
}

fn base64_decode(text: &str) -> Vec<u8> {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text)
        .unwrap()
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The tenant's call-log rows once there are `count`.
async fn rows(store: &dyn Store, tenant: &str, count: usize) -> Vec<CallRecord> {
    let started = Instant::now();
    loop {
        let rows = store.calls(tenant, None, 100).await.unwrap();
        if rows.len() >= count {
            return rows;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{rows:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn every_fixture_compaction_is_logged_under_its_agent(store: Arc<dyn Store>) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::with_store(gateway_config(&model, &provider), store.clone()).await;
    let mut expected = Vec::new();
    for fixture in FIXTURES {
        let recorded = recorded(fixture);
        let first = recorded.iter().find(|r| r.compaction).unwrap();
        let response = first.request(&app.client, &app.url).send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap();
        assert_eq!(status, StatusCode::OK, "{body}");
        expected.push(match agent_of(fixture) {
            "claude-code" => "gateway:claude-code",
            "codex-custom" => "gateway:codex",
            "codex-openai" => "gateway:codex-remote",
            _ => "gateway:opencode",
        });
    }
    let mut logged: Vec<String> = rows(store.as_ref(), "", FIXTURES.len())
        .await
        .into_iter()
        .inspect(|row| {
            assert_eq!(row.outcome, "ok");
            assert!(
                row.model
                    .as_deref()
                    .unwrap()
                    .contains("compactd-summarizer")
            );
            assert!(row.prompt_bytes > 0);
        })
        .map(|row| row.endpoint)
        .collect();
    logged.sort();
    expected.sort();
    assert_eq!(logged, expected);
}

/// Recorded from the real Claude Code 2.1.330 (`real_agents.rs`): after a tool call it appends
/// its summary instruction to the user message that carries the tool's result.
#[tokio::test]
async fn a_claude_code_compaction_after_a_tool_call_keeps_the_tools_result() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let path = format!(
        "{}/tests/fixtures/agent-requests/claude-code-2.1.330-tool-history.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let body = std::fs::read(path).unwrap();
    let recorded = recorded(FIXTURES[0])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    let response = recorded
        .request_with_body(&app.client, &app.url, body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(streamed_text(&recorded, &response.text().await.unwrap()).contains(MODEL_SUMMARY));
    let asked = model.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    let (conversation, instructions) = asked.split_once("</conversation>").unwrap();
    let call = conversation.find("Read(file_path=").expect("the tool call");
    let result = conversation
        .find("return a + b")
        .expect("the tool's result");
    assert!(call < result, "{conversation}");
    assert!(!conversation.contains("CRITICAL: Respond with TEXT ONLY"));
    assert!(instructions.contains("Your task is to create a detailed summary"));
    assert!(provider.received().is_empty());
}

/// With only the extractive summarizer behind it, OpenCode still gets its own template back.
#[tokio::test]
async fn opencodes_template_is_followed_by_the_extractive_summarizer() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    let app = TestApp::spawn(config).await;
    let compaction = recorded("opencode-1.18.33")
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    let response = compaction
        .request(&app.client, &app.url)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = streamed_text(&compaction, &response.text().await.unwrap());
    let headings: Vec<&str> = text.lines().filter(|l| l.starts_with('#')).collect();
    assert_eq!(
        headings,
        [
            "## Objective",
            "## Important Details",
            "## Work State",
            "### Completed",
            "### Active",
            "### Blocked",
            "## Next Move",
            "## Relevant Files"
        ],
        "{text}"
    );
    assert!(text.contains("calc.py"), "{text}");
    assert!(model.received().is_empty());
}

/// OpenCode's second compaction carries the first summary in its instructions
/// (`<prior-summary>`): the extractive summarizer carries it on.
#[tokio::test]
async fn opencodes_prior_summary_is_carried_into_the_next_one() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    let app = TestApp::spawn(config).await;
    let second = recorded("opencode-1.18.33")
        .into_iter()
        .find(|r| r.compaction && r.seq == 8)
        .unwrap();
    assert!(
        second
            .body_bytes()
            .windows(15)
            .any(|w| w == b"<prior-summary>")
    );
    let response = second.request(&app.client, &app.url).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = streamed_text(&second, &response.text().await.unwrap());
    assert!(
        text.contains("FAKE SUMMARY: the user asked for small edits"),
        "{text}"
    );
}

/// Past the tenant's budget the gateway decides before any work (issue 65): every agent's
/// compaction goes to its own provider as it came; compactd's model is never asked, no summary
/// is written, gated or kept for recall, and the call log says the budget was spent.
async fn past_the_budget_every_compaction_goes_to_the_agents_provider_unsummarized(
    store: Arc<dyn Store>,
) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    // Every request is summarized anew (a cached summary would answer at no cost).
    config.summarizers.stages.cache_bytes = 0;
    let app = TestApp::with_store(config, store.clone()).await;
    store.set_budget("", Some(1), 0).await.unwrap();
    // One paid call spends it (the fake reports 127 tokens a call).
    let first = recorded(FIXTURES[0])
        .into_iter()
        .find(|r| r.compaction)
        .unwrap();
    let paid = first.request(&app.client, &app.url).send().await.unwrap();
    assert_eq!(paid.status(), StatusCode::OK);
    let _ = rows(store.as_ref(), "", 1).await;
    let asked = model.received().len();
    let mut forwarded = 0;
    for fixture in FIXTURES {
        let recorded = recorded(fixture);
        let compaction = recorded.iter().find(|r| r.compaction).unwrap();
        let before = provider.received().len();
        let response = compaction
            .request(&app.client, &app.url)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{fixture}");
        let body = response.text().await.unwrap();
        assert_eq!(
            body,
            provider_answer(&compaction.path_and_query),
            "{fixture}"
        );
        assert_eq!(provider.received().len(), before + 1, "{fixture}");
        forwarded += 1;
    }
    assert_eq!(model.received().len(), asked, "compactd's model was asked");
    let logged = rows(store.as_ref(), "", 1 + forwarded).await;
    let spent = logged
        .iter()
        .filter(|row| row.outcome == "budget_spent")
        .count();
    assert_eq!(spent, forwarded, "{logged:?}");
    assert!(
        logged
            .iter()
            .all(|row| row.outcome != "budget_spent" || row.model.is_none())
    );
}
