//! Every path that sends text to a model or stores a summary goes through the same redaction
//! (issue 52): every family of secret, planted in the conversation, reaches no model and no
//! stored or returned summary — on the agent wire, a session compaction, a branch summary, the
//! gateway's three wires, the windows of a fold and the gate's repair call.

use std::sync::Arc;

use compactd_store::Store;
use compactd_testkit::samples;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::redaction::line;
use crate::support::gateway::{gateway_config, recorded};
use crate::support::{FakeProvider, Reply, TestApp, chain_config, compact_body};

on_both_backends!(a_session_compaction_and_a_branch_summary_send_and_store_no_secret);

/// `(secret, a text holding it)`: every family of the built-in rules as sessions hold them,
/// as tools write them, and shapes reported to slip through (a Discord bot token in code, a
/// Heroku key exported in a shell, in its old and its `HRKU-` form).
fn planted(seed: u64) -> Vec<(String, String)> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut of = |alphabet: &[u8], n: usize| -> String {
        (0..n)
            .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
            .collect()
    };
    const HEX: &[u8] = b"0123456789abcdef";
    const URLSAFE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        of(HEX, 8),
        of(HEX, 4),
        of(HEX, 4),
        of(HEX, 4),
        of(HEX, 12)
    );
    let hrku = format!("HRKU-AA{}", of(URLSAFE, 58));
    let mut out: Vec<(String, String)> = samples::all(seed)
        .into_iter()
        .map(|s| (s.secret, s.line))
        .chain(samples::tool_shapes(seed))
        .collect();
    out.push((uuid.clone(), format!("export HEROKU_API_KEY={uuid}")));
    out.push((hrku.clone(), format!("export HEROKU_API_KEY={hrku}")));
    out.push((hrku.clone(), format!("heroku auth:token\n{hrku}")));
    out
}

/// Each secret's forms that would give it away: as written, and as JSON writes it.
fn forms(secret: &str) -> Vec<String> {
    let json = serde_json::to_string(secret).unwrap();
    let json = json.trim_matches('"').to_owned();
    let mut forms = vec![secret.to_owned()];
    if json != secret {
        forms.push(json);
    }
    // A multi-line secret (a private key) by a line of its middle.
    if let Some(line) = secret.lines().nth(2) {
        forms.push(line.to_owned());
    }
    forms
}

#[track_caller]
fn assert_none_in(planted: &[(String, String)], places: &[(String, String)]) {
    assert!(!places.is_empty());
    for (secret, text) in planted {
        for form in forms(secret) {
            for (what, body) in places {
                if let Some(at) = body.find(&form) {
                    panic!(
                        "{form} (planted as {text:?}) is in {what}: …{}…",
                        &body[at.saturating_sub(60)..(at + form.len() + 20).min(body.len())]
                    );
                }
            }
        }
    }
}

fn model_calls(fake: &FakeProvider) -> Vec<(String, String)> {
    fake.received()
        .into_iter()
        .map(|r| (format!("a model call to {}", r.path), r.body.to_string()))
        .collect()
}

/// A rendered prompt whose turns hold every planted text (user text, a call, its result).
fn prompt_with(planted: &[(String, String)], filler: usize) -> String {
    let mut turns = String::new();
    for (n, (_, text)) in planted.iter().enumerate() {
        turns.push_str(&format!(
            "[User]: step {n}: {text}\n\n[Assistant tool calls]: bash(command={})\n\n[Tool result]: {}\n\n[Assistant]: working on it. {}\n\n",
            serde_json::to_string(text).unwrap(),
            text,
            "Still working on it. ".repeat(filler)
        ));
    }
    turns.push_str("[User]: now fix src/lib.rs");
    compactd_core::transcript::prompt::history_prompt(
        &compactd_core::prompts::Prompts::builtin(),
        &turns,
        None,
        None,
    )
}

#[tokio::test]
async fn the_agent_wire_the_fold_and_the_repair_call_send_no_secret() {
    let planted = planted(52);
    // The model forgets the latest request, so the gate asks again (the repair call).
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nWork on it.")).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.compact(&compact_body(&prompt_with(&planted, 0))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer = response.text().await.unwrap();
    let calls = model_calls(&fake);
    assert!(calls.len() >= 2, "the summary and the gate's repair call");
    let mut places = calls;
    places.push(("the answer".into(), answer));
    assert_none_in(&planted, &places);

    // A window small enough that the same conversation is folded: every window's call.
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nfix src/lib.rs")).await;
    let app = TestApp::spawn(chain_config(&fake, "openai:small@4096", false)).await;
    let response = app.compact(&compact_body(&prompt_with(&planted, 40))).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let mut places = model_calls(&fake);
    assert!(
        places.len() > 10,
        "folded over windows: {} calls",
        places.len()
    );
    places.push(("the answer".into(), body.to_string()));
    assert_none_in(&planted, &places);
}

#[tokio::test]
async fn the_gateway_sends_no_secret_on_any_wire() {
    let planted = planted(53);
    let model = FakeProvider::start(vec![], Reply::openai("## Goal\nWork on it.")).await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let all: String = planted
        .iter()
        .map(|(_, text)| format!("{text}\n"))
        .collect();
    for fixture in [
        "claude-code-2.1.330",
        "codex-0.169.0-custom-provider",
        "codex-0.169.0-openai-provider",
        "opencode-1.18.33",
    ] {
        let compaction = recorded(fixture)
            .into_iter()
            .find(|r| r.compaction)
            .unwrap();
        let mut body = compaction.body.clone().unwrap();
        // The secrets in the history's first user message, where a user pastes them.
        let list = if body.get("messages").is_some() {
            "messages"
        } else {
            "input"
        };
        let first = body[list]
            .as_array()
            .unwrap()
            .iter()
            .position(|m| m["role"] == "user")
            .unwrap();
        body[list][first]["content"] = json!(format!("Set up the deploy with these:\n{all}"));
        let response = compaction
            .request_with_body(&app.client, &app.url, serde_json::to_vec(&body).unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{fixture}");
        let answer = response.text().await.unwrap();
        assert!(
            !answer.contains("PROVIDER SAYS OK"),
            "{fixture}: answered by compactd"
        );
        let mut places = model_calls(&model);
        places.push((format!("{fixture}'s answer"), answer));
        assert_none_in(&planted, &places);
    }
}

async fn a_session_compaction_and_a_branch_summary_send_and_store_no_secret(store: Arc<dyn Store>) {
    let planted = planted(54);
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nDeploy.")).await;
    let app =
        TestApp::with_store(chain_config(&fake, "openai:gpt-test", false), store.clone()).await;
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "planted", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"})
            .to_string(),
    ];
    let mut parent: Option<String> = None;
    for (n, (_, text)) in planted.iter().enumerate() {
        let (user, call, result) = (format!("u{n}"), format!("a{n}"), format!("r{n}"));
        lines.push(line(
            &user,
            parent.as_deref(),
            json!({"role": "user", "timestamp": 1, "content": text}),
        ));
        lines.push(line(
            &call,
            Some(&user),
            json!({"role": "assistant", "timestamp": 2,
            "provider": "p", "model": "m", "stopReason": "toolUse", "content": [{"type": "toolCall",
            "id": format!("t{n}"), "name": "bash", "arguments": {"command": text}}]}),
        ));
        lines.push(line(
            &result,
            Some(&call),
            json!({"role": "toolResult", "toolCallId": format!("t{n}"),
            "toolName": "bash", "timestamp": 3, "isError": false,
            "content": [{"type": "text", "text": text}]}),
        ));
        parent = Some(result);
    }
    for i in 0..4 {
        let id = format!("k{i}");
        lines.push(line(
            &id,
            parent.as_deref(),
            json!({"role": "user", "timestamp": 4,
            "content": format!("next step {i}: {}", "x".repeat(400))}),
        ));
        parent = Some(id);
    }
    let uploaded: Value = app
        .upload(lines.join("\n") + "\n")
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let compacted = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    let compacted = compacted.text().await.unwrap();
    // Navigating back to before the secrets' last turn leaves the branch after it behind.
    let branch = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": "u0"}),
        )
        .await;
    let branch_status = branch.status();
    let branch = branch.text().await.unwrap();
    assert_eq!(branch_status, StatusCode::CREATED, "{branch}");
    let stored = app.entries(&id).await.text().await.unwrap();
    let written: Vec<(String, String)> = stored
        .lines()
        .filter(|l| l.contains("\"compaction\"") || l.contains("\"branch_summary\""))
        .map(|l| ("a stored entry".to_owned(), l.to_owned()))
        .collect();
    assert!(written.len() >= 2, "{written:?}");
    let mut places = model_calls(&fake);
    places.extend(written);
    places.push(("the compaction's answer".into(), compacted));
    places.push(("the branch summary's answer".into(), branch));
    assert_none_in(&planted, &places);
}
