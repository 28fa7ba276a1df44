//! The gateway's routes (see [`crate::gateway`]): Anthropic Messages for Claude Code, OpenAI
//! Responses for Codex; chat completions (OpenCode) share `chat.rs`. A compaction is answered by
//! compactd in the agent's wire; anything else goes to the configured upstream as it came. When
//! compactd cannot answer a compaction (its models down, the tenant's budget spent), the agent's
//! own request goes upstream: the agent is never worse off than without compactd.

use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::RawBody;
use crate::access::Identity;
use crate::app::AppError;
use crate::gateway::answer::{self, Answer};
use crate::gateway::detect::{self, Agent, Compaction};
use crate::gateway::proxy::{self, Credentials};
use crate::gateway::{Gateway, codex};
use crate::summarizer::Summary;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(messages))
        .routes(routes!(count_tokens))
        .routes(routes!(responses, responses_socket))
}

/// The gateway, or 404 when it is off (these routes do not exist then).
fn gateway(state: &AppState) -> Result<&Gateway, ApiError> {
    state.gateway.as_deref().ok_or(ApiError::NotFound)
}

/// A compaction summarized by compactd, or `None` when the agent's request should go upstream.
async fn summarize(
    state: &AppState,
    who: &Identity,
    compaction: &Compaction,
    headers: &HeaderMap,
) -> Option<Summary> {
    let chain = state.gateway.as_deref().and_then(|g| {
        g.agent_chain(
            compaction.agent,
            &compaction.model,
            headers,
            &state.app.pipeline.chain,
        )
    });
    match state.app.summarize_compaction(who, compaction, chain).await {
        Ok(summary) if !summary.flags.budget_exhausted => Some(summary),
        result => {
            log_fallback(compaction.agent, result.as_ref().err());
            None
        }
    }
}

/// Why an agent's own compaction went to its provider: the tenant's budget, or compactd's error.
pub(super) fn log_fallback(agent: Agent, error: Option<&AppError>) {
    let agent = agent.label();
    match error {
        None => tracing::info!(
            agent,
            "gateway: the tenant's budget is spent; the agent's own compaction goes upstream"
        ),
        Some(error) => {
            tracing::warn!(agent, error = %error, "gateway: compactd could not summarize; the agent's own compaction goes upstream")
        }
    }
}

#[utoipa::path(post, path = "/v1/messages", tag = "gateway",
    request_body(content = Object, description = "An Anthropic Messages request, as Claude Code sends it"),
    responses(
        (status = 200, description = "Claude Code's compaction answered by compactd (`<summary>` tags, streamed when asked), or the upstream's answer to anything else, streamed through",
            content((Object = "application/json"), (String = "text/event-stream"))),
        (status = 400, description = "`ambiguous_credentials`: compactd's key came in the only header the provider reads its credential from (send it in `/k/KEY/` or `X-Compactd-Key`); `invalid_content_encoding`: the body does not decode as its `Content-Encoding`", body = ErrorBody),
        (status = 404, description = "The gateway is off (`COMPACTD_GATEWAY`), or beyond loopback an unknown key in a `/k/KEY/` URL", body = ErrorBody),
        (status = 413, description = "Body over the limit", body = ErrorBody),
        (status = 502, description = "The upstream could not be reached (`upstream_unreachable`, in the shape Anthropic and OpenAI clients read)", body = Object),
    ))]
pub(super) async fn messages(
    State(state): State<AppState>,
    Caller(who): Caller,
    method: Method,
    uri: Uri,
    body: RawBody,
) -> Result<Response, ApiError> {
    let gateway = gateway(&state)?;
    let plain = body.readable();
    let parsed: Option<Value> = detect::may_be_compaction(plain)
        .then(|| serde_json::from_slice(plain).ok())
        .flatten();
    if let Some(compaction) = parsed.as_ref().and_then(detect::anthropic_messages)
        && let Some(summary) = summarize(&state, &who, &compaction, &body.headers).await
    {
        let text = answer::with_summary_tags(&summary.text);
        let reply = Answer {
            text: &text,
            model: &compaction.model,
            usage: summary.usage,
        };
        return Ok(answer::anthropic(&reply, compaction.stream));
    }
    forward_anthropic(gateway, method, &uri, body).await
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
    method: Method,
    uri: Uri,
    body: RawBody,
) -> Result<Response, ApiError> {
    let gateway = gateway(&state)?;
    forward_anthropic(gateway, method, &uri, body).await
}

async fn forward_anthropic(
    gateway: &Gateway,
    method: Method,
    uri: &Uri,
    body: RawBody,
) -> Result<Response, ApiError> {
    let target = proxy::target(&gateway.anthropic_upstream, uri.path(), "", uri.query());
    gateway
        .proxy
        .forward(
            target,
            Credentials::Anthropic,
            method,
            &body.headers,
            body.bytes,
        )
        .await
        .map_err(ambiguous)
}

/// Where an OpenAI-wire request goes: the upstream (which includes `/v1`) and the path after it.
pub(super) async fn forward_openai(
    gateway: &Gateway,
    method: Method,
    uri: &Uri,
    headers: &axum::http::HeaderMap,
    bytes: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let target = proxy::target(&gateway.openai_upstream, uri.path(), "/v1", uri.query());
    gateway
        .proxy
        .forward(target, Credentials::OpenAi, method, headers, bytes)
        .await
        .map_err(ambiguous)
}

/// 400 when the only header the provider would read its credential from carried compactd's key
/// instead (the key is never forwarded, so the provider would get none; docs/agents.md says how
/// an agent sends both).
fn ambiguous(ambiguous: proxy::AmbiguousCredentials) -> ApiError {
    ApiError::Invalid {
        status: axum::http::StatusCode::BAD_REQUEST,
        code: "ambiguous_credentials",
        message: format!(
            "the {} header carries a compactd key, which compactd never forwards, and the provider \
             reads its credential from the same header: send compactd's key in the URL \
             (/k/KEY/…) or in X-Compactd-Key, and the provider's key as the agent always does",
            ambiguous.header
        ),
        param: Some(ambiguous.header.into()),
    }
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
    method: Method,
    uri: Uri,
    body: RawBody,
) -> Result<Response, ApiError> {
    let gateway = gateway(&state)?;
    let RawBody {
        mut headers,
        mut bytes,
        plain,
    } = body;
    let plain = plain.unwrap_or_default();
    let holds_item = codex::may_hold_item(&plain);
    let mut parsed: Option<Value> = (detect::may_be_compaction(&plain) || holds_item)
        .then(|| serde_json::from_slice(&plain).ok())
        .flatten();
    // compactd's items from an earlier compaction, the caller's own: their summaries, before
    // anything reads them. The rewritten body goes upstream plain.
    if holds_item && let Some(value) = parsed.as_mut() {
        let seal = gateway.seal(&state.app.store).await?;
        if seal.expand(value, &who) > 0 {
            bytes = value.to_string().into();
            headers.remove(axum::http::header::CONTENT_ENCODING);
        }
    }
    if let Some(compaction) = parsed.as_ref().and_then(|b| detect::responses(&headers, b))
        && let Some(summary) = summarize(&state, &who, &compaction, &headers).await
    {
        let reply = Answer {
            text: &summary.text,
            model: &compaction.model,
            usage: summary.usage,
        };
        let item = match compaction.agent {
            Agent::CodexRemote => Some(
                gateway
                    .seal(&state.app.store)
                    .await?
                    .item(&summary.text, &who),
            ),
            _ => None,
        };
        return Ok(answer::responses(&reply, compaction.stream, item));
    }
    forward_openai(gateway, method, &uri, &headers, bytes).await
}

#[utoipa::path(get, path = "/v1/responses", tag = "gateway",
    responses(
        (status = 404, description = "The Responses WebSocket is not served: Codex falls back to HTTP at once", body = ErrorBody),
    ))]
pub(super) async fn responses_socket(State(state): State<AppState>) -> Result<Response, ApiError> {
    gateway(&state)?;
    Ok(ApiError::NotFound.into_response())
}
