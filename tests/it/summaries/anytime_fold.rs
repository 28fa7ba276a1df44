//! A prompt far over the model's window is folded; when the model cannot finish every window
//! before the deadline, what it wrote is kept and the extractive summarizer finishes the rest —
//! the answer comes in time, never without the model's share, and says which part is which.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config, secs};

const MODEL_SUMMARY: &str = "## Goal\nMODEL-WRITTEN GOAL\n\n## Key Decisions\n- **MODEL-DECISION-7**: keep the parser streaming";

fn long_prompt() -> String {
    let prompts = compactd_core::prompts::Prompts::builtin();
    let turns: Vec<String> = (0..220)
        .map(|i| {
            format!(
                "[User]: look at src/module{i}.rs and explain the parser step {i} in detail please\n\n[Assistant]: The parser step {i} reads tokens, checks the header and keeps the offsets; nothing unusual there."
            )
        })
        .chain(["[User]: Now write the release notes for 2.0 in CHANGELOG.md".to_owned()])
        .collect();
    compactd_core::transcript::prompt::history_prompt(&prompts, &turns.join("\n\n"), None, None)
}

#[tokio::test]
async fn a_fold_out_of_time_keeps_the_models_windows_and_finishes_extractively() {
    // Two windows answered at once, then a model that never answers again.
    let fake = FakeProvider::start(
        vec![Reply::openai(MODEL_SUMMARY), Reply::openai(MODEL_SUMMARY)],
        Reply::Hang(Duration::from_secs(120)),
    )
    .await;
    let mut config = chain_config(&fake, "openai:small@4096", false);
    config.summarizers.first_token_timeout = secs(1.0);
    config.summarizers.deadline = secs(4.0);
    let app = TestApp::spawn(config).await;
    let started = Instant::now();
    let response = app
        .compact(&json!({"systemPrompt": "You summarize.", "prompt": long_prompt()}))
        .await;
    let took = started.elapsed();
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["model"], "openai:small+extractive");
    let windows = &body["modelWindows"];
    assert_eq!(windows["byModel"], 2, "{body}");
    assert!(windows["windows"].as_u64().unwrap() > 2, "{body}");
    let summary = body["summary"].as_str().unwrap();
    // The model's share is kept, and the last window (the latest request) is in.
    assert!(summary.contains("MODEL-DECISION-7"), "{summary}");
    assert!(
        summary.contains("Now write the release notes for 2.0 in CHANGELOG.md"),
        "{summary}"
    );
    assert!(
        took < Duration::from_secs(30),
        "answered within the deadline's reach: {took:?}"
    );
}
