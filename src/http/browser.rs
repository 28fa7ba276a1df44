//! What a web browser may make compactd do. A compactd on loopback is reachable from every page
//! its user opens, so two things are checked before any route runs:
//!
//! * **The Host header** (DNS rebinding): a page on `attacker.example` whose name re-resolves to
//!   127.0.0.1 reaches compactd as the *same origin*, so the browser lets it read the answers. The
//!   name it used is still in `Host`. Where callers without a key are served (loopback, or
//!   `COMPACTD_ALLOW_ANONYMOUS`), only names that cannot be rebound are accepted — `localhost`,
//!   the loopback addresses, and (beyond loopback) IP literals — plus `COMPACTD_ALLOWED_HOSTS`;
//!   anything else is 421 on every route. Where every caller needs a key, the key is what
//!   protects, and the Host is checked only when `COMPACTD_ALLOWED_HOSTS` is set.
//! * **Cross-site requests** (CSRF): a page can POST `text/plain` or a form to any address without
//!   a CORS preflight; the browser then says where it came from (`Origin`, `Sec-Fetch-Site`).
//!   Outside the console (which has its own check), a request whose `Origin` is not this server
//!   or one of `COMPACTD_ALLOWED_ORIGINS`, or whose `Sec-Fetch-Site` says another site, is refused.
//!   Agents send neither header and are never refused by this.
//!
//! Request bodies must also say they are JSON (or NDJSON for session files): see [`super::json`].

use std::net::IpAddr;

use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};

use super::error::ApiError;

/// Which Host names and Origins this compactd answers.
#[derive(Debug, Clone, Default)]
pub(crate) struct BrowserPolicy {
    /// Whether the Host is checked at all.
    check_host: bool,
    /// Whether IP literals other than loopback are accepted as Host (beyond loopback: an address
    /// cannot be rebound, and it is how such a listener is reached).
    any_ip_literal: bool,
    /// `COMPACTD_ALLOWED_HOSTS`, lowercased, without ports.
    hosts: Vec<String>,
    /// `COMPACTD_ALLOWED_ORIGINS`, lowercased, without a trailing slash.
    origins: Vec<String>,
}

impl BrowserPolicy {
    /// Which Host names and Origins a listener with `config` serves.
    pub(crate) fn of(config: &crate::config::ServeConfig) -> BrowserPolicy {
        BrowserPolicy::new(
            config.http.listen.ip().is_loopback(),
            config.anonymous_allowed(),
            &config.access.allowed_hosts,
            &config.access.allowed_origins,
        )
    }

    /// The policy of a listener: `loopback` when it listens on a loopback address,
    /// `anonymous_served` when callers without a key are served.
    pub(crate) fn new(
        loopback: bool,
        anonymous_served: bool,
        hosts: &[String],
        origins: &[String],
    ) -> BrowserPolicy {
        let hosts: Vec<String> = hosts
            .iter()
            .map(|h| strip_port(h.trim()).to_ascii_lowercase())
            .filter(|h| !h.is_empty())
            .collect();
        BrowserPolicy {
            check_host: anonymous_served || !hosts.is_empty(),
            any_ip_literal: !loopback,
            hosts,
            origins: origins
                .iter()
                .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                .filter(|o| !o.is_empty())
                .collect(),
        }
    }

    /// Whether a request naming `host` (a Host header value) is for this listener.
    pub(crate) fn host_allowed(&self, host: &str) -> bool {
        if !self.check_host {
            return true;
        }
        let name = strip_port(host).to_ascii_lowercase();
        if name == "localhost" {
            return true;
        }
        let literal = name.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            // The address forms a browser writes: dotted IPv4, bracketed IPv6.
            let canonical = match ip {
                IpAddr::V4(_) => !name.starts_with('['),
                IpAddr::V6(_) => name.starts_with('[') && name.ends_with(']'),
            };
            if canonical && (ip.is_loopback() || self.any_ip_literal) {
                return true;
            }
        }
        self.hosts.contains(&name)
    }

    /// Whether a browser sent this request from another site: its `Origin` is neither this
    /// server (the Host it was sent to) nor an allowed origin, or, without an `Origin`,
    /// `Sec-Fetch-Site` names another site. Clients that send neither are not browsers.
    pub(crate) fn cross_site(&self, headers: &HeaderMap) -> bool {
        let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(origin) = headers.get(header::ORIGIN) {
            let Ok(origin) = origin.to_str() else {
                return true;
            };
            let origin = origin.trim().to_ascii_lowercase();
            if self.origins.contains(&origin) {
                return false;
            }
            let authority = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            let host = value(header::HOST.as_str()).map(str::to_ascii_lowercase);
            return match (authority, host) {
                (Some(authority), Some(host)) => authority != host,
                // `null` (a sandboxed frame, a file, a redirect across sites) or no Host.
                _ => true,
            };
        }
        value("sec-fetch-site").is_some_and(|site| site == "cross-site" || site == "same-site")
    }
}

/// `host` without a `:port` (IPv6 literals keep their brackets).
fn strip_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

/// 400 for a request that names its host twice, or (in HTTP/1.1) not at all: RFC 9112 §3.2
/// requires it, and a proxy or a check reading the other `Host` than compactd would be fooled.
fn host_malformed(request: &Request) -> Option<ApiError> {
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let problem = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => "a request must have one Host header; this one has several",
        (None, _)
            if request.version() == axum::http::Version::HTTP_11
                && request.uri().authority().is_none() =>
        {
            "an HTTP/1.1 request must have a Host header; this one has none"
        }
        _ => return None,
    };
    tracing::info!("request with a malformed Host refused");
    Some(ApiError::Invalid {
        status: StatusCode::BAD_REQUEST,
        code: "invalid_host",
        message: problem.into(),
        param: Some("Host".into()),
    })
}

/// The host a request was sent to: its `Host` header, or the URI's authority (HTTP/2).
fn request_host(request: &Request) -> Option<std::borrow::Cow<'_, str>> {
    match request.headers().get(header::HOST) {
        Some(value) => Some(String::from_utf8_lossy(value.as_bytes())),
        None => request.uri().authority().map(|a| a.as_str().into()),
    }
}

impl BrowserPolicy {
    /// The refusal of a request this listener should not serve, checked before routing (every
    /// route: the console, health and metrics too): a Host it does not serve (421, DNS
    /// rebinding), then a browser's request sent from another site, on every route but the
    /// console's (which checks its forms itself and must open from a link). The agent wires
    /// answer that 400, never 403 (agents read a 403 there as their provider login failing).
    pub(super) fn refusal(&self, request: &Request) -> Option<ApiError> {
        if let Some(malformed) = host_malformed(request) {
            return Some(malformed);
        }
        if let Some(host) = request_host(request)
            && !self.host_allowed(&host)
        {
            tracing::info!("request for a Host this listener does not serve refused");
            return Some(ApiError::Invalid {
                status: StatusCode::MISDIRECTED_REQUEST,
                code: "host_not_allowed",
                message: format!(
                    "this compactd does not serve the host {:?}: it answers to localhost and IP \
                     addresses; other names must be listed in COMPACTD_ALLOWED_HOSTS",
                    strip_port(&host)
                ),
                param: Some("Host".into()),
            });
        }
        let path = request.uri().path();
        let console = path == "/ui" || path.starts_with("/ui/");
        if !console && self.cross_site(request.headers()) {
            tracing::info!("cross-site browser request refused");
            let status = if super::auth::is_agent_wire(path) {
                StatusCode::BAD_REQUEST
            } else {
                StatusCode::FORBIDDEN
            };
            return Some(ApiError::Invalid {
                status,
                code: "cross_site_request",
                message: "a web page on another site sent this request through a browser; compactd \
                          serves other origins only when they are listed in COMPACTD_ALLOWED_ORIGINS"
                    .into(),
                param: Some("Origin".into()),
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn a_loopback_listener_answers_only_to_names_that_cannot_be_rebound() {
        let policy = BrowserPolicy::new(true, true, &["compactd.internal".into()], &[]);
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.8.9.1:1",
            "[::1]:8080",
            "[::1]",
            "compactd.internal:9000",
        ] {
            assert!(policy.host_allowed(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "localhost.",
            "127.0.0.1.nip.io:8080",
            "10.0.0.5:8080",
            "::1",
            "",
        ] {
            assert!(!policy.host_allowed(host), "{host}");
        }
    }

    #[test]
    fn beyond_loopback_ip_literals_are_accepted_and_keys_alone_accept_any_host() {
        let anonymous = BrowserPolicy::new(false, true, &[], &[]);
        assert!(anonymous.host_allowed("10.0.0.5:8080"));
        assert!(anonymous.host_allowed("[fd00::5]:8080"));
        assert!(!anonymous.host_allowed("compactd.internal"));
        let keyed = BrowserPolicy::new(false, false, &[], &[]);
        assert!(keyed.host_allowed("compactd.internal"));
        let listed = BrowserPolicy::new(false, false, &["compactd.internal".into()], &[]);
        assert!(listed.host_allowed("compactd.internal:443"));
        assert!(!listed.host_allowed("other.example"));
    }

    #[test]
    fn requests_from_other_sites_are_told_from_agents_and_the_same_origin() {
        let policy = BrowserPolicy::new(true, true, &[], &["http://localhost:5173/".into()]);
        // An agent: no Origin, no Sec-Fetch-*.
        assert!(!policy.cross_site(&headers(&[("host", "127.0.0.1:8080")])));
        let same = headers(&[
            ("origin", "http://127.0.0.1:8080"),
            ("host", "127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]);
        assert!(!policy.cross_site(&same));
        let listed = headers(&[
            ("origin", "http://localhost:5173"),
            ("host", "127.0.0.1:8080"),
        ]);
        assert!(!policy.cross_site(&listed));
        for other in [
            headers(&[
                ("origin", "https://attacker.example"),
                ("host", "127.0.0.1:8080"),
            ]),
            // Another port on the same machine is another origin.
            headers(&[
                ("origin", "http://127.0.0.1:3000"),
                ("host", "127.0.0.1:8080"),
            ]),
            headers(&[("origin", "null"), ("host", "127.0.0.1:8080")]),
            headers(&[("sec-fetch-site", "cross-site"), ("host", "127.0.0.1:8080")]),
            headers(&[("sec-fetch-site", "same-site"), ("host", "127.0.0.1:8080")]),
        ] {
            assert!(policy.cross_site(&other), "{other:?}");
        }
        // A user typing the URL is no other site.
        assert!(!policy.cross_site(&headers(&[("sec-fetch-site", "none")])));
    }
}
