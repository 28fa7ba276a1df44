//! The OpenAPI 3.1 document (`GET /openapi.json`): built by utoipa-axum from the same route list
//! as the router, each route's own `#[utoipa::path]` responses, and the responses every route can
//! give whatever it does (a bad key, the request rate, storage down, the time limit) added here once.

use std::sync::LazyLock;

use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa_axum::router::OpenApiRouter;

use super::AppState;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "compactd",
        description = "Context compaction for LLM coding agents: the remote summarizer of pi-family agents, and a compactor for uploaded pi sessions."
    ),
    tags(
        (name = "summarize", description = "The remote-summarizer wire contract"),
        (name = "sessions", description = "Stored sessions"),
        (name = "compaction", description = "Planning, compaction and branch summaries"),
        (name = "operations", description = "Health, readiness, metrics, this document"),
        (name = "gateway", description = "compactd at an agent's model base URL (COMPACTD_GATEWAY=on): compactions answered, everything else passed through"),
    )
)]
struct ApiDoc;

/// Every documented route, each listed once with its documentation.
pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(super::ops::router())
        .merge(super::remote_endpoint::router())
        .merge(super::chat::router())
        .merge(super::gateway::router())
        .merge(super::sessions::router())
        .merge(super::handoff::router())
        .merge(super::threads::router())
        .merge(super::compactions::router())
        .merge(super::pins::router())
        .merge(super::recall::router())
        .merge(super::calls::router())
}

/// The OpenAPI 3.1 description of every endpoint, from the same list as the router.
pub fn openapi() -> utoipa::openapi::OpenApi {
    let mut document = routes().split_for_parts().1;
    for (path, item) in document.paths.paths.iter_mut() {
        let posts = item.post.is_some();
        for operation in [&mut item.get, &mut item.post, &mut item.delete]
            .into_iter()
            .flatten()
        {
            add_response(
                operation,
                "421",
                "The Host header names a host this listener does not serve (`host_not_allowed`): see COMPACTD_ALLOWED_HOSTS",
            );
            if path.starts_with("/v1/") {
                add_common_responses(path, posts, operation);
            }
        }
    }
    document
}

/// `openapi()` as served, built once.
pub(super) static DOCUMENT: LazyLock<serde_json::Value> =
    LazyLock::new(|| serde_json::to_value(openapi()).expect("the OpenAPI document serializes"));

/// The responses of the layers around every `/v1` handler (the caller, the body, the rate, the
/// store, the time limit), where the handler's own documentation does not say more.
fn add_common_responses(path: &str, posts: bool, operation: &mut Operation) {
    let agent_wire = super::auth::is_agent_wire(path);
    let mut common = Vec::new();
    if agent_wire {
        common.push(("400", "Sent by a web page on another site through a browser (`cross_site_request`), or not valid"));
    } else {
        // The agent wires answer 404 instead: agents read 401 as their provider key failing.
        common.push(("401", "No usable API key: beyond loopback one is required (`Authorization: Bearer KEY` or `/k/KEY/` before the path)"));
        common.push(("403", "Sent by a web page on another site through a browser (`cross_site_request`): see COMPACTD_ALLOWED_ORIGINS"));
    }
    if path.contains("{id}") {
        common.push((
            "400",
            "The session id in the path is not valid (`invalid_path`), or a query parameter holds NUL (`invalid_query`)",
        ));
    }
    common.push(("400", "A query parameter holds NUL (`invalid_query`)"));
    if posts {
        common.push(("413", "The body is over COMPACTD_MAX_BODY_BYTES"));
        common.push((
            "415",
            "The body's Content-Type is not JSON (`application/json`; session files `application/x-ndjson`) (`unsupported_media_type`)",
        ));
    }
    common.extend([
        (
            "429",
            "Over the key's request rate (COMPACTD_RATE_LIMIT_PER_MINUTE); see Retry-After",
        ),
        (
            "500",
            "A bug in compactd; the cause is in its log, never in the body",
        ),
        (
            "503",
            "Storage unavailable (`storage_unavailable`); see Retry-After",
        ),
        (
            "504",
            "The request took longer than its time limit, 295 s (`request_timeout`)",
        ),
    ]);
    for (status, description) in common {
        add_response(operation, status, description);
    }
}

/// Documents an error response of `operation`, unless its own documentation says more.
fn add_response(operation: &mut Operation, status: &str, description: &str) {
    operation
        .responses
        .responses
        .entry(status.to_owned())
        .or_insert_with(|| {
            RefOr::T(
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        "application/json",
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("ErrorBody")))
                            .build(),
                    )
                    .build(),
            )
        });
}
