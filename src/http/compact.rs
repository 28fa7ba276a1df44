//! `POST /v1/compact`: the `compaction.remoteEndpoint` wire contract of pi-family agents
//! (spec §10.2): `{systemPrompt, prompt, maxTokens?}` in, `{summary, model, usage}` out.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::auth::Caller;
use super::error::ApiError;
use super::json::JsonBody;
use super::{AppState, openapi};
use crate::summarizer::{SummaryRequest, TokenUsage};

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

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactResponse {
    summary: String,
    model: String,
    usage: TokenUsage,
}

/// Reads a positive integer token count; `param` names the field in the error.
pub(super) fn token_count(value: Option<&Value>, param: &str) -> Result<Option<u64>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) | None => Err(ApiError::unprocessable(
                param,
                format!("{param} must be a positive integer, not {n}"),
            )),
            Some(count) => Ok(Some(count)),
        },
        Some(other) => Err(ApiError::unprocessable(
            param,
            format!("{param} must be a positive integer, not {other}"),
        )),
    }
}

#[utoipa::path(post, path = "/v1/compact", tag = "summarize", request_body = CompactRequest,
    responses(
        (status = 200, description = "The summary", body = openapi::CompactResponseDoc),
        (status = 400, description = "Not JSON, or the prompt is too long for every model (`context_length_exceeded`)", body = openapi::ErrorBody),
        (status = 413, description = "Body over the limit", body = openapi::ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody),
        (status = 429, description = "Queue full; see Retry-After", body = openapi::ErrorBody),
        (status = 503, description = "No model answered; see Retry-After", body = openapi::ErrorBody),
    ))]
pub(super) async fn compact(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(request): JsonBody<CompactRequest>,
) -> Result<Json<CompactResponse>, ApiError> {
    if request.prompt.trim().is_empty() {
        return Err(ApiError::unprocessable(
            "prompt",
            "prompt is empty: there is nothing to summarize",
        ));
    }
    state.check_prompt_size(
        request.system_prompt.as_deref().unwrap_or_default(),
        &request.prompt,
    )?;
    let requested = token_count(request.max_tokens.as_ref(), "maxTokens")?;
    let max_tokens = state.max_tokens(requested, &request.prompt);
    let system_prompt = request
        .system_prompt
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| state.prompts.system.clone());
    let _slot = state.summarization_slot(&caller)?;
    let summary = state
        .summarize(
            "/v1/compact",
            SummaryRequest {
                system_prompt,
                prompt: request.prompt,
                max_tokens,
            },
        )
        .await?;
    Ok(Json(CompactResponse {
        summary: summary.text,
        model: summary.model,
        usage: summary.usage,
    }))
}
