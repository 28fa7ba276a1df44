//! The rules in force go with a handoff (issue 64): a rule stated for all work of one kind when
//! the goal is that kind of work, and the rules of a project file an agent pasted into its system
//! prompt.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

on_both_backends!(a_rule_stated_for_a_kind_of_work_goes_with_that_work);

/// A rule stated once for all work of one kind ("One rule for all billing work: …", issue 64)
/// governs a goal of that kind: the handoff carries it, with the work's files and open error.
async fn a_rule_stated_for_a_kind_of_work_goes_with_that_work(store: Arc<dyn Store>) {
    let keys = crate::support::tenant_keys(store.as_ref(), &["a"]).await;
    let app = TestApp::handlers_with_store(crate::support::config(), store);
    const BILLING_RULE: &str = "One rule for all billing work: never write a card number or a CVC to any log line, not even masked.";
    let header = json!({"type": "session", "version": 3, "id": "billing", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/repo"});
    let mut lines = vec![header.to_string()];
    let mut parent: Option<String> = None;
    let turns = [
        (
            format!("{BILLING_RULE} Start with the charge client."),
            "src/billing/charge.rs",
            "test result: ok. 4 passed",
            false,
        ),
        (
            "Make the tokenizer skip comments.".to_owned(),
            "src/parser/lexer.rs",
            "test result: ok. 9 passed",
            false,
        ),
        (
            "Retry failed card charges with backoff.".to_owned(),
            "src/billing/retry.rs",
            "error: test billing::retries::gives_up_after_three failed",
            true,
        ),
    ];
    for (n, (request, file, output, failed)) in turns.iter().enumerate() {
        for (id, message) in [
            (
                format!("u{n}"),
                json!({"role": "user", "content": request, "timestamp": 1}),
            ),
            (
                format!("a{n}"),
                json!({"role": "assistant", "content": [
                {"type": "toolCall", "id": format!("e{n}"), "name": "edit", "arguments": {"path": file, "oldText": "a", "newText": "b"}},
                {"type": "toolCall", "id": format!("t{n}"), "name": "bash", "arguments": {"command": "cargo test"}}],
                "provider": "p", "model": "m", "stopReason": "toolUse", "timestamp": 2}),
            ),
            (
                format!("r{n}"),
                json!({"role": "toolResult", "toolCallId": format!("e{n}"), "toolName": "edit",
                "content": [{"type": "text", "text": "Edited."}], "isError": false, "timestamp": 3}),
            ),
            (
                format!("b{n}"),
                json!({"role": "toolResult", "toolCallId": format!("t{n}"), "toolName": "bash",
                "content": [{"type": "text", "text": output}], "isError": failed, "timestamp": 4}),
            ),
        ] {
            let entry = json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message});
            lines.push(entry.to_string());
            parent = Some(id);
        }
    }
    let uploaded: Value = app
        .send(
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .bearer_auth(&keys[0])
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(lines.join("\n") + "\n"),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap();
    let goal = "fix the failing billing tests and finish the retries for failed card charges";
    let draft: Value = app
        .send(
            app.client
                .post(format!("{}/v1/sessions/{id}/handoff", app.url))
                .bearer_auth(&keys[0])
                .json(&json!({"goal": goal})),
        )
        .await
        .json()
        .await
        .unwrap();
    let prompt = draft["prompt"].as_str().unwrap();
    assert!(
        prompt.contains(BILLING_RULE),
        "the rule governs the goal:\n{prompt}"
    );
    for file in ["src/billing/charge.rs", "src/billing/retry.rs"] {
        assert!(prompt.contains(file), "{file}:\n{prompt}");
    }
    assert!(!prompt.contains("src/parser/lexer.rs"), "{prompt}");
    assert!(
        prompt.contains("gives_up_after_three"),
        "the open error:\n{prompt}"
    );
}

/// The agent's system prompt is not the conversation, but the project rules file it pastes there
/// (OpenCode's "Instructions from: …/AGENTS.md") holds for the new thread: its rules are carried;
/// the agent's own instructions are not.
#[tokio::test]
async fn a_rules_file_in_the_system_prompt_goes_with_the_handoff() {
    let app = TestApp::handlers(crate::support::config()).await;
    let system = "You are opencode. NEVER commit changes unless the user explicitly asks you to.\n\
                  Instructions from: /repo/AGENTS.md\n# Guidelines\n\n- Never call unwrap() in library code.\n";
    for system in [json!(system), json!([{"type": "text", "text": system}])] {
        let response = app
            .post(
                "/v1/handoff",
                &json!({"goal": "Finish tab handling", "system": system, "messages": [
                    {"role": "user", "content": "Fix tab handling in src/lexer.rs"}]}),
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK);
        let draft: Value = response.json().await.unwrap();
        let prompt = draft["prompt"].as_str().unwrap();
        assert!(
            prompt.contains("Never call unwrap() in library code."),
            "{prompt}"
        );
        assert!(!prompt.contains("NEVER commit"), "{prompt}");
    }
}
