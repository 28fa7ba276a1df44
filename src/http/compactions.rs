//! Planning, context rebuild, compaction and branch summaries of sessions (spec §4–§9).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::ApiError;
use super::json::{JsonBody, QueryParams, RawBody};
use super::sessions::{Loaded, entry_record, load};
use super::{AppState, openapi};
use crate::compaction::{CompactionSettings, NothingReason, PlanOutcome, build_session_context};
use crate::compactor::{self, BranchSummaryRequest, CompactError, CompactionRequest};
use crate::session::{EntryKind, Session, time};
use crate::store::{Append, CompactionRecord, StoreError, now_ms};

/// Largest token setting accepted: far above any model's window, small enough to stay exact.
const MAX_TOKEN_SETTING: u64 = 100_000_000;

/// Planning settings from a query or body, checked.
fn settings(
    keep_recent_tokens: Option<i64>,
    reserve_tokens: Option<i64>,
) -> Result<CompactionSettings, ApiError> {
    let defaults = CompactionSettings::default();
    let check = |name: &str, value: Option<i64>, min: u64, default: u64| -> Result<u64, ApiError> {
        match value {
            None => Ok(default),
            Some(v) if v >= min as i64 && (v as u64) <= MAX_TOKEN_SETTING => Ok(v as u64),
            Some(v) => Err(ApiError::unprocessable(
                name,
                format!("{name} must be between {min} and {MAX_TOKEN_SETTING}, not {v}"),
            )),
        }
    };
    Ok(CompactionSettings {
        enabled: true,
        keep_recent_tokens: check(
            "keepRecentTokens",
            keep_recent_tokens,
            0,
            defaults.keep_recent_tokens,
        )?,
        reserve_tokens: check("reserveTokens", reserve_tokens, 1, defaults.reserve_tokens)?,
    })
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
}

fn plan_of(session: &Session, query: &PlanQuery) -> Result<Json<PlanOutcome>, ApiError> {
    let settings = settings(query.keep_recent_tokens, query.reserve_tokens)?;
    let path = session
        .active_path(query.leaf_id.as_deref())
        .map_err(|e| ApiError::unprocessable("leafId", e.to_string()))?;
    Ok(Json(PlanOutcome::for_path(&path, &settings)))
}

/// `POST /v1/plan`: the plan of a JSONL body; nothing is stored.
#[utoipa::path(post, path = "/v1/plan", tag = "compaction", params(PlanQuery),
    request_body(content = String, content_type = "application/x-ndjson", description = "A pi session file (JSONL)"),
    responses((status = 200, body = openapi::PlanOutcomeDoc), (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody)))]
pub(super) async fn plan_upload(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(query): QueryParams<PlanQuery>,
    RawBody(body): RawBody,
) -> Result<Json<PlanOutcome>, ApiError> {
    let options = state.parse_options(query.lenient);
    let session = tokio::task::spawn_blocking(move || Session::parse(&body, options))
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("the session reader failed: {e}")))?
        .map_err(ApiError::InvalidSession)?;
    plan_of(&session, &query)
}

/// `GET /v1/sessions/{id}/plan?keepRecentTokens=&reserveTokens=&leafId=`.
#[utoipa::path(get, path = "/v1/sessions/{id}/plan", tag = "compaction",
    params(("id" = String, Path, description = "Session id"), PlanQuery),
    responses((status = 200, body = openapi::PlanOutcomeDoc), (status = 404, body = openapi::ErrorBody), (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody)))]
pub(super) async fn plan_stored(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<PlanQuery>,
) -> Result<Json<PlanOutcome>, ApiError> {
    let loaded = load(&state, &caller, &id).await?;
    plan_of(&loaded.session, &query)
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
    responses((status = 200, body = openapi::ContextDoc), (status = 404, body = openapi::ErrorBody), (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody)))]
pub(super) async fn context(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<LeafQuery>,
) -> Result<Json<Value>, ApiError> {
    let loaded = load(&state, &caller, &id).await?;
    let path = loaded
        .session
        .active_path(query.leaf_id.as_deref())
        .map_err(|e| ApiError::unprocessable("leafId", e.to_string()))?;
    let context = build_session_context(&path);
    Ok(Json(json!({
        "messages": context.llm_json(),
        "thinkingLevel": context.thinking_level,
        "model": context.model,
    })))
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

/// Appending one entry compactd wrote, which becomes the leaf, to the session as it was loaded.
fn new_leaf(
    loaded: &Loaded,
    line: &str,
    context_tokens: i64,
    compaction: Option<CompactionRecord>,
) -> Result<Append, ApiError> {
    let entry = crate::session::parse_entry_line(0, line.as_bytes()).map_err(|e| {
        ApiError::Internal(anyhow::anyhow!("compactd wrote an unreadable entry: {e}"))
    })?;
    Ok(Append {
        expected_entry_count: loaded.entry_count,
        leaf_id: Some(entry.id.clone()),
        entries: vec![entry_record(&entry)],
        context_tokens,
        compaction,
    })
}

/// The compaction entry already made from `leaf_id`, if any.
fn compaction_child<'a>(session: &'a Session, leaf_id: &str) -> Option<&'a crate::session::Entry> {
    session
        .entries
        .iter()
        .rev()
        .find(|e| e.is_compaction() && e.parent_id.as_deref() == Some(leaf_id))
}

fn existing_compaction(entry: &crate::session::Entry) -> Json<Value> {
    Json(json!({
        "created": false,
        "entry": serde_json::from_str::<Value>(&entry.raw).unwrap_or(Value::Null),
        "line": entry.raw.as_ref(),
    }))
}

/// A compaction or branch summary that was not made, as an HTTP error; `param` names the entry
/// parameter an unknown id came from.
fn compact_error(error: CompactError, param: &str) -> ApiError {
    match error {
        CompactError::Nothing(reason, message) => nothing_to_compact(reason, message),
        CompactError::UnknownLeaf(e) => ApiError::unprocessable(param, e.to_string()),
        CompactError::Summarize(e) => e.into(),
    }
}

fn nothing_to_compact(reason: NothingReason, message: String) -> ApiError {
    let code = match reason {
        NothingReason::AlreadyCompacted => "already_compacted",
        _ => "nothing_to_compact",
    };
    ApiError::Conflict {
        code,
        message: format!("nothing to compact: {message}"),
    }
}

/// `POST /v1/sessions/{id}/compactions`: plans, summarizes and appends a compaction entry in pi's
/// shape. Concurrent requests for the same leaf produce one entry: the later ones get it back.
#[utoipa::path(post, path = "/v1/sessions/{id}/compactions", tag = "compaction",
    params(("id" = String, Path, description = "Session id")), request_body(content = Option<CompactBody>),
    responses(
        (status = 201, description = "Appended", body = openapi::CompactionDoc),
        (status = 200, description = "This leaf was already compacted by another request: that entry", body = openapi::CompactionDoc),
        (status = 404, body = openapi::ErrorBody),
        (status = 409, description = "Nothing to compact (`nothing_to_compact`, `already_compacted`) or the session changed", body = openapi::ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody),
        (status = 503, description = "No model answered, or storage unavailable", body = openapi::ErrorBody),
    ))]
pub(super) async fn compact(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawBody(raw): RawBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    // Every field is optional, and so is the body.
    let body: CompactBody = if raw.iter().all(u8::is_ascii_whitespace) {
        CompactBody::default()
    } else {
        super::json::decode(&raw)?
    };
    let settings = settings(body.keep_recent_tokens, body.reserve_tokens)?;
    let first = load(&state, &caller, &id).await?;
    let leaf_id = match &body.leaf_id {
        Some(leaf) => {
            first.session.get(leaf).ok_or_else(|| {
                ApiError::unprocessable(
                    "leafId",
                    format!("no entry with id {leaf:?} in this session"),
                )
            })?;
            leaf.clone()
        }
        None => match first.session.entries.last() {
            Some(last) => last.id.clone(),
            None => {
                return Err(nothing_to_compact(
                    NothingReason::EmptySession,
                    "the session has no entries".into(),
                ));
            }
        },
    };
    let _slot = state.summarization_slot(&caller)?;
    let lock = state.compaction_lock(&id, &leaf_id);
    let _guard = lock.lock().await;
    // Re-read under the lock: another request may have compacted this leaf meanwhile.
    let loaded = load(&state, &caller, &id).await?;
    if let Some(existing) = compaction_child(&loaded.session, &leaf_id) {
        return Ok((StatusCode::OK, existing_compaction(existing)));
    }
    let request = CompactionRequest {
        leaf_id: Some(leaf_id.clone()),
        settings,
        custom_instructions: body.custom_instructions,
    };
    let outcome = compactor::compact(&loaded.session, &request, &state.summarizer, &state.prompts)
        .await
        .inspect_err(|e| {
            if matches!(e, CompactError::Summarize(_)) {
                state
                    .calls
                    .record("compaction", Some(&id), "", Err(("failed", 503)), 0);
            }
        })
        .map_err(|e| compact_error(e, "leafId"))?;
    let append = new_leaf(
        &loaded,
        &outcome.line,
        outcome.tokens_after as i64,
        Some(CompactionRecord {
            session_id: id.clone(),
            entry_id: outcome.entry_id.clone(),
            leaf_id: outcome.leaf_id.clone(),
            first_kept_entry_id: outcome.first_kept_entry_id.clone(),
            model: outcome.model.clone(),
            input_tokens: outcome.usage.input_tokens as i64,
            output_tokens: outcome.usage.output_tokens as i64,
            latency_ms: outcome.latency_ms as i64,
            tokens_before: outcome.tokens_before as i64,
            tokens_after: outcome.tokens_after as i64,
            summary: outcome.summary.clone(),
            created_at_ms: now_ms(),
        }),
    )?;
    match state.store.append(&id, &append, now_ms()).await {
        Ok(()) => {}
        Err(StoreError::Changed) => {
            // Another replica appended first: if it compacted the same leaf, that is the answer.
            let reloaded: Loaded = load(&state, &caller, &id).await?;
            if let Some(existing) = compaction_child(&reloaded.session, &leaf_id) {
                return Ok((StatusCode::OK, existing_compaction(existing)));
            }
            return Err(StoreError::Changed.into());
        }
        Err(error) => return Err(error.into()),
    }
    state.metrics.compactions.inc();
    state
        .metrics
        .tokens_saved
        .inc_by((outcome.tokens_before as u64).saturating_sub(outcome.tokens_after));
    tracing::info!(session = %id, entry = %outcome.entry_id, model = %outcome.model,
        tokens_before = outcome.tokens_before as u64, tokens_after = outcome.tokens_after, "compaction appended");
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "created": true,
            "entry": serde_json::from_str::<Value>(&outcome.line).unwrap_or(Value::Null),
            "line": outcome.line,
            "model": outcome.model,
            "usage": outcome.usage,
            "latencyMs": outcome.latency_ms,
            "tokensBefore": outcome.tokens_before as u64,
            "tokensAfter": outcome.tokens_after,
            "summarizerCalls": outcome.summarizer_calls,
        })),
    ))
}

/// `GET /v1/sessions/{id}/compactions`: every compaction on record, oldest first: the ones
/// compactd wrote (with model, usage and savings) and the ones that came with the upload.
#[utoipa::path(get, path = "/v1/sessions/{id}/compactions", tag = "compaction",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = openapi::CompactionHistoryDoc), (status = 404, body = openapi::ErrorBody)))]
pub(super) async fn history(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let loaded = load(&state, &caller, &id).await?;
    let made = state.store.compactions(&id).await?;
    let list: Vec<Value> = loaded
        .session
        .entries
        .iter()
        .filter(|e| e.is_compaction())
        .map(|entry| {
            let EntryKind::Compaction { first_kept_entry_id, .. } = &entry.kind else { unreachable!() };
            let tokens_before = match entry.as_message() {
                Some(crate::session::Message::CompactionSummary { tokens_before, .. }) => *tokens_before as i64,
                _ => 0,
            };
            match made.iter().find(|m| m.entry_id == entry.id) {
                Some(m) => json!({
                    "entryId": entry.id, "source": "compactd", "leafId": m.leaf_id,
                    "firstKeptEntryId": m.first_kept_entry_id, "summary": m.summary, "model": m.model,
                    "usage": {"inputTokens": m.input_tokens, "outputTokens": m.output_tokens},
                    "latencyMs": m.latency_ms, "tokensBefore": m.tokens_before, "tokensAfter": m.tokens_after,
                    "tokensSaved": m.tokens_before - m.tokens_after, "createdAt": time::epoch_ms_to_iso(m.created_at_ms),
                }),
                None => json!({
                    "entryId": entry.id, "source": "upload", "leafId": entry.parent_id,
                    "firstKeptEntryId": first_kept_entry_id, "summary": entry.summary(), "model": null,
                    "tokensBefore": tokens_before, "createdAt": entry.timestamp,
                }),
            }
        })
        .collect();
    Ok(Json(json!({"compactions": list})))
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

/// `POST /v1/sessions/{id}/branch-summaries`: summarizes the branch left when navigating from the
/// leaf to `targetId` and appends the branch-summary entry where pi would (spec §9).
#[utoipa::path(post, path = "/v1/sessions/{id}/branch-summaries", tag = "compaction",
    params(("id" = String, Path, description = "Session id")), request_body = BranchBody,
    responses(
        (status = 201, description = "Appended", body = openapi::BranchSummaryDoc),
        (status = 404, body = openapi::ErrorBody),
        (status = 409, description = "No branch is left behind", body = openapi::ErrorBody),
        (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody),
        (status = 503, description = "No model answered, or storage unavailable", body = openapi::ErrorBody),
    ))]
pub(super) async fn branch_summary(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody<BranchBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let reserve = settings(None, body.reserve_tokens)?.reserve_tokens;
    let loaded = load(&state, &caller, &id).await?;
    for (param, value) in [
        ("targetId", Some(&body.target_id)),
        ("fromLeafId", body.from_leaf_id.as_ref()),
    ] {
        if let Some(value) = value
            && loaded.session.get(value).is_none()
        {
            return Err(ApiError::unprocessable(
                param,
                format!("no entry with id {value:?} in this session"),
            ));
        }
    }
    let request = BranchSummaryRequest {
        target_id: body.target_id,
        from_leaf_id: body.from_leaf_id,
        reserve_tokens: reserve,
        context_window: state.limits.context_window,
        custom_instructions: body.custom_instructions,
        replace_instructions: body.replace_instructions,
    };
    let _slot = state.summarization_slot(&caller)?;
    let outcome =
        compactor::summarize_branch(&loaded.session, &request, &state.summarizer, &state.prompts)
            .await
            .map_err(|e| compact_error(e, "targetId"))?;
    let append = new_leaf(&loaded, &outcome.line, loaded.record.context_tokens, None)?;
    state.store.append(&id, &append, now_ms()).await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "entry": serde_json::from_str::<Value>(&outcome.line).unwrap_or(Value::Null),
            "line": outcome.line,
            "model": outcome.model,
            "usage": outcome.usage,
            "latencyMs": outcome.latency_ms,
        })),
    ))
}
