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
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::compact::token_count;
use super::error::ApiError;
use super::json::JsonBody;
use super::{AppState, openapi};
use crate::summarizer::{Summary, SummaryRequest};

#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(super) struct ChatRequest {
    /// The client's model name; compactd routes through its own chain and reports the model that
    /// wrote the answer instead.
    #[serde(default)]
    #[allow(dead_code)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[schema(value_type = Option<u64>)]
    max_tokens: Option<Value>,
    #[schema(value_type = Option<u64>)]
    max_completion_tokens: Option<Value>,
    #[serde(default)]
    stream: bool,
}

/// A chat message: `system`/`developer` ones make the system prompt, the others the prompt.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
struct ChatMessage {
    role: String,
    /// A string, or an array of parts whose `text` values are joined.
    #[serde(default)]
    #[schema(value_type = Object)]
    content: Value,
}

/// The text of a message's content: a string, or the `text` of its parts joined together.
fn content_text(content: &Value) -> Result<String, ApiError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect()),
        other => Err(ApiError::unprocessable(
            "messages",
            format!("message content must be a string or an array of parts, not {other}"),
        )),
    }
}

#[utoipa::path(post, path = "/v1/chat/completions", tag = "summarize", request_body = ChatRequest,
    responses(
        (status = 200, description = "A chat completion whose content is the summary; server-sent chunks with `stream: true`", body = openapi::ChatCompletionDoc),
        (status = 400, description = "Not JSON, or the prompt is too long for every model (`context_length_exceeded`)", body = openapi::ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody),
        (status = 429, description = "Queue full; see Retry-After", body = openapi::ErrorBody),
        (status = 503, description = "No model answered; see Retry-After", body = openapi::ErrorBody),
    ))]
pub(super) async fn chat_completions(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(request): JsonBody<ChatRequest>,
) -> Result<Response, ApiError> {
    let mut system = Vec::new();
    let mut prompt = Vec::new();
    for message in &request.messages {
        let text = content_text(&message.content)?;
        match message.role.as_str() {
            "system" | "developer" => system.push(text),
            _ => prompt.push(text),
        }
    }
    let prompt = prompt.join("\n\n");
    state.check_prompt_size(&system.concat(), &prompt)?;
    if prompt.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "messages",
            "messages hold no user content to summarize",
        ));
    }
    let requested = match token_count(
        request.max_completion_tokens.as_ref(),
        "max_completion_tokens",
    )? {
        Some(n) => Some(n),
        None => token_count(request.max_tokens.as_ref(), "max_tokens")?,
    };
    let max_tokens = state.max_tokens(requested, &prompt);
    let system_prompt = Some(system.join("\n\n"))
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| state.prompts.system.clone());
    let _slot = state.summarization_slot(&caller)?;
    let summary = state
        .summarize(
            "/v1/chat/completions",
            SummaryRequest {
                system_prompt,
                prompt,
                max_tokens,
            },
        )
        .await?;
    let id = format!("chatcmpl-{:016x}", fastrand::u64(..));
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if request.stream {
        Ok(stream_response(id, created, summary))
    } else {
        Ok(Json(json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": summary.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": summary.text},
                "finish_reason": "stop",
            }],
            "usage": {
                "prompt_tokens": summary.usage.input_tokens,
                "completion_tokens": summary.usage.output_tokens,
                "total_tokens": summary.usage.input_tokens + summary.usage.output_tokens,
            },
        }))
        .into_response())
    }
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
    last["usage"] = json!({
        "prompt_tokens": summary.usage.input_tokens,
        "completion_tokens": summary.usage.output_tokens,
        "total_tokens": summary.usage.input_tokens + summary.usage.output_tokens,
    });
    events.push(last);
    let events = events
        .into_iter()
        .map(|data| Event::default().data(data.to_string()))
        .chain(std::iter::once(Event::default().data("[DONE]")))
        .map(Ok::<_, Infallible>);
    Sse::new(stream::iter(events)).into_response()
}
