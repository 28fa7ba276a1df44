//! The gateway's routes (see [`crate::agents`], which decides what each request is): Anthropic
//! Messages for Claude Code, OpenAI Responses for Codex; chat completions (OpenCode) share
//! `chat.rs`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{RawBody, RawBodyRejected};
use crate::agents::{self, Gateway, Outcome, Wire};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(messages))
        .routes(routes!(count_tokens))
        .routes(routes!(responses, responses_socket))
        .routes(routes!(responses_compact))
        .routes(routes!(codex_responses, codex_responses_socket))
        .routes(routes!(codex_responses_compact))
}

/// The gateway, or 404 when it is off (these routes do not exist then).
fn gateway(state: &AppState) -> Result<&Gateway, ApiError> {
    state.gateway.as_deref().ok_or(ApiError::NotFound)
}

/// An agent's request on `wire`, handled by [`agents::handle`]; the answer is its wire's.
async fn handle(
    state: &AppState,
    who: &crate::access::Identity,
    wire: Wire,
    request: agents::Request,
) -> Result<Response, ApiError> {
    let gateway = gateway(state)?;
    match agents::handle(&state.app, gateway, who, wire, request).await? {
        Outcome::Response(response) => Ok(response),
        // Only the chat wire answers a chat summary.
        Outcome::Chat { .. } => Err(ApiError::NotFound),
    }
}

/// An agent's request body, or its refusal: a refused request of an agent session leaves no
/// older request of it standing as its latest (see [`crate::app::threads::seen`]).
pub(super) fn agent_body(
    state: &AppState,
    who: &crate::access::Identity,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<RawBody, ApiError> {
    body.map_err(|rejected| {
        state.app.forget_agent_request(who, &rejected.headers);
        rejected.error
    })
}

#[utoipa::path(post, path = "/v1/messages", tag = "gateway",
    request_body(content = Object, description = "An Anthropic Messages request, as Claude Code sends it"),
    responses(
        (status = 200, description = "Claude Code's compaction answered by compactd (`<summary>` tags, streamed when asked); Anthropic's on-demand compaction (`compaction: {\"type\": \"summarize\"}`) answered with compactd's `compaction` block alone (`stop_reason: \"compaction\"`, its `signature` compactd's seal of the summary, for the caller); the upstream's answer to anything else, streamed through, with compactd's own blocks replaced by their summaries before it goes upstream",
            content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "`ambiguous_credentials`: compactd's key came in the only header the provider reads its credential from (send it in `/k/KEY/` or `X-Compactd-Key`); `invalid_content_encoding`: the body does not decode as its `Content-Encoding`; in Anthropic's shape as well (`type: \"error\"`, `error.details.error_code`), a compaction the API refuses: `compaction_nothing_to_summarize`, `compaction_incomplete_turn`, `compaction_content_mismatch` (a block of compactd's whose content was changed), `compaction_block_misplaced`, or `compaction` with `context_management`", body = ErrorBody),
        (status = 404, description = "The gateway is off (`COMPACTD_GATEWAY`), or beyond loopback an unknown key in a `/k/KEY/` URL", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`, in the shape Anthropic and OpenAI clients read)", body = Object),
    ))]
pub(super) async fn messages(
    State(state): State<AppState>,
    Caller(who): Caller,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    let body = agent_body(&state, &who, body)?;
    handle(&state, &who, Wire::AnthropicMessages, body.into_request()).await
}

#[utoipa::path(post, path = "/v1/messages/count_tokens", tag = "gateway",
    request_body(content = Object, description = "Passed to the Anthropic upstream"),
    responses(
        (status = 200, description = "The upstream's answer", body = Object),
        (status = 400, description = "`ambiguous_credentials`: compactd's key came in the only header the provider reads its credential from (send it in `/k/KEY/` or `X-Compactd-Key`); `invalid_content_encoding`: the body does not decode as its `Content-Encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`, in the shape Anthropic and OpenAI clients read)", body = Object),
    ))]
pub(super) async fn count_tokens(
    State(state): State<AppState>,
    Caller(_who): Caller,
    body: RawBody,
) -> Result<Response, ApiError> {
    let gateway = gateway(&state)?;
    Ok(agents::forward(gateway, Wire::AnthropicMessages, body.into_request()).await?)
}

#[utoipa::path(post, path = "/v1/responses", tag = "gateway",
    request_body(content = Object, description = "An OpenAI Responses request, as Codex sends it"),
    responses(
        (status = 200, description = "Codex's compaction answered by compactd (for remote compaction v2, one `compaction` item compactd can read back), or the upstream's answer to anything else, with compactd's own compaction items expanded into their summaries before it goes upstream",
            content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "`ambiguous_credentials`: compactd's key came in the only header the provider reads its credential from (send it in `/k/KEY/` or `X-Compactd-Key`); `invalid_content_encoding`: the body does not decode as its `Content-Encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`, in the shape Anthropic and OpenAI clients read)", body = Object),
    ))]
pub(super) async fn responses(
    State(state): State<AppState>,
    Caller(who): Caller,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    let body = agent_body(&state, &who, body)?;
    handle(&state, &who, Wire::Responses, body.into_request()).await
}

#[utoipa::path(get, path = "/v1/responses", tag = "gateway",
    responses(
        (status = 426, description = "`websocket_not_served`: the Responses WebSocket is not served. Codex takes a 426 to its WebSocket handshake as the signal to use HTTP for the rest of the session at once (other answers it retries, about 6 s of a `codex exec`'s start)", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
    ))]
pub(super) async fn responses_socket(State(state): State<AppState>) -> Result<Response, ApiError> {
    gateway(&state)?;
    Ok(ApiError::Invalid {
        status: axum::http::StatusCode::UPGRADE_REQUIRED,
        code: "websocket_not_served",
        message: "compactd serves the Responses API over HTTP: POST /v1/responses".into(),
        param: None,
    }
    .into_response())
}

#[utoipa::path(post, path = "/v1/responses/compact", tag = "gateway",
    request_body(content = Object, description = "An OpenAI `responses.compact` request: `model`, `input` (a string or Responses input items), `instructions`"),
    responses(
        (status = 200, description = "The conversation compacted by compactd: a `response.compaction` whose `output` is the input's user messages, then one `compaction` item (compactd's, sealed for the caller; sent back in a later turn's input, compactd opens it into its summary). A compaction compactd does not answer (its models down, the tenant's budget spent) is the upstream's answer", body = Object),
        (status = 400, description = "`invalid_value`: the body is not a JSON object; `invalid_content_encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 422, description = "`input` missing (and no `previous_response_id` for the upstream), or nothing to compact", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`)", body = Object),
    ))]
pub(super) async fn responses_compact(
    State(state): State<AppState>,
    Caller(who): Caller,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    let gateway = gateway(&state)?;
    let body = agent_body(&state, &who, body)?;
    Ok(agents::responses_compact::compact(&state.app, gateway, &who, body.into_request()).await?)
}

#[utoipa::path(post, path = "/codex/responses", tag = "gateway",
    request_body(content = Object, description = "A Responses request on the ChatGPT backend's Codex path, as oh-my-pi's `openai-codex` provider (its base URL at compactd) sends it"),
    responses(
        (status = 200, description = "As `POST /v1/responses`: a Codex remote compaction (`compaction_trigger` last) answered by compactd with its `compaction` item; anything else the answer of the Codex upstream (`COMPACTD_GATEWAY_CODEX_UPSTREAM`, the ChatGPT backend), with compactd's items expanded first",
            content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "`ambiguous_credentials`, `invalid_content_encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`)", body = Object),
    ))]
pub(super) async fn codex_responses(
    state: State<AppState>,
    caller: Caller,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    responses(state, caller, body).await
}

#[utoipa::path(get, path = "/codex/responses", tag = "gateway",
    responses(
        (status = 426, description = "`websocket_not_served`: as `GET /v1/responses`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
    ))]
pub(super) async fn codex_responses_socket(state: State<AppState>) -> Result<Response, ApiError> {
    responses_socket(state).await
}

#[utoipa::path(post, path = "/codex/responses/compact", tag = "gateway",
    request_body(content = Object, description = "A `responses.compact` request on the ChatGPT backend's Codex path (oh-my-pi's `openai-codex` provider, its first compaction lane)"),
    responses(
        (status = 200, description = "As `POST /v1/responses/compact`; what compactd does not answer goes to the Codex upstream", body = Object),
        (status = 400, description = "`invalid_value`, `invalid_content_encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 422, description = "`input` missing, or nothing to compact", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`)", body = Object),
    ))]
pub(super) async fn codex_responses_compact(
    state: State<AppState>,
    caller: Caller,
    body: Result<RawBody, RawBodyRejected>,
) -> Result<Response, ApiError> {
    responses_compact(state, caller, body).await
}
