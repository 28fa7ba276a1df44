//! Handoff (issue 57): `POST /v1/sessions/{id}/handoff {goal, leafId?}` answers the draft of a
//! new thread's first prompt for that goal and creates the new session starting with it;
//! `POST /v1/handoff {goal, prompt | messages | input}` drafts it from a conversation an agent
//! holds, in any wire or dialect compactd reads, and stores nothing.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::threads::handoff::{Around, Held};
use serde_json::Value;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{JsonBody, SessionId};
use super::sessions::SessionView;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(handoff))
        .routes(routes!(handoff_conversation))
        .routes(routes!(thread_map))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct HandoffRequest {
    /// What the new thread is for (at most 4,000 characters).
    goal: String,
    /// Hand off from the path to this entry (the session's leaf by default).
    leaf_id: Option<String>,
}

/// A file the draft names.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileView {
    path: String,
    /// Why it matters to the goal: changed or read, for which request.
    why: String,
    changed: bool,
}

/// What the thread held that the draft leaves out.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct LeftOut {
    files: Vec<String>,
    /// Requests of the thread that share nothing with the goal.
    requests: usize,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Handoff {
    /// The new thread's first prompt: the goal, then what the old thread holds that it needs.
    prompt: String,
    files: Vec<FileView>,
    left_out: LeftOut,
    /// The new session: a pi v3 file (`GET /v1/sessions/{id}/entries`) whose first user message
    /// is `prompt` and whose header names the old one as `parentSession`.
    session: SessionView,
    parent_session: String,
    /// Who wrote the prompt: the model (`provider:model`), or `extractive` (drafted from the
    /// thread without a model: none is configured, or the tenant's budget is spent).
    drafted_by: String,
}

/// `POST /v1/sessions/{id}/handoff`: hand the session off to a new one focused on `goal`.
#[utoipa::path(post, path = "/v1/sessions/{id}/handoff", tag = "sessions", params(("id" = String, Path, description = "Session id")),
    request_body = HandoffRequest,
    responses(
        (status = 201, body = Handoff),
        (status = 404, body = ErrorBody),
        (status = 422, description = "`goal` missing or too long, `leafId` not an entry", body = ErrorBody),
        (status = 503, description = "The draft did not finish within the deadline (`COMPACTD_DEADLINE_SECS`), or no model answered; see Retry-After", body = ErrorBody),
    ))]
pub(super) async fn handoff(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    JsonBody(request): JsonBody<HandoffRequest>,
) -> Result<(StatusCode, Json<Handoff>), ApiError> {
    let (drafted, uploaded) = state
        .app
        .handoff(&who, &id, &request.goal, request.leaf_id.as_deref())
        .await?;
    let draft = drafted.draft.into_inner();
    Ok((
        StatusCode::CREATED,
        Json(Handoff {
            prompt: draft.prompt,
            files: files(draft.files),
            left_out: LeftOut {
                files: draft.left_out_files,
                requests: draft.left_out_requests,
            },
            session: SessionView::from(&uploaded.record),
            parent_session: id.into_string(),
            drafted_by: drafted.drafted_by,
        }),
    ))
}

fn files(files: Vec<compactd_core::handoff::RelevantFile>) -> Vec<FileView> {
    files
        .into_iter()
        .map(|f| FileView {
            path: f.path,
            why: f.why,
            changed: f.changed,
        })
        .collect()
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ConversationHandoffRequest {
    /// What the new thread is for (at most 4,000 characters).
    goal: String,
    /// The conversation as text, in any dialect compactd reads (pi's, oh-my-pi's chat markups).
    prompt: Option<String>,
    /// The conversation as chat messages: OpenAI chat completions' or Anthropic Messages'.
    #[schema(value_type = Option<Vec<Object>>)]
    messages: Option<Vec<Value>>,
    /// The conversation as OpenAI Responses input items.
    #[schema(value_type = Option<Object>)]
    input: Option<Value>,
    /// The agent's system prompt, as its request carries it (a string or text blocks): not part
    /// of the conversation, but the rules of a project file it pastes (`Instructions from:
    /// …/AGENTS.md`) go to the new thread as rules still in force.
    #[schema(value_type = Option<Object>)]
    system: Option<Value>,
    /// The summary the conversation continues (its rules still hold).
    previous_summary: Option<String>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ConversationHandoff {
    /// The new thread's first prompt: the goal, then what the conversation holds that it needs.
    prompt: String,
    files: Vec<FileView>,
    left_out: LeftOut,
    /// Who wrote the prompt: the model (`provider:model`), or `extractive`.
    drafted_by: String,
}

/// `POST /v1/handoff`: draft a new thread's first prompt for `goal` from a conversation.
#[utoipa::path(post, path = "/v1/handoff", tag = "compaction", request_body = ConversationHandoffRequest,
    responses(
        (status = 200, body = ConversationHandoff),
        (status = 422, description = "`goal` missing or too long; not exactly one of `prompt`, `messages`, `input`", body = ErrorBody),
        (status = 503, description = "The draft did not finish within the deadline (`COMPACTD_DEADLINE_SECS`), or no model answered; see Retry-After", body = ErrorBody),
    ))]
pub(super) async fn handoff_conversation(
    State(state): State<AppState>,
    Caller(who): Caller,
    JsonBody(request): JsonBody<ConversationHandoffRequest>,
) -> Result<Json<ConversationHandoff>, ApiError> {
    let held = match (request.prompt, request.messages, request.input) {
        (Some(prompt), None, None) => Held::Prompt(prompt),
        (None, Some(messages), None) => Held::Messages(messages),
        (None, None, Some(input)) => Held::Input(input),
        _ => {
            return Err(crate::app::AppError::invalid(
                "prompt",
                "give the conversation as exactly one of prompt, messages or input",
            )
            .into());
        }
    };
    let drafted = state
        .app
        .handoff_conversation(
            &who,
            &request.goal,
            held,
            Around {
                system: request.system,
                previous_summary: request.previous_summary,
            },
        )
        .await?;
    let draft = drafted.draft.into_inner();
    Ok(Json(ConversationHandoff {
        prompt: draft.prompt,
        files: files(draft.files),
        left_out: LeftOut {
            files: draft.left_out_files,
            requests: draft.left_out_requests,
        },
        drafted_by: drafted.drafted_by,
    }))
}

/// A session connected to another.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct LinkedView {
    id: String,
    /// `handoff` (its one entry is the prompt) or `fork` (the path it copied).
    kind: &'static str,
    title: Option<String>,
    created_at: String,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThreadMapView {
    /// The stored session this one was handed off or forked from.
    parent: Option<LinkedView>,
    /// Its parent when that is a pi session file, not a stored session (`parentSession`).
    parent_file: Option<String>,
    /// Sessions handed off or forked from this one, newest first.
    children: Vec<LinkedView>,
}

fn linked(l: crate::app::threads::map::Linked) -> LinkedView {
    LinkedView {
        id: l.id,
        kind: l.kind,
        title: l.title,
        created_at: compactd_core::session::time::epoch_ms_to_iso(l.created_at_ms),
    }
}

/// `GET /v1/sessions/{id}/threads`: the threads it came from and led to.
#[utoipa::path(get, path = "/v1/sessions/{id}/threads", tag = "sessions", params(("id" = String, Path, description = "Session id")),
    responses(
        (status = 200, body = ThreadMapView),
        (status = 404, body = ErrorBody),
    ))]
pub(super) async fn thread_map(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
) -> Result<Json<ThreadMapView>, ApiError> {
    let map = state.app.thread_map(&who, &id).await?;
    Ok(Json(ThreadMapView {
        parent: map.parent.map(linked),
        parent_file: map.parent_file,
        children: map.children.into_iter().map(linked).collect(),
    }))
}
