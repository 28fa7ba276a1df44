//! A rubric every summary compactd writes must pass, checked on text no one here wrote (issue 56):
//! the real pi sessions (`before-compaction.jsonl`, `large-session.jsonl`), the pi 1.5 samples
//! (split turns, planned as pi 1.5.2 planned them) and the recorded agents' compactions (Claude
//! Code, Codex with a custom provider, OpenCode), extractive and behind a model that drops what it
//! should keep. Per summary: no tool output, escapes or records in the goal and the rules; no
//! framing anywhere (pi's `# Conversation` / `# Instructions`, `<conversation>`, `[User]:`, the
//! agents' own continuation text); no bullet twice; the latest request verbatim; every file the
//! summarized span changed. `RUBRIC_REPORT=1` prints every summary checked.

use compactd_core::compaction::plan::PlanOutcome;
use compactd_core::compaction::tokens::CompactionSettings;
use compactd_core::session::{ParseOptions, Session};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::standing_chain::LOSSY;
use crate::support::agent_scenario::{Expected, FRAMING, session};
use crate::support::gateway::{
    agent_of, gateway_config, recorded, streamed_text, summarizer_model,
};
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

/// What a summary must hold: the latest request of its span and the files the span changed.
#[derive(Default)]
pub struct Must<'a> {
    pub latest: Option<&'a str>,
    pub modified: Vec<String>,
}

/// Sections that hold the user's goal and rules, under any agent's headings.
fn is_goal_or_rules(heading: &str) -> bool {
    let heading = heading.to_lowercase();
    [
        "goal",
        "objective",
        "constraint",
        "intent",
        "important details",
    ]
    .iter()
    .any(|h| heading.contains(h))
}

/// Text a tool printed, or the escapes of a record it was carried in.
fn tool_output(line: &str) -> bool {
    let line = line.trim_start_matches(['-', '*', ' ']);
    line.contains("\\n")
        || line.contains("\\\"")
        || line.starts_with("{\"")
        || line.starts_with("> ")
        || line.starts_with("$ ")
        || line.starts_with("at ") && line.ends_with(')')
}

/// A bullet's text without its marker and checkbox, for comparing.
fn bullet(line: &str) -> Option<String> {
    let t = line.trim();
    let rest = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            (digits > 0)
                .then(|| t[digits..].strip_prefix(". "))
                .flatten()
        })?;
    let rest = rest
        .trim_start_matches("[x] ")
        .trim_start_matches("[ ] ")
        .trim();
    (rest.len() >= 8).then(|| rest.to_lowercase())
}

/// What `summary` does wrong by the rubric.
pub fn violations(summary: &str, must: &Must) -> Vec<String> {
    let mut wrong = Vec::new();
    if let Some(latest) = must.latest {
        // Its first paragraph, as written (what follows it is often pasted output).
        let paragraph = latest.trim().split("\n\n").next().unwrap_or_default();
        let head: String = paragraph.chars().take(200).collect();
        if !summary.contains(&head) {
            wrong.push(format!("the latest request is not quoted: {head:?}"));
        }
    }
    for file in &must.modified {
        if !summary.contains(file.as_str()) {
            wrong.push(format!("the changed file {file} is missing"));
        }
    }
    // The latest request is quoted as written, whatever it holds: the rest is compactd's.
    let own = match must.latest {
        Some(latest) if latest.trim().len() >= 12 => summary.replace(latest.trim(), "<latest>"),
        _ => summary.to_owned(),
    };
    let mut heading = "";
    let mut seen = std::collections::HashSet::new();
    for line in own.lines() {
        if line.starts_with('#') {
            heading = line;
        }
        // pi's split-turn summary is two summaries (the history's and the turn prefix's): a
        // bullet may be in both.
        if line.trim() == "**Turn Context (split turn):**" {
            seen.clear();
        }
        let trimmed = line.trim();
        if ["# Conversation", "# Instructions"].contains(&trimmed)
            || trimmed.starts_with("<conversation>")
            || trimmed.starts_with("[User]:")
            || trimmed.starts_with("[Assistant]:")
            || trimmed.contains("- [ ] # Conversation")
            || trimmed.contains("was compacted into the following summary")
            || trimmed.contains("summary of a branch that this conversation came back from")
        {
            wrong.push(format!("framing: {trimmed:?}"));
        }
        if is_goal_or_rules(heading) && tool_output(line) {
            wrong.push(format!("tool output under {heading:?}: {trimmed:?}"));
        }
        if let Some(item) = bullet(line)
            && !seen.insert(item)
        {
            wrong.push(format!("a bullet twice: {trimmed:?}"));
        }
    }
    for framing in FRAMING {
        if own.contains(framing) {
            wrong.push(format!("the agent's framing: {framing:?}"));
        }
    }
    wrong
}

pub fn report(name: &str, summary: &str) {
    if std::env::var_os("RUBRIC_REPORT").is_some() {
        println!("===== {name}\n{summary}\n");
    }
}

/// The text of a user message entry, when the entry is one.
fn user_text(raw: &[u8]) -> Option<String> {
    let entry: Value = serde_json::from_slice(raw).ok()?;
    let message = &entry["message"];
    if message["role"] != "user" {
        return None;
    }
    match &message["content"] {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            let text: Vec<&str> = blocks.iter().filter_map(|b| b["text"].as_str()).collect();
            (!text.is_empty()).then(|| text.join("\n"))
        }
        _ => None,
    }
}

/// The real and sample sessions, each compacted at two settings, as pi would plan them.
fn sessions() -> Vec<(String, String)> {
    let dir = format!("{}/tests/fixtures", env!("CARGO_MANIFEST_DIR"));
    [
        "before-compaction.jsonl",
        "large-session.jsonl",
        "pi15/s0000.jsonl",
        "pi15/s0001.jsonl",
        "pi15/s0002.jsonl",
    ]
    .iter()
    .map(|f| {
        (
            f.to_string(),
            std::fs::read_to_string(format!("{dir}/{f}")).unwrap(),
        )
    })
    .collect()
}

/// The span a compaction at `keep` summarizes: its latest request and changed files (compactd's
/// planner, checked against pi's own plans in `pi15.rs` and `conformance.rs`).
fn planned(text: &str, keep: u64) -> Option<(Option<String>, Vec<String>)> {
    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    let settings = CompactionSettings {
        keep_recent_tokens: keep,
        reserve_tokens: 16384,
        ..Default::default()
    };
    let plan =
        serde_json::to_value(PlanOutcome::for_path(&path, &settings)).unwrap()["plan"].clone();
    if plan.is_null() {
        return None;
    }
    let kept_at = plan["firstKeptPathIndex"].as_u64().unwrap() as usize;
    let latest = path[..kept_at]
        .iter()
        .rev()
        .find_map(|e| user_text(e.raw.as_ref()).filter(|t| !t.trim_start().starts_with('/')));
    let modified = plan["modifiedFiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    Some((latest, modified))
}

async fn session_summaries_pass(models: &str) {
    let mut checked = 0;
    for (name, text) in sessions() {
        for keep in [2000, 20000] {
            let Some((latest, modified)) = planned(&text, keep) else {
                continue;
            };
            let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
            let app = TestApp::handlers(chain_config(&fake, models, false)).await;
            let uploaded = app.upload(text.clone()).await;
            assert_eq!(uploaded.status(), StatusCode::CREATED, "{name}");
            let id = uploaded.json::<Value>().await.unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned();
            let compacted = app
                .compact_session(&id, &json!({"keepRecentTokens": keep}))
                .await;
            assert_eq!(compacted.status(), StatusCode::CREATED, "{name} k={keep}");
            let compacted: Value = compacted.json().await.unwrap();
            let summary = compacted["entry"]["summary"].as_str().unwrap();
            report(&format!("{name} k={keep} {models}"), summary);
            let must = Must {
                latest: latest.as_deref(),
                modified,
            };
            let wrong = violations(summary, &must);
            assert!(
                wrong.is_empty(),
                "{name} k={keep} {models}: {wrong:#?}\n{summary}"
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} compactions checked");
}

#[tokio::test]
async fn every_real_session_summary_passes_the_rubric_extractive() {
    session_summaries_pass("extractive").await;
}

#[tokio::test]
async fn every_real_session_summary_passes_the_rubric_behind_a_lossy_model() {
    session_summaries_pass("openai:gpt-test").await;
}

/// The recorded agents' compactions whose summary reaches the agent as text (Codex's built-in
/// provider gets a sealed item), through the gateway.
async fn agent_summaries_pass(extractive: bool) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    if extractive {
        config.summarizers.models = vec!["extractive".parse().unwrap()];
    }
    let app = TestApp::spawn(config).await;
    let steps = session();
    let mut checked = 0;
    for fixture in crate::support::gateway::FIXTURES {
        if agent_of(fixture) == "codex-openai" {
            continue;
        }
        // The recorded sessions say which step each request was made in: what it must keep is
        // known from the session's script (what changed since the last compaction, whose
        // summary was the recording's, not compactd's).
        let mut since: Option<(String, String)> = None;
        for recorded in recorded(fixture).into_iter().filter(|r| r.compaction) {
            let response = recorded
                .request(&app.client, &app.url)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let text = streamed_text(&recorded, &response.text().await.unwrap());
            let request = String::from_utf8(recorded.body_bytes()).unwrap();
            let step = recorded_step(fixture, recorded.seq);
            let expected = step.as_deref().map(|step| {
                Expected::at(
                    &steps,
                    step,
                    &request,
                    since.as_ref().map(|(s, r)| (s.as_str(), r.as_str())),
                )
            });
            let must = match &expected {
                Some(e) => Must {
                    latest: Some(e.latest),
                    modified: e.modified.iter().map(|f| f.to_string()).collect(),
                },
                None => Must::default(),
            };
            let name = format!("{fixture} seq {} extractive={extractive}", recorded.seq);
            report(&name, &text);
            let wrong = violations(&text, &must);
            assert!(wrong.is_empty(), "{name}: {wrong:#?}\n{text}");
            if let Some(step) = step {
                since = Some((step, request));
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked} compactions checked");
}

/// The step of the agent session a recorded request was made in (the hand-recorded fixtures
/// have none).
fn recorded_step(fixture: &str, seq: u64) -> Option<String> {
    if !fixture.starts_with("sessions/") {
        return None;
    }
    let path = format!(
        "{}/tests/fixtures/agent-requests/{fixture}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["seq"] == seq)
        .and_then(|l| l["step"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn every_recorded_agent_compaction_passes_the_rubric_extractive() {
    agent_summaries_pass(true).await;
}

#[tokio::test]
async fn every_recorded_agent_compaction_passes_the_rubric_behind_a_model() {
    agent_summaries_pass(false).await;
}

#[test]
fn the_rubric_catches_what_it_names() {
    let must = Must {
        latest: Some("now add the docs"),
        modified: vec!["src/a.rs".to_owned()],
    };
    let good = "## Goal\nShip it.\n- never push to main\n\n## Critical Context\n- Latest user request (verbatim): now add the docs\n- Files modified: src/a.rs";
    assert!(violations(good, &must).is_empty());
    for bad in [
        good.replace("src/a.rs", "src/b.rs"),
        good.replace("now add the docs", "add docs"),
        good.replace("Ship it.", "# Conversation"),
        good.replace("- never push to main", "- No fixes applied.\\n\\n> check"),
        good.replace(
            "- never push to main",
            "- never push to main\n- [ ] Never push to main",
        ),
        good.replace("Ship it.", "[User]: ship it"),
    ] {
        assert!(!violations(&bad, &must).is_empty(), "{bad}");
    }
}
