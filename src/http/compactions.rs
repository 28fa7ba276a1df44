//! Planning, context rebuild, compaction and branch summaries of sessions (spec §4–§9).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use compactd_core::compaction::pi15::Planner;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{JsonBody, JsonlBody, OptionalJsonBody, QueryParams, SessionId};
use crate::app::compaction::compactor::{BranchSummaryRequest, CompactionRequest};
use crate::app::compaction::plans::{ContextView, settings};
use crate::app::compaction::{Compacted, UsageView, usage_view};
use crate::app::sessions::ReplaceNotice;
use crate::app::views::history::{CompactionView, HistoryRange};
use crate::app::wire::StagesView;
use compactd_core::compaction::entry::BranchSummaryEntry;
use compactd_core::fidelity::{Missing, Report};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(plan_upload))
        .routes(routes!(plan_stored))
        .routes(routes!(context))
        .routes(routes!(compact, history))
        .routes(routes!(branch_summary))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct PlanQuery {
    /// Tokens of recent conversation kept verbatim (default 20000).
    keep_recent_tokens: Option<i64>,
    /// Tokens reserved for the answer (default 16384).
    reserve_tokens: Option<i64>,
    /// Plan from this entry instead of the leaf.
    leaf_id: Option<String>,
    /// For `POST /v1/plan`: skip malformed lines.
    #[serde(default)]
    lenient: bool,
    /// Whose rules: `pi-1.5` or `pi-0.x`; by default the file decides (a `context_edit` entry,
    /// a system message or a compaction's `systemMessage` means pi 1.5).
    #[param(value_type = Option<String>)]
    planner: Option<Planner>,
}

/// `POST /v1/plan`: the plan of a JSONL body; nothing is stored.
#[utoipa::path(post, path = "/v1/plan", tag = "compaction", params(PlanQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "A pi session file (JSONL)"),
    responses((status = 200, body = crate::openapi::PlanOutcome), (status = 422, description = "A line or field cannot be read", body = ErrorBody)))]
pub(super) async fn plan_upload(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(query): QueryParams<PlanQuery>,
    JsonlBody(body): JsonlBody,
) -> Result<Response, ApiError> {
    let settings = settings(query.keep_recent_tokens, query.reserve_tokens)?;
    let json = state
        .app
        .plan_file_json(
            body,
            query.lenient,
            &settings,
            query.leaf_id.as_deref(),
            query.planner,
        )
        .await?;
    Ok(json_response(json))
}

/// `GET /v1/sessions/{id}/plan?keepRecentTokens=&reserveTokens=&leafId=`.
#[utoipa::path(get, path = "/v1/sessions/{id}/plan", tag = "compaction",
    params(("id" = String, Path, description = "Session id"), PlanQuery),
    responses((status = 200, body = crate::openapi::PlanOutcome), (status = 404, body = ErrorBody), (status = 422, description = "A field is missing or invalid", body = ErrorBody)))]
pub(super) async fn plan_stored(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    QueryParams(query): QueryParams<PlanQuery>,
) -> Result<Response, ApiError> {
    let settings = settings(query.keep_recent_tokens, query.reserve_tokens)?;
    let json = state
        .app
        .plan_json(
            &who,
            &id,
            &settings,
            query.leaf_id.as_deref(),
            query.planner,
        )
        .await?;
    Ok(json_response(json))
}

/// A plan's JSON, written by the application layer as the CLI writes it (off the runtime's
/// threads, the conversations escaped as they are serialized): a long session's plan is megabytes
/// of text, which `Json` would escape one byte at a time on a runtime worker.
fn json_response(json: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], json).into_response()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub(super) struct LeafQuery {
    /// Rebuild from this entry instead of the leaf.
    leaf_id: Option<String>,
}

/// `GET /v1/sessions/{id}/context?leafId=`: the LLM-facing messages (spec §8).
#[utoipa::path(get, path = "/v1/sessions/{id}/context", tag = "compaction",
    params(("id" = String, Path, description = "Session id"), LeafQuery),
    responses((status = 200, body = ContextView), (status = 404, body = ErrorBody), (status = 422, description = "A field is missing or invalid", body = ErrorBody)))]
pub(super) async fn context(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    QueryParams(query): QueryParams<LeafQuery>,
) -> Result<Json<ContextView>, ApiError> {
    Ok(Json(
        state
            .app
            .context(&who, &id, query.leaf_id.as_deref())
            .await?,
    ))
}

/// Every field is optional, and so is the body.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CompactBody {
    leaf_id: Option<String>,
    keep_recent_tokens: Option<i64>,
    reserve_tokens: Option<i64>,
    custom_instructions: Option<String>,
}

/// A compaction entry: written now (`created: true`, with what it cost) or found already made
/// from the same leaf (`created: false`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactionResponse {
    created: bool,
    /// The entry, in pi's shape (`compaction`, with `summary`, `firstKeptEntryId`,
    /// `tokensBefore`, `details`, `fromHook`).
    #[schema(value_type = crate::openapi::CompactionEntry)]
    entry: serde_json::Value,
    /// The entry as stored: the JSONL line to append to a v3 session file.
    line: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<UsageView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tokens_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    summarizer_calls: Option<u32>,
    /// What the fidelity gate found in the summary and did to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::openapi::Report>)]
    fidelity: Option<Report>,
    /// The anchors of the replaced history the summary does not keep: what the agent will no
    /// longer know.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<crate::openapi::Missing>>)]
    forgotten: Option<Vec<Missing>>,
    /// What the pipeline's stages did (compactions written now).
    #[serde(skip_serializing_if = "Option::is_none")]
    stages: Option<StagesView>,
    /// The session's recall id: the entries this compaction summarized are searchable under it
    /// (`recall_search` in compactd's MCP server, `GET /v1/recall/search?session=…`).
    #[serde(skip_serializing_if = "Option::is_none")]
    recall_id: Option<String>,
    #[serde(flatten)]
    replace: ReplaceNotice,
}

/// `POST /v1/sessions/{id}/compactions`: plans, summarizes and appends a compaction entry in pi's
/// shape. Concurrent requests for the same leaf produce one entry: the later ones get it back.
#[utoipa::path(post, path = "/v1/sessions/{id}/compactions", tag = "compaction",
    params(("id" = String, Path, description = "Session id")), request_body(content = Option<CompactBody>),
    responses(
        (status = 201, description = "Appended", body = CompactionResponse),
        (status = 200, description = "This leaf was already compacted: that entry", body = CompactionResponse),
        (status = 404, body = ErrorBody),
        (status = 409, description = "Nothing to compact (`nothing_to_compact`, `already_compacted`) or the session changed", body = ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = ErrorBody),
        (status = 429, description = "The caller's summarization slots or the queue are full", body = ErrorBody),
        (status = 503, description = "No model answered, or storage unavailable", body = ErrorBody),
    ))]
pub(super) async fn compact(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    // Every field is optional, and so is the body.
    OptionalJsonBody(body): OptionalJsonBody<CompactBody>,
) -> Result<(StatusCode, Json<CompactionResponse>), ApiError> {
    let request = CompactionRequest {
        leaf_id: body.leaf_id,
        settings: settings(body.keep_recent_tokens, body.reserve_tokens)?,
        custom_instructions: body.custom_instructions,
        // The session's pins and prepared summary are the application's to add.
        ..Default::default()
    };
    let focused = (request.custom_instructions.as_deref()).is_some_and(|f| !f.trim().is_empty());
    crate::agents::before_compaction(&state.app, &state.preparer, &who, &id, focused).await;
    let compacted = state.app.compact(&who, &id, request).await?;
    // The session starts afresh from its new entry: its next summary ahead is prepared anew.
    crate::agents::compacted(&state.preparer, &who, &id);
    Ok(match compacted {
        Compacted::Created { outcome, session } => (
            StatusCode::CREATED,
            Json(CompactionResponse {
                created: true,
                entry: serde_json::to_value(&outcome.entry).expect("an entry serializes"),
                line: outcome.line,
                model: Some(outcome.model),
                usage: Some(usage_view(&outcome.usage)),
                latency_ms: Some(outcome.latency_ms),
                tokens_before: Some(outcome.entry.tokens_before as u64),
                tokens_after: Some(outcome.tokens_after),
                summarizer_calls: Some(outcome.summarizer_calls),
                forgotten: Some(outcome.fidelity.missing.clone()),
                stages: Some(StagesView::from(&outcome.flags)),
                recall_id: outcome.flags.recall_id.clone(),
                fidelity: Some(outcome.fidelity),
                replace: ReplaceNotice::of(&session),
            }),
        ),
        Compacted::Existing {
            entry,
            line,
            session,
        } => (
            StatusCode::OK,
            Json(CompactionResponse {
                created: false,
                entry,
                line,
                model: None,
                usage: None,
                latency_ms: None,
                tokens_before: None,
                tokens_after: None,
                summarizer_calls: None,
                fidelity: None,
                forgotten: None,
                stages: None,
                recall_id: None,
                replace: ReplaceNotice::of(&session),
            }),
        ),
    })
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactionHistory {
    compactions: Vec<CompactionView>,
    /// `cursor` of the next page; `null` on the last.
    next_cursor: Option<String>,
    /// Compactions in the whole session.
    total: usize,
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct HistoryQuery {
    /// Compactions per page, 1 to 1000 (default 100).
    limit: Option<i64>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// `GET /v1/sessions/{id}/compactions?limit=&cursor=`: the compactions on record, oldest first,
/// a page at a time: the ones compactd wrote (with model, usage and savings) and the ones that
/// came with the upload.
#[utoipa::path(get, path = "/v1/sessions/{id}/compactions", tag = "compaction",
    params(("id" = String, Path, description = "Session id"), HistoryQuery),
    responses((status = 200, body = CompactionHistory), (status = 404, body = ErrorBody),
        (status = 422, description = "A bad limit or cursor", body = ErrorBody)))]
pub(super) async fn history(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    QueryParams(query): QueryParams<HistoryQuery>,
) -> Result<Json<CompactionHistory>, ApiError> {
    let max = crate::app::views::history::MAX_HISTORY_PAGE as i64;
    let limit = match query.limit {
        None => 100,
        Some(n) if (1..=max).contains(&n) => n as usize,
        Some(n) => {
            return Err(ApiError::unprocessable(
                "limit",
                format!("limit must be between 1 and {max}, not {n}"),
            ));
        }
    };
    let after = match query.cursor.as_deref() {
        None | Some("") => None,
        Some(cursor) => Some(cursor.parse::<usize>().map_err(|_| {
            ApiError::unprocessable("cursor", "cursor: not a cursor this endpoint gave")
        })?),
    };
    let page = state
        .app
        .compaction_history(
            &who,
            &id,
            HistoryRange {
                after,
                limit,
                newest: false,
            },
        )
        .await?;
    Ok(Json(CompactionHistory {
        compactions: page.compactions,
        next_cursor: page.next_cursor,
        total: page.total,
    }))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct BranchBody {
    target_id: String,
    from_leaf_id: Option<String>,
    reserve_tokens: Option<i64>,
    custom_instructions: Option<String>,
    #[serde(default)]
    replace_instructions: bool,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct BranchSummaryResponse {
    #[schema(value_type = crate::openapi::BranchSummaryEntry)]
    entry: BranchSummaryEntry,
    /// The entry as stored: the JSONL line to append to a v3 session file.
    line: String,
    model: String,
    usage: UsageView,
    latency_ms: u64,
    /// What the fidelity gate found in the summary and did to it.
    #[schema(value_type = crate::openapi::Report)]
    fidelity: Report,
}

/// `POST /v1/sessions/{id}/branch-summaries`: summarizes the branch left when navigating from the
/// leaf to `targetId` and appends the branch-summary entry where pi would (spec §9).
#[utoipa::path(post, path = "/v1/sessions/{id}/branch-summaries", tag = "compaction",
    params(("id" = String, Path, description = "Session id")), request_body = BranchBody,
    responses(
        (status = 201, description = "Appended", body = BranchSummaryResponse),
        (status = 404, body = ErrorBody),
        (status = 409, description = "No branch is left behind", body = ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = ErrorBody),
        (status = 503, description = "No model answered, or storage unavailable", body = ErrorBody),
    ))]
pub(super) async fn branch_summary(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    JsonBody(body): JsonBody<BranchBody>,
) -> Result<(StatusCode, Json<BranchSummaryResponse>), ApiError> {
    let reserve_tokens = settings(None, body.reserve_tokens)?.reserve_tokens;
    let request = BranchSummaryRequest {
        target_id: body.target_id,
        from_leaf_id: body.from_leaf_id,
        reserve_tokens,
        context_window: 0,
        custom_instructions: body.custom_instructions,
        replace_instructions: body.replace_instructions,
    };
    let summarized = state.app.summarize_branch(&who, &id, request).await?;
    let outcome = summarized.outcome;
    Ok((
        StatusCode::CREATED,
        Json(BranchSummaryResponse {
            entry: outcome.entry,
            line: outcome.line,
            model: outcome.model,
            usage: usage_view(&outcome.usage),
            latency_ms: outcome.latency_ms,
            fidelity: outcome.fidelity,
        }),
    ))
}
