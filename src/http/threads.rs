//! Thread references (issue 57): `POST /v1/threads/read {thread, question}` answers a question
//! from one of the caller's stored sessions or kept conversations, citing its entries: written
//! by the configured model after a short loop of searches and reads, or the relevant entries
//! quoted, ranked.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::JsonBody;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(read))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ReadRequest {
    /// A stored session's id, or a recall id (the caller's tenant's).
    #[schema(value_type = String)]
    thread: compactd_core::ids::Id,
    /// What to find out from it (at most 2,000 characters).
    question: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct HitView {
    entry_id: String,
    role: String,
    text: String,
    /// A later entry that revises this one.
    revised_by: Option<String>,
    /// A tool call whose result was an error (or that result).
    failed: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThreadAnswer {
    /// The model's answer, or the relevant entries quoted, the most recent first; within 4,000
    /// characters.
    answer: String,
    /// `provider:model`, or `extractive` (quoted without a model).
    answered_by: String,
    /// Calls made to the model (its searches and reads, then its answer).
    model_steps: usize,
    /// The entries the answer rests on.
    citations: Vec<String>,
    hits: Vec<HitView>,
    /// Entries searched.
    searched: usize,
}

/// `POST /v1/threads/read`: answer `question` from the thread, citing its entries.
#[utoipa::path(post, path = "/v1/threads/read", tag = "sessions", request_body = ReadRequest,
    responses(
        (status = 200, body = ThreadAnswer),
        (status = 400, description = "`thread` is no id (empty, too long, or a control character such as NUL: `invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such session or recall id of the caller's", body = ErrorBody),
        (status = 422, description = "`question` or `thread` missing or too long", body = ErrorBody),
        (status = 503, description = "The read did not finish within the deadline (`COMPACTD_DEADLINE_SECS`), or no model answered; see Retry-After", body = ErrorBody),
    ))]
pub(super) async fn read(
    State(state): State<AppState>,
    Caller(who): Caller,
    JsonBody(request): JsonBody<ReadRequest>,
) -> Result<Json<ThreadAnswer>, ApiError> {
    let answer = state
        .app
        .read_thread(&who, &request.thread, &request.question)
        .await?;
    let reading = answer.reading.into_inner();
    Ok(Json(ThreadAnswer {
        answer: reading.answer,
        answered_by: answer.answered_by,
        model_steps: answer.steps,
        citations: reading.cited,
        hits: reading
            .hits
            .into_iter()
            .map(|h| HitView {
                entry_id: h.id,
                role: h.role,
                text: h.text,
                revised_by: h.revised_by,
                failed: h.failed,
            })
            .collect(),
        searched: reading.searched,
    }))
}
