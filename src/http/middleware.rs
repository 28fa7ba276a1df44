//! The middleware stack around every route, outermost first:
//!
//! 1. panics become a generic JSON 500 (the cause goes to the log);
//! 2. request ids: a well-formed `x-request-id` from the client is kept, otherwise one is made;
//!    it is echoed on the response and recorded on the request's span;
//! 3. a trace span per request (method, path with keys redacted, request id), logged at DEBUG
//!    for health checks and the gateway's passthrough (every turn of every agent) and INFO
//!    otherwise; headers and bodies are never logged;
//! 4. requests refused before their body is read: a URI over 8 KiB (414), a declared
//!    `Content-Length` over the body limit (413);
//! 5. a Host this listener does not serve (421, DNS rebinding), then a browser's request from
//!    another site outside the console (403; 400 on the agent wires), see [`super::browser`];
//! 6. a time limit for the whole request (504, JSON like every error);
//! 7. the body-size limit, for bodies that declare no length.

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;

use super::HttpLimits as Limits;
use super::error::ApiError;

pub(super) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Longest request id accepted from a client.
const MAX_REQUEST_ID: usize = 128;

/// Wraps `router` in the layers, in the order documented above (`Router::layer` puts each new
/// layer outside the ones before it, so they are added innermost first).
pub(super) fn around(
    router: Router,
    limits: Limits,
    browser: std::sync::Arc<super::browser::BrowserPolicy>,
) -> Router {
    router
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        // Layers 4 to 6 in one: each layer of its own cloned and boxed the rest of the stack
        // for every request.
        .layer(axum::middleware::from_fn(move |request, next| {
            let browser = browser.clone();
            async move { screen(request, next, limits, &browser).await }
        }))
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
                .on_response(LogResponse),
        )
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
        // A plain function of the request: no boxed service and future, as `from_fn` makes.
        .layer(tower::util::MapRequestLayer::new(drop_bad_request_id))
        .layer(CatchPanicLayer::custom(panic_response))
}

/// The line of a finished request: at INFO, but at DEBUG for an agent's ordinary turn the gateway
/// passed through (most of a gateway's traffic, and a line each was a tenth of its CPU).
#[derive(Clone, Copy)]
struct LogResponse;

impl<B> tower_http::trace::OnResponse<B> for LogResponse {
    fn on_response(
        self,
        response: &axum::http::Response<B>,
        latency: std::time::Duration,
        span: &tracing::Span,
    ) {
        let level = if response
            .extensions()
            .get::<crate::agents::PassedThrough>()
            .is_some()
        {
            Level::DEBUG
        } else {
            Level::INFO
        };
        DefaultOnResponse::new()
            .level(level)
            .on_response(response, latency, span);
    }
}

/// Longest request URI served: far above any real one, far below what would cost memory.
const MAX_URI_BYTES: usize = 8 * 1024;

/// Layers 4 to 6: a request refused before its body is read (too large, or one this listener
/// should not serve), else the rest of the stack under the time limit of the whole request,
/// answered as JSON (tower's timeout answers an empty 504).
async fn screen(
    request: Request,
    next: Next,
    limits: Limits,
    browser: &super::browser::BrowserPolicy,
) -> Response {
    let refused = too_large(&request, limits.max_body_bytes).or_else(|| browser.refusal(&request));
    if let Some(refused) = refused {
        return refused.into_response();
    }
    let limit = limits.request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::RequestTimeout { limit }.into_response(),
    }
}

/// A request whose URI or declared body is too large.
fn too_large(request: &Request, max_body_bytes: usize) -> Option<ApiError> {
    let uri = request
        .uri()
        .path_and_query()
        .map_or(0, |p| p.as_str().len());
    if uri > MAX_URI_BYTES {
        return Some(ApiError::UriTooLong {
            limit: MAX_URI_BYTES,
        });
    }
    // An agent's request that names its session is refused by its handler instead (still before
    // its body is read): the session's older request is forgotten there, with the caller known.
    if crate::app::threads::seen::agent_session(request.headers()).is_some() {
        return None;
    }
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    declared
        .is_some_and(|n| n > max_body_bytes as u64)
        .then_some(ApiError::PayloadTooLarge {
            limit: max_body_bytes,
        })
}

fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::Internal(anyhow::anyhow!("a handler panicked")).into_response()
}

/// A client's request id is kept only when it is short and plain: it ends up in every log line.
fn drop_bad_request_id(mut request: Request) -> Request {
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
    request
}

/// The path for logs, with every segment that is a key replaced: the segment after a `k`
/// segment (whatever its case, wherever it is), and any segment that holds a compactd key
/// (percent-encoded or not).
pub(super) fn redact(path: &str) -> String {
    let mut after_k = false;
    path.split('/')
        .map(|segment| {
            let decoded = percent_decoded(segment).to_ascii_lowercase();
            let is_key = after_k || decoded.contains(crate::access::KEY_PREFIX);
            after_k = decoded == "k";
            if is_key && !segment.is_empty() {
                "<redacted>"
            } else {
                segment
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A path segment with `%XX` escapes decoded (invalid UTF-8 replaced), for recognizing keys.
fn percent_decoded(segment: &str) -> String {
    if !segment.contains('%') {
        return segment.to_owned();
    }
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn keys_in_paths_are_redacted() {
        use super::redact;
        assert_eq!(
            redact("/k/secret-key/v1/compact"),
            "/k/<redacted>/v1/compact"
        );
        assert_eq!(redact("/k/secret"), "/k/<redacted>");
        assert_eq!(redact("/v1/compact"), "/v1/compact");
        // Whatever precedes the key, whatever the case.
        assert_eq!(redact("//k/secret/v1/compact"), "//k/<redacted>/v1/compact");
        assert_eq!(redact("/K/secret/v1/compact"), "/K/<redacted>/v1/compact");
        assert_eq!(redact("/x/y/k/secret"), "/x/y/k/<redacted>");
        assert_eq!(redact("/%6b/secret/v1"), "/%6b/<redacted>/v1");
        // A compactd key anywhere, encoded or not.
        assert_eq!(
            redact("/v1/cmpd_0123abcd/compact"),
            "/v1/<redacted>/compact"
        );
        assert_eq!(redact("/v1/%63mpd_0123/x"), "/v1/<redacted>/x");
        assert_eq!(redact("/v1/CMPD_0123"), "/v1/<redacted>");
    }
}
