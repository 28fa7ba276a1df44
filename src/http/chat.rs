//! `POST /v1/chat/completions`: OpenAI's chat-completions API, for agent forks whose
//! `remoteEndpoint` ends in `/chat/completions` and for any OpenAI client. The system messages
//! become the system prompt, the other messages the prompt; the answer's content is the summary.
//! With `stream: true` the same answer comes as server-sent events in OpenAI's chunk format.
//!
//! The `Authorization` header such clients send carries the agent's own provider key: it is
//! never read, logged or forwarded.

use compactd_core::redact::Redacted;
use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue};
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use serde::Serialize;
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{RawBody, RawBodyRejected};
use crate::agents::{self, ChatRequest, Outcome, Wire};
use crate::app::wire::StagesView;
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
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    let body = super::gateway::agent_body(&state, &who, body)?;
    // With the gateway on, this is also an agent's model base URL, and the agents' layer reads
    // the body only when it may be a summarization; with it off, the body is compactd's own
    // summarization request, read here (a JSON object, or the error that says why not).
    let outcome = match state.gateway.as_deref() {
        Some(gateway) => {
            let request = body.into_request();
            agents::handle(&state.app, gateway, &who, Wire::ChatCompletions, request).await?
        }
        None => agents::summarize_chat(&state.app, &who, &body.json::<Value>()?).await?,
    };
    let (summary, stream) = match outcome {
        Outcome::Response(response) => return Ok(response),
        Outcome::Chat { summary, stream } => (summary, stream),
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
    let mut response = if stream {
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

fn chat_completion(id: String, created: u64, summary: Redacted<Summary>) -> Response {
    let summary = summary.into_inner();
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
fn stream_response(id: String, created: u64, summary: Redacted<Summary>) -> Response {
    let summary = summary.into_inner();
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
