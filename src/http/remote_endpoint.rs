//! `POST /v1/compact`: the `compaction.remoteEndpoint` wire contract of pi-family agents
//! (spec §10.2): `{systemPrompt, prompt, maxTokens?}` in, `{summary, model, usage}` out.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::JsonBody;
use crate::app::wire::{StagesView, WireRequest, token_count};
use crate::pipeline::Endpoint;
use crate::summarizer::TokenUsage;
use compactd_core::fidelity::Report;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(compact))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactRequest {
    /// The agent's summarization system prompt; compactd's own when absent.
    system_prompt: Option<String>,
    /// The fully rendered prompt; treated as opaque text.
    prompt: String,
    /// Output cap (R5 clients send it; older ones do not).
    #[schema(value_type = Option<u64>)]
    max_tokens: Option<Value>,
}

/// The summary of an agent's prompt.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactResponse {
    summary: String,
    /// `provider:model` or `extractive`.
    model: String,
    #[schema(value_type = crate::openapi::TokenUsage)]
    usage: TokenUsage,
    /// What compactd checked the summary against and repaired (agents read only `summary`).
    #[schema(value_type = crate::openapi::Report)]
    fidelity: Report,
    #[serde(flatten)]
    stages: StagesView,
    /// The recall id the conversation was kept under: `recall_search` / `GET /v1/recall/search`
    /// find its turns until `COMPACTD_RECALL_RETENTION` has passed.
    #[serde(skip_serializing_if = "Option::is_none")]
    recall_id: Option<String>,
}

#[utoipa::path(post, path = "/v1/compact", tag = "summarize", request_body = CompactRequest,
    responses(
        (status = 200, description = "The summary", body = CompactResponse),
        (status = 400, description = "Not JSON, or the prompt is too long for every model (`context_length_exceeded`)", body = ErrorBody),
        (status = 404, description = "Beyond loopback: no key, or an unknown or revoked one in a `/k/KEY/` URL", body = ErrorBody),
        (status = 413, description = "Body or prompt over the limit", body = ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = ErrorBody),
        (status = 429, description = "Queue full; see Retry-After", body = ErrorBody),
        (status = 503, description = "No model answered; see Retry-After", body = ErrorBody),
    ))]
pub(super) async fn compact(
    State(state): State<AppState>,
    Caller(who): Caller,
    headers: axum::http::HeaderMap,
    JsonBody(request): JsonBody<CompactRequest>,
) -> Result<Json<CompactResponse>, ApiError> {
    let max_tokens = token_count(request.max_tokens.as_ref(), "maxTokens")?;
    let request = WireRequest {
        system_prompt: request.system_prompt,
        prompt: request.prompt,
        conversation: None,
        previous_summary: None,
        max_tokens,
        prompt_field: "prompt",
    };
    // A session whose turns passed through the gateway may have its summary ready (issue 67).
    let prepared = match &state.gateway {
        Some(gateway) => {
            crate::agents::answered_remote(&state.app, gateway, &who, &headers, &request).await
        }
        None => None,
    };
    let summary = match prepared {
        Some(summary) => summary,
        None => {
            state
                .app
                .summarize_prompt(&who, Endpoint::Compact, request)
                .await?
        }
    }
    .into_inner();
    Ok(Json(CompactResponse {
        summary: summary.text,
        model: summary.model,
        usage: summary.usage,
        stages: StagesView::from(&summary.flags),
        recall_id: summary.flags.recall_id.clone(),
        fidelity: summary.fidelity.unwrap_or_default(),
    }))
}
