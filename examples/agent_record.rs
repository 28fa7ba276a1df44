//! A new release of a coding agent, checked the day it appears (`scripts/agents.sh record`), not
//! part of the service. Plays the session of `tests/it/support/agent_scenario.rs` with the agent talking
//! straight to the fake provider, writes every request it made as a fixture (the format of
//! `tests/fixtures/agent-requests/README.md`), then replays the fixture through compactd's
//! gateway (extractive summarizer) and prints, request by request, what compactd recognized,
//! whether it served the compaction or let it through, and what its summary kept: the latest
//! request, the files changed so far, the summary the agent carried from its previous compaction,
//! and none of the agent's own framing. Exits 1 when anything is missing.
//!
//!   cargo run --example agent_record -- AGENT BIN_DIR VERSION OUT_DIR
//!
//! AGENT is `claude-code`, `codex-custom-provider`, `codex-openai-provider` or `opencode`; BIN_DIR
//! holds the agent's binary (`claude`, `codex`, `opencode`).

#[allow(dead_code, unreachable_pub, unused_imports)]
#[path = "../tests/it/support/fake_provider/mod.rs"]
mod fake_provider;

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/it/support/agent_scenario.rs"]
mod agent_scenario;

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/it/support/agent_player.rs"]
mod agent_player;

/// The suite's helpers where they name each other (`crate::support::…`).
mod support {
    pub(crate) use super::{agent_scenario, fake_provider};
}

use std::path::PathBuf;
use std::time::Duration;

use compactd::config::ServeConfig;
use compactd::http::AppState;
use serde_json::{Value, json};
use tokio::net::TcpListener;

use agent_player::Player;
use agent_scenario::{Agent, Expected, answer_text, compaction_item, handed_over, session};
use fake_provider::{FakeProvider, Received};

/// What the agent's key is: a dummy, which the fixture shows as `***`.
const AGENT_KEY: &str = "sk-agent-own-key-for-the-provider";

/// Header values that are credentials are not written to a fixture.
fn redacted(name: &str, value: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let secret = ["auth", "key", "token", "secret", "cookie"]
        .iter()
        .any(|w| lower.contains(w));
    match (secret, value.split_once(' ')) {
        (false, _) => value.to_owned(),
        (true, Some((scheme, _))) if scheme.eq_ignore_ascii_case("bearer") => "Bearer ***".into(),
        (true, _) => "***".into(),
    }
}

fn fixture_line(r: &Received) -> Value {
    let headers: serde_json::Map<String, Value> = r
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), Value::String(redacted(n, v))))
        .collect();
    json!({"seq": r.seq, "compaction": r.compaction, "step": r.step, "method": r.method,
        "path": r.path, "query": r.query, "headers": headers, "body": r.body,
        "reply_kind": r.reply_kind, "reply_text": r.reply_text, "usage_sent": r.usage_sent})
}

/// compactd as the gateway before `provider`, extractive, on a socket of its own.
async fn compactd(provider: &str) -> String {
    let mut config = ServeConfig::defaults();
    config.storage.database_url = Some(compactd::config::Secret::new("sqlite::memory:"));
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{provider}/v1").parse().unwrap();
    config.validate().unwrap();
    let state = AppState::from_config(&config).await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(compactd::http::serve(
        listener,
        state,
        std::future::pending(),
        Duration::from_secs(1),
    ));
    url
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let recorded = match args.as_slice() {
        [agent, bin, version, out] => record(agent, bin, version, out).await,
        [replay, file] if replay == "replay" => read_fixture(file),
        _ => {
            eprintln!(
                "usage: agent_record AGENT BIN_DIR VERSION OUT_DIR | agent_record replay FILE"
            );
            std::process::exit(2);
        }
    };
    std::process::exit(replay(&recorded).await);
}

/// A fixture's requests, as recorded.
fn read_fixture(file: &str) -> Vec<Received> {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap();
            let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
            Received {
                seq: v["seq"].as_u64().unwrap(),
                step: text("step"),
                compaction: v["compaction"].as_bool().unwrap_or(false),
                method: text("method"),
                path: text("path"),
                query: text("query"),
                headers: v["headers"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(n, v)| (n.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect(),
                bytes: serde_json::to_vec(&v["body"]).unwrap(),
                body: v["body"].clone(),
                at: std::time::Instant::now(),
                reply_kind: match v["reply_kind"].as_str() {
                    Some("summary") => "summary",
                    Some("compaction_item") => "compaction_item",
                    _ => "text",
                },
                reply_text: text("reply_text"),
                usage_sent: v["usage_sent"].as_u64().unwrap_or(0),
            }
        })
        .collect()
}

/// Plays the session with `agent` against the recording provider; writes the fixture.
async fn record(agent: &str, bin: &str, version: &str, out: &str) -> Vec<Received> {
    let agent = Agent::ALL
        .into_iter()
        .find(|a| a.name() == agent)
        .unwrap_or_else(|| panic!("unknown agent {agent}"));
    let steps = session();
    let provider = FakeProvider::recording().await;
    let player = Player::new(agent, &PathBuf::from(bin), &provider.url, AGENT_KEY);
    player.play(&provider, &steps, true).await;
    let recorded = provider.received();
    let file = PathBuf::from(out).join(format!("{}-{version}.jsonl", agent.name()));
    let lines: Vec<String> = recorded
        .iter()
        .map(|r| fixture_line(r).to_string())
        .collect();
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let compactions = recorded.iter().filter(|r| r.compaction).count();
    println!(
        "recorded {} requests ({compactions} compactions) in {}",
        recorded.len(),
        file.display()
    );
    recorded
}

/// The recorded requests through compactd, in order; 1 when anything is missing.
async fn replay(recorded: &[Received]) -> i32 {
    let steps = session();
    let upstream = FakeProvider::agents().await;
    let url = compactd(&upstream.url).await;
    let client = reqwest::Client::new();
    let mut problems = 0;
    let mut previous: Option<String> = None;
    let mut since: Option<(String, String)> = None;
    for r in recorded.iter().filter(|r| r.method == "POST") {
        let before = upstream.received().len();
        let mut request = client.post(format!(
            "{url}{}{}",
            r.path,
            if r.query.is_empty() {
                String::new()
            } else {
                format!("?{}", r.query)
            }
        ));
        for (name, value) in &r.headers {
            let skip = ["host", "content-length", "connection", "content-encoding"];
            if !skip.contains(&name.to_ascii_lowercase().as_str()) {
                request = request.header(name, value);
            }
        }
        let response = request.body(r.text()).send().await.unwrap();
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        let served = upstream.received().len() == before;
        let verdict = match (r.compaction, served) {
            (true, true) => "served",
            (true, false) => {
                problems += 1;
                "MISSED: went to the provider"
            }
            (false, true) => {
                problems += 1;
                "FALSE: an ordinary turn answered by compactd"
            }
            (false, false) => "passed through",
        };
        println!("#{:<3} {:<12} {status} {verdict}", r.seq, r.step);
        if r.compaction && served {
            let summary = match compaction_item(&body) {
                // Codex sends the item back with its next turn: what compactd expands it to
                // is what the model reads.
                Some(item) => {
                    let before = upstream.received().len();
                    let next = json!({"model": "gpt-5.5", "stream": true, "input": [item,
                        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "next"}]}]});
                    let mut request = client.post(format!("{url}/v1/responses"));
                    for (name, value) in &r.headers {
                        let skip = ["host", "content-length", "connection", "content-encoding"];
                        if !skip.contains(&name.to_ascii_lowercase().as_str()) {
                            request = request.header(name, value);
                        }
                    }
                    request.json(&next).send().await.unwrap();
                    upstream.received()[before..]
                        .iter()
                        .map(|r| handed_over(&r.body))
                        .collect()
                }
                None => answer_text(&body),
            };
            let since = since.as_ref().map(|(s, r)| (s.as_str(), r.as_str()));
            let expected = Expected::at(&steps, &r.step, &r.text(), since);
            let missing = expected.missing_from(&summary, previous.as_deref());
            problems += missing.len();
            for missing in &missing {
                println!("      {missing}");
            }
            if missing.is_empty() {
                let carried = if previous.is_some() {
                    ", the carried summary"
                } else {
                    ""
                };
                let files = expected.modified.len();
                println!("      kept: the latest request, {files} changed file(s){carried}");
            }
        }
        if r.compaction {
            // The agent carries the fake's summary (a provider's opaque item is none it reads).
            previous = (r.reply_kind == "summary").then(|| format!("FAKE SUMMARY {}", r.seq));
            since = Some((r.step.clone(), r.text()));
        }
    }
    if problems > 0 {
        println!("{problems} problem(s)");
        return 1;
    }
    println!("every compaction served, and every summary kept what it must");
    0
}
