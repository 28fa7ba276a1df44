//! Handoff (issue 57): a generated session of several hundred turns working on two features,
//! compacted several times, handed off with a goal about one of them. The draft names every file
//! of that feature and none that only the other touched, the rule still in force and the open
//! error; the new session's header names the old one, its first user message is the prompt, and
//! the pinned pi opens it. Another tenant's session is 404; a bad goal says what is wrong.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

on_both_backends!(a_handoff_carries_one_features_files_rules_and_open_error);
on_both_backends!(a_model_drafts_the_handoff_and_the_gate_completes_it);

pub const PARSER: [&str; 3] = [
    "src/parser/lexer.rs",
    "src/parser/ast.rs",
    "tests/parser_tabs.rs",
];
pub const BILLING: [&str; 3] = [
    "src/billing/invoice.rs",
    "src/billing/tax.rs",
    "tests/invoice_rounding.rs",
];
pub const RULE: &str = "Never call unwrap() in library code.";
const ERROR: &str = "error[E0308]: mismatched types in the tab branch of next_token";

/// The entries of turns `from..to` after `parent`: even turns on the parser's tab handling, odd
/// ones on invoice rounding, each an edit of one of its feature's files and a test run; the
/// first states the rule, the last one's test run fails.
fn turns(from: usize, to: usize, last: usize, parent: Option<&str>) -> (String, String) {
    let mut lines = String::new();
    let mut parent = parent.map(str::to_owned);
    let mut push = |id: String, message: Value, lines: &mut String| {
        let entry = json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message});
        lines.push_str(&entry.to_string());
        lines.push('\n');
        parent = Some(id);
    };
    for turn in from..to {
        let parser = turn % 2 == 0;
        let (files, request, test) = if parser {
            (
                PARSER,
                format!("Make the parser's tokenizer handle tabs in case {turn}."),
                "cargo test -p parser",
            )
        } else {
            (
                BILLING,
                format!("Round invoice totals to cents for customer {turn}."),
                "cargo test -p billing",
            )
        };
        let request = if turn == 0 {
            format!("{RULE} {request}")
        } else {
            request
        };
        let file = files[turn / 2 % 3];
        push(
            format!("t{turn}u"),
            json!({"role": "user", "content": request, "timestamp": 1}),
            &mut lines,
        );
        push(
            format!("t{turn}a"),
            json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": format!("c{turn}e"), "name": "edit", "arguments": {"path": file, "oldText": "a", "newText": "b"}},
            {"type": "toolCall", "id": format!("c{turn}t"), "name": "bash", "arguments": {"command": test}},
        ], "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 2}),
            &mut lines,
        );
        push(
            format!("t{turn}r"),
            json!({"role": "toolResult", "toolCallId": format!("c{turn}e"), "toolName": "edit",
            "content": [{"type": "text", "text": "Edited."}], "isError": false, "timestamp": 3}),
            &mut lines,
        );
        let failed = turn + 2 >= last && parser;
        let output = if failed {
            format!("{ERROR}\nCommand exited with code 101")
        } else {
            "test result: ok. 12 passed".to_owned()
        };
        push(
            format!("t{turn}b"),
            json!({"role": "toolResult", "toolCallId": format!("c{turn}t"), "toolName": "bash",
            "content": [{"type": "text", "text": output}], "isError": failed, "timestamp": 4}),
            &mut lines,
        );
        push(
            format!("t{turn}d"),
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("Done with turn {turn}.")}],
            "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 5}),
            &mut lines,
        );
    }
    (lines, parent.unwrap())
}

/// Turns in all; four compactions between stretches of 80.
const STRETCH: usize = 80;
const LAST: usize = 4 * STRETCH;
pub const GOAL: &str = "Finish tab handling in the parser's tokenizer.";

/// The two features' session, stored for `key` with four compactions: its id.
pub async fn two_feature_session(app: &TestApp, key: &str) -> String {
    let mine = |request: reqwest::RequestBuilder| request.bearer_auth(key);
    let header = json!({"type": "session", "version": 3, "id": "two-features", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/repo"});
    let (first, _) = turns(0, STRETCH, LAST, None);
    let uploaded: Value = app
        .send(mine(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(format!("{header}\n{first}")),
        ))
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    for stretch in 1..4 {
        let compacted = app
            .send(mine(
                app.client
                    .post(format!("{}/v1/sessions/{id}/compactions", app.url))
                    .json(&json!({"keepRecentTokens": 2000})),
            ))
            .await;
        assert_eq!(compacted.status(), StatusCode::CREATED);
        let leaf: Value = compacted.json().await.unwrap();
        let (more, _) = turns(
            stretch * STRETCH,
            (stretch + 1) * STRETCH,
            LAST,
            leaf["entry"]["id"].as_str(),
        );
        let appended = app
            .send(mine(
                app.client
                    .post(format!("{}/v1/sessions/{id}/entries", app.url))
                    .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                    .body(more),
            ))
            .await;
        assert_eq!(appended.status(), StatusCode::OK);
    }
    id
}

async fn a_handoff_carries_one_features_files_rules_and_open_error(store: Arc<dyn Store>) {
    let keys = crate::support::tenant_keys(store.as_ref(), &["a", "b"]).await;
    let app = TestApp::handlers_with_store(crate::support::config(), store);
    let mine = |request: reqwest::RequestBuilder| request.bearer_auth(&keys[0]);
    let id = two_feature_session(&app, &keys[0]).await;

    let goal = GOAL;
    let handoff = |key: &str, body: Value| {
        app.client
            .post(format!("{}/v1/sessions/{id}/handoff", app.url))
            .bearer_auth(key)
            .json(&body)
    };
    let response = app.send(handoff(&keys[0], json!({"goal": goal}))).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let draft: Value = response.json().await.unwrap();
    let prompt = draft["prompt"].as_str().unwrap();
    if std::env::var_os("HANDOFF_REPORT").is_some() {
        println!("{}", serde_json::to_string_pretty(&draft).unwrap());
    }
    the_draft_holds_one_feature(&draft, prompt);

    // The new session: its header names the old one, its one entry is the prompt.
    assert_eq!(draft["parentSession"], id.as_str());
    let child = draft["session"]["id"].as_str().unwrap();
    let file = app
        .send(mine(
            app.client
                .get(format!("{}/v1/sessions/{child}/entries", app.url)),
        ))
        .await
        .text()
        .await
        .unwrap();
    let lines: Vec<Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["parentSession"], id.as_str());
    assert_eq!(lines[0]["cwd"], "/repo");
    assert_eq!(lines[1]["message"]["role"], "user");
    assert_eq!(lines[1]["message"]["content"][0]["text"], prompt);
    // The map: the old session leads to the new one, the new one came from the old.
    let app = &app;
    let map = |session: &str| {
        let request = mine(
            app.client
                .get(format!("{}/v1/sessions/{session}/threads", app.url)),
        );
        async move { app.send(request).await.json::<Value>().await.unwrap() }
    };
    let old = map(&id).await;
    assert_eq!(old["children"][0]["id"], child, "{old}");
    assert_eq!(old["children"][0]["kind"], "handoff");
    assert!(old["parent"].is_null());
    let new = map(child).await;
    assert_eq!(new["parent"]["id"], id.as_str(), "{new}");
    assert!(new["children"].as_array().unwrap().is_empty());

    // Another tenant's session is none; a goal must say something.
    let theirs = app.send(handoff(&keys[1], json!({"goal": goal}))).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    for body in [json!({"goal": "  "}), json!({"goal": "x".repeat(4001)})] {
        let response = app.send(handoff(&keys[0], body)).await;
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["param"], "goal", "{error}");
    }
    let response = app
        .send(handoff(&keys[0], json!({"goal": goal, "leafId": "nope"})))
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);

    // The pinned pi opens the new session with the prompt as its first user message.
    compactd_testkit::needs!(Agents);
    let on_disk = std::env::temp_dir().join(format!(
        "compactd-handoff-{}-{child}.jsonl",
        std::process::id()
    ));
    let read = crate::sessions::pi15::pi_reads_back(&on_disk, &file);
    assert_eq!(read["roles"], json!(["user"]));
    assert_eq!(read["header"]["parentSession"], id.as_str());
    let first = &read["context"]["messages"][0]["content"];
    let text = first
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| first[0]["text"].as_str().unwrap().to_owned());
    assert_eq!(text, prompt);
}

/// The paths of the files a handoff's draft names.
pub fn draft_paths(draft: &Value) -> Vec<&str> {
    (draft["files"].as_array().into_iter().flatten())
        .map(|f| f["path"].as_str().unwrap())
        .collect()
}

/// The draft: the goal first, the feature's files, the rule in force and the open error, none of
/// the other feature's (listed as left out), the feature's test command only.
fn the_draft_holds_one_feature(draft: &Value, prompt: &str) {
    assert!(prompt.starts_with(GOAL), "the goal first:\n{prompt}");
    assert_eq!(draft["draftedBy"], "extractive");
    let named = draft_paths(draft);
    for file in PARSER {
        assert!(named.contains(&file), "{file} missing: {named:?}");
        assert!(prompt.contains(file), "{prompt}");
    }
    for file in BILLING {
        assert!(
            !named.contains(&file),
            "{file} is the other feature's: {named:?}"
        );
        assert!(!prompt.contains(file), "{prompt}");
        assert!(
            draft["leftOut"]["files"]
                .as_array()
                .unwrap()
                .contains(&json!(file))
        );
    }
    assert!(
        prompt.contains(RULE),
        "the rule is still in force:\n{prompt}"
    );
    assert!(prompt.contains(ERROR), "the open error:\n{prompt}");
    assert!(prompt.contains("cargo test -p parser") && !prompt.contains("cargo test -p billing"));
    assert!(draft["leftOut"]["requests"].as_u64().unwrap() >= (LAST / 2) as u64);
}

/// Behind a model: it is sent the goal, what compactd found for it and the goal's turns (none of
/// the other feature's files, no secret), within the prompt's budget; its draft leaves out a file,
/// the rule and the error, the gate asks it again, and what it still lacks is completed from the
/// extractive findings. The same handoff again is answered from the cache.
async fn a_model_drafts_the_handoff_and_the_gate_completes_it(store: Arc<dyn Store>) {
    use crate::support::fake_provider::{FakeProvider, Reply};
    let keys = crate::support::tenant_keys(store.as_ref(), &["a"]).await;
    let built = TestApp::handlers_with_store(crate::support::config(), store.clone());
    let id = two_feature_session(&built, &keys[0]).await;
    let lossy = "Pick up tab handling in the tokenizer.\n\n## Relevant files\n- `src/parser/lexer.rs`: the tokenizer, where tabs are read\n\n## State\n- Tabs mostly work.";
    let fake = FakeProvider::start(vec![], Reply::openai(lossy)).await;
    let app = TestApp::handlers_with_store(
        crate::support::chain_config(&fake, "openai:gpt-test", true),
        store,
    );
    let secret = &compactd_testkit::samples::all(3)[0].secret;
    let goal = format!("{GOAL} The staging key is {secret}.");
    let handoff = || {
        app.client
            .post(format!("{}/v1/sessions/{id}/handoff", app.url))
            .bearer_auth(&keys[0])
            .json(&json!({"goal": goal}))
    };
    let response = app.send(handoff()).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let draft: Value = response.json().await.unwrap();
    assert_eq!(draft["draftedBy"], "openai:gpt-test", "{draft}");
    let prompt = draft["prompt"].as_str().unwrap();
    if std::env::var_os("HANDOFF_REPORT").is_some() {
        println!("{prompt}");
    }
    assert!(prompt.starts_with(GOAL), "the goal first:\n{prompt}");
    assert!(
        prompt.contains("Tabs mostly work."),
        "the model's words:\n{prompt}"
    );
    for file in PARSER {
        assert!(prompt.contains(file), "{file}:\n{prompt}");
    }
    for file in BILLING {
        assert!(!prompt.contains(file), "{file}:\n{prompt}");
    }
    assert!(prompt.contains(RULE) && prompt.contains(ERROR), "{prompt}");
    assert!(!prompt.contains(secret.as_str()), "redacted:\n{prompt}");

    let received = fake.received();
    // The draft and the gate's repair call (the rule and two changed files were missing).
    assert_eq!(received.len(), 2, "{received:?}");
    let sent = received[0].body.to_string();
    assert!(
        sent.contains("Finish tab handling")
            && sent.contains("Make the parser's tokenizer handle tabs")
    );
    assert!(sent.contains(RULE) && sent.contains("src/parser/ast.rs"));
    for file in BILLING {
        assert!(
            !sent.contains(file),
            "the other feature's {file} went to the model"
        );
    }
    assert!(
        !sent.contains(secret.as_str()),
        "a secret went to the model"
    );
    let prompt_chars: usize = received[0].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().chars().count())
        .sum();
    assert!(prompt_chars < 52_000, "{prompt_chars} characters sent");

    // The same handoff again: the cache answers, the model is not asked.
    let again: Value = app.send(handoff()).await.json().await.unwrap();
    assert_eq!(again["prompt"], draft["prompt"]);
    assert_eq!(fake.received().len(), 2);
}

/// `POST /v1/handoff` on what the agents themselves send (their recorded requests): Claude
/// Code's Anthropic messages, OpenCode's chat messages, Codex's Responses input, and pi's text.
/// The draft opens with the goal and names the file the conversation worked on, with none of
/// the agents' own reminders; nothing is stored. A body without exactly one conversation is 422.
#[tokio::test]
async fn a_conversation_in_any_wire_is_handed_off() {
    use crate::support::gateway::recorded;
    let app = TestApp::handlers(crate::support::config()).await;
    let goal = "Add a docstring to calc.py's add";
    let claude: Value = serde_json::from_str(
        &std::fs::read_to_string(format!(
            "{}/tests/fixtures/agent-requests/claude-code-2.1.330-tool-history.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap(),
    )
    .unwrap();
    let last = |fixture: &'static str| recorded(fixture).pop().unwrap().body.unwrap();
    let bodies = [
        (
            "claude code",
            json!({"goal": goal, "messages": claude["messages"], "system": claude["system"]}),
            Some("calc.py"),
        ),
        (
            "opencode",
            json!({"goal": goal, "messages": last("opencode-1.18.33")["messages"]}),
            None,
        ),
        (
            "codex",
            json!({"goal": goal, "input": last("codex-0.169.0-custom-provider")["input"]}),
            None,
        ),
        (
            "pi",
            json!({"goal": goal, "prompt": "[User]: Add type hints to add in calc.py.\n\n[Assistant tool calls]: edit(path=\"calc.py\")\n\n[Tool result]: Edited.\n\n[User]: Fix the tab bug in src/lexer.rs.\n\n[Assistant tool calls]: edit(path=\"src/lexer.rs\")\n\n[Tool result]: Edited."}),
            Some("calc.py"),
        ),
    ];
    for (agent, body, file) in bodies {
        let response = app.post("/v1/handoff", &body).await;
        assert_eq!(response.status(), StatusCode::OK, "{agent}");
        let draft: Value = response.json().await.unwrap();
        let prompt = draft["prompt"].as_str().unwrap();
        assert!(prompt.starts_with(goal), "{agent}: {prompt}");
        assert_eq!(draft["draftedBy"], "extractive");
        assert!(!prompt.contains("<system-reminder>"), "{agent}: {prompt}");
        assert!(
            !prompt.contains("Handed off from session"),
            "{agent}: {prompt}"
        );
        if let Some(file) = file {
            let named = draft_paths(&draft).iter().any(|p| p.ends_with(file));
            assert!(named, "{agent}: {file} in {draft:#}");
        }
    }
    let pi = app
        .post(
            "/v1/handoff",
            &json!({"goal": goal, "prompt": "[User]: Fix the tab bug in src/lexer.rs. Never use unwrap()."}),
        )
        .await
        .json::<Value>()
        .await
        .unwrap();
    assert!(
        pi["prompt"]
            .as_str()
            .unwrap()
            .contains("Never use unwrap()."),
        "{pi}"
    );
    let listed: Value = app.sessions().await.json().await.unwrap();
    assert_eq!(
        listed["sessions"].as_array().unwrap().len(),
        0,
        "nothing stored"
    );
    for body in [
        json!({"goal": goal}),
        json!({"goal": goal, "prompt": "[User]: a", "input": "b"}),
        json!({"goal": " ", "prompt": "[User]: a"}),
        json!({"goal": goal, "prompt": "  "}),
    ] {
        let response = app.post("/v1/handoff", &body).await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}"
        );
        let error: Value = response.json().await.unwrap();
        assert!(error["error"]["message"].is_string(), "{error}");
    }
}
