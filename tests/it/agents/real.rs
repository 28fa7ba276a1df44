//! The real agents, run headless as a user runs them, with compactd as the gateway at their model
//! base URL and the fake provider behind it: Claude Code, Codex (a custom provider, and the
//! built-in `openai` one with its remote compaction v2; its TUI for `/compact`) and OpenCode, at
//! the versions `scripts/agents.sh install` pins (`scripts/test.sh` runs it first; the binaries
//! are found in `COMPACTD_AGENTS_BIN` or `target/agents/bin`).
//!
//! Each plays the session of [`crate::support::agent_scenario`]: turns with tool calls, a manual compaction
//! right after five calls (Claude Code then ends its request with a system message of its own),
//! an automatic one inside a tool loop, one before a turn, a second manual one. compactd must
//! serve every compaction (the provider never sees one), each summary must keep the latest
//! request, every file the session changed, the user's rule and none of the agent's framing —
//! whatever earlier compaction it was chained on — and the agent's next request must carry it.
//! A tap between the agent and compactd keeps each exchange, so that what compactd answered is
//! read from the wire, not from compactd.

use std::sync::{Arc, Mutex};

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;

use crate::support::TestApp;
use crate::support::agent_player::Player;
use crate::support::agent_scenario::{
    Agent, Expected, Step, answer_text, compaction_item, handed_over, session,
};
use crate::support::fake_provider::{FakeProvider, decoded};

/// What the agents' key is (a dummy the provider checks it receives).
const AGENT_KEY: &str = "sk-agent-own-key-for-the-provider";

/// The rule the session's user states once, which every summary must carry.
const RULE: &str = "never edit sub";

/// One request the agent made to compactd, and compactd's answer.
#[derive(Debug, Clone)]
struct Exchange {
    step: String,
    method: String,
    /// The body as JSON text (decoded from its `Content-Encoding`).
    request: String,
    answer: String,
    /// How many requests the provider had received when the answer was complete.
    provider_seen: usize,
}

/// A reverse proxy before compactd that keeps every exchange, labelled with the session's step.
#[derive(Clone)]
struct Tap {
    to: String,
    provider: FakeProvider,
    exchanges: Arc<Mutex<Vec<Exchange>>>,
    client: reqwest::Client,
}

impl Tap {
    async fn start(to: &str, provider: &FakeProvider) -> (String, Tap) {
        let tap = Tap {
            to: to.to_owned(),
            provider: provider.clone(),
            exchanges: Arc::default(),
            client: reqwest::Client::new(),
        };
        let router = axum::Router::new().fallback(relay).with_state(tap.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        (url, tap)
    }

    fn exchanges(&self) -> Vec<Exchange> {
        self.exchanges.lock().unwrap().clone()
    }
}

async fn relay(
    axum::extract::State(tap): axum::extract::State<Tap>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let step = tap.provider.step();
    let mut request = tap
        .client
        .request(method.clone(), format!("{}{uri}", tap.to));
    for (name, value) in &headers {
        if !["host", "content-length", "connection"].contains(&name.as_str()) {
            request = request.header(name, value);
        }
    }
    let response = request.body(body.clone()).send().await.unwrap();
    let status = response.status();
    let response_headers = response.headers().clone();
    let answer = response.bytes().await.unwrap();
    let encoding = headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    tap.exchanges.lock().unwrap().push(Exchange {
        step,
        method: method.to_string(),
        request: decoded(encoding, &body).to_string(),
        answer: String::from_utf8_lossy(&answer).into_owned(),
        provider_seen: tap.provider.received().len(),
    });
    let mut reply = Response::new(Body::from(answer));
    *reply.status_mut() = status;
    for (name, value) in &response_headers {
        if !["content-length", "transfer-encoding", "connection"].contains(&name.as_str()) {
            reply.headers_mut().insert(name, value.clone());
        }
    }
    reply
}

/// compactd as the gateway (extractive summarizer, its recall line on) before the fake provider,
/// the tap before compactd, and the agent set up to talk to the tap.
struct Rig {
    _app: TestApp,
    provider: FakeProvider,
    tap: Tap,
    player: Player,
}

impl Rig {
    async fn start(agent: Agent) -> Rig {
        let bin = compactd_testkit::agents_bin();
        let provider = FakeProvider::agents().await;
        let mut config = crate::support::config();
        config.gateway.enabled = true;
        config.gateway.anthropic_upstream = provider.url.parse().unwrap();
        config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
        config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
        config.summarizers.stages.recall_footer = true;
        let app = TestApp::spawn(config).await;
        let (url, tap) = Tap::start(&app.url, &provider).await;
        let player = Player::new(agent, &bin, &url, AGENT_KEY);
        Rig {
            _app: app,
            provider,
            tap,
            player,
        }
    }
}

/// A compaction compactd served: the summary, and what of it the agent sends back.
struct Served {
    summary: String,
    /// The summary's recall id, or Codex's sealed item that stands for it.
    token: String,
}

/// What compactd answered an exchange with, if it served a compaction: the summary the agent
/// got (for Codex's sealed item, what compactd expanded it to in the provider's next request).
fn served(exchange: &Exchange, provider: &FakeProvider) -> Option<Served> {
    if let Some(item) = compaction_item(&exchange.answer) {
        let sealed = item["encrypted_content"].as_str()?;
        if !sealed.starts_with("compactd.") {
            return None;
        }
        let summary = provider.received()[exchange.provider_seen..]
            .iter()
            .map(|r| handed_over(&r.body))
            .find(|text| !text.is_empty())?;
        return Some(Served {
            summary,
            token: sealed.to_owned(),
        });
    }
    let summary = answer_text(&exchange.answer);
    let id = summary
        .split("Earlier detail is searchable")
        .nth(1)?
        .split("id r_")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let token = format!("r_{id}");
    Some(Served { summary, token })
}

/// The markers of each agent's compaction request: the provider must never see one.
fn compaction_markers(agent: Agent) -> &'static [&'static str] {
    match agent {
        Agent::ClaudeCode => &["Your task is to create a detailed summary of the conversation"],
        Agent::CodexCustom => &["You are performing a CONTEXT CHECKPOINT COMPACTION"],
        Agent::CodexOpenai => &["\"compaction_trigger\""],
        Agent::OpenCode => &["You are a context summarization agent"],
    }
}

/// Plays the session with `agent` through compactd and checks every compaction it made.
async fn plays_the_session(agent: Agent) {
    let rig = Rig::start(agent).await;
    let steps = session();
    rig.player.play(&rig.provider, &steps, false).await;
    let exchanges = rig.tap.exchanges();
    let posts = rig.provider.posts();
    assert!(!posts.is_empty(), "the agent's turns reached the provider");

    // The provider saw every ordinary turn, with the agent's own key, and no compaction.
    let first = &posts[0];
    let key = first
        .headers
        .iter()
        .find(|(n, _)| n == "x-api-key" || n == "authorization")
        .map(|(_, v)| v.as_str())
        .unwrap_or_default();
    assert!(key.ends_with(AGENT_KEY), "the agent's own key: {key}");
    for post in &posts {
        for marker in compaction_markers(agent) {
            assert!(
                !post.text().contains(marker),
                "the provider saw a compaction (#{} in {}): {marker}",
                post.seq,
                post.step
            );
        }
    }

    // Every compaction compactd served kept what it must.
    let mut summaries = Vec::new();
    for (at, exchange) in exchanges.iter().enumerate() {
        let Some(Served { summary, token }) = served(exchange, &rig.provider) else {
            continue;
        };
        let expected = Expected::at(&steps, &exchange.step, &exchange.request, None);
        let missing = expected.missing_from(&summary, Some(RULE));
        assert!(
            missing.is_empty(),
            "{} compaction in {}: {missing:?}\n{summary}",
            agent.name(),
            exchange.step
        );
        // The agent carried it on in a later request: to the provider, or to compactd in its
        // next compaction.
        assert!(
            exchanges[at + 1..]
                .iter()
                .any(|e| e.request.contains(&token)),
            "{}: the summary of {} was not carried on",
            agent.name(),
            exchange.step
        );
        summaries.push(exchange.step.clone());
    }
    // Both manual compactions, the one inside the tool loop and the one before a turn.
    for (index, step) in steps.iter().enumerate() {
        let automatic = matches!(step, Step::Turn { spike: Some(_), .. });
        if matches!(step, Step::Compact) || automatic {
            let after = crate::support::agent_scenario::label(index, step);
            let next = crate::support::agent_scenario::label(index + 1, &steps[index + 1]);
            assert!(
                summaries.iter().any(|s| *s == after || *s == next),
                "{}: no compaction served at {after}: {summaries:?}",
                agent.name()
            );
        }
    }
    // Codex tries its WebSocket once and takes HTTP at once: no attempt follows another.
    let methods: Vec<&str> = exchanges.iter().map(|e| e.method.as_str()).collect();
    assert!(
        !methods.windows(2).any(|w| w == ["GET", "GET"]),
        "WebSocket attempts without a POST between: {methods:?}"
    );
}

#[tokio::test]
async fn claude_code_has_every_compaction_served_by_compactd() {
    compactd_testkit::needs!(Agents);
    plays_the_session(Agent::ClaudeCode).await;
}

#[tokio::test]
async fn codex_with_a_custom_provider_has_every_compaction_served_by_compactd() {
    compactd_testkit::needs!(Agents);
    plays_the_session(Agent::CodexCustom).await;
}

#[tokio::test]
async fn codex_with_the_openai_provider_has_every_compaction_served_by_compactd() {
    compactd_testkit::needs!(Agents);
    plays_the_session(Agent::CodexOpenai).await;
}

#[tokio::test]
async fn opencode_has_every_compaction_served_by_compactd() {
    compactd_testkit::needs!(Agents);
    plays_the_session(Agent::OpenCode).await;
}
