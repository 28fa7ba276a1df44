//! Recall over HTTP (issue 27): `GET /v1/recall/search`, `GET /v1/recall/{id}/turns`, and the
//! MCP server at `/mcp` (also `/k/KEY/mcp`) whose tools `recall_search` and `recall_read` do the
//! same for an agent. Both take the REST API's keys; every query is the caller's tenant's.

use axum::Json;
use axum::extract::{Path, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::QueryParams;
use crate::app::recall::RecallPage;
use compactd_store::{RecallHit, RecallQuery, RecallTurn};

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(turns))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct SearchParams {
    /// Words to find (all of them); a path or an identifier is one word.
    q: String,
    /// Only this kept conversation (the id a summary's last line names).
    id: Option<String>,
    /// Only the entries this stored session's compactions summarized.
    session: Option<String>,
    /// `user`, `assistant`, `tool` or `developer`.
    role: Option<String>,
    /// Only turns of this tool (its results, or assistant turns that called it).
    tool: Option<String>,
    /// Only turns whose tool calls named this path (or a path holding it).
    path: Option<String>,
    /// Most hits (1–50, default 10).
    limit: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct Hits {
    hits: Vec<RecallHit>,
}

/// `GET /v1/recall/search`: the caller's kept turns that hold every word of `q`, best first, with
/// the words marked in a snippet.
#[utoipa::path(get, path = "/v1/recall/search", tag = "recall", params(SearchParams),
    responses(
        (status = 200, description = "Matching turns, best first", body = Hits),
        (status = 400, description = "A NUL character in the query or a filter", body = ErrorBody),
        (status = 422, description = "No word to search for, or an unknown or invalid parameter", body = ErrorBody),
    ))]
pub(super) async fn search(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(params): QueryParams<SearchParams>,
) -> Result<Json<Hits>, ApiError> {
    let query = RecallQuery {
        text: params.q,
        recall_id: params.id,
        session_id: params.session,
        role: params.role,
        tool: params.tool,
        path: params.path,
        limit: params.limit.unwrap_or(10),
        now_ms: 0,
    };
    let hits = state.app.search_recall(&caller.0, query).await?;
    Ok(Json(Hits { hits }))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(super) struct TurnsParams {
    /// First turn (0-based, default 0).
    from: Option<i32>,
    /// Most turns (1–50, default 20).
    limit: Option<i64>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Turns {
    id: String,
    /// Turns the conversation has.
    total: i64,
    turns: Vec<RecallTurn>,
    /// Where the next page starts, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    next: Option<i32>,
}

/// `GET /v1/recall/{id}/turns`: a page of one kept conversation, each turn in full.
#[utoipa::path(get, path = "/v1/recall/{id}/turns", tag = "recall",
    params(("id" = String, Path, description = "Recall id"), TurnsParams),
    responses(
        (status = 200, description = "The turns", body = Turns),
        (status = 400, description = "The id is no id (too long, or a control character such as NUL: `invalid_id`)", body = ErrorBody),
        (status = 404, description = "No such conversation for this caller, or expired", body = ErrorBody),
        (status = 422, description = "An unknown or invalid parameter", body = ErrorBody),
    ))]
pub(super) async fn turns(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    QueryParams(params): QueryParams<TurnsParams>,
) -> Result<Json<Turns>, ApiError> {
    let id = compactd_core::ids::Id::parse(id).map_err(|bad| ApiError::Invalid {
        status: axum::http::StatusCode::BAD_REQUEST,
        code: "invalid_id",
        message: format!("id: {bad}"),
        param: Some("id".into()),
    })?;
    let from = params.from.unwrap_or(0);
    let read = state
        .app
        .read_recall(&caller.0, &id, from, params.limit.unwrap_or(20))
        .await?;
    Ok(Json(page(id.into_string(), read)))
}

fn page(id: String, read: RecallPage) -> Turns {
    Turns {
        id,
        total: read.total,
        turns: read.turns,
        next: read.next,
    }
}

/// Authenticates an MCP request as the REST API does and hands the caller to the tools.
pub(super) async fn mcp_caller(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let (mut parts, body) = request.into_parts();
    match <Caller as axum::extract::FromRequestParts<AppState>>::from_request_parts(
        &mut parts, &state,
    )
    .await
    {
        Ok(caller) => {
            parts.extensions.insert(caller.0);
            // JavaScript clients write lone surrogates as escapes (`"fix \ud83d"`), which the
            // MCP SDK's JSON reader refuses: they become U+FFFD here, as on every other route.
            let limit = state.limits.max_body_bytes;
            let bytes = match axum::body::to_bytes(body, limit).await {
                Ok(bytes) => bytes,
                Err(_) => return ApiError::PayloadTooLarge { limit }.into_response(),
            };
            let bytes = match compactd_core::js_json::replace_lone_surrogates(&bytes) {
                std::borrow::Cow::Borrowed(_) => bytes,
                std::borrow::Cow::Owned(fixed) => fixed.into(),
            };
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Err(error) => error.into_response(),
    }
}

pub(super) mod mcp {
    //! The MCP server: two tools over the caller's kept conversations.

    use rmcp::handler::server::router::tool::ToolRouter;
    use rmcp::handler::server::tool::Extension;
    use rmcp::handler::server::wrapper::Parameters;
    use rmcp::model::{ServerCapabilities, ServerConfig};
    use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
    use serde::Deserialize;

    use crate::access::Identity;
    use crate::app::App;
    use compactd_store::RecallQuery;

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    pub(crate) struct SearchArgs {
        /// Words to find, all of them: an error message, a file path, an identifier, a phrase
        /// the user used.
        pub query: String,
        /// Only this conversation: the recall id the summary's last line names.
        pub recall_id: Option<String>,
        /// Only the entries this stored session's compactions summarized (a session id).
        pub session_id: Option<String>,
        /// Only turns of this role: user, assistant, tool or developer.
        pub role: Option<String>,
        /// Only turns of this tool (its results, or calls of it).
        pub tool: Option<String>,
        /// Only turns whose tool calls named this file path.
        pub path: Option<String>,
        /// Most hits, 1 to 50 (default 10).
        pub limit: Option<i64>,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    pub(crate) struct ReadArgs {
        /// The recall id (from the summary's last line or a search hit).
        #[schemars(with = "String")]
        pub recall_id: compactd_core::ids::Id,
        /// First turn to read, 0-based (a search hit's `seq`).
        pub from: Option<i32>,
        /// Most turns, 1 to 50 (default 1: the turn at `from`, in full).
        pub limit: Option<i64>,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    pub(crate) struct ThreadArgs {
        /// The thread: a stored session's id.
        #[schemars(with = "String")]
        pub thread: compactd_core::ids::Id,
        /// What to find out from it.
        pub question: String,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    pub(crate) struct HandoffArgs {
        /// The thread to hand off from: a stored session's id. Omitted: this agent's own
        /// current thread, as compactd's gateway last saw it.
        pub thread: Option<String>,
        /// What the new thread is for.
        pub goal: String,
    }

    #[derive(Clone)]
    pub(crate) struct RecallServer {
        app: App,
        tool_router: ToolRouter<Self>,
    }

    impl RecallServer {
        pub(crate) fn new(app: App) -> RecallServer {
            RecallServer {
                app,
                tool_router: Self::tool_router(),
            }
        }
    }

    fn caller(parts: &axum::http::request::Parts) -> Result<&Identity, ErrorData> {
        parts
            .extensions
            .get::<Identity>()
            .ok_or_else(|| ErrorData::internal_error("no caller", None))
    }

    fn tool_error(error: crate::app::AppError) -> ErrorData {
        ErrorData::invalid_params(error.to_string(), None)
    }

    #[tool_router]
    impl RecallServer {
        #[tool(
            description = "Search the earlier part of this conversation that was compacted away. \
            Use it when the summary lacks a detail you need: a file's exact content, a command's \
            output, an error message, why something was decided, what the user said earlier. \
            Returns matching turns (recall id, seq, role, tool, snippet with the words in \
            [brackets]); read one in full with recall_read."
        )]
        async fn recall_search(
            &self,
            Parameters(args): Parameters<SearchArgs>,
            Extension(parts): Extension<axum::http::request::Parts>,
        ) -> Result<String, ErrorData> {
            let query = RecallQuery {
                text: args.query,
                recall_id: args.recall_id,
                session_id: args.session_id,
                role: args.role,
                tool: args.tool,
                path: args.path,
                limit: args.limit.unwrap_or(10),
                now_ms: 0,
            };
            let hits = self
                .app
                .search_recall(caller(&parts)?, query)
                .await
                .map_err(tool_error)?;
            Ok(serde_json::json!({ "hits": hits }).to_string())
        }

        #[tool(
            description = "Read turns of a compacted-away conversation back in full, exactly as \
            they were (secrets redacted): the turn a recall_search hit named (from = its seq), or \
            a range of turns around it (limit up to 50). Returns the turns and `next` when more follow."
        )]
        async fn recall_read(
            &self,
            Parameters(args): Parameters<ReadArgs>,
            Extension(parts): Extension<axum::http::request::Parts>,
        ) -> Result<String, ErrorData> {
            let read = self
                .app
                .read_recall(
                    caller(&parts)?,
                    &args.recall_id,
                    args.from.unwrap_or(0),
                    args.limit.unwrap_or(1),
                )
                .await
                .map_err(tool_error)?;
            let page = super::page(args.recall_id.into_string(), read);
            Ok(serde_json::to_string(&page).unwrap_or_default())
        }

        #[tool(
            description = "Answer a question from another thread (a stored session id, or a \
            recall id from a summary), however long: its entries are searched and the answer \
            cites their entry ids; a later entry that revised an earlier one holds, and a tool \
            call whose result was an error is marked failed."
        )]
        async fn read_thread(
            &self,
            Parameters(args): Parameters<ThreadArgs>,
            Extension(parts): Extension<axum::http::request::Parts>,
        ) -> Result<String, ErrorData> {
            let answer = self
                .app
                .read_thread(caller(&parts)?, &args.thread, &args.question)
                .await
                .map_err(tool_error)?;
            Ok(serde_json::json!({
                "answer": answer.reading.answer,
                "citations": answer.reading.cited,
                "answeredBy": answer.answered_by,
            })
            .to_string())
        }

        #[tool(
            description = "Hand a thread off to a new one focused on a goal: returns the new \
            thread's first prompt (the goal, the files that matter with why, the rules in force, \
            open errors, commands that verify the work). Without `thread`, your own current \
            thread (as compactd's gateway last saw it); with a stored session's id, that one, \
            and the new session's id."
        )]
        async fn handoff(
            &self,
            Parameters(args): Parameters<HandoffArgs>,
            Extension(parts): Extension<axum::http::request::Parts>,
        ) -> Result<String, ErrorData> {
            let who = caller(&parts)?;
            let thread = args.thread.as_deref().map(str::trim).unwrap_or_default();
            if thread.is_empty() || thread == "current" {
                let agent = crate::app::threads::seen::agent_of_client(&parts.headers);
                let (drafted, seen) = self
                    .app
                    .handoff_current(who, agent, &args.goal)
                    .await
                    .map_err(tool_error)?;
                return Ok(serde_json::json!({
                    "prompt": drafted.draft.prompt,
                    "thread": format!("{} session {}", seen.agent, seen.session),
                    "leftOutFiles": drafted.draft.left_out_files,
                    "draftedBy": drafted.drafted_by,
                })
                .to_string());
            }
            let thread = compactd_core::ids::Id::parse(thread)
                .map_err(|bad| ErrorData::invalid_params(format!("thread: {bad}"), None))?;
            let (drafted, uploaded) = self
                .app
                .handoff(who, &thread, &args.goal, None)
                .await
                .map_err(tool_error)?;
            Ok(serde_json::json!({
                "prompt": drafted.draft.prompt,
                "session": uploaded.record.session_id,
                "leftOutFiles": drafted.draft.left_out_files,
                "draftedBy": drafted.drafted_by,
            })
            .to_string())
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for RecallServer {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
                .with_instructions(
                    "compactd keeps what your context's compaction summarized away. When a \
                     summary ends with a recall id and you need a detail it lacks, search with \
                     recall_search and read with recall_read. read_thread answers a question \
                     from another thread; handoff starts a focused new thread for a goal.",
                )
        }
    }
}
