//! Zero-wait compaction measured where users wait (issue 67), not part of the service: agent
//! sessions replayed through compactd's gateway with a summarizing model that takes MODEL_SECS a
//! call (10 by default), once with preparation on and once off, each in the same run. Prints, per
//! mode, the time to answer each compaction (p50, p95), the share answered from a prepared
//! summary, and the model calls per compaction (the preparations included).
//!
//!   cargo run --release --example prepare_replay -- [MODEL_SECS] [TURN_SECS] [long|stored] [on] [bare]
//!
//! With `long`, only the long real sessions are replayed; with `stored`, only the long real
//! sessions as stored pi sessions (see [`stored::stored_session`]); with `transcripts`, instead
//! of them the real Claude Code sessions of `tests/fixtures/real-transcripts/` (public
//! repositories' recordings the replay was not written against; see [`played::transcripts`]);
//! with `on`, only with preparation on;
//! with `bare`, the long sessions are sent without Claude Code's session header (an agent that
//! names none: compactd knows the session by its conversation).
//!
//! The sessions: the recorded Claude Code and Codex sessions of `tests/fixtures/agent-requests/`
//! (their requests as the agents sent them; tens of kilobytes each, so prepared past 2 % of the
//! window), and the two long real pi sessions of `tests/fixtures/` (`large-session.jsonl`, 914
//! messages; `before-compaction.jsonl`, 990) played as Claude Code plays a conversation: a request
//! at each turn with everything so far, a compaction once it reaches 80 % of a 128,000-token
//! window (a local model's), the summary carried on as Claude Code carries it. Each turn takes
//! TURN_SECS (0.3 by default: an agent's own model is not instant) before the next.
//!
//! Other sessions (a held-out set): `REPLAY_SESSIONS=a.jsonl,b.jsonl` names the pi session files
//! to play instead of the two long ones (any format version), `REPLAY_RECORDED=x.jsonl,…` the
//! recorded agent requests (as `scripts/agents.sh record` writes them) instead of the six.

mod kept;
mod played;
mod stored;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use compactd::config::ServeConfig;
use compactd::http::AppState;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// The recorded agent sessions replayed unless `REPLAY_RECORDED` names others.
const FIXTURES: [&str; 6] = [
    "claude-code-2.1.330",
    "codex-0.169.0-custom-provider",
    "codex-0.169.0-openai-provider",
    "sessions/claude-code-2.1.332",
    "sessions/codex-custom-provider-0.171.0",
    "sessions/codex-openai-provider-0.171.0",
];
/// The pi sessions replayed unless `REPLAY_SESSIONS` names others.
const LONG_SESSIONS: [&str; 2] = ["large-session.jsonl", "before-compaction.jsonl"];
/// A local model's window, as compactd knows it (any model it does not list).
const LOCAL_MODEL: &str = "qwen3-coder-30b";
const WINDOW_BYTES: usize = 128_000 * 4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The files a comma-separated environment variable names, or else `defaults`.
fn files(variable: &str, defaults: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    match std::env::var(variable) {
        Ok(list) if !list.trim().is_empty() => list.split(',').map(PathBuf::from).collect(),
        _ => defaults.collect(),
    }
}

/// The recorded agent sessions: `REPLAY_RECORDED` (files as `scripts/agents.sh record` writes
/// them), or the six of tests/fixtures/agent-requests/.
fn recorded_files() -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures/agent-requests");
    files(
        "REPLAY_RECORDED",
        FIXTURES.iter().map(|f| dir.join(format!("{f}.jsonl"))),
    )
}

/// The pi sessions: `REPLAY_SESSIONS` (pi session files, any version), or the two long real
/// ones of tests/fixtures/.
fn session_files() -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures");
    files("REPLAY_SESSIONS", LONG_SESSIONS.iter().map(|f| dir.join(f)))
}

/// A file's name, for what is printed.
fn name(file: &Path) -> String {
    file.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The summarizing model: an OpenAI chat endpoint that answers after `delay`.
async fn slow_model(delay: Duration) -> MockServer {
    let server = MockServer::start().await;
    let answer = json!({"id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "## Goal\nThe user's work, as the model summarized it.\n\n## Progress\n### Done\n- (see below)"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}});
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(answer)
                .set_delay(delay),
        )
        .mount(&server)
        .await;
    server
}

/// The agents' provider: answers every turn at once (the pacing is the replay's).
async fn provider() -> MockServer {
    let server = MockServer::start().await;
    let message = json!({"id": "msg", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 1}});
    let sse = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    Mock::given(path("/v1/messages"))
        .respond_with(move |request: &wiremock::Request| {
            let streams =
                serde_json::from_slice::<Value>(&request.body).is_ok_and(|b| b["stream"] == true);
            if streams {
                ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream")
            } else {
                ResponseTemplate::new(200).set_body_json(message.clone())
            }
        })
        .mount(&server)
        .await;
    let completed = "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1,\"total_tokens\":2}}}\n\n";
    Mock::given(path("/v1/responses"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(completed, "text/event-stream"))
        .mount(&server)
        .await;
    server
}

async fn compactd(model: &MockServer, provider: &MockServer, prepare: bool, share: f64) -> String {
    let mut config = ServeConfig::defaults();
    config.storage.database_url = Some(compactd::config::Secret::new("sqlite::memory:"));
    config.summarizers.models = vec!["openai:summarizer".parse().unwrap()];
    config.summarizers.openai_base_url = format!("{}/v1", model.uri()).parse().unwrap();
    config.summarizers.openai_api_key = Some(compactd::config::Secret::new("sk-bench"));
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.uri().parse().unwrap();
    config.gateway.openai_upstream = format!("{}/v1", provider.uri()).parse().unwrap();
    config.gateway.prepare = prepare;
    config.gateway.prepare_at = share;
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

/// One compaction as the agent waited for it.
struct Waited {
    seconds: f64,
    prepared: bool,
    /// What its summary kept, where the replay knows what it must.
    kept: Option<kept::Kept>,
    /// The answer's body.
    answer: String,
}

async fn used(client: &reqwest::Client, url: &str) -> f64 {
    let text = client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("compactd_prepared_summaries_total{outcome=\"used\"}"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Sends one request; when it is a compaction, how long the agent waited and whether a prepared
/// summary answered it.
async fn send(
    client: &reqwest::Client,
    url: &str,
    path_and_query: &str,
    headers: &[(String, String)],
    body: &Value,
    compaction: bool,
) -> Option<Waited> {
    let before = if compaction {
        used(client, url).await
    } else {
        0.0
    };
    let mut request = client.post(format!("{url}{path_and_query}")).json(body);
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        if !["host", "content-length", "connection", "transfer-encoding"].contains(&lower.as_str())
        {
            request = request.header(name, value);
        }
    }
    let started = Instant::now();
    let response = request.send().await.unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let answer = response.text().await.unwrap();
    let seconds = started.elapsed().as_secs_f64();
    if !compaction {
        return None;
    }
    Some(Waited {
        seconds,
        prepared: used(client, url).await > before,
        kept: None,
        answer,
    })
}

async fn recorded(client: &reqwest::Client, url: &str, file: &Path, turn: Duration) -> Vec<Waited> {
    let mut waited = Vec::new();
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let r: Value = serde_json::from_str(line).unwrap();
        if r["body"].is_null() {
            continue;
        }
        let query = r["query"].as_str().unwrap_or_default();
        let path = r["path"].as_str().unwrap();
        let path_and_query = match query {
            "" => path.to_owned(),
            q => format!("{path}?{q}"),
        };
        let headers: Vec<(String, String)> = r["headers"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(n, v)| (n.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let compaction = r["compaction"].as_bool().unwrap();
        let body = r["body"].clone();
        waited.extend(send(client, url, &path_and_query, &headers, &body, compaction).await);
        if !compaction {
            tokio::time::sleep(turn).await;
        }
    }
    waited
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let model_secs: f64 = args.get(1).map_or(10.0, |a| a.parse().unwrap());
    let turn = Duration::from_secs_f64(args.get(2).map_or(0.3, |a| a.parse().unwrap()));
    let only_long = args
        .get(3)
        .is_some_and(|a| ["long", "stored", "transcripts"].contains(&a.as_str()));
    let stored = args.get(3).is_some_and(|a| a == "stored");
    let transcripts = args.get(3).is_some_and(|a| a == "transcripts");
    let bare = args.get(5).is_some_and(|a| a == "bare");
    let client = reqwest::Client::new();
    println!(
        "model {model_secs} s a call, {} s a turn",
        turn.as_secs_f64()
    );
    let modes: &[bool] = if args.get(4).is_some_and(|a| a == "on") {
        &[true]
    } else {
        &[false, true]
    };
    for &prepare in modes {
        let model = slow_model(Duration::from_secs_f64(model_secs)).await;
        let provider = provider().await;
        let mut waited = Vec::new();
        let started = Instant::now();
        // The recorded sessions are tens of kilobytes: prepared past 2 % of the window.
        if !only_long {
            let url = compactd(&model, &provider, prepare, 0.02).await;
            for file in recorded_files() {
                waited.extend(recorded(&client, &url, &file, turn).await);
            }
        }
        let recorded_count = waited.len();
        let url = compactd(&model, &provider, prepare, 0.6).await;
        let played = match transcripts {
            true => played::transcripts(),
            false => Vec::new(),
        };
        for conversation in &played {
            waited.extend(played::play(&client, &url, conversation, turn, bare).await);
        }
        for file in session_files().into_iter().filter(|_| !transcripts) {
            let replayed = match stored {
                true => stored::stored_session(&client, &url, &file, turn).await,
                false => {
                    let conversation = played::anthropic_messages(&file);
                    played::play(&client, &url, &conversation, turn, bare).await
                }
            };
            waited.extend(replayed);
        }
        let calls = model.received_requests().await.unwrap_or_default().len();
        let mode = if prepare { "on " } else { "off" };
        println!(
            "preparation {mode}: {:.2} model calls per compaction; replay {:.0} s",
            calls as f64 / waited.len().max(1) as f64,
            started.elapsed().as_secs_f64()
        );
        let (recorded, long) = waited.split_at(recorded_count);
        for (name, group) in [
            ("recorded agents", recorded),
            ("long sessions", long),
            ("all", &waited[..]),
        ] {
            let mut seconds: Vec<f64> = group.iter().map(|w| w.seconds).collect();
            seconds.sort_by(f64::total_cmp);
            let prepared = group.iter().filter(|w| w.prepared).count();
            println!(
                "  {name}: {} compactions, p50 {:.2} s, p95 {:.2} s, max {:.2} s; {} answered from a prepared summary",
                group.len(),
                percentile(&seconds, 0.5),
                percentile(&seconds, 0.95),
                seconds.last().copied().unwrap_or(f64::NAN),
                prepared,
            );
            let checked: Vec<kept::Kept> = group.iter().filter_map(|w| w.kept).collect();
            if !checked.is_empty() {
                println!(
                    "    kept: the latest request verbatim in {} of {}; the changed files {} of {}",
                    checked.iter().filter(|k| k.latest).count(),
                    checked.len(),
                    checked.iter().map(|k| k.files).sum::<usize>(),
                    checked.iter().map(|k| k.of_files).sum::<usize>(),
                );
            }
        }
    }
}
