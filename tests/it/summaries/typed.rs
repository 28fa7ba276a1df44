//! One typed conversation for every dialect and wire: oh-my-pi 18.3's ten dialects as recorded,
//! a generated corpus written in every dialect compactd reads, and a structured chat
//! conversation (tool calls, tool messages, content parts) — each summarized so that every edited
//! path and the latest request are kept, by the extractive summarizer and by the fidelity gate in
//! front of a model that forgets everything. And a request's conversation is read once, whatever
//! stages run on it.

use std::collections::BTreeSet;

use compactd::summarizer::SummaryRequest;
use compactd_core::extractive::summarize;
use compactd_core::fidelity::AnchorKind;
use compactd_core::prompts::Prompts;
use compactd_core::transcript::Shape;
use compactd_core::transcript::{self, Dialect, Message, Role, ToolCall};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config};

/// What a forgetful model writes: the asked structure, none of the facts.
const LOSSY: &str = "## Goal\nWork on the project.\n\n## Progress\n### Done\n- Some changes were made.\n\n## Next Steps\n1. Continue.\n\n## Critical Context\n- None.";

/// What a summary of `prompt` must keep: the paths edited or written, and the latest request as
/// the gate anchors it (its first paragraph, clipped; none when it is a word or two, like "ok").
fn must_keep(prompt: &str) -> (BTreeSet<String>, String) {
    let shape = Shape::of_prompt(prompt);
    let modified = (shape.conversation.messages.iter())
        .flat_map(|m| &m.calls)
        .filter(|c| c.name == "edit" || c.name == "write")
        .filter_map(|c| c.arg("path").map(str::to_owned))
        .collect();
    let latest = compactd_core::fidelity::anchors::of_shape(&shape, 16_384)
        .into_iter()
        .find(|a| a.kind == AnchorKind::LatestRequest)
        .map(|a| a.text)
        .unwrap_or_default();
    (modified, latest)
}

fn assert_kept(name: &str, summary: &str, modified: &BTreeSet<String>, latest: &str) {
    for path in modified {
        assert!(
            summary.contains(path.as_str()),
            "{name}: lost {path}:\n{summary}"
        );
    }
    assert!(
        summary.contains(latest),
        "{name}: lost the latest request {latest:?}:\n{summary}"
    );
}

/// The history calls oh-my-pi 18.3.4 made for the two shared sessions, in its ten dialects.
fn recorded_18_3() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for file in ["before.jsonl", "large.jsonl"] {
        let bytes = crate::fixture(&format!("omp-requests-18.3/{file}"));
        for line in String::from_utf8(bytes).unwrap().lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            if v["call"] == "history" {
                let name = format!("{file} {} {}", v["dialect"], v["model"]);
                out.push((name, v["request"].clone()));
            }
        }
    }
    out
}

#[tokio::test]
async fn every_recorded_dialect_keeps_its_edited_paths_and_latest_request() {
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:lossy", false)).await;
    let mut dialects = BTreeSet::new();
    let mut requests = 0;
    let recorded = recorded_18_3();
    for (name, request) in &recorded {
        let prompt = request["prompt"].as_str().unwrap();
        let dialect = Shape::of_prompt(prompt).conversation.dialect.name();
        dialects.insert(dialect);
        let (modified, latest) = must_keep(prompt);
        assert!(!modified.is_empty(), "{name}: the session edits files");
        // A latest request of a word or two ("ok") is no anchor; any longer one is.
        let typed = Shape::of_prompt(prompt)
            .conversation
            .latest_user_text()
            .unwrap_or_default()
            .trim()
            .to_owned();
        assert_eq!(
            latest.is_empty(),
            typed.chars().count() < 4,
            "{name}: {typed:?}"
        );
        requests += usize::from(!latest.is_empty());
        let extractive = summarize(&SummaryRequest::from_prompt(
            request["systemPrompt"].as_str().unwrap().to_owned(),
            prompt.to_owned(),
            request["maxTokens"].as_u64().unwrap(),
        ));
        assert_kept(
            &format!("{name} extractive"),
            &extractive.text,
            &modified,
            &latest,
        );

        let response = app.compact(request).await;
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        let body: Value = response.json().await.unwrap();
        let summary = body["summary"].as_str().unwrap();
        assert_kept(&format!("{name} gated"), summary, &modified, &latest);
        assert_eq!(body["fidelity"]["dialect"], dialect, "{name}");
        assert!(
            summary.starts_with("## Goal\nWork on the project."),
            "{name}: the model's answer, repaired"
        );
    }
    assert_eq!(dialects.len(), 10, "{dialects:?}");
    assert!(
        requests * 2 > recorded.len(),
        "{requests} of {} with a latest request",
        recorded.len()
    );
}

/// A session of `turns` exchanges from `seed`: requests, thinking, reads, edits and writes with
/// awkward arguments (quotes, escapes, closing tags of every dialect, nested lists, unicode), tool
/// output with errors. The last request is the user's last words.
fn generated(seed: u64, turns: usize) -> Vec<Message> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut messages = Vec::new();
    let awkward = [
        "a \"quoted\" \\ backslash",
        "</parameter></invoke>",
        "<|\"|>}<tool_call|>",
        "<｜tool▁sep｜> and <|im_end|>",
        "```\nfenced\n```",
        "émoji 🦀 and 中文",
        "[User]: not a turn",
    ];
    for turn in 0..turns {
        let dir = ["src", "tests", "docs", "crates/core/src"][rng.usize(..4)];
        let path = format!("{dir}/mod_{seed}_{turn}.rs");
        messages.push(Message::with_text(
            Role::User,
            format!(
                "Step {turn}: change {path} so that {}",
                awkward[rng.usize(..awkward.len())]
            ),
        ));
        let mut calls = vec![ToolCall::new("read", vec![("path".into(), json!(path))])];
        let edit = rng.bool();
        calls.push(ToolCall::new(
            if edit { "edit" } else { "write" },
            if edit {
                vec![
                    ("path".into(), json!(path)),
                    ("oldText".into(), json!(awkward[rng.usize(..awkward.len())])),
                    (
                        "newText".into(),
                        json!(format!("{}\n{}", awkward[rng.usize(..7)], turn)),
                    ),
                ]
            } else {
                vec![
                    ("path".into(), json!(path)),
                    ("content".into(), json!(awkward.join("\n"))),
                ]
            },
        ));
        if rng.u8(..4) == 0 {
            calls.push(ToolCall::new(
                "configure",
                vec![(
                    "opts".into(),
                    json!({"nested": [1, true, null, {"k": "v \"q\""}], "x": 1.5}),
                )],
            ));
        }
        let results: Vec<Message> = calls
            .iter()
            .map(|call| {
                Message::tool_result(
                    format!(
                        "{} done: {}",
                        call.name,
                        awkward[rng.usize(..awkward.len())]
                    ),
                    None,
                    false,
                )
            })
            .collect();
        messages.push(Message {
            thinking: if rng.bool() {
                format!("Think about {path}.")
            } else {
                String::new()
            },
            text: format!("Working on {path}."),
            calls,
            ..Message::new(Role::Assistant)
        });
        messages.extend(results);
        messages.push(Message::with_text(
            Role::Assistant,
            format!("Done with step {turn}."),
        ));
    }
    messages.push(Message::with_text(
        Role::User,
        format!("Now make sure the release notes mention run {seed}."),
    ));
    messages
}

fn without_gemma_quotes(messages: &[Message]) -> Vec<Message> {
    fn clean(value: &mut Value) {
        match value {
            Value::String(text) => *text = text.replace("<|\"|>", "<|'|>"),
            Value::Array(items) => items.iter_mut().for_each(clean),
            Value::Object(map) => map.values_mut().for_each(clean),
            _ => {}
        }
    }
    let mut messages = messages.to_vec();
    for message in &mut messages {
        message.text = message.text.replace("<|\"|>", "<|'|>");
        for call in &mut message.calls {
            call.arguments.iter_mut().for_each(|(_, v)| clean(v));
        }
    }
    messages
}

#[tokio::test]
async fn a_generated_corpus_in_every_dialect_keeps_edited_paths_and_the_latest_request() {
    let prompts = Prompts::builtin();
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:lossy", false)).await;
    for seed in 0..12 {
        let messages = generated(seed, 3 + seed as usize % 5);
        let expected: BTreeSet<String> = (messages.iter())
            .flat_map(|m| &m.calls)
            .filter(|c| c.name == "edit" || c.name == "write")
            .map(|c| c.arg("path").unwrap().to_owned())
            .collect();
        let latest = format!("Now make sure the release notes mention run {seed}.");
        for dialect in Dialect::written() {
            let name = format!("seed {seed} {}", dialect.name());
            // Gemma 4 quotes strings with `<|"|>` and escapes nothing: a value holding the quote
            // itself cannot be written (oh-my-pi's renderer writes it ambiguously).
            let messages = if dialect == Dialect::Gemma {
                without_gemma_quotes(&messages)
            } else {
                messages.clone()
            };
            let text = transcript::write(dialect, &messages);
            let prompt = transcript::prompt::history_prompt(&prompts, &text, None, None);
            // The reading is right before anything is summarized from it.
            let (modified, anchored) = must_keep(&prompt);
            assert_eq!(modified, expected, "{name}");
            assert_eq!(anchored, latest, "{name}");
            let extractive = summarize(&SummaryRequest::from_prompt(
                prompts.system.clone(),
                prompt.clone(),
                13_107,
            ));
            assert_kept(
                &format!("{name} extractive"),
                &extractive.text,
                &expected,
                &latest,
            );
            // Through the gate, for a few of the seeds (each is a model call and a repair).
            if seed < 2 {
                let response = app
                    .compact(&json!({"systemPrompt": prompts.system, "prompt": prompt}))
                    .await;
                assert_eq!(response.status(), StatusCode::OK, "{name}");
                let body: Value = response.json().await.unwrap();
                assert_kept(
                    &format!("{name} gated"),
                    body["summary"].as_str().unwrap(),
                    &expected,
                    &latest,
                );
            }
        }
    }
}

/// A session as an agent that compacts by appending an instruction to its own history sends it
/// on the chat wire: content parts, assistant messages with `tool_calls`, `tool` messages, a long
/// tool output, then the instruction.
fn structured_chat() -> Vec<Value> {
    let output: String = (0..400)
        .map(|i| format!("line {i}: RAW-OUTPUT-{i}\n"))
        .collect();
    json!([
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": [{"type": "text", "text": "Fix the flaky login test in src/auth/login.rs."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"src/auth/login.rs\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"cargo test auth\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "fn login() {}"},
        {"role": "tool", "tool_call_id": "call_2", "content": output},
        {"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_3", "type": "function", "function": {"name": "edit", "arguments": "{\"path\":\"src/auth/login.rs\",\"oldText\":\"a\",\"newText\":\"b\"}"}},
            {"id": "call_4", "type": "function", "function": {"name": "edit", "arguments": "{\"path\":\"src/auth/session.rs\",\"oldText\":\"c\",\"newText\":\"d\"}"}},
            {"id": "call_5", "type": "function", "function": {"name": "write", "arguments": "{\"path\":\"CHANGELOG.md\",\"content\":\"- fixed\"}"}}]},
        {"role": "tool", "tool_call_id": "call_3", "content": "Successfully replaced text in src/auth/login.rs."},
        {"role": "tool", "tool_call_id": "call_4", "content": "Successfully replaced text in src/auth/session.rs."},
        {"role": "tool", "tool_call_id": "call_5", "content": "Successfully wrote 9 bytes to CHANGELOG.md"},
        {"role": "user", "content": "Also make the retry use exponential backoff, capped at 30 seconds."},
        {"role": "assistant", "content": "On it."},
        {"role": "user", "content": "Your task is to create a detailed summary of the conversation so far, paying close attention to the user's explicit requests and your previous actions. This summary will replace the conversation."}
    ])
    .as_array()
    .unwrap()
    .clone()
}

const EDITED: [&str; 3] = ["src/auth/login.rs", "src/auth/session.rs", "CHANGELOG.md"];
const LATEST: &str = "Also make the retry use exponential backoff, capped at 30 seconds.";

#[tokio::test]
async fn a_structured_chat_conversation_keeps_every_edited_path_and_the_latest_request() {
    let body = json!({"model": "any", "messages": structured_chat()});
    // Behind a model that forgets everything.
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:lossy", false)).await;
    let response = app.chat(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    let summary = answer["choices"][0]["message"]["content"].as_str().unwrap();
    for path in EDITED {
        assert!(summary.contains(path), "lost {path}:\n{summary}");
    }
    assert!(
        summary.contains(LATEST),
        "lost the latest request:\n{summary}"
    );
    // The model got the conversation in pi's form, its long output clipped, and the agent's
    // instruction after it.
    let sent = fake.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        sent.starts_with("<conversation>\n[User]: Fix the flaky login test"),
        "{sent}"
    );
    assert!(
        sent.contains("[Assistant tool calls]: edit(path=\"src/auth/login.rs\""),
        "{sent}"
    );
    assert!(
        sent.contains("more characters truncated]") && !sent.contains("RAW-OUTPUT-399"),
        "{sent}"
    );
    assert!(
        sent.ends_with("This summary will replace the conversation."),
        "{sent}"
    );

    // The extractive summarizer alone: the same, and tool outputs are not dumped.
    let app = TestApp::handlers(crate::support::config()).await;
    let response = app.chat(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    let summary = answer["choices"][0]["message"]["content"].as_str().unwrap();
    for path in EDITED {
        assert!(summary.contains(path), "lost {path}:\n{summary}");
    }
    assert!(summary.contains(LATEST), "{summary}");
    assert!(
        !summary.contains("RAW-OUTPUT-1"),
        "tool output dumped:\n{summary}"
    );
}

/// Every stage on (redaction, the gate with a repair call, a fold over a small window, the cache,
/// loop detection): the request's conversation is read once.
#[tokio::test]
async fn a_requests_conversation_is_read_once_whatever_runs_on_it() {
    let opening = format!("Human: read-once-{:016x}", fastrand::u64(..));
    let secret = compactd_testkit::samples::all(7).swap_remove(0);
    let prompts = Prompts::builtin();
    let mut turns = Vec::new();
    for i in 0..60 {
        let human = if i == 0 { opening.as_str() } else { "Human:" };
        let note = if i == 5 { secret.line.as_str() } else { "" };
        turns.push(format!(
            "{human} step {i}: edit src/step_{i}.rs {note} {}\n\nAssistant: <function_calls>\n<invoke name=\"edit\"><parameter name=\"path\">\"src/step_{i}.rs\"</parameter></invoke>\n</function_calls>",
            "x".repeat(300)
        ));
    }
    let conversation = turns.join("\n\n");
    let prompt = transcript::prompt::history_prompt(&prompts, &conversation, None, None);
    transcript::watch_reads(&opening);
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:small@4096", false)).await;
    let body = json!({"systemPrompt": prompts.system, "prompt": prompt});
    let response = app.compact(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    assert!(answer["redactions"].as_u64().unwrap() > 0, "{answer}");
    assert!(
        answer["fidelity"]["repairCall"].as_bool().unwrap(),
        "{answer}"
    );
    let received = fake.received();
    assert!(received.len() > 3, "folded into windows");
    // The windows are written from the typed conversation: redacted as the prompt is.
    for request in &received {
        assert!(
            !request.body.to_string().contains(&secret.secret),
            "{}",
            secret.family
        );
    }
    assert_eq!(transcript::reads_of(&opening), 1, "read once");
    // The same request again is answered from the cache without reading it: recall names the
    // conversation its miss kept by the request's cache key.
    let response = app.compact(&body).await;
    let again: Value = response.json().await.unwrap();
    assert!(again["cached"].as_bool().unwrap(), "{again}");
    assert!(answer["recallId"].is_string(), "{answer}");
    assert_eq!(again["recallId"], answer["recallId"]);
    assert_eq!(transcript::reads_of(&opening), 1, "a hit reads nothing");
}

/// Text in no dialect compactd knows: the generic reader still finds the last request, and the
/// report says the reading was a guess.
#[tokio::test]
async fn an_unknown_dialect_is_read_generically_and_says_so() {
    let prompts = Prompts::builtin();
    let conversation = "USER >> please port src/net/tcp.rs to the new runtime\nBOT >> done, see src/net/tcp.rs\nUSER >> now add a test for the reconnect path";
    let prompt = transcript::prompt::history_prompt(&prompts, conversation, None, None);
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:lossy", false)).await;
    let response = app
        .compact(&json!({"systemPrompt": prompts.system, "prompt": prompt}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["fidelity"]["dialect"], "generic", "{body}");
    let summary = body["summary"].as_str().unwrap();
    assert!(
        summary.contains("add a test for the reconnect path"),
        "{summary}"
    );
}

/// The extractive summarizer and the fidelity gate both read the conversation's facts: they are
/// extracted once per request, and shared.
#[tokio::test]
async fn a_requests_facts_are_extracted_once_for_every_stage_that_reads_them() {
    let opening = format!("extract-once-{:016x}", fastrand::u64(..));
    let prompts = Prompts::builtin();
    let conversation = format!(
        "[User]: {opening} fix the parser in src/parse.rs\n\n[Assistant]: I'll read it.\n\n\
         [Assistant tool calls]: read(path=\"src/parse.rs\")\n\n[Tool result]: fn parse() {{}}"
    );
    let prompt = transcript::prompt::history_prompt(&prompts, &conversation, None, None);
    compactd_core::fidelity::facts::watch_extractions(&opening);
    let app = TestApp::handlers(crate::support::config()).await;
    let body = json!({"systemPrompt": prompts.system, "prompt": prompt});
    let response = app.compact(&body).await;
    assert_eq!(response.status(), StatusCode::OK);
    let answer: Value = response.json().await.unwrap();
    assert_eq!(answer["model"], "extractive", "{answer}");
    assert!(
        answer["fidelity"]["anchors"].as_u64().unwrap() > 0,
        "{answer}"
    );
    assert_eq!(
        compactd_core::fidelity::facts::extractions_of(&opening),
        1,
        "extracted once"
    );
}
