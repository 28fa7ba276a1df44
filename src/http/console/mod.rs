//! The web console under `/ui`: server-rendered pages of what compactd holds — a tenant's
//! sessions, a session as a tree with the next cut drawn on it, each compaction's summary beside
//! the one it replaced with its fidelity report, and the fleet's calls — and the actions a person
//! takes there (upload, plan, compact, pin, download, hand off).
//!
//! Templates are compiled into the binary (askama), as are the stylesheet and the 2 KB script,
//! which only enhances pages that work without it. Access is the API's (see [`viewer`]); every
//! page answers with a strict Content-Security-Policy, and a form posted from another origin is
//! refused, so another site cannot act through a browser on a loopback compactd.

mod error;
mod extract;
mod fleet;
mod handoff;
mod markdown;
mod pages;
mod recall;
mod session_page;
mod viewer;
mod views;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};

use super::AppState;
use error::PageError;

const CSS: &str = include_str!("assets/console.css");
const JS: &str = include_str!("assets/console.js");

/// The console's routes, with their security headers and the cross-origin check.
pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/ui", get(pages::sessions))
        .route("/ui/login", get(viewer::login_page).post(viewer::login))
        .route("/ui/logout", post(viewer::logout))
        .route("/ui/fleet", get(fleet::fleet))
        .route("/ui/recall", get(recall::recall))
        .route("/ui/sessions", post(pages::upload))
        .route("/ui/sessions/{id}", get(pages::session))
        .route("/ui/sessions/{id}/compact", post(pages::compact))
        .route("/ui/sessions/{id}/pins", post(pages::add_pin))
        .route(
            "/ui/sessions/{id}/pins/{pin}/delete",
            post(pages::delete_pin),
        )
        .route("/ui/sessions/{id}/download", get(pages::download))
        .route("/ui/sessions/{id}/handoff/draft", post(handoff::draft))
        .route("/ui/sessions/{id}/handoff", post(handoff::start))
        .route(
            "/ui/sessions/{id}/compactions/{entry}",
            get(pages::compaction),
        )
        .route("/ui/assets/console.css", get(|| asset(CSS, "text/css")))
        .route(
            "/ui/assets/console.js",
            get(|| asset(JS, "text/javascript")),
        )
        // Any other address under /ui is the console's own 404 page.
        .route("/ui/{*rest}", any(not_found))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(guard))
}

async fn method_not_allowed() -> PageError {
    PageError(super::error::ApiError::MethodNotAllowed)
}

async fn not_found() -> PageError {
    PageError(super::error::ApiError::NotFound)
}

async fn asset(body: &'static str, content_type: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// Refuses state-changing requests from other origins; adds the security headers.
async fn guard(request: Request, next: Next) -> Response {
    if !matches!(*request.method(), Method::GET | Method::HEAD)
        && from_another_origin(request.headers())
    {
        return PageError(super::error::ApiError::Invalid {
            status: StatusCode::FORBIDDEN,
            code: "cross_origin",
            param: None,
            message: "a console form was sent from another site".into(),
        })
        .into_response();
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    let defaults = [
        (
            header::CONTENT_SECURITY_POLICY,
            // Inline styles draw the plan's bar and the chart; no inline script runs.
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        // Not `no-referrer`: with it a browser sends `Origin: null` on the console's own forms.
        (header::REFERRER_POLICY, "same-origin"),
        (header::CACHE_CONTROL, "no-store"),
    ];
    for (name, value) in defaults {
        if !headers.contains_key(&name) {
            headers.insert(name, HeaderValue::from_static(value));
        }
    }
    response
}

/// A browser says where a form came from: `Sec-Fetch-Site`, and `Origin` on every POST. Either
/// naming another site refuses the request; clients that send neither (curl) are not browsers
/// acting for someone else.
fn from_another_origin(headers: &HeaderMap) -> bool {
    let value = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    if value("sec-fetch-site").is_some_and(|site| site == "cross-site" || site == "same-site") {
        return true;
    }
    match (value(header::ORIGIN.as_str()), value(header::HOST.as_str())) {
        (Some(origin), Some(host)) => {
            let origin_host = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .unwrap_or(origin);
            !origin_host.eq_ignore_ascii_case(host)
        }
        (Some(_), None) => true,
        (None, _) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn forms_from_other_sites_are_told_apart() {
        let same = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(!from_another_origin(&same));
        assert!(!from_another_origin(&headers(&[(
            "host",
            "127.0.0.1:8080"
        )])));
        let other = headers(&[
            ("origin", "https://evil.example"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(from_another_origin(&other));
        let fetch = headers(&[("sec-fetch-site", "cross-site"), ("host", "127.0.0.1:8080")]);
        assert!(from_another_origin(&fetch));
        let null = headers(&[("origin", "null"), ("host", "127.0.0.1:8080")]);
        assert!(from_another_origin(&null));
    }
}
