//! Sessions: upload a pi session file, list, read, delete, get it back as JSONL, append entries,
//! fork one at an entry.

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{JsonBody, JsonlBody, QueryParams, SessionId};
use crate::app::AppError;
use crate::app::compaction::plans::settings;
use crate::app::sessions::ReplaceNotice;
use compactd_core::session::{self, LineIssue, time};
use compactd_store::SessionRecord;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(upload, list))
        .routes(routes!(show, delete))
        .routes(routes!(entries, append))
        .routes(routes!(fork))
}

/// A stored session as the API shows it.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionView {
    id: String,
    /// The `id` of the session header.
    header_id: String,
    leaf_id: Option<String>,
    entry_count: i64,
    /// Always 3: sessions are stored migrated.
    version: u32,
    source_version: i64,
    context_tokens: i64,
    /// Compaction entries in the session.
    compactions: i64,
    bytes: i64,
    created_at: String,
    updated_at: String,
}

impl From<&SessionRecord> for SessionView {
    fn from(r: &SessionRecord) -> Self {
        SessionView {
            id: r.session_id.clone(),
            header_id: r.header_id.clone(),
            leaf_id: r.leaf_id.clone(),
            entry_count: r.entry_count,
            version: session::CURRENT_VERSION,
            source_version: r.source_version,
            context_tokens: r.context_tokens,
            compactions: r.compaction_count,
            bytes: r.byte_size,
            created_at: time::epoch_ms_to_iso(r.created_at_ms),
            updated_at: time::epoch_ms_to_iso(r.updated_at_ms),
        }
    }
}

/// A session just stored.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Uploaded {
    #[serde(flatten)]
    session: SessionView,
    /// Lines lenient reading skipped.
    #[schema(value_type = Vec<crate::openapi::LineIssue>)]
    skipped_lines: Vec<LineIssue>,
    /// Links lenient reading repaired.
    #[schema(value_type = Vec<crate::openapi::LineIssue>)]
    repaired_lines: Vec<LineIssue>,
    #[serde(flatten)]
    replace: ReplaceNotice,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionList {
    sessions: Vec<SessionView>,
    /// Pass it as `cursor` for the next page; `null` on the last page.
    next_cursor: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct Appended {
    appended: usize,
    /// Lines already stored with the same content, skipped.
    unchanged: usize,
    session: SessionView,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct UploadQuery {
    /// Skip malformed lines (as pi does) instead of rejecting the upload.
    #[serde(default)]
    lenient: bool,
}

/// `POST /v1/sessions`: stores a session file (migrated to v3 when older).
#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", params(UploadQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "A pi session file (JSONL)"),
    responses(
        (status = 201, description = "Stored", body = Uploaded),
        (status = 413, description = "Body, a line or the entry count over the limit", body = ErrorBody),
        (status = 422, description = "A line cannot be read (`invalid_session` with `line` and `kind`)", body = ErrorBody),
        (status = 503, description = "Storage unavailable", body = ErrorBody),
    ))]
pub(super) async fn upload(
    State(state): State<AppState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<UploadQuery>,
    JsonlBody(body): JsonlBody,
) -> Result<(StatusCode, Json<Uploaded>), ApiError> {
    let uploaded = state.app.upload(&who, body, query.lenient).await?;
    Ok((
        StatusCode::CREATED,
        Json(Uploaded {
            session: SessionView::from(&uploaded.record),
            replace: ReplaceNotice::of(&uploaded.record),
            skipped_lines: uploaded.skipped,
            repaired_lines: uploaded.repaired,
        }),
    ))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Sessions per page, 1 to 1000 (default 50).
    limit: Option<i64>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
    /// Only sessions whose id starts with this, or whose header (its `cwd`) contains it, ignoring
    /// ASCII case.
    q: Option<String>,
}

/// `GET /v1/sessions?limit=&cursor=&q=`: oldest first; `nextCursor` continues the listing.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(ListQuery), responses(
    (status = 200, body = SessionList), (status = 422, description = "A field is missing or invalid", body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<SessionList>, ApiError> {
    let page = state
        .app
        .sessions(
            &who,
            query.limit.unwrap_or(50),
            query.cursor.as_deref(),
            query.q.as_deref(),
        )
        .await?;
    Ok(Json(SessionList {
        sessions: page.sessions.iter().map(SessionView::from).collect(),
        next_cursor: page.next_cursor,
    }))
}

/// `GET /v1/sessions/{id}`.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 200, body = SessionView), (status = 404, body = ErrorBody)))]
pub(super) async fn show(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
) -> Result<Json<SessionView>, ApiError> {
    Ok(Json(SessionView::from(
        &state.app.session(&who, &id).await?,
    )))
}

/// `DELETE /v1/sessions/{id}`: the session, its entries and its compactions.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 204, description = "Deleted"), (status = 404, body = ErrorBody)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
) -> Result<StatusCode, ApiError> {
    state.app.delete_session(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /v1/sessions/{id}/entries`: the session file back, as JSONL.
#[utoipa::path(get, path = "/v1/sessions/{id}/entries", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 200, description = "The session as JSONL (v3)", content_type = "application/x-ndjson", body = String),
    (status = 404, body = ErrorBody)))]
pub(super) async fn entries(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
) -> Result<Response, ApiError> {
    let file = state.app.session_file(&who, &id).await?;
    Ok(([(header::CONTENT_TYPE, "application/x-ndjson")], file).into_response())
}

/// What the agent appending a session knows of how it will compact it: what its summary is
/// prepared ahead with (issue 67).
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct AppendQuery {
    /// The window of the session's model, in tokens, as the live agent appending it says (the
    /// pi extension does): past `COMPACTD_PREPARE_AT` of it, the session is summarized ahead.
    /// Without it nothing is prepared.
    context_window: Option<i64>,
    /// The agent's `keepRecentTokens` (default 20000).
    keep_recent_tokens: Option<i64>,
    /// The agent's `reserveTokens` (default 16384).
    reserve_tokens: Option<i64>,
}

/// `POST /v1/sessions/{id}/entries`: appends JSONL entries whose parents exist. An entry already
/// stored with the same id and the same content is skipped; with other content it is a 409.
/// A session whose agent gives its model's window (`contextWindow`) and is past a share of it is
/// then summarized ahead of its compaction, in the background, with the settings the query gives.
#[utoipa::path(post, path = "/v1/sessions/{id}/entries", tag = "sessions", params(("id" = String, Path, description = "Session id"), AppendQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "Entries to append (JSONL, v3)"),
    responses(
        (status = 200, body = Appended),
        (status = 404, body = ErrorBody),
        (status = 409, description = "An id already stored with other content (`entry_conflict`)", body = ErrorBody),
        (status = 413, description = "A line or the entry count over the limit", body = ErrorBody),
        (status = 422, description = "A line cannot be read, is a header, or names a missing parent", body = ErrorBody),
    ))]
pub(super) async fn append(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    QueryParams(query): QueryParams<AppendQuery>,
    JsonlBody(body): JsonlBody,
) -> Result<Json<Appended>, ApiError> {
    let ahead = crate::app::compaction::ahead::Hints {
        settings: settings(query.keep_recent_tokens, query.reserve_tokens)?,
        window: match query.context_window {
            None => None,
            Some(window) if (1_000..=100_000_000).contains(&window) => Some(window as u64),
            Some(window) => {
                let message =
                    format!("contextWindow must be between 1000 and 100000000, not {window}");
                return Err(AppError::invalid("contextWindow", message).into());
            }
        },
    };
    let appended = state.app.append(&who, &id, &body).await?;
    if appended.appended > 0 {
        let tokens = appended.record.context_tokens;
        crate::agents::after_append(&state.app, &state.preparer, &who, &id, tokens, ahead);
    }
    Ok(Json(Appended {
        appended: appended.appended,
        unchanged: appended.unchanged,
        session: SessionView::from(&appended.record),
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ForkRequest {
    /// The entry the fork ends at: the new session holds the path from the root to it.
    entry_id: String,
}

/// A fork: the new session, and the one it came from.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Forked {
    session: SessionView,
    /// The session it was forked from (its header's `parentSession`).
    parent_session: String,
}

/// `POST /v1/sessions/{id}/fork`: a new session holding the path to `entryId`, its header naming
/// this one as `parentSession` (pi's `/fork`).
#[utoipa::path(post, path = "/v1/sessions/{id}/fork", tag = "sessions", params(("id" = String, Path, description = "Session id")),
    request_body = ForkRequest,
    responses(
        (status = 201, body = Forked),
        (status = 404, body = ErrorBody),
        (status = 422, description = "`entryId` missing or not an entry of the session", body = ErrorBody),
    ))]
pub(super) async fn fork(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    JsonBody(request): JsonBody<ForkRequest>,
) -> Result<(StatusCode, Json<Forked>), ApiError> {
    let forked = state.app.fork(&who, &id, &request.entry_id).await?;
    Ok((
        StatusCode::CREATED,
        Json(Forked {
            session: SessionView::from(&forked.record),
            parent_session: id.into_string(),
        }),
    ))
}
