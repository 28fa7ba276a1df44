//! oh-my-pi 18's model-native transcripts: every request it recorded for the two shared sessions
//! (`tests/fixtures/omp-requests/`, five dialects, history and short-summary calls), summarized by
//! the extractive summarizer and sent over both wires exactly as the agent sent them.

use std::collections::BTreeSet;

use compactd::summarizer::SummaryRequest;
use compactd_core::extractive::summarize;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, config};

/// One recorded request: `{model, call, request}`.
pub struct Recorded {
    pub model: String,
    pub call: String,
    pub request: Value,
}

impl Recorded {
    pub fn prompt(&self) -> &str {
        self.request["prompt"].as_str().unwrap()
    }

    pub fn system_prompt(&self) -> &str {
        self.request["systemPrompt"].as_str().unwrap()
    }
}

pub fn recorded(file: &str) -> Vec<Recorded> {
    let bytes = crate::fixture(&format!("omp-requests/{file}"));
    String::from_utf8(bytes)
        .unwrap()
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            Recorded {
                model: v["model"].as_str().unwrap().to_owned(),
                call: v["call"].as_str().unwrap().to_owned(),
                request: v["request"].clone(),
            }
        })
        .collect()
}

fn conversation(prompt: &str) -> &str {
    let start = prompt.find("<conversation>\n").unwrap() + 15;
    let end = prompt.find("\n</conversation>").unwrap();
    &prompt[start..end]
}

/// What the same compaction holds, read from its Claude-dialect prompt by plain text search (an
/// oracle independent of the transcript readers): the paths of edit and write calls, and the
/// last thing the user wrote.
pub fn oracle(claude_prompt: &str) -> (BTreeSet<String>, String) {
    let conversation = conversation(claude_prompt);
    let mut modified = BTreeSet::new();
    for tool in ["edit", "write"] {
        let needle = format!("<invoke name=\"{tool}\"><parameter name=\"path\">");
        let mut rest = conversation;
        while let Some(at) = rest.find(&needle) {
            let after = &rest[at + needle.len()..];
            let end = after.find("</parameter>").unwrap();
            let path: String = serde_json::from_str(&after[..end]).unwrap();
            modified.insert(path);
            rest = &after[end..];
        }
    }
    let latest = conversation
        .split("\n\nHuman: ")
        .skip(1)
        .map(|turn| turn.split("\n\nAssistant: ").next().unwrap().trim())
        .filter(|turn| !turn.starts_with("<function_results>") && !turn.starts_with('/'))
        .last()
        .unwrap()
        .to_owned();
    (modified, latest)
}

const SECTIONS: [&str; 9] = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
];

/// Chat markup of any dialect.
const MARKUP: [&str; 9] = [
    "Human:",
    "Assistant:",
    "<|",
    "<\\|",
    "<start_of_turn>",
    "<function_calls>",
    "<invoke",
    "<tool_call>",
    "```tool_code",
];

fn section<'a>(text: &'a str, heading: &str, next: &str) -> &'a str {
    let start = text.find(heading).unwrap_or_else(|| panic!("no {heading}"));
    let end = text[start..].find(next).map_or(text.len(), |e| start + e);
    &text[start..end]
}

#[test]
fn every_dialect_gets_a_complete_extractive_summary() {
    for file in ["before.jsonl", "large.jsonl"] {
        let recorded = recorded(file);
        for call in ["history", "short-summary"] {
            let claude = recorded
                .iter()
                .find(|r| r.model == "claude-sonnet-4-5" && r.call == call)
                .unwrap();
            let (modified, latest) = oracle(claude.prompt());
            for r in recorded.iter().filter(|r| r.call == call) {
                let name = format!("{file} {} {call}", r.model);
                let summary = summarize(&SummaryRequest::from_prompt(
                    r.system_prompt().to_owned(),
                    r.prompt().to_owned(),
                    r.request["maxTokens"].as_u64().unwrap(),
                ))
                .text;
                if call == "short-summary" {
                    // A plain sentence or two, free of markup.
                    assert!(!summary.contains('\n'), "{name}: {summary}");
                    assert!(
                        !summary.contains(['<', '>', '|', '`', '#', '*']),
                        "{name}: {summary}"
                    );
                    assert!(
                        summary.starts_with("I ") && summary.ends_with('.'),
                        "{name}: {summary}"
                    );
                    assert!(summary.matches(". ").count() <= 2, "{name}: {summary}");
                    for path in modified.iter().rev().take(3) {
                        assert!(
                            summary.contains(path.as_str()) || modified.len() > 4,
                            "{name}: {path} in {summary}"
                        );
                    }
                    continue;
                }
                for heading in SECTIONS {
                    assert!(
                        summary.contains(&format!("{heading}\n")),
                        "{name}: no {heading}:\n{summary}"
                    );
                }
                let progress = section(&summary, "## Progress", "## Key Decisions");
                assert!(!modified.is_empty(), "{name}: the session modifies files");
                for path in &modified {
                    assert!(
                        progress.contains(path.as_str()),
                        "{name}: {path} not in Progress:\n{progress}"
                    );
                }
                let first_line = latest.lines().next().unwrap();
                assert!(
                    summary.contains(&latest[..latest.len().min(1000)]),
                    "{name}: the latest request is not kept verbatim: {latest:?}\n{summary}"
                );
                let in_progress = section(&summary, "### In Progress", "### Blocked");
                assert!(
                    in_progress.contains(first_line),
                    "{name}: {first_line:?}\n{in_progress}"
                );
                let goal = section(&summary, "## Goal", "## Constraints");
                let constraints = section(&summary, "## Constraints", "## Progress");
                for mark in MARKUP {
                    assert!(
                        !goal.contains(mark),
                        "{name}: markup {mark:?} in the goal:\n{goal}"
                    );
                    assert!(
                        !constraints.contains(mark),
                        "{name}: markup {mark:?} in the constraints:\n{constraints}"
                    );
                }
            }
        }
    }
}

#[tokio::test]
async fn both_wires_answer_the_recorded_requests_byte_for_byte() {
    let app = TestApp::handlers(config()).await;
    let recorded = recorded("before.jsonl");
    for r in &recorded {
        // The exact body the agent POSTed.
        let response = app
            .send(
                app.client
                    .post(format!("{}/v1/compact", app.url))
                    .header("content-type", "application/json")
                    .body(serde_json::to_string(&r.request).unwrap()),
            )
            .await;
        assert_eq!(response.status(), StatusCode::OK, "{} {}", r.model, r.call);
        let body: Value = response.json().await.unwrap();
        let summary = body["summary"].as_str().unwrap();
        assert!(!summary.trim().is_empty());
        if r.call == "history" {
            assert!(summary.contains("## Critical Context"), "{}", r.model);
        }
    }
    // The chat wire gets the same prompts as a system and a user message, with the provider key.
    let r = recorded.iter().find(|r| r.model == "qwen3-coder").unwrap();
    let response = app.send(app.client.post(format!("{}/v1/chat/completions", app.url))
        .bearer_auth("sk-the-agents-own-provider-key")
        .json(
            &json!({"model": "qwen3-coder", "stream": false, "max_tokens": 13107, "messages": [
                {"role": "system", "content": r.system_prompt()},
                {"role": "user", "content": r.prompt()},
            ]}),
        )).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let content = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(content.contains("## Progress"), "{content}");
    assert!(!content.contains("<|im_start|>"), "{content}");
}
