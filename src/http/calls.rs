//! `GET /v1/calls`: the caller's tenant's call log, a page at a time, newest first — every
//! summary compactd wrote or tried to, on any wire, with the agent and wire it came by, its
//! tokens before and after, and what the fidelity gate found (see [`crate::app::views::calls`]).
//! Prompts and summaries are never in it.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::QueryParams;
use compactd_core::session::time::epoch_ms_to_iso;
use compactd_store::CallRecord;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(calls))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct CallsParams {
    /// Most calls (1–500, default 50).
    limit: Option<i64>,
    /// Only calls older than this one: the `next` of the page before.
    before: Option<i64>,
}

/// One summarization call.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Call {
    id: i64,
    /// When it ended (UTC, ISO 8601).
    at: String,
    /// The way in: `/v1/compact`, `/v1/chat/completions`, `session_compaction`,
    /// `branch_summary`, `cli`, `gateway:AGENT`.
    endpoint: String,
    /// The agent it was for: `claude-code`, `codex`, `codex-remote`, `opencode`, `pi`,
    /// `pi-family` (the remote endpoint), `openai-client` (the chat wire); empty for calls logged
    /// before compactd recorded it.
    agent: String,
    /// The wire it came by: `anthropic-messages`, `responses`, `chat-completions`,
    /// `remote-endpoint`, `session`, `cli`.
    wire: String,
    /// `prompt`, `history`, `turn_prefix` or `branch`.
    purpose: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    /// The model that wrote the summary (`extractive` for the built-in summarizer); none when
    /// it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    /// `ok`, or why it failed.
    outcome: String,
    /// The HTTP status its caller got.
    status: i64,
    latency_ms: i64,
    /// Tokens the model read and wrote.
    input_tokens: i64,
    output_tokens: i64,
    /// Estimated tokens of what the summary replaces, and of the summary.
    tokens_before: i64,
    tokens_after: i64,
    /// The fidelity gate's anchors, and how many the summary kept.
    #[serde(skip_serializing_if = "Option::is_none")]
    anchors: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    anchors_kept: Option<i64>,
    /// Answered from the summary cache.
    cached: bool,
    loop_detected: bool,
    /// Over the tenant's daily budget: the extractive summarizer answered (the gateway passed
    /// the agent's own compaction to its provider).
    budget_exhausted: bool,
}

impl From<CallRecord> for Call {
    fn from(c: CallRecord) -> Call {
        Call {
            id: c.call_id,
            at: epoch_ms_to_iso(c.created_at_ms),
            endpoint: c.endpoint,
            agent: c.agent,
            wire: c.wire,
            purpose: c.purpose,
            session_id: c.session_id,
            model: c.model,
            outcome: c.outcome,
            status: c.status,
            latency_ms: c.latency_ms,
            input_tokens: c.input_tokens,
            output_tokens: c.output_tokens,
            tokens_before: c.tokens_before,
            tokens_after: c.tokens_after,
            anchors: c.anchors,
            anchors_kept: c.anchors_kept,
            cached: c.cached,
            loop_detected: c.loop_detected,
            budget_exhausted: c.budget_exhausted,
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct Calls {
    calls: Vec<Call>,
    /// The `before` of the next page, when one follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<i64>,
}

/// `GET /v1/calls`: the caller's tenant's calls, newest first.
#[utoipa::path(get, path = "/v1/calls", tag = "operations", params(CallsParams),
    responses(
        (status = 200, description = "A page of calls, newest first (a call is listed a moment after it ends)", body = Calls),
        (status = 422, description = "An unknown or invalid parameter", body = ErrorBody),
    ))]
pub(super) async fn calls(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<CallsParams>,
) -> Result<Json<Calls>, ApiError> {
    let page = state
        .app
        .calls_page(&caller.0, params.before, params.limit.unwrap_or(50))
        .await?;
    Ok(Json(Calls {
        calls: page.calls.into_iter().map(Call::from).collect(),
        next: page.next,
    }))
}
