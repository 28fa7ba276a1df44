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
use crate::summarizer::Link;

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
    let store = &state.app.store;
    let storage = match tokio::time::timeout(READY_TIMEOUT, store.ready()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {} s", READY_TIMEOUT.as_secs())),
    };
    // Upstream models are not probed (that would spend tokens); a chain can answer when it has a
    // link at all, and always when it ends in the extractive summarizer.
    let links = &state.app.pipeline.chain.links;
    let summarizer_ok = !links.is_empty();
    let ready = storage.is_ok() && summarizer_ok;
    let body = Ready {
        status: if ready { "ready" } else { "not_ready" },
        storage: StorageCheck {
            backend: store.backend(),
            ok: storage.is_ok(),
            error: storage.err(),
        },
        summarizers: SummarizerCheck {
            chain: links.iter().map(Link::name).collect(),
            ok: summarizer_ok,
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
    let limiter = &state.app.pipeline.admission.limiter;
    let metrics = &state.app.metrics;
    metrics.queue_depth.set(limiter.queue_depth() as i64);
    metrics.in_flight.set(limiter.in_flight() as i64);
    metrics
        .session_index_bytes
        .set(state.app.index_cache.weighted_bytes().await as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        metrics.render(),
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
