//! The conversations compactd last saw through the gateway, one per agent session (issue 57).
//! An agent behind the gateway asks its MCP `handoff` tool to hand off "this thread" without
//! knowing any id for it: each agent names its session in a header of every model request —
//! Claude Code `X-Claude-Code-Session-Id`, Codex `session-id`, OpenCode `x-session-id` (read
//! from their recorded requests) — but its MCP calls name only the agent (`User-Agent`). So
//! compactd answers from the latest request of the caller's most recent session of that agent.
//!
//! Held in memory, bounded by sessions and bytes, the oldest going first: the replica that saw
//! the request answers. A request's body is shared with the request, not copied.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::http::HeaderMap;

use crate::access::Identity;

/// Sessions remembered, across tenants.
const MAX_SESSIONS: usize = 256;
/// Bytes of request bodies remembered, across tenants.
const MAX_BYTES: usize = 64 << 20;

/// How a remembered request's conversation is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeenWire {
    AnthropicMessages,
    ChatCompletions,
    Responses,
}

/// The latest request of one agent session.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) agent: &'static str,
    pub(crate) session: String,
    pub(crate) wire: SeenWire,
    /// The request's body, decoded.
    pub(crate) body: Bytes,
    /// When it came, in the order of arrival.
    at: u64,
}

type Key = (String, Option<String>, &'static str, String);

#[derive(Debug, Default)]
struct Inner {
    sessions: HashMap<Key, Seen>,
    bytes: usize,
    clock: u64,
}

/// The latest request of each agent session the gateway saw.
#[derive(Debug, Default)]
pub(crate) struct SeenThreads {
    inner: Mutex<Inner>,
}

/// The agent and its session id, from the header each agent names its session in.
pub(crate) fn agent_session(headers: &HeaderMap) -> Option<(&'static str, &str)> {
    [
        ("x-claude-code-session-id", "claude-code"),
        ("session-id", "codex"),
        ("x-session-id", "opencode"),
    ]
    .into_iter()
    .find_map(|(header, agent)| {
        let id = headers.get(header)?.to_str().ok()?.trim();
        (!id.is_empty() && id.len() <= 200).then_some((agent, id))
    })
}

/// The agent an MCP client is, from its `User-Agent` (`claude-code/2.1.332 (sdk-cli)`,
/// `opencode/1.18.33`, Codex's `codex_…`).
pub(crate) fn agent_of_client(headers: &HeaderMap) -> Option<&'static str> {
    let agent = headers
        .get(axum::http::header::USER_AGENT)?
        .to_str()
        .ok()?
        .to_ascii_lowercase();
    [
        ("claude-code", "claude-code"),
        ("claude-cli", "claude-code"),
        ("opencode", "opencode"),
        ("codex", "codex"),
    ]
    .into_iter()
    .find_map(|(prefix, name)| agent.starts_with(prefix).then_some(name))
}

impl SeenThreads {
    /// Remembers `body` as the latest request of `who`'s `agent` session `session`.
    pub(crate) fn note(
        &self,
        who: &Identity,
        (agent, session): (&'static str, &str),
        wire: SeenWire,
        body: Bytes,
    ) {
        if body.len() > MAX_BYTES / 4 {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let at = inner.clock;
        let key = (
            who.tenant.clone(),
            who.key_id.clone(),
            agent,
            session.to_owned(),
        );
        let added = body.len();
        let seen = Seen {
            agent,
            session: session.to_owned(),
            wire,
            body,
            at,
        };
        if let Some(old) = inner.sessions.insert(key, seen) {
            inner.bytes -= old.body.len();
        }
        inner.bytes += added;
        while inner.bytes > MAX_BYTES || inner.sessions.len() > MAX_SESSIONS {
            let Some(oldest) = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.at)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(gone) = inner.sessions.remove(&oldest) {
                inner.bytes -= gone.body.len();
            }
        }
    }

    /// The latest request of `who`'s most recent session of `agent` (any agent when `None`).
    pub(crate) fn latest(&self, who: &Identity, agent: Option<&str>) -> Option<Seen> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .sessions
            .iter()
            .filter(|((tenant, key, kind, _), _)| {
                *tenant == who.tenant && *key == who.key_id && agent.is_none_or(|a| a == *kind)
            })
            .max_by_key(|(_, s)| s.at)
            .map(|(_, s)| s.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(tenant: &str) -> Identity {
        Identity {
            tenant: tenant.into(),
            key_id: Some(format!("k-{tenant}")),
        }
    }

    #[test]
    fn the_latest_session_of_the_agent_and_caller_answers() {
        let seen = SeenThreads::default();
        let body = |s: &str| Bytes::from(s.to_owned());
        seen.note(
            &who("a"),
            ("claude-code", "s1"),
            SeenWire::AnthropicMessages,
            body("one"),
        );
        seen.note(
            &who("a"),
            ("opencode", "o1"),
            SeenWire::ChatCompletions,
            body("two"),
        );
        seen.note(
            &who("b"),
            ("claude-code", "s9"),
            SeenWire::AnthropicMessages,
            body("theirs"),
        );
        seen.note(
            &who("a"),
            ("claude-code", "s1"),
            SeenWire::AnthropicMessages,
            body("three"),
        );
        let latest = seen.latest(&who("a"), Some("claude-code")).unwrap();
        assert_eq!(
            (latest.session.as_str(), &latest.body[..]),
            ("s1", &b"three"[..])
        );
        assert_eq!(seen.latest(&who("a"), None).unwrap().agent, "claude-code");
        assert_eq!(
            &seen.latest(&who("a"), Some("opencode")).unwrap().body[..],
            b"two"
        );
        assert!(seen.latest(&who("a"), Some("codex")).is_none());
        assert!(seen.latest(&who("c"), None).is_none());
    }

    #[test]
    fn the_oldest_sessions_go_first_past_the_bounds() {
        let seen = SeenThreads::default();
        for i in 0..MAX_SESSIONS + 10 {
            let id = format!("s{i}");
            seen.note(
                &who("a"),
                ("codex", &id),
                SeenWire::Responses,
                Bytes::from_static(b"x"),
            );
        }
        let inner = seen.inner.lock().unwrap();
        assert_eq!(inner.sessions.len(), MAX_SESSIONS);
        assert_eq!(inner.bytes, MAX_SESSIONS);
        assert!(!inner.sessions.keys().any(|k| k.3 == "s0"));
    }

    #[test]
    fn agents_are_told_by_their_session_headers_and_their_clients() {
        let mut headers = HeaderMap::new();
        headers.insert("x-claude-code-session-id", "a934".parse().unwrap());
        assert_eq!(agent_session(&headers), Some(("claude-code", "a934")));
        let mut headers = HeaderMap::new();
        headers.insert("session-id", "01a2".parse().unwrap());
        assert_eq!(agent_session(&headers), Some(("codex", "01a2")));
        let mut headers = HeaderMap::new();
        headers.insert("x-session-id", "ses_1".parse().unwrap());
        assert_eq!(agent_session(&headers), Some(("opencode", "ses_1")));
        assert_eq!(agent_session(&HeaderMap::new()), None);
        let mut headers = HeaderMap::new();
        headers.insert(
            "user-agent",
            "claude-code/2.1.332 (sdk-cli)".parse().unwrap(),
        );
        assert_eq!(agent_of_client(&headers), Some("claude-code"));
        headers.insert("user-agent", "opencode/1.18.33".parse().unwrap());
        assert_eq!(agent_of_client(&headers), Some("opencode"));
    }
}
