//! The Anthropic Messages API: `POST {base}/v1/messages`, streamed.
//!
//! Streamed events: `message_start` (input usage), `content_block_start`/`_delta`/`_stop` (text,
//! thinking), `message_delta` (output usage), `message_stop`, `ping` keep-alives, and `error`
//! (for example `overloaded_error` in the middle of an answer).

use serde_json::{Map, Value, json};

use super::stream::{Ended, Progress, Timing, is_event_stream, read_events};
use super::{AttemptError, Summary, SummaryRequest, TokenUsage, read_body, send};

#[derive(Clone)]
pub struct AnthropicClient {
    http: reqwest::Client,
    base_url: String,
    api_key: String,
    version: String,
    /// Headers sent with every call in place of the key: an agent's own credentials, when the
    /// gateway summarizes with the agent's model (never shown by `Debug`).
    credentials: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("version", &self.version)
            .field("credentials", &self.credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl AnthropicClient {
    /// `base_url` without the `/v1` path, e.g. `https://api.anthropic.com`.
    pub(crate) fn new(
        http: reqwest::Client,
        base_url: &str,
        api_key: String,
        version: String,
    ) -> Self {
        AnthropicClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            version,
            credentials: reqwest::header::HeaderMap::new(),
        }
    }

    /// The client with an agent's own credential headers (`x-api-key` or `authorization`, and
    /// the `anthropic-*` headers that go with them) instead of compactd's key.
    pub(crate) fn with_credentials(mut self, credentials: reqwest::header::HeaderMap) -> Self {
        self.api_key.clear();
        self.credentials = credentials;
        self
    }

    pub(crate) async fn complete(
        &self,
        model: &str,
        options: &Map<String, Value>,
        request: &SummaryRequest,
        timing: &Timing,
    ) -> Result<Summary, AttemptError> {
        let mut body = json!({
            "model": model,
            "max_tokens": request.max_tokens,
            "messages": [{"role": "user", "content": user_content(request)}],
            "stream": true,
        });
        // The system prompt is the same for every summarization of a kind, across all agents:
        // the stable prefix Anthropic's prompt cache can serve.
        if !request.system_prompt.is_empty() {
            body["system"] = json!([{"type": "text", "text": request.system_prompt,
                "cache_control": {"type": "ephemeral"}}]);
        }
        for (key, value) in options {
            body[key] = value.clone();
        }
        let mut call = self
            .http
            .post(format!("{}/v1/messages", self.base_url))
            .header("anthropic-version", &self.version)
            .json(&body);
        if !self.api_key.is_empty() {
            call = call.header("x-api-key", &self.api_key);
        }
        // Replaces what it names (an agent's own `anthropic-version` included).
        call = call.headers(self.credentials.clone());
        let sent = std::time::Instant::now();
        // Errors: {"type":"error","error":{"type":"overloaded_error","message":"…"}}; 529
        // "overloaded" is Anthropic's retryable server status.
        let response = send(call, timing.first_token_due(sent)).await?;
        let model_name = format!("anthropic:{model}");
        if !is_event_stream(&response) {
            let bytes = read_body(response, timing.deadline).await?;
            return whole_message(&bytes, model_name);
        }
        let mut answer = Streamed::default();
        let ended = read_events(response, sent, timing, |_, data| answer.event(data)).await?;
        if let Ended::Closed { .. } = ended {
            return Err(AttemptError::Malformed(
                "the stream ended before the answer was complete".into(),
            ));
        }
        let text = answer.blocks.join("\n");
        if super::is_blank(&text) {
            return Err(AttemptError::Empty);
        }
        Ok(Summary {
            text,
            model: model_name,
            usage: answer.usage,
            fidelity: None,
            flags: Default::default(),
        })
    }
}

/// A Messages answer as its events arrive: its text blocks and what it used.
#[derive(Default)]
struct Streamed {
    blocks: Vec<String>,
    usage: TokenUsage,
}

impl Streamed {
    /// One event's `data`, and whether the model wrote, finished, or neither.
    fn event(&mut self, data: &str) -> Result<Progress, AttemptError> {
        let event: Value = serde_json::from_str(data)
            .map_err(|e| AttemptError::Malformed(format!("not a Messages event: {e}")))?;
        let field = |path: &[&str]| {
            path.iter()
                .try_fold(&event, |v, key| v.get(key))
                .and_then(Value::as_u64)
        };
        Ok(match event.get("type").and_then(Value::as_str) {
            Some("message_start") => {
                let input = |key| field(&["message", "usage", key]).unwrap_or(0);
                // Anthropic counts tokens read from or written to its prompt cache apart.
                self.usage.input_tokens = input("input_tokens")
                    + input("cache_read_input_tokens")
                    + input("cache_creation_input_tokens");
                self.usage.cached_input_tokens = input("cache_read_input_tokens");
                Progress::Nothing
            }
            Some("content_block_start") => {
                if event["content_block"]["type"] == "text" {
                    self.blocks.push(
                        event["content_block"]["text"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                }
                Progress::Nothing
            }
            Some("content_block_delta") => {
                if event["delta"]["type"] == "text_delta" {
                    let piece = event["delta"]["text"].as_str().unwrap_or_default();
                    match self.blocks.last_mut() {
                        Some(block) => block.push_str(piece),
                        None => self.blocks.push(piece.to_owned()),
                    }
                }
                // Thinking and tool input are the model writing too.
                Progress::Token
            }
            Some("message_delta") => {
                if let Some(output) = field(&["usage", "output_tokens"]) {
                    self.usage.output_tokens = output;
                }
                Progress::Nothing
            }
            Some("message_stop") => Progress::Done,
            Some("error") => return Err(stream_error(&event)),
            _ => Progress::Nothing,
        })
    }
}

/// Shortest text Anthropic caches (1024 tokens for most models): below it a cache breakpoint
/// does nothing.
const MIN_CACHED_TOKENS: u64 = 1024;

/// The user turn. An update summary's previous summary is what retries, loops and forks of one
/// session send again with another conversation: when it is long enough to be cached it goes
/// first, as a block of its own marked as a cache breakpoint, then the conversation and the
/// instructions (which name both by their tags, so the order does not change what is asked).
fn user_content(request: &SummaryRequest) -> Value {
    use compactd_core::transcript::prompt::previous_block;
    let prompt = &request.prompt;
    let Some(previous) = (request.shape().previous_summary.as_deref())
        .filter(|p| compactd_core::transcript::estimate_tokens(p) >= MIN_CACHED_TOKENS)
    else {
        return json!(prompt);
    };
    // The block follows the conversation (whose own tags the agent escapes): the last one.
    let block = previous_block(previous);
    match prompt.rfind(&block) {
        Some(at) => json!([
            {"type": "text", "text": block.trim_start(), "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": format!("{}{}", &prompt[..at], &prompt[at + block.len()..])},
        ]),
        None => json!(prompt),
    }
}

/// An `error` event: its `error.type` tells what kind of failure it was.
fn stream_error(event: &Value) -> AttemptError {
    let status = match event["error"]["type"].as_str() {
        Some("overloaded_error") => 529,
        Some("rate_limit_error") => 429,
        Some("api_error") => 500,
        Some("request_too_large") => 413,
        _ => 400,
    };
    super::classify(
        status,
        &reqwest::header::HeaderMap::new(),
        event.to_string().as_bytes(),
    )
}

/// A non-streamed Messages response: its text blocks joined with a newline.
fn whole_message(bytes: &[u8], model: String) -> Result<Summary, AttemptError> {
    let parsed: Value = serde_json::from_slice(bytes)
        .map_err(|e| AttemptError::Malformed(format!("not a Messages response: {e}")))?;
    let content = parsed
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| AttemptError::Malformed("a Messages response without content".into()))?;
    let text = content
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    if super::is_blank(&text) {
        return Err(AttemptError::Empty);
    }
    let usage = |key: &str| parsed["usage"][key].as_u64().unwrap_or(0);
    Ok(Summary {
        text,
        model,
        usage: TokenUsage {
            // Anthropic counts tokens read from or written to its prompt cache apart.
            input_tokens: usage("input_tokens")
                + usage("cache_read_input_tokens")
                + usage("cache_creation_input_tokens"),
            output_tokens: usage("output_tokens"),
            cached_input_tokens: usage("cache_read_input_tokens"),
        },
        fidelity: None,
        flags: Default::default(),
    })
}
