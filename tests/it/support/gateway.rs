//! What the gateway's tests share: the recorded agent requests (`tests/fixtures/agent-requests/`),
//! compactd configured as the gateway before it, and
//! readers of the streams the agents get.

use compactd::config::ServeConfig;
use serde_json::Value;

use crate::support::{FakeProvider, Reply, chain_config};

/// What compactd's own summarizer model writes: the agents' summaries must be this.
pub const MODEL_SUMMARY: &str =
    "## Objective\nSUMMARY BY COMPACTD'S MODEL: the user asked what calc.py does.";

/// One request an agent made, as recorded.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub fixture: &'static str,
    pub seq: u64,
    pub compaction: bool,
    pub method: String,
    pub path_and_query: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

/// The recordings: the first four by hand (README), the others the session of
/// `tests/it/support/agent_scenario.rs` as `scripts/agents.sh record` plays it.
pub const FIXTURES: [&str; 8] = [
    "claude-code-2.1.330",
    "codex-0.169.0-custom-provider",
    "codex-0.169.0-openai-provider",
    "opencode-1.18.33",
    "sessions/claude-code-2.1.332",
    "sessions/codex-custom-provider-0.171.0",
    "sessions/codex-openai-provider-0.171.0",
    "sessions/opencode-1.18.33",
];

/// The agent a fixture was recorded from: `claude-code`, `codex-custom`, `codex-openai` or
/// `opencode`.
pub fn agent_of(fixture: &str) -> &'static str {
    let name = fixture.rsplit('/').next().unwrap_or(fixture);
    if name.starts_with("claude-code") {
        "claude-code"
    } else if name.contains("custom-provider") {
        "codex-custom"
    } else if name.contains("openai-provider") {
        "codex-openai"
    } else {
        "opencode"
    }
}

/// Every request of a fixture, in the order the agent made them.
pub fn recorded(fixture: &'static str) -> Vec<Recorded> {
    let path = format!(
        "{}/tests/fixtures/agent-requests/{fixture}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| {
            let line: Value = serde_json::from_str(line).unwrap();
            let query = line["query"].as_str().unwrap_or_default();
            let path = line["path"].as_str().unwrap();
            Recorded {
                fixture,
                seq: line["seq"].as_u64().unwrap(),
                compaction: line["compaction"].as_bool().unwrap(),
                method: line["method"].as_str().unwrap().to_owned(),
                path_and_query: match query {
                    "" => path.to_owned(),
                    query => format!("{path}?{query}"),
                },
                headers: line["headers"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(n, v)| (n.clone(), v.as_str().unwrap().to_owned()))
                    .collect(),
                body: Some(line["body"].clone()).filter(|b| !b.is_null()),
            }
        })
        .collect()
}

/// Headers a client's connection sets: not the agent's, and not forwarded as they are.
pub fn connection_header(name: &str) -> bool {
    ["host", "content-length", "connection", "transfer-encoding"]
        .contains(&name.to_ascii_lowercase().as_str())
}

impl Recorded {
    pub fn body_bytes(&self) -> Vec<u8> {
        self.body
            .as_ref()
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default()
    }

    /// The request as the agent sent it, to `base` (compactd's URL, with a `/k/KEY` prefix when
    /// the agent carries a key).
    pub fn request(&self, client: &reqwest::Client, base: &str) -> reqwest::RequestBuilder {
        self.request_with_body(client, base, self.body_bytes())
    }

    pub fn request_with_body(
        &self,
        client: &reqwest::Client,
        base: &str,
        body: Vec<u8>,
    ) -> reqwest::RequestBuilder {
        let method = reqwest::Method::from_bytes(self.method.as_bytes()).unwrap();
        let mut request = client.request(method, format!("{base}{}", self.path_and_query));
        for (name, value) in &self.headers {
            if !connection_header(name) {
                request = request.header(name, value);
            }
        }
        match self.body {
            Some(_) => request.body(body),
            None => request,
        }
    }
}

/// compactd as the gateway in front of `provider`, its own summaries written by `model`.
pub fn gateway_config(model: &FakeProvider, provider: &FakeProvider) -> ServeConfig {
    let mut config = chain_config(model, "openai:compactd-summarizer", false);
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    config.gateway.codex_upstream = provider.url.parse().unwrap();
    config
}

/// compactd's model answering every summarization with [`MODEL_SUMMARY`].
pub async fn summarizer_model() -> FakeProvider {
    FakeProvider::start(vec![], Reply::openai(MODEL_SUMMARY)).await
}

/// The `data:` payloads of a server-sent event stream, as JSON (`[DONE]` left out).
pub fn events(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The text an agent reads from compactd's streamed answer in its wire.
pub fn streamed_text(recorded: &Recorded, body: &str) -> String {
    let events = events(body);
    let pick = |event: &Value| -> Option<String> {
        match event["type"].as_str() {
            Some("content_block_delta") => event.pointer("/delta/text"),
            Some("response.output_text.delta") => event.get("delta"),
            _ if recorded.path_and_query.contains("chat/completions") => {
                event.pointer("/choices/0/delta/content")
            }
            _ => None,
        }
        .and_then(Value::as_str)
        .map(str::to_owned)
    };
    events.iter().filter_map(pick).collect()
}

/// Codex's remote compaction (built-in `openai` provider, as recorded): the trigger request and
/// the next turn, which sends the compaction item back.
pub fn codex_trigger_and_next() -> (Recorded, Recorded) {
    let requests = recorded("codex-0.169.0-openai-provider");
    let at = |seq| requests.iter().find(|r| r.seq == seq).unwrap().clone();
    (at(29), at(30))
}

/// The one compaction item of a streamed Responses answer.
pub fn compaction_item(answer: &str) -> Value {
    events(answer)
        .into_iter()
        .find(|e| e["type"] == "response.output_item.done")
        .expect("a compaction item was answered")["item"]
        .clone()
}

/// The body of Codex's next turn with `item` where it sends its compaction item back.
pub fn with_item(next: &Recorded, item: &Value) -> Vec<u8> {
    let mut body = next.body.clone().unwrap();
    let input = body["input"].as_array_mut().unwrap();
    let at = input
        .iter()
        .position(|i| i["type"] == "compaction")
        .unwrap();
    input[at] = item.clone();
    serde_json::to_vec(&body).unwrap()
}
