//! Passthrough: a request that is not a compaction goes to the configured upstream of its wire —
//! only there, never to a URL the request names — with the client's own headers and credentials
//! (never logged), hop-by-hop headers dropped, and the answer streamed back as it comes (each
//! chunk as soon as it arrives, nothing buffered), bounded in size and in silence. When the
//! agent hangs up, the response body is dropped and with it the upstream request.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures_util::StreamExt;
use serde_json::json;

/// Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and the ones
/// the client's connection to compactd sets.
const HOP_BY_HOP: [&str; 10] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The upstream client and its bounds.
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    client: reqwest::Client,
    /// The most an upstream's answer may be (`COMPACTD_GATEWAY_MAX_RESPONSE_BYTES`).
    pub(crate) max_response_bytes: u64,
}

impl Proxy {
    pub(crate) fn new(idle_timeout: Duration, max_response_bytes: u64) -> anyhow::Result<Proxy> {
        let client = crate::tls::client()
            .connect_timeout(Duration::from_secs(10))
            // Silence, not length, ends a stream: an agent's turn may stream for many minutes.
            .read_timeout(idle_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            // A redirect would carry the agent's credentials to another host.
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Proxy {
            client,
            max_response_bytes,
        })
    }

    /// Sends the request to `target`, whose provider reads its credential as `wire` says, and
    /// streams the answer back; refused when compactd's key took the provider's only credential
    /// header ([`check_credentials`]).
    pub(crate) async fn forward(
        &self,
        target: reqwest::Url,
        wire: Credentials,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
        mut usage: Option<super::prepare::UsageTap>,
    ) -> Result<Response, AmbiguousCredentials> {
        check_credentials(headers, wire)?;
        let started = std::time::Instant::now();
        let host = target.host_str().unwrap_or_default().to_owned();
        let mut headers = forwarded(headers);
        // The body may be compactd's rewrite (Codex's items expanded): its length is the body's.
        headers.remove(header::CONTENT_LENGTH);
        let upstream = self
            .client
            .request(method, target)
            .headers(headers)
            .body(body)
            .send()
            .await;
        let upstream = match upstream {
            Ok(upstream) => upstream,
            Err(error) => {
                // The error's text may hold the URL, never a header: safe to log.
                tracing::warn!(upstream = %host, error = %error.without_url(), "gateway: the upstream did not answer");
                return Ok(unreachable_upstream(&host));
            }
        };
        tracing::debug!(upstream = %host, status = upstream.status().as_u16(), first_byte_ms = started.elapsed().as_millis() as u64, "gateway: passed through");
        let status = upstream.status();
        let mut response_headers = forwarded(upstream.headers());
        response_headers.remove(header::CONTENT_LENGTH);
        if let Some(length) = upstream.content_length() {
            response_headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
        }
        let limit = self.max_response_bytes;
        let mut seen = 0u64;
        let stream = upstream.bytes_stream().map(move |chunk| {
            let chunk = chunk.map_err(std::io::Error::other)?;
            seen += chunk.len() as u64;
            if seen > limit {
                return Err(std::io::Error::other(format!(
                    "the upstream's answer is over COMPACTD_GATEWAY_MAX_RESPONSE_BYTES ({limit})"
                )));
            }
            if let Some(usage) = usage.as_mut() {
                usage.read(&chunk);
            }
            Ok(chunk)
        });
        let mut response = Response::new(Body::from_stream(stream));
        *response.status_mut() = status;
        *response.headers_mut() = response_headers;
        response.extensions_mut().insert(PassedThrough);
        Ok(response)
    }
}

/// Marks an answer the upstream wrote: an agent's ordinary turn, logged at DEBUG (every turn of
/// every agent passes through; the metrics count them, and compactions, refusals and failures
/// are still logged at INFO and above).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PassedThrough;

/// `headers` without the hop-by-hop ones (and those a `Connection` header names), and without
/// every header that holds a compactd key (whichever header carried it, and compactd's own
/// `X-Compactd-Key`): compactd's keys never leave it.
fn forwarded(headers: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .collect();
    let mut out = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let lower = name.as_str();
        if HOP_BY_HOP.contains(&lower)
            || named.iter().any(|n| n == lower)
            || lower == crate::access::KEY_HEADER
            || crate::access::holds_key(value.as_bytes())
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// The headers each wire's provider reads its credentials from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// Anthropic Messages: `x-api-key`, or `Authorization` (a subscription's OAuth token).
    Anthropic,
    /// OpenAI's wires: `Authorization`, or Azure's `api-key`.
    OpenAi,
}

impl Credentials {
    fn headers(self) -> &'static [&'static str] {
        match self {
            Credentials::Anthropic => &["x-api-key", "authorization"],
            Credentials::OpenAi => &["authorization", "api-key"],
        }
    }
}

/// Why a request cannot be forwarded as it came: the header the provider reads its credential
/// from carried compactd's key, and nothing else is left for the provider. Guessing would send
/// the provider no credential (its 401 reads as the agent's login failing) or compactd's key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {header} header carries a compactd key and nothing is left for the provider")]
pub(crate) struct AmbiguousCredentials {
    /// The header that held compactd's key.
    pub(crate) header: &'static str,
}

/// Checks that forwarding `headers` leaves the provider a credential where compactd's key was
/// taken out; a request that never held compactd's key in a provider's header passes as it is
/// (with no credential at all, the provider answers for itself).
fn check_credentials(headers: &HeaderMap, wire: Credentials) -> Result<(), AmbiguousCredentials> {
    let names = wire.headers();
    let mut took = None;
    let mut left = false;
    for name in names {
        for value in headers.get_all(*name) {
            if crate::access::holds_key(value.as_bytes()) {
                took.get_or_insert(*name);
            } else if !value.is_empty() {
                left = true;
            }
        }
    }
    match took {
        Some(header) if !left => Err(AmbiguousCredentials { header }),
        _ => Ok(()),
    }
}

/// 502 in the shape both wires' clients read (`error.type`, `error.message`).
fn unreachable_upstream(host: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": "api_error", "code": "upstream_unreachable",
        "message": format!("compactd's gateway could not reach the upstream {host}")}});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::BAD_GATEWAY;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// The upstream URL of a request: `base` with the request's path after `strip` and its query.
pub(crate) fn target(
    base: &reqwest::Url,
    path: &str,
    strip: &str,
    query: Option<&str>,
) -> reqwest::Url {
    let rest = path.strip_prefix(strip).unwrap_or(path);
    let mut url = base.clone();
    url.set_path(&format!("{}{}", base.path().trim_end_matches('/'), rest));
    url.set_query(query);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_keep_the_base_and_take_only_path_and_query() {
        let anthropic = reqwest::Url::parse("https://api.anthropic.com").unwrap();
        let openai = reqwest::Url::parse("http://127.0.0.1:9/v1/").unwrap();
        assert_eq!(
            target(&anthropic, "/v1/messages", "", Some("beta=true")).as_str(),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
        assert_eq!(
            target(&openai, "/v1/responses", "/v1", None).as_str(),
            "http://127.0.0.1:9/v1/responses"
        );
        // A path that looks like a URL stays a path on the configured host.
        let sneaky = target(&anthropic, "//evil.example/v1/messages", "", None);
        assert_eq!(sneaky.host_str(), Some("api.anthropic.com"));
    }

    #[test]
    fn compactd_keys_never_leave_and_a_provider_header_left_empty_is_refused() {
        let (key, _) = crate::access::new_key("t", None, 1);
        let bearer = HeaderValue::from_str(&format!("Bearer {key}")).unwrap();
        let mut anthropic = HeaderMap::new();
        anthropic.insert("authorization", bearer.clone());
        anthropic.insert("x-api-key", HeaderValue::from_static("sk-ant-provider"));
        anthropic.insert("x-compactd-key", HeaderValue::from_str(&key).unwrap());
        let out = forwarded(&anthropic);
        assert_eq!(out.len(), 1, "{out:?}");
        assert_eq!(out["x-api-key"], "sk-ant-provider");
        assert_eq!(
            check_credentials(&anthropic, Credentials::Anthropic),
            Ok(())
        );
        // OpenAI's wires have one header for both: compactd's key there leaves none for the
        // provider.
        let mut openai = HeaderMap::new();
        openai.insert("authorization", bearer);
        assert_eq!(
            check_credentials(&openai, Credentials::OpenAi),
            Err(AmbiguousCredentials {
                header: "authorization"
            })
        );
        anthropic.remove("x-api-key");
        assert!(check_credentials(&anthropic, Credentials::Anthropic).is_err());
        // The key in compactd's own header: the provider's key travels where it always does.
        let mut both = HeaderMap::new();
        both.insert("x-compactd-key", HeaderValue::from_str(&key).unwrap());
        both.insert(
            "authorization",
            HeaderValue::from_static("Bearer sk-provider"),
        );
        assert_eq!(check_credentials(&both, Credentials::OpenAi), Ok(()));
        assert_eq!(forwarded(&both).len(), 1);
        // No credential at all is the provider's to answer.
        assert_eq!(
            check_credentials(&HeaderMap::new(), Credentials::OpenAi),
            Ok(())
        );
    }

    #[test]
    fn hop_by_hop_headers_are_dropped_and_the_rest_kept() {
        let mut headers = HeaderMap::new();
        headers.insert(
            "connection",
            HeaderValue::from_static("keep-alive, x-private"),
        );
        headers.insert("x-private", HeaderValue::from_static("1"));
        headers.insert("host", HeaderValue::from_static("127.0.0.1:8080"));
        headers.insert("x-api-key", HeaderValue::from_static("sk-ant-1"));
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        let out = forwarded(&headers);
        assert_eq!(out.len(), 2);
        assert_eq!(out["x-api-key"], "sk-ant-1");
        assert_eq!(out["anthropic-version"], "2023-06-01");
    }
}
