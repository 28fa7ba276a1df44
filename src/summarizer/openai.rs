//! OpenAI-compatible chat completions (OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio,
//! OpenRouter, …): `POST {base}/chat/completions`, streamed.
//!
//! The answer is streamed (`stream: true`) so that a slow model is judged by whether it is still
//! writing, not by how long the whole answer takes ([`super::stream`]). Servers that answer with
//! one JSON body anyway are read as such. A server that closes the stream without a single event
//! (llama-cpp-python does this when the prompt overflows its window) is asked once more without
//! streaming, which makes it say why.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::stream::{Ended, Progress, Timing, is_event_stream, read_events};
use super::{AttemptError, Summary, SummaryRequest, TokenUsage, read_body, send};
use compactd_core::transcript::estimate_tokens;

/// One client per provider, built once; it serves every model of the provider in the chain.
#[derive(Clone)]
pub struct OpenAiClient {
    http: reqwest::Client,
    /// `…/chat/completions` under the base URL, parsed once rather than on every call.
    chat_url: reqwest::Url,
    api_key: Option<String>,
    /// Headers sent with every call in place of the key: an agent's own credentials, when the
    /// gateway summarizes with the agent's model (never shown by `Debug`).
    credentials: reqwest::header::HeaderMap,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("chat_url", &self.chat_url.as_str())
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("credentials", &self.credentials.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl OpenAiClient {
    /// `base_url` up to and including the API version, e.g. `https://api.openai.com/v1` or
    /// `http://127.0.0.1:11434/v1` for Ollama. The key is optional: local servers need none.
    pub(crate) fn new(
        http: reqwest::Client,
        base_url: &reqwest::Url,
        api_key: Option<String>,
    ) -> Self {
        let chat_url = format!(
            "{}/chat/completions",
            base_url.as_str().trim_end_matches('/')
        );
        OpenAiClient {
            http,
            chat_url: reqwest::Url::parse(&chat_url)
                .expect("a URL with path segments appended is a URL"),
            api_key: api_key.filter(|k| !k.is_empty()),
            credentials: reqwest::header::HeaderMap::new(),
        }
    }

    /// The client with an agent's own credential headers instead of compactd's key.
    pub(crate) fn with_credentials(mut self, credentials: reqwest::header::HeaderMap) -> Self {
        self.api_key = None;
        self.credentials = credentials;
        self
    }

    /// Asks `model` for a summary. `options` are merged into the request body (sampling settings
    /// such as `temperature`, `top_p`, `repeat_penalty`).
    pub(crate) async fn complete(
        &self,
        model: &str,
        options: &Map<String, Value>,
        request: &SummaryRequest,
        timing: &Timing,
    ) -> Result<Summary, AttemptError> {
        if let Asked::Answer(summary) = self.ask(model, options, request, timing, true).await? {
            return Ok(*summary);
        }
        // The server may drop the connection of the silent stream after its answer, and the
        // pool hands that connection out again: a connection error here is asked once more.
        let unstreamed = match self.ask(model, options, request, timing, false).await {
            Err(AttemptError::Connection) => self.ask(model, options, request, timing, false).await,
            other => other,
        };
        match unstreamed? {
            Asked::Answer(summary) => Ok(*summary),
            Asked::SilentStream => Err(AttemptError::Empty),
        }
    }

    async fn ask(
        &self,
        model: &str,
        options: &Map<String, Value>,
        request: &SummaryRequest,
        timing: &Timing,
        streamed: bool,
    ) -> Result<Asked, AttemptError> {
        let mut body = json!({
            "model": model,
            "messages": [
                {"role": "system", "content": request.system_prompt},
                {"role": "user", "content": request.prompt},
            ],
            "max_tokens": request.max_tokens,
            "stream": streamed,
        });
        if streamed {
            body["stream_options"] = json!({"include_usage": true});
        }
        for (key, value) in options {
            body[key] = value.clone();
        }
        let mut call = self.http.post(self.chat_url.clone()).json(&body);
        if let Some(key) = &self.api_key {
            call = call.bearer_auth(key);
        }
        call = call.headers(self.credentials.clone());
        let sent = std::time::Instant::now();
        let response = send(call, timing.first_token_due(sent)).await?;
        let model_name = format!("openai:{model}");
        if !is_event_stream(&response) {
            let bytes = read_body(response, timing.deadline).await?;
            return completion(&bytes, model_name, request).map(|s| Asked::Answer(Box::new(s)));
        }
        let mut text = String::new();
        let mut usage: Option<ChatUsage> = None;
        let ended = read_events(response, sent, timing, |_, data| {
            if data.trim() == "[DONE]" {
                return Ok(Progress::Done);
            }
            let chunk: Chunk = serde_json::from_str(data).map_err(|e| {
                AttemptError::Malformed(format!("not a chat completion chunk: {e}"))
            })?;
            if let Some(error) = chunk.error {
                return Err(stream_error(&error));
            }
            if chunk.usage.is_some() {
                usage = chunk.usage;
            }
            let mut wrote = false;
            for choice in chunk.choices {
                if let Some(content) = choice.delta.content {
                    wrote |= !content.is_empty();
                    text.push_str(&content);
                }
                // Reasoning is not part of the summary, but it is the model writing.
                wrote |= choice
                    .delta
                    .reasoning_content
                    .or(choice.delta.reasoning)
                    .is_some_and(|r| !r.is_empty());
            }
            Ok(if wrote {
                Progress::Token
            } else {
                Progress::Nothing
            })
        })
        .await?;
        match ended {
            Ended::Closed { events: 0 } => return Ok(Asked::SilentStream),
            Ended::Closed { .. } => {
                return Err(AttemptError::Malformed(
                    "the stream ended before the answer was complete".into(),
                ));
            }
            Ended::Done => {}
        }
        Ok(Asked::Answer(Box::new(summary(
            text, usage, model_name, request,
        )?)))
    }
}

/// What one request produced.
enum Asked {
    Answer(Box<Summary>),
    /// A stream that closed without a single event.
    SilentStream,
}

/// The summary of a non-streamed completion.
fn completion(
    bytes: &[u8],
    model_name: String,
    request: &SummaryRequest,
) -> Result<Summary, AttemptError> {
    let parsed: ChatCompletion = serde_json::from_slice(bytes)
        .map_err(|e| AttemptError::Malformed(format!("not a chat completion: {e}")))?;
    let choice = parsed
        .choices
        .into_iter()
        .next()
        .ok_or_else(|| AttemptError::Malformed("no choices in the completion".into()))?;
    let text = match choice.message.content {
        Some(Value::String(text)) => text,
        // Some servers answer with content parts; their texts are joined with no separator.
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    summary(text, parsed.usage, model_name, request)
}

fn summary(
    text: String,
    usage: Option<ChatUsage>,
    model: String,
    request: &SummaryRequest,
) -> Result<Summary, AttemptError> {
    if super::is_blank(&text) {
        return Err(AttemptError::Empty);
    }
    // Servers that stream without usage get the reference's estimate.
    let usage = usage.unwrap_or_else(|| ChatUsage {
        prompt_tokens: estimate_tokens(&request.system_prompt) + estimate_tokens(&request.prompt),
        completion_tokens: estimate_tokens(&text),
        prompt_tokens_details: None,
    });
    Ok(Summary {
        text,
        model,
        usage: TokenUsage {
            input_tokens: usage.prompt_tokens,
            output_tokens: usage.completion_tokens,
            cached_input_tokens: usage
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0),
        },
        fidelity: None,
        flags: Default::default(),
    })
}

/// An error sent inside the stream (`data: {"error": {...}}`).
fn stream_error(error: &Value) -> AttemptError {
    let body = json!({ "error": error }).to_string();
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(500);
    super::classify(status, &reqwest::header::HeaderMap::new(), body.as_bytes())
}

#[derive(Deserialize)]
struct ChatCompletion {
    choices: Vec<Choice>,
    usage: Option<ChatUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: ChoiceMessage,
}

#[derive(Deserialize)]
struct ChoiceMessage {
    content: Option<Value>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<ChatUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Delta,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    /// vLLM, llama.cpp and others stream reasoning in one of these.
    reasoning_content: Option<String>,
    reasoning: Option<String>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct ChatUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    /// OpenAI's automatic prompt caching reports the tokens it read from the cache here.
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(default)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}
