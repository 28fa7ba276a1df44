//! Operations endpoints: liveness, readiness, Prometheus metrics, and the middleware that counts
//! and times every request.

use std::time::{Duration, Instant};

use axum::Json;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::{AppState, openapi};
use crate::summarizer::Link;

/// `GET /healthz`: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations", responses((status = 200, body = openapi::HealthDoc)))]
pub(super) async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// How long readiness waits for the database.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /readyz`: storage reachable with its migrations applied, and at least one summarizer
/// usable. 503 with the failing checks otherwise, so a load balancer stops sending traffic.
#[utoipa::path(get, path = "/readyz", tag = "operations", responses(
    (status = 200, description = "Ready", body = openapi::ReadyDoc),
    (status = 503, description = "Storage down or no summarizer", body = openapi::ReadyDoc)))]
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    let storage = match tokio::time::timeout(READY_TIMEOUT, state.store.ready()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!("no answer within {} s", READY_TIMEOUT.as_secs())),
    };
    // Upstream models are not probed (that would spend tokens); a chain can answer when it has a
    // link at all, and always when it ends in the extractive summarizer.
    let links = &state.summarizer.chain.links;
    let summarizers: Vec<String> = links.iter().map(Link::name).collect();
    let summarizer_ok = !links.is_empty();
    let ready = storage.is_ok() && summarizer_ok;
    let body = json!({
        "status": if ready { "ready" } else { "not_ready" },
        "storage": {"backend": state.store.backend(), "ok": storage.is_ok(), "error": storage.err()},
        "summarizers": {"chain": summarizers, "ok": summarizer_ok},
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// `GET /metrics`: Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "operations", responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain")))]
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let limiter = &state.summarizer.limiter;
    state.metrics.queue_depth.set(limiter.queue_depth() as i64);
    state.metrics.in_flight.set(limiter.in_flight() as i64);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// Counts and times every request by its route pattern (`/v1/sessions/{id}`, never the id
/// itself, so the label set stays bounded), method and status.
pub(super) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let method = request.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let labels = [route.as_str(), method.as_str(), status.as_str()];
    state.metrics.http_requests.with_label_values(&labels).inc();
    state
        .metrics
        .http_duration
        .with_label_values(&labels)
        .observe(started.elapsed().as_secs_f64());
    response
}
