//! compactd against a real local model server, as a developer runs it: `scripts/local-model.sh
//! test` starts llama.cpp's server (llama-cpp-python) with SmolLM2-135M-Instruct and runs these
//! (they are `#[ignore]`d otherwise: they need that server, and minutes of CPU).
//!
//! `COMPACTD_LOCAL_MODEL_URL` (`http://127.0.0.1:PORT/v1`), `COMPACTD_LOCAL_MODEL` (its model
//! name) and `LOCAL_MODEL_CTX` (its window) say where it is.

use std::time::{Duration, Instant};

use compactd::config::ServeConfig;
use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_core::prompts::Prompts;
use compactd_core::session::{ParseOptions, Session};
use compactd_core::transcript::prompt::history_prompt;
use serde_json::{Value, json};

use crate::support::{TestApp, config, secs};

struct Local {
    url: String,
    model: String,
    window: u64,
}

fn local() -> Local {
    let var = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!("{name} is not set: run these with scripts/local-model.sh test")
        })
    };
    Local {
        url: var("COMPACTD_LOCAL_MODEL_URL"),
        model: var("COMPACTD_LOCAL_MODEL"),
        window: var("LOCAL_MODEL_CTX").parse().unwrap(),
    }
}

/// compactd with only the local model in its chain (no extractive fallback: every summary is the
/// model's), with the sampling that keeps a small model from looping.
fn local_config(local: &Local, with_window: bool) -> ServeConfig {
    let mut config = config();
    let spec = if with_window {
        format!("openai:{}@{}", local.model, local.window)
    } else {
        format!("openai:{}", local.model)
    };
    config.summarizers.models = vec![spec.parse().unwrap()];
    config.summarizers.extractive_fallback = false;
    config.summarizers.openai_base_url = (local.url.clone()).parse().unwrap();
    config.summarizers.openai_api_key = None;
    config.summarizers.first_token_timeout = secs(120.0);
    config.summarizers.idle_timeout = secs(30.0);
    config.summarizers.deadline = secs(170.0);
    config.http.request_timeout = secs(175.0);
    config.summarizers.model_options = serde_json::from_str(&format!(
        r#"{{"openai:{}": {{"temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.1}}}}"#,
        local.model
    ))
    .unwrap();
    config
}

/// The planned history prompt of the large fixture: a real conversation, far larger than a small
/// model's window.
fn fixture_prompt() -> (String, String) {
    let session = Session::parse(
        &crate::fixture("large-session.jsonl"),
        ParseOptions::default(),
    )
    .unwrap();
    let path = session.active_path(None).unwrap();
    let plan = PlanOutcome::for_path(&path, &CompactionSettings::default())
        .plan
        .unwrap();
    let prompts = Prompts::builtin();
    (
        prompts.system.clone(),
        history_prompt(&prompts, &plan.conversation, None, None),
    )
}

#[tokio::test]
#[ignore = "needs the local model server of scripts/local-model.sh"]
async fn local_model_answers_both_wires_with_a_summary_it_wrote() {
    let local = local();
    let app = TestApp::spawn(local_config(&local, true)).await;
    let (system, prompt) = fixture_prompt();
    let started = Instant::now();
    let response = app
        .compact(&json!({"systemPrompt": system, "prompt": prompt, "maxTokens": 256}))
        .await;
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    println!("/v1/compact: {:?}\n{}", started.elapsed(), body["summary"]);
    assert_eq!(body["model"], format!("openai:{}", local.model));
    assert!(body["summary"].as_str().unwrap().trim().len() > 20);

    let started = Instant::now();
    let response = app
        .client
        .post(format!("{}/v1/chat/completions", app.url))
        .bearer_auth("sk-the-agents-own-key")
        .json(&json!({"model": "any", "max_tokens": 128, "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": "<conversation>\n[User]: Fix the crash in src/parser.rs when the input is empty.\n\n[Assistant tool calls]: edit(path=\"src/parser.rs\", oldText=\"a\", newText=\"b\")\n\n[Tool result]: Successfully replaced text in src/parser.rs.\n\n[Assistant]: I added an early return for empty input in src/parser.rs.\n</conversation>\n\nSummarize the conversation above in a few lines."},
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    println!(
        "/v1/chat/completions: {:?}\n{}",
        started.elapsed(),
        body["choices"][0]["message"]["content"]
    );
    assert_eq!(body["model"], format!("openai:{}", local.model));
    assert!(
        !body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .trim()
            .is_empty()
    );
}

#[tokio::test]
#[ignore = "needs the local model server of scripts/local-model.sh"]
async fn local_model_writes_a_session_compaction() {
    let local = local();
    let app = TestApp::spawn(local_config(&local, true)).await;
    // A window of the large fixture: its first 40 entries, as a v3 file.
    let session = Session::parse(
        &crate::fixture("large-session.jsonl"),
        ParseOptions::default(),
    )
    .unwrap();
    let window: String = std::iter::once(session.header.raw.to_string())
        .chain(session.entries.iter().take(40).map(|e| e.raw.to_string()))
        .map(|l| l + "\n")
        .collect();
    let uploaded: Value = app.upload(window).await.json().await.unwrap();
    let id = uploaded["id"].as_str().unwrap();
    let started = Instant::now();
    let response = app
        .compact_session(id, &json!({"keepRecentTokens": 1500, "reserveTokens": 640}))
        .await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    println!("session compaction: {:?}\n{body}", started.elapsed());
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["model"], format!("openai:{}", local.model));
    let entries = app.entries(id).await.text().await.unwrap();
    let last: Value = serde_json::from_str(entries.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "compaction");
    assert_eq!(last["summary"], body["entry"]["summary"]);
}

#[tokio::test]
#[ignore = "needs the local model server of scripts/local-model.sh"]
async fn a_prompt_larger_than_the_window_is_an_overflow_not_a_rejection() {
    let local = local();
    // compactd is not told the window: it learns it from the server's overflow answer.
    let app = TestApp::spawn(local_config(&local, false)).await;
    let (system, prompt) = fixture_prompt();
    assert!(compactd_core::transcript::estimate_tokens(&prompt) > 10 * local.window);
    let started = Instant::now();
    let response = app
        .compact(&json!({"systemPrompt": system, "prompt": prompt, "maxTokens": 200}))
        .await;
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    println!("overflowing prompt: {:?}\n{body}", started.elapsed());
    assert_eq!(status, 200);
    assert_eq!(
        body["model"],
        format!("openai:{}", local.model),
        "the model wrote it"
    );
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let overflowed = metrics.lines().any(|l| {
        l.starts_with("compactd_upstream_calls_total") && l.contains("outcome=\"context_overflow\"")
    });
    assert!(
        overflowed,
        "the server's answer was read as an overflow:\n{metrics}"
    );
}

/// compactd's share of the latency: the same request, streamed, straight to the model and through
/// compactd. A marker at the start of each system prompt keeps the server from reusing the
/// previous prompt's cache, so every request pays for reading its prompt, as a real one does.
/// Printed for BENCHMARKS.md.
#[tokio::test]
#[ignore = "needs the local model server of scripts/local-model.sh"]
async fn local_model_latency_against_the_model_alone() {
    let local = local();
    let app = TestApp::spawn(local_config(&local, true)).await;
    let client = reqwest::Client::new();
    let (system, prompt) = fixture_prompt();
    let prompt: String = {
        // About 3 600 estimated tokens of conversation, as in the issue's measurement.
        let parts = compactd_core::transcript::prompt::Parts::parse(&prompt);
        let cut = compactd_core::transcript::read(parts.conversation).windows(14_400)[0].write();
        parts.with(&cut, None)
    };
    let (mut alone_total, mut via_total) = (0.0, 0.0);
    for round in 0..3 {
        let started = Instant::now();
        let streamed = client
            .post(format!("{}/chat/completions", local.url))
            .json(
                &json!({"model": local.model, "max_tokens": 200, "stream": true,
                "temperature": 0.7, "top_p": 0.8, "repeat_penalty": 1.1,
                "messages": [{"role": "system", "content": format!("[run {round}a] {system}")},
                    {"role": "user", "content": prompt}]}),
            )
            .timeout(Duration::from_secs(170))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let alone = started.elapsed().as_secs_f64();
        let alone_tokens = streamed.matches("\"content\"").count();
        let started = Instant::now();
        let through: Value = app
            .compact(&json!({"systemPrompt": format!("[run {round}b] {system}"), "prompt": prompt, "maxTokens": 200}),
            )
            .await
            .json()
            .await
            .unwrap();
        let via = started.elapsed().as_secs_f64();
        assert_eq!(through["model"], format!("openai:{}", local.model));
        alone_total += alone;
        via_total += via;
        println!(
            "round {round}: model alone {alone:.2} s (~{alone_tokens} output tokens), through compactd {via:.2} s ({} output tokens)",
            through["usage"]["outputTokens"],
        );
    }
    println!(
        "mean: model alone {:.2} s, through compactd {:.2} s, ratio {:.3}",
        alone_total / 3.0,
        via_total / 3.0,
        via_total / alone_total
    );
}

/// oh-my-pi's ~95k-token update request (its history call with a previous summary, from
/// `omp-requests/before.jsonl`) against the 8k-token local model, with compactd's default
/// deadline: the fold summarizes windows in order until the deadline nears, keeps what the model
/// wrote and finishes the rest extractively. Printed for BENCHMARKS.md: the time, the model's
/// share of the windows, the anchors kept.
#[tokio::test]
#[ignore = "needs the local model server of scripts/local-model.sh"]
async fn an_over_window_update_request_keeps_the_models_share_within_the_deadline() {
    let local = local();
    let mut config = local_config(&local, true);
    config.summarizers.extractive_fallback = true;
    // compactd's defaults (COMPACTD_DEADLINE_SECS, the request's time limit).
    config.summarizers.deadline = secs(280.0);
    config.http.request_timeout = secs(295.0);
    let app = TestApp::spawn(config).await;
    let raw = crate::fixture("omp-requests/before.jsonl");
    let line = raw.split(|&b| b == b'\n').next().unwrap();
    let sample: Value = serde_json::from_slice(line).unwrap();
    let request = &sample["request"];
    let prompt = request["prompt"].as_str().unwrap();
    assert!(prompt.contains("<previous-summary>"));
    let tokens = compactd_core::transcript::estimate_tokens(prompt);
    assert!(tokens > 5 * local.window, "{tokens}");
    let started = Instant::now();
    let response = app.compact(request).await;
    let took = started.elapsed();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let windows = &body["modelWindows"];
    let fidelity = &body["fidelity"];
    println!(
        "over-window update request: {tokens} estimated tokens, {took:?}, model {}, windows by the model {} of {}, anchors {} kept {} repaired {}",
        body["model"],
        windows["byModel"],
        windows["windows"],
        fidelity["anchors"],
        fidelity["kept"],
        fidelity["repaired"]
    );
    assert!(
        body["model"]
            .as_str()
            .unwrap()
            .starts_with(&format!("openai:{}", local.model)),
        "the model wrote part of it: {body}"
    );
    assert!(
        windows.is_null() || windows["byModel"].as_u64().unwrap() >= 1,
        "{body}"
    );
}
