//! What every wire's answer is written with: the summary and its usage ([`Answer`]), the text in
//! stream-sized pieces, ids, server-sent events and a JSON body. Each wire's module writes its own
//! events with them; chat completions are answered by the HTTP layer, whose type documents them.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::Value;

use crate::summarizer::TokenUsage;

/// Characters of text per streamed delta.
const DELTA_CHARS: usize = 512;

/// What an answer says, whatever its wire.
pub(crate) struct Answer<'a> {
    pub(crate) text: &'a str,
    /// The model the agent asked for: its accounting is per model.
    pub(crate) model: &'a str,
    pub(crate) usage: TokenUsage,
}

pub(super) fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(DELTA_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

pub(super) fn id(prefix: &str) -> String {
    format!("{prefix}_compactd{:016x}", fastrand::u64(..))
}

pub(super) fn sse(events: Vec<(&str, Value)>) -> Response {
    let mut body = String::new();
    for (name, data) in events {
        body.push_str("event: ");
        body.push_str(name);
        body.push_str("\ndata: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(super) fn json_response(value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
