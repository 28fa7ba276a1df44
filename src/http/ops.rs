//! Operations endpoints: liveness, readiness, Prometheus metrics, and the middleware that counts
//! and times every request.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(document))
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Health {
    /// `ok`
    status: &'static str,
}

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = Health)))]
pub(super) async fn healthz() -> Json<Health> {
    Json(Health { status: "ok" })
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Ready {
    /// `ready` or `not_ready`
    status: &'static str,
    storage: StorageCheck,
    summarizers: SummarizerCheck,
}

#[derive(Serialize, utoipa::ToSchema)]
struct StorageCheck {
    /// `postgres` or `sqlite`
    backend: &'static str,
    ok: bool,
    error: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
struct SummarizerCheck {
    /// The models of the chain, in order.
    chain: Vec<String>,
    ok: bool,
}

/// `GET /openapi.json`: this document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", responses((status = 200, description = "The OpenAPI 3.1 description of every endpoint", content_type = "application/json")))]
pub(super) async fn document() -> Json<&'static serde_json::Value> {
    Json(&super::document::DOCUMENT)
}

/// How long readiness waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /readyz`: storage reachable with its migrations applied, and at least one summarizer
/// usable. 503 with the failing checks otherwise, so a load balancer stops sending traffic.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "Ready", body = Ready),
    (status = 503, description = "Storage down or no summarizer", body = Ready)))]
pub(super) async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Ready>) {
    let readiness = state.app.readiness(READY_TIMEOUT).await;
    let ready = readiness.ready();
    let body = Ready {
        status: if ready { "ready" } else { "not_ready" },
        storage: StorageCheck {
            backend: readiness.backend,
            ok: readiness.storage.is_ok(),
            error: readiness.storage.err(),
        },
        summarizers: SummarizerCheck {
            ok: !readiness.chain.is_empty(),
            chain: readiness.chain,
        },
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.app.metrics_text().await,
    )
        .into_response()
}

/// Counts and times every request by its route pattern (`/v1/sessions/{id}`, never the id
/// itself, so the label set stays bounded), method and status; logs the cause of a 5xx.
pub(super) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    // Both cheap to clone (a shared string; a method is a tag unless it is an extension one).
    let route = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let started = Instant::now();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let status = response.status();
    let labels = [route, method.as_str(), status.as_str()];
    state
        .app
        .metrics
        .http_requests
        .with_label_values(&labels)
        .inc();
    state
        .app
        .metrics
        .http_duration
        .with_label_values(&labels)
        .observe(started.elapsed().as_secs_f64());
    super::error::log_failure(&response);
    response
}
