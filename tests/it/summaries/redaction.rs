//! Secret redaction end to end: secrets of every rule family planted where sessions hold them
//! (user text, tool arguments, tool output, the previous summary) never reach the model, the
//! summary or the stored compaction; the client's own lines stay byte-exact.

use std::sync::Arc;

use compactd_store::Store;
use compactd_testkit::samples::{self, Sample};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config, compact_body, metric_sample};

on_both_backends!(
    secrets_never_leave_and_never_land,
    secrets_as_tools_write_them_reach_no_model_no_summary_no_page
);

pub fn line(id: &str, parent: Option<&str>, message: Value) -> String {
    json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-22T10:00:00.000Z",
        "message": message})
    .to_string()
}

/// A session whose every part carries secrets: the previous compaction's summary, a user
/// message, a tool call's arguments, a tool's output; then enough recent work to keep.
fn session_with(secrets: &[Sample]) -> String {
    let text_of = |family: &str| {
        secrets
            .iter()
            .find(|s| s.family == family)
            .unwrap()
            .line
            .clone()
    };
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "secrets", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"})
            .to_string(),
        line("u0", None, json!({"role": "user", "content": "set up the deploy", "timestamp": 1})),
        line("a0", Some("u0"), json!({"role": "assistant", "content": [{"type": "text", "text": "done"}],
            "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2})),
        json!({"type": "compaction", "id": "c0", "parentId": "a0", "timestamp": "2026-11-22T10:01:00.000Z",
            "summary": format!("## Goal\nDeploy.\n\n## Critical Context\n- {}\n- {}\n- {}",
                text_of("openai"), text_of("anthropic"), text_of("jwt")),
            "firstKeptEntryId": "u0", "tokensBefore": 5000})
        .to_string(),
        line("u1", Some("c0"), json!({"role": "user", "timestamp": 3, "content":
            format!("Use these: {} and {} and {} (aws again: {})", text_of("aws"), text_of("github"),
                text_of("gitlab"), secrets[0].secret)})),
        line("a1", Some("u1"), json!({"role": "assistant", "timestamp": 4, "provider": "p", "model": "m",
            "stopReason": "toolUse", "content": [{"type": "toolCall", "id": "t1", "name": "bash",
            "arguments": {"command": format!("curl -H 'X-Slack: {}' -d '{}' https://hooks.example.com/x",
                secrets.iter().find(|s| s.family == "slack").unwrap().secret, text_of("gcp"))}}]})),
        line("r1", Some("a1"), json!({"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
            "timestamp": 5, "isError": false, "content": [{"type": "text", "text":
            format!("$ cat .env\n{}\n{}\n{}\n{}\n{}", text_of("env"), text_of("stripe"),
                text_of("url-credentials"), text_of("azure"), text_of("private-key"))}]})),
    ];
    let mut parent = "r1".to_owned();
    for i in 0..6 {
        let id = format!("k{i}");
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": format!("next step {i}: {}", "x".repeat(400)), "timestamp": 6})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": "y".repeat(400)}],
                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 7})
        };
        lines.push(line(&id, Some(&parent), message));
        parent = id;
    }
    lines.join("\n") + "\n"
}

async fn secrets_never_leave_and_never_land(store: Arc<dyn Store>) {
    let secrets = samples::all(7);
    // The model echoes secrets it remembers: the AWS key it was shown redacted, and a GitHub
    // token of its own making.
    let echo = format!(
        "## Goal\nDeploy.\n\n## Critical Context\n- key {} and {}",
        secrets[0].secret,
        samples::all(8)[5].secret
    );
    let fake = FakeProvider::start(vec![], Reply::openai(&echo)).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let file = session_with(&secrets);
    let uploaded: Value = app.upload(file.clone()).await.json().await.unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let compacted = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    let compacted: Value = compacted.json().await.unwrap();

    let sent: Vec<String> = fake.received().iter().map(|r| r.body.to_string()).collect();
    assert!(!sent.is_empty());
    let stored = app.entries(&id).await.text().await.unwrap();
    let compaction_line = stored.lines().last().unwrap();
    // The compaction compactd wrote, as the history lists it (the uploaded one is the client's).
    let history: Value = app.compactions(&id).await.json().await.unwrap();
    let history = history["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["source"] == "compactd")
        .unwrap()
        .to_string();
    for sample in &secrets {
        // The secret as JSON writes it (the private key's newlines are escaped in bodies).
        let json_form = serde_json::to_string(&sample.secret).unwrap();
        let json_form = json_form.trim_matches('"');
        for body in &sent {
            if let Some(at) = body.find(json_form) {
                panic!(
                    "{} sent upstream: …{}…",
                    sample.family,
                    &body[at.saturating_sub(80)..(at + json_form.len() + 40).min(body.len())]
                );
            }
        }
        for (what, text) in [
            ("the response", compacted.to_string()),
            ("the stored entry", compaction_line.to_owned()),
            ("the history", history.clone()),
        ] {
            assert!(!text.contains(json_form), "{} in {what}", sample.family);
        }
        // The client's own lines are its data: byte for byte.
        assert!(
            stored.contains(json_form),
            "{} not kept in the raw lines",
            sample.family
        );
    }
    assert!(!compacted.to_string().contains(&samples::all(8)[5].secret));
    let summary = compacted["entry"]["summary"].as_str().unwrap();
    assert!(summary.contains("[REDACTED:"), "{summary}");

    placeholders_are_stable(&fake.received(), &compacted, &secrets, &app).await;
}

/// Stable placeholders: the AWS key appears twice in the conversation and once in the model's
/// answer, always as the same name; every family's rule named; every redaction counted.
async fn placeholders_are_stable(
    received: &[crate::support::fake_provider::Received],
    compacted: &Value,
    secrets: &[Sample],
    app: &TestApp,
) {
    let summary = compacted["entry"]["summary"].as_str().unwrap();
    // (The history and the split turn's prefix are summarized in parallel: either may arrive
    // first. The key is in the history.)
    let prompts: Vec<String> = received
        .iter()
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(
        prompts
            .iter()
            .any(|p| p.matches("[REDACTED:aws-access-token:1]").count() == 2),
        "{prompts:?}"
    );
    assert!(
        prompts
            .iter()
            .all(|p| !p.contains("[REDACTED:aws-access-token:2]"))
    );
    assert!(
        summary.contains("[REDACTED:aws-access-token:1]"),
        "{summary}"
    );
    for sample in secrets {
        assert!(
            prompts
                .iter()
                .any(|p| p.contains(&format!("[REDACTED:{}:", sample.rule))),
            "{}: {}",
            sample.family,
            sample.rule
        );
    }
    let redactions = compacted["stages"]["redactions"].as_u64().unwrap();
    assert!(redactions >= secrets.len() as u64, "{redactions}");
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metric_sample(
            &metrics,
            "compactd_redactions_total{rule=\"aws-access-token\"}"
        ) >= 3.0
    );
}

#[tokio::test]
async fn the_agent_wire_is_redacted_and_can_be_turned_off() {
    let secrets = samples::all(11);
    let github = &secrets[5];
    let prompt = format!(
        "<conversation>\n[User]: deploy with {}\n\n[Assistant tool calls]: bash(command=\"export GH={}\")\n</conversation>\n\n## Critical Context",
        github.secret, github.secret
    );
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\ndeploy")).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", false)).await;
    let answered: Value = app
        .compact(&compact_body(&prompt))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answered["redactions"], 2);
    let sent = fake.received()[0].body.to_string();
    assert!(!sent.contains(&github.secret));
    assert_eq!(sent.matches("[REDACTED:github-pat:1]").count(), 2);

    // COMPACTD_REDACT=false: the operator's choice, the text goes as it is.
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\ndeploy")).await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.stages.redact = false;
    let app = TestApp::handlers(config).await;
    let answered: Value = app
        .compact(&compact_body(&prompt))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answered["redactions"], 0);
    assert!(fake.received()[0].body.to_string().contains(&github.secret));
}

/// Secrets as tools write them (inside JSON-escaped strings in tool arguments and output, in code,
/// in URLs without a user, provider keys a character off), planted in a session that is then
/// compacted: absent from what the upstream receives, the summary, the stored entry, the history
/// and the console's pages.
async fn secrets_as_tools_write_them_reach_no_model_no_summary_no_page(store: Arc<dyn Store>) {
    let shapes = samples::tool_shapes(21);
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nDeploy.")).await;
    let app =
        TestApp::with_store(chain_config(&fake, "openai:gpt-test", false), store.clone()).await;
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "shapes", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"})
            .to_string(),
    ];
    let mut parent: Option<String> = None;
    for (n, (_, text)) in shapes.iter().enumerate() {
        let (user, call, result) = (format!("u{n}"), format!("a{n}"), format!("r{n}"));
        lines.push(line(
            &user,
            parent.as_deref(),
            json!({"role": "user", "timestamp": 1,
            "content": format!("note {n}: {text}")}),
        ));
        lines.push(line(&call, Some(&user), json!({"role": "assistant", "timestamp": 2,
            "provider": "p", "model": "m", "stopReason": "toolUse", "content": [{"type": "toolCall",
            "id": format!("t{n}"), "name": "bash", "arguments": {"command": format!("echo '{text}'")}}]})));
        lines.push(line(&result, Some(&call), json!({"role": "toolResult", "toolCallId": format!("t{n}"),
            "toolName": "bash", "timestamp": 3, "isError": false,
            "content": [{"type": "text", "text": format!("{{\"out\": {}}}", serde_json::to_string(text).unwrap())}]})));
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
    let file = lines.join("\n") + "\n";
    let uploaded: Value = app.upload(file).await.json().await.unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let compacted = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    let compacted: Value = compacted.json().await.unwrap();
    let entry_id = compacted["entry"]["id"].as_str().unwrap().to_owned();
    let stored = app.entries(&id).await.text().await.unwrap();
    let history = app.compactions(&id).await.text().await.unwrap();
    let base = app.url.clone();
    let page = |path: String| {
        let url = format!("{base}{path}");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    let mut places = vec![
        ("the response", compacted.to_string()),
        (
            "the stored entry",
            stored.lines().last().unwrap().to_owned(),
        ),
        ("the history", history),
        ("the session page", page(format!("/ui/sessions/{id}")).await),
        (
            "the compaction page",
            page(format!("/ui/sessions/{id}/compactions/{entry_id}")).await,
        ),
    ];
    // Every page of the tree, where the previews are.
    for n in 1..=2 {
        places.push((
            "a tree page",
            page(format!("/ui/sessions/{id}?page={n}")).await,
        ));
    }
    for received in fake.received() {
        places.push(("the upstream", received.body.to_string()));
    }
    assert!(!fake.received().is_empty());
    for (secret, text) in &shapes {
        for (what, body) in &places {
            assert!(
                !body.contains(secret.as_str()),
                "{secret} (from {text}) in {what}"
            );
        }
    }
}
