//! Redaction holds on the newest ways out (issue 64): a handoff's draft — its prompt and each
//! file's reason — is redacted in the answer, the stored handoff, the new session's file, the
//! console's draft page and a prompt the user edited, with and without a model (which may echo
//! a secret); secrets in structured tool arguments (an env map's value under a key named like a
//! secret, a key exported in a command string) reach no model and land in no entry, history or
//! page on the session path. Both stores.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::redaction::line;
use crate::support::{FakeProvider, Reply, TestApp, chain_config, config, tenant_keys};

on_both_backends!(
    a_handoff_draft_is_redacted_wherever_it_goes,
    a_handoff_drafted_by_a_model_is_redacted_in_every_field,
    secrets_in_structured_tool_arguments_reach_no_model_and_land_nowhere,
);

/// A GitHub token, a Discord bot token's last two segments (`abc.def`, which reads as a code
/// path without its key) and a Heroku key (a UUID), of a seeded generator.
fn secrets(seed: u64) -> (String, String, String) {
    let mut rng = fastrand::Rng::with_seed(seed);
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const WORD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
    let mut of = |alphabet: &[u8], n: usize| -> String {
        (0..n)
            .map(|_| alphabet[rng.usize(..alphabet.len())] as char)
            .collect()
    };
    let github = format!("ghp_{}", of(ALNUM, 36));
    // As a code path would be: each segment a letter, then letters, digits and underscores.
    let discord = format!(
        "{}{}.{}{}",
        of(&ALNUM[..52], 1),
        of(WORD, 5),
        of(&ALNUM[..52], 1),
        of(WORD, 37)
    );
    let hex = b"0123456789abcdef";
    let heroku = format!(
        "{}-{}-4{}-a{}-{}",
        of(hex, 8),
        of(hex, 4),
        of(hex, 3),
        of(hex, 3),
        of(hex, 12)
    );
    (github, discord, heroku)
}

fn assert_clean(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "{what} holds {secret}: {text}");
    }
}

/// The conversation: a user turn naming the file and the token, an edit of the file.
fn conversation(token: &str) -> Vec<Value> {
    vec![
        json!({"role": "user", "content": format!("Fix tab handling in src/lexer.rs with token {token}")}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "edit", "arguments": json!({"path": "src/lexer.rs", "oldText": "\\t", "newText": "    "}).to_string()}}]}),
        json!({"role": "tool", "tool_call_id": "c1", "content": "Edited src/lexer.rs"}),
    ]
}

/// The same conversation as a stored pi session.
fn session(token: &str) -> String {
    [
        json!({"type": "session", "version": 3, "id": "lexer", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"}).to_string(),
        line("u1", None, json!({"role": "user", "timestamp": 1,
            "content": format!("Fix tab handling in src/lexer.rs with token {token}")})),
        line("a1", Some("u1"), json!({"role": "assistant", "timestamp": 2, "provider": "p", "model": "m",
            "stopReason": "toolUse", "content": [{"type": "toolCall", "id": "c1", "name": "edit",
            "arguments": {"path": "src/lexer.rs", "oldText": "\t", "newText": "    "}}]})),
        line("r1", Some("a1"), json!({"role": "toolResult", "toolCallId": "c1", "toolName": "edit",
            "timestamp": 3, "isError": false, "content": [{"type": "text", "text": "Edited src/lexer.rs"}]})),
    ]
    .join("\n")
        + "\n"
}

async fn upload(app: &TestApp, key: &str, file: String) -> String {
    let uploaded = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(key)
                .header("content-type", "application/x-ndjson")
                .body(file),
        )
        .await;
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn entries(app: &TestApp, key: &str, id: &str) -> String {
    app.send(
        app.client
            .get(format!("{}/v1/sessions/{id}/entries", app.url))
            .bearer_auth(key),
    )
    .await
    .text()
    .await
    .unwrap()
}

const GOAL: &str = "Finish tab handling";

async fn a_handoff_draft_is_redacted_wherever_it_goes(store: Arc<dyn Store>) {
    // On loopback without keys, so that the console serves the same (anonymous) tenant.
    let app = TestApp::with_store(config(), store).await;
    let (token, edited_in, _) = secrets(1);
    let key = "";
    // A conversation as an agent holds it: nothing stored.
    let posted: Value = app
        .post(
            "/v1/handoff",
            &json!({"goal": GOAL, "messages": conversation(&token)}),
        )
        .await
        .json()
        .await
        .unwrap();
    assert!(
        posted["prompt"].as_str().unwrap().starts_with(GOAL),
        "{posted}"
    );
    assert!(posted["files"][0]["path"] == "src/lexer.rs", "{posted}");
    assert!(posted.to_string().contains("[REDACTED:"), "{posted}");
    assert_clean("POST /v1/handoff", &posted.to_string(), &[&token]);

    // A stored session: the answer, and the new session's file.
    let id = upload(&app, key, session(&token)).await;
    let handed = app
        .post(
            &format!("/v1/sessions/{id}/handoff"),
            &json!({"goal": GOAL}),
        )
        .await;
    assert_eq!(handed.status(), StatusCode::CREATED);
    let handed: Value = handed.json().await.unwrap();
    assert_clean("the stored handoff", &handed.to_string(), &[&token]);
    let child = handed["session"]["id"].as_str().unwrap();
    assert_clean(
        "the new session",
        &entries(&app, key, child).await,
        &[&token],
    );

    // The console: the draft page, and a prompt the user edited to hold a secret again.
    let origin = app.url.clone();
    let page = app
        .client
        .post(format!("{}/ui/sessions/{id}/handoff/draft", app.url))
        .header("origin", &origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("goal={}", GOAL.replace(' ', "+")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let page = page.text().await.unwrap();
    assert!(page.contains("src/lexer.rs"), "{page}");
    assert_clean("the console's draft page", &page, &[&token]);
    let started = app
        .client
        .post(format!("{}/ui/sessions/{id}/handoff", app.url))
        .header("origin", &origin)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("prompt=Go+on+with+{edited_in}+and+{token}"))
        .send()
        .await
        .unwrap();
    assert!(started.status().is_success() || started.status().is_redirection());
    let listed: Value = app.sessions().await.json().await.unwrap();
    let mut files = String::new();
    // Every session but the one uploaded (the user's own file, as they wrote it).
    for session in listed["sessions"].as_array().unwrap() {
        let started_id = session["id"].as_str().unwrap();
        if started_id != id {
            files.push_str(&entries(&app, key, started_id).await);
        }
    }
    assert!(files.contains("Go on with"), "the edited prompt was stored");
    assert_clean("the sessions the console started", &files, &[&token]);
}

async fn a_handoff_drafted_by_a_model_is_redacted_in_every_field(store: Arc<dyn Store>) {
    let (token, _, _) = secrets(2);
    // A model that echoes a secret it remembers, and names no file (the gate and the draft
    // complete it).
    let (echoed, _, _) = secrets(3);
    let fake = FakeProvider::start(
        vec![],
        Reply::openai(&format!("{GOAL}.\n\nUse {echoed} for the registry.")),
    )
    .await;
    let app =
        TestApp::with_store(chain_config(&fake, "openai:gpt-test", true), store.clone()).await;
    let key = &tenant_keys(store.as_ref(), &["alice"]).await[0];
    let posted = app
        .send(
            app.client
                .post(format!("{}/v1/handoff", app.url))
                .bearer_auth(key)
                .json(&json!({"goal": GOAL, "messages": conversation(&token)})),
        )
        .await;
    assert_eq!(posted.status(), StatusCode::OK);
    let posted: Value = posted.json().await.unwrap();
    assert_eq!(posted["draftedBy"], "openai:gpt-test", "{posted}");
    assert!(
        posted["files"].as_array().is_some_and(|f| !f.is_empty()),
        "{posted}"
    );
    assert_clean(
        "the model's handoff",
        &posted.to_string(),
        &[&token, &echoed],
    );
    for received in fake.received() {
        assert_clean(
            "what the model was sent",
            &received.body.to_string(),
            &[&token],
        );
    }
}

async fn secrets_in_structured_tool_arguments_reach_no_model_and_land_nowhere(
    store: Arc<dyn Store>,
) {
    let (_, discord, heroku) = secrets(4);
    // The model echoes its prompt back: whatever it was sent lands in the entry.
    let fake = FakeProvider::start(vec![], Reply::echo_openai()).await;
    let app =
        TestApp::with_store(chain_config(&fake, "openai:gpt-test", true), store.clone()).await;
    let key = &tenant_keys(store.as_ref(), &["alice"]).await[0];
    let mut lines = vec![
        json!({"type": "session", "version": 3, "id": "deploy", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"}).to_string(),
        line("u0", None, json!({"role": "user", "timestamp": 1, "content": "Deploy the bot to Heroku."})),
        line("a0", Some("u0"), json!({"role": "assistant", "timestamp": 2, "provider": "p", "model": "m",
            "stopReason": "toolUse", "content": [
                {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "node bot.js",
                    "env": {"SECRET_VALUE": discord, "NODE_ENV": "production"}}},
                {"type": "toolCall", "id": "t2", "name": "bash", "arguments":
                    {"command": format!("export HEROKU_API_KEY={heroku} && heroku apps")}},
            ]})),
        line("r0", Some("a0"), json!({"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
            "timestamp": 3, "isError": false, "content": [{"type": "text", "text": "bot online"}]})),
    ];
    let mut parent = "r0".to_owned();
    for i in 0..6 {
        let id = format!("k{i}");
        lines.push(line(
            &id,
            Some(&parent),
            json!({"role": "user", "timestamp": 4,
            "content": format!("next step {i}: {}", "words ".repeat(80))}),
        ));
        parent = id;
    }
    let id = upload(&app, key, lines.join("\n") + "\n").await;
    let compacted = app
        .send(
            app.client
                .post(format!("{}/v1/sessions/{id}/compactions", app.url))
                .bearer_auth(key)
                .json(&json!({"keepRecentTokens": 200})),
        )
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    let secrets = [discord.as_str(), heroku.as_str()];
    let sent: Vec<String> = fake.received().iter().map(|r| r.body.to_string()).collect();
    assert!(!sent.is_empty());
    for body in &sent {
        assert_clean("what the model was sent", body, &secrets);
    }
    assert_clean("the answer", &compacted.text().await.unwrap(), &secrets);
    let stored = entries(&app, key, &id).await;
    let entry = stored
        .lines()
        .find(|l| l.contains("\"compaction\""))
        .expect("the compaction entry");
    assert!(entry.contains("[REDACTED:"), "{entry}");
    assert_clean("the stored entry", entry, &secrets);
    let history = app
        .send(
            app.client
                .get(format!("{}/v1/sessions/{id}/compactions", app.url))
                .bearer_auth(key),
        )
        .await
        .text()
        .await
        .unwrap();
    assert_clean("the compaction history", &history, &secrets);
}
