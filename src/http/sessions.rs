//! Sessions: upload a pi session file, list, read, delete, get it back as JSONL, append entries.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Caller;
use super::error::ApiError;
use super::json::{QueryParams, RawBody};
use super::{AppState, openapi};
use crate::compaction::{build_session_context, estimate_context_tokens};
use crate::session::{self, LineIssue, ParseErrorKind, ParseOptions, Session, time};
use crate::store::{Append, EntryRecord, SessionRecord, StoreError, now_ms};

/// A stored session as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionView {
    id: String,
    header_id: String,
    leaf_id: Option<String>,
    entry_count: i64,
    /// Always 3: sessions are stored migrated.
    version: u32,
    source_version: i64,
    context_tokens: i64,
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
            bytes: r.byte_size,
            created_at: time::epoch_ms_to_iso(r.created_at_ms),
            updated_at: time::epoch_ms_to_iso(r.updated_at_ms),
        }
    }
}

/// The session as JSONL, from its stored lines.
pub(super) fn jsonl(record: &SessionRecord, entries: &[EntryRecord]) -> String {
    let size = record.header.len() + entries.iter().map(|e| e.raw.len() + 1).sum::<usize>() + 256;
    let mut text = String::with_capacity(size);
    for line in record
        .title_line
        .iter()
        .chain(std::iter::once(&record.header))
        .chain(entries.iter().map(|e| &e.raw))
    {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// Reads a session file off the async workers (a 20 MB file takes ~100 ms).
async fn parse(
    bytes: impl AsRef<[u8]> + Send + 'static,
    options: ParseOptions,
) -> Result<Session, ApiError> {
    tokio::task::spawn_blocking(move || Session::parse(bytes.as_ref(), options))
        .await
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("the session reader failed: {e}")))?
        .map_err(ApiError::InvalidSession)
}

/// A stored session, parsed. Stored lines were accepted at upload or append; they are read
/// leniently so that links repaired at a lenient upload are repaired the same way again.
pub(super) struct Loaded {
    pub record: SessionRecord,
    pub session: Session,
    /// Entries actually read: the count an append must find unchanged.
    pub entry_count: i64,
}

/// The caller's session record: another tenant's session is "not found", like a missing one.
pub(super) async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<SessionRecord, ApiError> {
    state
        .store
        .get_session(id)
        .await?
        .filter(|record| record.tenant == caller.tenant())
        .ok_or_else(|| ApiError::NotFoundWhat(format!("no session with id {id:?}")))
}

pub(super) async fn load(state: &AppState, caller: &Caller, id: &str) -> Result<Loaded, ApiError> {
    let record = owned(state, caller, id).await?;
    let entries = state.store.entries(id).await?;
    let entry_count = entries.len() as i64;
    let text = jsonl(&record, &entries);
    let session = parse(
        text,
        ParseOptions {
            lenient: true,
            ..Default::default()
        },
    )
    .await?;
    Ok(Loaded {
        record,
        session,
        entry_count,
    })
}

/// Context tokens of the path to the leaf, as the planner estimates them.
pub(super) fn context_tokens(session: &Session) -> i64 {
    let path = session.active_path(None).unwrap_or_default();
    estimate_context_tokens(&build_session_context(&path).messages()).tokens as i64
}

pub(super) fn entry_record(entry: &session::Entry) -> EntryRecord {
    EntryRecord {
        entry_id: entry.id.clone(),
        parent_id: entry.parent_id.clone(),
        entry_type: entry.entry_type().to_owned(),
        raw: entry.raw.to_string(),
    }
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
        (status = 201, description = "Stored", body = openapi::UploadDoc),
        (status = 413, description = "Body over the limit", body = openapi::ErrorBody),
        (status = 422, description = "A line cannot be read (`invalid_session` with `line` and `kind`)", body = openapi::ErrorBody),
        (status = 503, description = "Storage unavailable", body = openapi::ErrorBody),
    ))]
pub(super) async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(query): QueryParams<UploadQuery>,
    RawBody(body): RawBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let session = parse(body, state.parse_options(query.lenient)).await?;
    // Lenient reading lets a later line win a duplicate id; storage keeps ids unique per session.
    if let Some(duplicate) = session
        .repairs
        .iter()
        .find(|r| r.kind == ParseErrorKind::DuplicateId)
    {
        return Err(ApiError::InvalidSession(session::ParseError {
            line: Some(duplicate.line),
            kind: duplicate.kind,
            message: format!("{} (a stored session needs unique ids)", duplicate.message),
        }));
    }
    let now = now_ms();
    let lines = session
        .title
        .iter()
        .chain(std::iter::once(&session.header.raw));
    let byte_size = lines
        .chain(session.entries.iter().map(|e| &e.raw))
        .map(|l| l.len() + 1)
        .sum::<usize>();
    let record = SessionRecord {
        session_id: uuid::Uuid::new_v4().to_string(),
        tenant: caller.tenant().to_owned(),
        header_id: session.header.id.clone(),
        title_line: session.title.as_deref().map(str::to_owned),
        header: session.header.raw.to_string(),
        source_version: i64::from(session.source_version),
        leaf_id: session.entries.last().map(|e| e.id.clone()),
        entry_count: session.entries.len() as i64,
        byte_size: byte_size as i64,
        context_tokens: context_tokens(&session),
        created_at_ms: now,
        updated_at_ms: now,
    };
    let skipped = issues(&session.skipped);
    let repaired = issues(&session.repairs);
    // The lines move into the records: a 20 MB upload is not copied again.
    let entries: Vec<EntryRecord> = session
        .entries
        .into_iter()
        .map(|e| EntryRecord {
            entry_type: e.entry_type().to_owned(),
            entry_id: e.id,
            parent_id: e.parent_id,
            raw: e.raw.into_string(),
        })
        .collect();
    state.store.insert_session(&record, &entries).await?;
    tracing::info!(session = %record.session_id, entries = record.entry_count, bytes = record.byte_size, "session stored");
    let mut view = serde_json::to_value(SessionView::from(&record)).expect("a view serializes");
    view["skippedLines"] = json!(skipped);
    view["repairedLines"] = json!(repaired);
    Ok((StatusCode::CREATED, Json(view)))
}

fn issues(list: &[LineIssue]) -> Vec<Value> {
    list.iter()
        .map(|i| json!({"line": i.line, "kind": i.kind, "message": i.message}))
        .collect()
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub(super) struct ListQuery {
    /// Sessions per page, 1 to 1000 (default 50).
    limit: Option<i64>,
    /// `nextCursor` of the previous page.
    cursor: Option<String>,
}

/// `GET /v1/sessions?limit=&cursor=`: oldest first; `nextCursor` continues the listing.
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(ListQuery), responses(
    (status = 200, body = openapi::SessionListDoc), (status = 422, description = "A field is missing or invalid", body = openapi::ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query.limit.unwrap_or(50);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::unprocessable(
            "limit",
            "limit must be between 1 and 1000",
        ));
    }
    let after = match &query.cursor {
        None => None,
        Some(cursor) => {
            let parsed = cursor
                .split_once('.')
                .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id.to_owned())));
            Some(parsed.ok_or_else(|| {
                ApiError::unprocessable("cursor", "cursor is not one this API returned")
            })?)
        }
    };
    let sessions = state
        .store
        .list_sessions(caller.tenant(), limit, after)
        .await?;
    let next = (sessions.len() as i64 == limit)
        .then(|| {
            sessions
                .last()
                .map(|s| format!("{}.{}", s.created_at_ms, s.session_id))
        })
        .flatten();
    let views: Vec<SessionView> = sessions.iter().map(SessionView::from).collect();
    Ok(Json(json!({"sessions": views, "nextCursor": next})))
}

/// `GET /v1/sessions/{id}`.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 200, body = openapi::SessionDoc), (status = 404, body = openapi::ErrorBody)))]
pub(super) async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<SessionView>, ApiError> {
    let record = owned(&state, &caller, &id).await?;
    Ok(Json(SessionView::from(&record)))
}

/// `DELETE /v1/sessions/{id}`: the session, its entries and its compactions.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 204, description = "Deleted"), (status = 404, body = openapi::ErrorBody)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    owned(&state, &caller, &id).await?;
    if state.store.delete_session(&id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFoundWhat(format!("no session with id {id:?}")))
    }
}

/// `GET /v1/sessions/{id}/entries`: the session file back, as JSONL.
#[utoipa::path(get, path = "/v1/sessions/{id}/entries", tag = "sessions", params(("id" = String, Path, description = "Session id")), responses(
    (status = 200, description = "The session as JSONL (v3)", content_type = "application/x-ndjson", body = String),
    (status = 404, body = openapi::ErrorBody)))]
pub(super) async fn entries(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let record = owned(&state, &caller, &id).await?;
    let entries = state.store.entries(&id).await?;
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        jsonl(&record, &entries),
    )
        .into_response())
}

/// How many times an append re-reads the session when another writer got in first.
const APPEND_ATTEMPTS: usize = 5;

/// `POST /v1/sessions/{id}/entries`: appends JSONL entries whose parents exist. An entry already
/// stored with the same id and the same content is skipped; with other content it is a 409.
#[utoipa::path(post, path = "/v1/sessions/{id}/entries", tag = "sessions", params(("id" = String, Path, description = "Session id")),
    request_body(content = String, content_type = "application/x-ndjson", description = "Entries to append (JSONL, v3)"),
    responses(
        (status = 200, body = openapi::AppendDoc),
        (status = 404, body = openapi::ErrorBody),
        (status = 409, description = "An id already stored with other content (`entry_conflict`)", body = openapi::ErrorBody),
        (status = 422, description = "A line cannot be read or names a missing parent", body = openapi::ErrorBody),
    ))]
pub(super) async fn append(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    RawBody(body): RawBody,
) -> Result<Json<Value>, ApiError> {
    let lines = parse_entry_lines(&body, state.limits.max_line_bytes)?;
    for _ in 0..APPEND_ATTEMPTS {
        let loaded = load(&state, &caller, &id).await?;
        let (new, unchanged) = check_append(&loaded.session, &lines)?;
        let limit = state.limits.max_entries;
        if loaded.session.entries.len() + new.len() > limit {
            return Err(invalid_line(
                new[0].line,
                ParseErrorKind::TooManyEntries,
                format!(
                    "the session would have {} entries, over the limit of {limit}",
                    loaded.session.entries.len() + new.len()
                ),
            ));
        }
        if new.is_empty() {
            return Ok(Json(
                json!({"appended": 0, "unchanged": unchanged, "session": SessionView::from(&loaded.record)}),
            ));
        }
        let text = jsonl(&loaded.record, &[])
            + &loaded
                .session
                .entries
                .iter()
                .chain(new.iter())
                .map(|e| format!("{}\n", e.raw))
                .collect::<String>();
        let updated = parse(
            text,
            ParseOptions {
                lenient: true,
                ..Default::default()
            },
        )
        .await?;
        let append = Append {
            expected_entry_count: loaded.entry_count,
            entries: new.iter().map(entry_record).collect(),
            leaf_id: new.last().map(|e| e.id.clone()),
            context_tokens: context_tokens(&updated),
            compaction: None,
        };
        match state.store.append(&id, &append, now_ms()).await {
            Ok(()) => {
                let record = state.store.get_session(&id).await?.unwrap_or(loaded.record);
                return Ok(Json(
                    json!({"appended": new.len(), "unchanged": unchanged, "session": SessionView::from(&record)}),
                ));
            }
            Err(StoreError::Changed) => continue,
            Err(error) => return Err(error.into()),
        }
    }
    Err(StoreError::Changed.into())
}

/// The entry lines of an append body (v3 entries, no header), each checked on its own.
fn parse_entry_lines(body: &[u8], max_line_bytes: usize) -> Result<Vec<session::Entry>, ApiError> {
    let mut entries = Vec::new();
    for (index, line) in body.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > max_line_bytes {
            return Err(invalid_line(
                index + 1,
                ParseErrorKind::LineTooLong,
                format!(
                    "the line is {} bytes, over the limit of {max_line_bytes} bytes",
                    line.len()
                ),
            ));
        }
        entries.push(session::parse_entry_line(index + 1, line).map_err(ApiError::InvalidSession)?);
    }
    if entries.is_empty() {
        return Err(ApiError::unprocessable(
            "body",
            "the body holds no entries (one JSON entry per line)",
        ));
    }
    Ok(entries)
}

/// Splits the lines into new entries and ones already stored identically, checking ids and
/// parents against the stored session.
fn check_append(
    session: &Session,
    lines: &[session::Entry],
) -> Result<(Vec<session::Entry>, usize), ApiError> {
    let mut new: Vec<session::Entry> = Vec::new();
    let mut unchanged = 0;
    for entry in lines {
        if let Some(stored) = session.get(&entry.id) {
            let same = serde_json::from_str::<Value>(&stored.raw).ok()
                == serde_json::from_str::<Value>(&entry.raw).ok();
            if same {
                unchanged += 1;
                continue;
            }
            return Err(ApiError::Conflict {
                code: "entry_conflict",
                message: format!(
                    "line {}: an entry with id {:?} is already stored with different content",
                    entry.line, entry.id
                ),
            });
        }
        if new.iter().any(|e| e.id == entry.id) {
            return Err(invalid_line(
                entry.line,
                ParseErrorKind::DuplicateId,
                format!("duplicate id {:?} in the request", entry.id),
            ));
        }
        if let Some(parent) = &entry.parent_id
            && session.get(parent).is_none()
            && !new.iter().any(|e| &e.id == parent)
        {
            return Err(invalid_line(
                entry.line,
                ParseErrorKind::DanglingParent,
                format!("parentId {parent:?} names no entry of the session or of the lines before"),
            ));
        }
        new.push(entry.clone());
    }
    Ok((new, unchanged))
}

fn invalid_line(line: usize, kind: ParseErrorKind, message: String) -> ApiError {
    ApiError::InvalidSession(session::ParseError {
        line: Some(line),
        kind,
        message,
    })
}
