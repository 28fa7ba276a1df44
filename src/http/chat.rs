//! `POST /v1/chat/completions`: OpenAI's chat-completions API, for agent forks whose
//! `remoteEndpoint` ends in `/chat/completions` and for any OpenAI client. The system messages
//! become the system prompt, the other messages the prompt; the answer's content is the summary.
//! With `stream: true` the same answer comes as server-sent events in OpenAI's chunk format.
//!
//! The `Authorization` header such clients send carries the agent's own provider key: it is
//! never read, logged or forwarded.

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, Method, Uri};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::compact::token_count;
use super::error::{ApiError, ErrorBody};
use super::json::RawBody;
use crate::app::wire::{StagesView, WireRequest};
use crate::gateway::detect;
use crate::pipeline::Endpoint;
use crate::summarizer::Summary;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(chat_completions))
}

/// An OpenAI chat completion whose content is the summary (with `stream: true`, the same as
/// `chat.completion.chunk` server-sent events).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct ChatCompletion {
    id: String,
    /// `chat.completion`
    object: &'static str,
    created: u64,
    /// The model that wrote the summary.
    model: String,
    choices: Vec<Choice>,
    usage: ChatUsage,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct Choice {
    index: u32,
    message: ChoiceMessage,
    /// `stop`
    finish_reason: &'static str,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ChoiceMessage {
    /// `assistant`
    role: &'static str,
    /// The summary.
    content: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
struct ChatUsage {
    prompt_tokens: u64,
    completion_tokens: u64,
    total_tokens: u64,
}

impl ChatUsage {
    fn of(summary: &Summary) -> ChatUsage {
        ChatUsage {
            prompt_tokens: summary.usage.input_tokens,
            completion_tokens: summary.usage.output_tokens,
            total_tokens: summary.usage.input_tokens + summary.usage.output_tokens,
        }
    }
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(super) struct ChatRequest {
    /// The client's model name; compactd routes through its own chain and reports the model that
    /// wrote the answer instead.
    #[serde(default)]
    model: Option<String>,
    /// Chat messages: `system`/`developer` ones make the system prompt. One user message is a
    /// rendered prompt; a longer history (with `tool_calls`, `tool` messages, content parts) is a
    /// conversation whose last user message, when it is last, is the instructions.
    #[schema(value_type = Vec<Object>)]
    messages: Vec<Value>,
    #[schema(value_type = Option<u64>)]
    max_tokens: Option<Value>,
    #[schema(value_type = Option<u64>)]
    max_completion_tokens: Option<Value>,
    #[serde(default)]
    stream: bool,
}

/// The text of a message's content: a string, or the `text` of its parts joined together.
fn content_text(content: &Value, at: usize) -> Result<String, ApiError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect()),
        other => {
            let param = format!("messages[{at}].content");
            let message = format!("{param} must be a string or an array of parts, not {other}");
            Err(ApiError::unprocessable(&param, message))
        }
    }
}

/// What a chat request asks to summarize, split: the system prompt, and either a rendered prompt
/// (one user message, as oh-my-pi sends it) or a structured conversation and its instructions.
fn split_messages(messages: &[Value]) -> Result<(String, WirePrompt), ApiError> {
    let mut system = Vec::new();
    let mut rest = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).ok_or_else(|| {
            let param = format!("messages[{at}].role");
            ApiError::unprocessable(&param, format!("{param} must be a string"))
        })?;
        let content = message.get("content").unwrap_or(&Value::Null);
        let text = content_text(content, at)?;
        match role {
            "system" | "developer" => system.push(text),
            _ => rest.push((role, text, message)),
        }
    }
    let structured = rest.len() > 1
        || rest
            .iter()
            .any(|(role, _, message)| *role != "user" || message.get("tool_calls").is_some());
    if !structured {
        let prompt = rest.into_iter().map(|(_, text, _)| text).collect();
        return Ok((system.join("\n\n"), WirePrompt::Text(prompt)));
    }
    // The instruction an agent appends to its history to have it summarized.
    let instructions = match rest.last() {
        Some(("user", text, message)) if message.get("tool_calls").is_none() => {
            let text = text.clone();
            rest.pop();
            text
        }
        _ => String::new(),
    };
    let history: Vec<Value> = rest.into_iter().map(|(_, _, m)| m.clone()).collect();
    let conversation = crate::transcript::structured::from_chat(&history);
    Ok((
        system.join("\n\n"),
        WirePrompt::Conversation(conversation, instructions),
    ))
}

enum WirePrompt {
    Text(String),
    Conversation(crate::transcript::Conversation, String),
}

#[utoipa::path(post, path = "/v1/chat/completions", tag = "summarize", request_body = ChatRequest,
    responses(
        (status = 200, description = "A chat completion whose content is the summary; with `stream: true`, server-sent `chat.completion.chunk` events ending in `data: [DONE]`",
            headers(("x-compactd-fidelity" = String, description = "The fidelity gate's report: `anchors=N; kept=N; repaired=N; appended=N; missing=N; repair-call=BOOL`"),
                ("x-compactd-stages" = String, description = "What the pipeline did: `cached=BOOL; loop=BOOL; budget-exhausted=BOOL; redactions=N`")),
            content((ChatCompletion = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "Not JSON, or the prompt is too long for every model (`context_length_exceeded`); with the gateway on, a request to forward whose only provider credential header carried compactd's key (`ambiguous_credentials`)", body = ErrorBody),
        (status = 404, description = "Beyond loopback: no compactd key, or an unknown or revoked one in a `/k/KEY/` URL", body = ErrorBody),
        (status = 413, description = "Body or prompt over the limit", body = ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = ErrorBody),
        (status = 429, description = "Queue full; see Retry-After", body = ErrorBody),
        (status = 503, description = "No model answered; see Retry-After", body = ErrorBody),
    ))]
pub(super) async fn chat_completions(
    State(state): State<AppState>,
    Caller(who): Caller,
    method: Method,
    uri: Uri,
    body: RawBody,
) -> Result<Response, ApiError> {
    // With the gateway on, this is also an agent's model base URL: only summarization requests
    // are compactd's to answer; the agent's ordinary turns go upstream as they came.
    let mut endpoint = Endpoint::ChatCompletions;
    if let Some(gateway) = state.gateway.as_deref() {
        let plain = body.readable();
        let parsed: Option<Value> = detect::may_be_compaction(plain)
            .then(|| serde_json::from_slice(plain).ok())
            .flatten();
        match parsed.as_ref() {
            Some(value) if detect::is_chat_summarization(value) => {
                if let Some(agent) = detect::chat_agent(value) {
                    endpoint = Endpoint::Gateway(agent);
                }
            }
            _ => {
                let RawBody { headers, bytes, .. } = body;
                return super::gateway::forward_openai(gateway, method, &uri, &headers, bytes)
                    .await;
            }
        }
    }
    let request: ChatRequest = body.json()?;
    let (system, prompt) = split_messages(&request.messages)?;
    let (prompt, conversation) = match prompt {
        WirePrompt::Text(prompt) => (prompt, None),
        WirePrompt::Conversation(conversation, instructions) => (instructions, Some(conversation)),
    };
    let max_tokens = match token_count(
        request.max_completion_tokens.as_ref(),
        "max_completion_tokens",
    )? {
        Some(n) => Some(n),
        None => token_count(request.max_tokens.as_ref(), "max_tokens")?,
    };
    // The gateway's `agent` mode: OpenCode's compaction written by the model it asked for.
    let chain = match (state.gateway.as_deref(), endpoint) {
        (Some(gateway), Endpoint::Gateway(agent)) => gateway.agent_chain(
            agent,
            request.model.as_deref().unwrap_or_default(),
            &body.headers,
            &state.app.pipeline.chain,
        ),
        _ => None,
    };
    let summary = state
        .app
        .summarize_prompt_with(
            &who,
            endpoint,
            WireRequest {
                system_prompt: Some(system),
                prompt,
                conversation,
                previous_summary: None,
                max_tokens,
                prompt_field: "messages",
            },
            chain,
        )
        .await;
    // An agent's own compaction that compactd cannot answer (its models down, the tenant's
    // budget spent) goes to the agent's provider, as it would without compactd.
    let summary = match (summary, state.gateway.as_deref(), endpoint) {
        (Ok(summary), _, _) if !summary.flags.budget_exhausted => summary,
        (result, Some(gateway), Endpoint::Gateway(agent)) => {
            super::gateway::log_fallback(agent, result.as_ref().err());
            let RawBody { headers, bytes, .. } = body;
            return super::gateway::forward_openai(gateway, method, &uri, &headers, bytes).await;
        }
        (result, _, _) => result?,
    };
    let id = format!("chatcmpl-{:016x}", fastrand::u64(..));
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    // OpenAI's body has no place for it: the gate's report rides in a header.
    let fidelity = summary
        .fidelity
        .as_ref()
        .and_then(|r| HeaderValue::from_str(&r.header_value()).ok());
    let stages = HeaderValue::from_str(&StagesView::from(&summary.flags).header_value())
        .expect("the stages header is ASCII");
    let mut response = if request.stream {
        stream_response(id, created, summary)
    } else {
        chat_completion(id, created, summary)
    };
    if let Some(value) = fidelity {
        response.headers_mut().insert(FIDELITY_HEADER, value);
    }
    response.headers_mut().insert(STAGES_HEADER, stages);
    Ok(response)
}

/// The header that carries the fidelity report of a chat completion.
pub(super) const FIDELITY_HEADER: HeaderName = HeaderName::from_static("x-compactd-fidelity");

/// The header that says what the pipeline's stages did (cache, loop, budget, redactions).
pub(super) const STAGES_HEADER: HeaderName = HeaderName::from_static("x-compactd-stages");

fn chat_completion(id: String, created: u64, summary: Summary) -> Response {
    Json(ChatCompletion {
        id,
        object: "chat.completion",
        created,
        usage: ChatUsage::of(&summary),
        model: summary.model,
        choices: vec![Choice {
            index: 0,
            message: ChoiceMessage {
                role: "assistant",
                content: summary.text,
            },
            finish_reason: "stop",
        }],
    })
    .into_response()
}

/// Characters of content per streamed chunk.
const CHUNK_CHARS: usize = 1024;

/// The finished summary as OpenAI chunks: the role, the content in pieces, the finish reason
/// with usage, then `[DONE]`.
fn stream_response(id: String, created: u64, summary: Summary) -> Response {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": created, "model": summary.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    };
    let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
    let chars: Vec<char> = summary.text.chars().collect();
    for piece in chars.chunks(CHUNK_CHARS) {
        events.push(chunk(
            json!({"content": piece.iter().collect::<String>()}),
            None,
        ));
    }
    let mut last = chunk(json!({}), Some("stop"));
    last["usage"] = json!(ChatUsage::of(&summary));
    events.push(last);
    let events = events
        .into_iter()
        .map(|data| Event::default().data(data.to_string()))
        .chain(std::iter::once(Event::default().data("[DONE]")))
        .map(Ok::<_, Infallible>);
    Sse::new(stream::iter(events)).into_response()
}
