//! The middleware stack around every route, outermost first:
//!
//! 1. panics become a generic JSON 500 (the cause goes to the log);
//! 2. request ids: a well-formed `x-request-id` from the client is kept, otherwise one is made;
//!    it is echoed on the response and recorded on the request's span;
//! 3. a trace span per request (method, path with keys redacted, request id), logged at DEBUG
//!    for health checks and INFO otherwise; headers and bodies are never logged;
//! 4. a time limit for the whole request;
//! 5. the body-size limit.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use super::Limits;
use super::error::ApiError;

pub(super) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest request id accepted from a client.
const MAX_REQUEST_ID: usize = 128;

/// Wraps `router` in the layers, in the order documented above (`Router::layer` puts each new
/// layer outside the ones before it, so they are added innermost first).
pub(super) fn around(router: Router, limits: Limits) -> Router {
    router
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(StatusCode::GATEWAY_TIMEOUT, limits.request_timeout))
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(|request: &Request| {
                    let request_id = request
                        .headers()
                        .get(REQUEST_ID)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let path = redact(request.uri().path());
                    if matches!(request.uri().path(), "/healthz" | "/readyz" | "/metrics") {
                        tracing::span!(Level::DEBUG, "request", method = %request.method(), path, request_id)
                    } else {
                        tracing::span!(Level::INFO, "request", method = %request.method(), path, request_id)
                    }
                })
                .on_response(DefaultOnResponse::new().level(Level::INFO)),
        )
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        .layer(axum::middleware::from_fn(drop_bad_request_id))
        .layer(CatchPanicLayer::custom(panic_response))
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::Internal(anyhow::anyhow!("a handler panicked")).into_response()
}

/// A client's request id is kept only when it is short and plain: it ends up in every log line.
async fn drop_bad_request_id(mut request: Request, next: Next) -> Response {
    let acceptable = |value: &HeaderValue| {
        let bytes = value.as_bytes();
        !bytes.is_empty()
            && bytes.len() <= MAX_REQUEST_ID
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b))
    };
    if request
        .headers()
        .get(REQUEST_ID)
        .is_some_and(|v| !acceptable(v))
    {
        request.headers_mut().remove(REQUEST_ID);
    }
    next.run(request).await
}

/// The path for logs: the key of `/k/{key}/…` routes is replaced.
pub(super) fn redact(path: &str) -> String {
    match path.strip_prefix("/k/") {
        Some(rest) => match rest.split_once('/') {
            Some((_, tail)) => format!("/k/<redacted>/{tail}"),
            None => "/k/<redacted>".to_owned(),
        },
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_in_paths_are_redacted() {
        assert_eq!(
            super::redact("/k/secret-key/v1/compact"),
            "/k/<redacted>/v1/compact"
        );
        assert_eq!(super::redact("/k/secret"), "/k/<redacted>");
        assert_eq!(super::redact("/v1/compact"), "/v1/compact");
    }
}
