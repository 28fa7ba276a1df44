//! The conversations compactd last saw through the gateway, one per agent session (issue 57).
//! An agent behind the gateway asks its MCP `handoff` tool to hand off "this thread" without
//! knowing any id for it: each agent names its session in a header of every model request —
//! Claude Code `X-Claude-Code-Session-Id`, Codex `session-id`, OpenCode `x-session-id` (read
//! from their recorded requests) — but its MCP calls name only the agent (`User-Agent`). So
//! compactd answers from the latest request of the caller's most recent session of that agent.
//!
//! Held in memory, bounded by sessions and bytes, the oldest going first: the replica that saw
//! the request answers. A request's body is shared with the request, not copied. Each tenant has
//! a share of its own (sessions and bytes), so that one tenant's traffic never evicts another's
//! threads; past the whole store's bound, the tenant holding the most bytes gives way first. The
//! latest request of a session always wins: one too large to keep drops the session's entry
//! rather than leave an older request standing for it.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Bytes;
use axum::http::HeaderMap;

use crate::access::Identity;
use compactd_core::wire::Wire;

/// Sessions remembered for one tenant.
const TENANT_SESSIONS: usize = 64;
/// Bytes of request bodies remembered for one tenant: also the largest request kept.
const TENANT_BYTES: usize = 32 << 20;
/// Bytes of request bodies remembered, across tenants.
const MAX_BYTES: usize = 256 << 20;

/// The latest request of one agent session.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) agent: &'static str,
    pub(crate) session: String,
    pub(crate) wire: Wire,
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

impl Inner {
    fn remove(&mut self, key: &Key) {
        if let Some(gone) = self.sessions.remove(key) {
            self.bytes -= gone.body.len();
        }
    }

    /// The sessions and bytes `tenant` holds (`None`: none).
    fn usage(&self, tenant: &str) -> Option<(usize, usize)> {
        let mine = self.sessions.iter().filter(|(k, _)| k.0 == tenant);
        let (sessions, bytes) = mine.fold((0, 0), |(n, b), (_, s)| (n + 1, b + s.body.len()));
        (sessions > 0).then_some((sessions, bytes))
    }

    /// The tenant holding the most bytes.
    fn largest_tenant(&self) -> Option<String> {
        let mut bytes: HashMap<&str, usize> = HashMap::new();
        for (key, seen) in &self.sessions {
            *bytes.entry(key.0.as_str()).or_default() += seen.body.len();
        }
        bytes
            .into_iter()
            .max_by_key(|(_, b)| *b)
            .map(|(t, _)| t.to_owned())
    }

    /// Forgets the oldest session whose key `matches`.
    fn evict_oldest(&mut self, matches: impl Fn(&Key) -> bool) {
        let oldest = self
            .sessions
            .iter()
            .filter(|(k, _)| matches(k))
            .min_by_key(|(_, s)| s.at)
            .map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.remove(&key);
        }
    }
}

/// The latest request of each agent session the gateway saw.
#[derive(Debug, Default)]
pub(crate) struct SeenThreads {
    inner: Mutex<Inner>,
}

/// The agent and its session id, from the header each agent names its session in (the wires'
/// [`Wire::session_header`]).
pub(crate) fn agent_session(headers: &HeaderMap) -> Option<(&'static str, &str)> {
    Wire::ALL
        .into_iter()
        .map(Wire::session_header)
        .find_map(|(agent, header)| {
            let id = headers.get(header)?.to_str().ok()?.trim();
            (!id.is_empty() && id.len() <= 200).then_some((agent, id))
        })
}

impl crate::app::App {
    /// Remembers `body` as the latest request of `who`'s agent session `session` on `wire`.
    pub(crate) fn note_agent_request(
        &self,
        who: &Identity,
        session: (&'static str, &str),
        wire: Wire,
        body: Bytes,
    ) {
        self.seen.note(who, session, wire, body);
    }

    /// Forgets the latest request of the agent session `headers` name, if any: a request of it
    /// that compactd refused leaves the older one stale.
    pub(crate) fn forget_agent_request(&self, who: &Identity, headers: &HeaderMap) {
        if let Some(session) = agent_session(headers) {
            self.seen.forget(who, session);
        }
    }
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
        wire: Wire,
        body: Bytes,
    ) {
        let key = (
            who.tenant.clone(),
            who.key_id.clone(),
            agent,
            session.to_owned(),
        );
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        // The session's older request goes whatever happens next: it is no longer its latest.
        inner.remove(&key);
        if body.is_empty() || body.len() > TENANT_BYTES {
            return;
        }
        inner.clock += 1;
        let at = inner.clock;
        inner.bytes += body.len();
        let seen = Seen {
            agent,
            session: session.to_owned(),
            wire,
            body,
            at,
        };
        inner.sessions.insert(key, seen);
        // The tenant's own share first: only its own oldest sessions give way.
        while inner
            .usage(&who.tenant)
            .is_some_and(|(sessions, bytes)| sessions > TENANT_SESSIONS || bytes > TENANT_BYTES)
        {
            let tenant = who.tenant.clone();
            inner.evict_oldest(|k| k.0 == tenant);
        }
        // Then the whole store's bound: the tenant holding the most bytes gives way.
        while inner.bytes > MAX_BYTES {
            let Some(largest) = inner.largest_tenant() else {
                break;
            };
            inner.evict_oldest(|k| k.0 == largest);
        }
    }

    /// Forgets the latest request of `who`'s `agent` session `session` (a request of it that
    /// compactd could not read: what is left would be stale).
    pub(crate) fn forget(&self, who: &Identity, (agent, session): (&'static str, &str)) {
        let key = (
            who.tenant.clone(),
            who.key_id.clone(),
            agent,
            session.to_owned(),
        );
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
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
            Wire::AnthropicMessages,
            body("one"),
        );
        seen.note(
            &who("a"),
            ("opencode", "o1"),
            Wire::ChatCompletions,
            body("two"),
        );
        seen.note(
            &who("b"),
            ("claude-code", "s9"),
            Wire::AnthropicMessages,
            body("theirs"),
        );
        seen.note(
            &who("a"),
            ("claude-code", "s1"),
            Wire::AnthropicMessages,
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
    fn a_tenants_oldest_sessions_go_first_past_its_share_and_never_anothers() {
        let seen = SeenThreads::default();
        seen.note(
            &who("b"),
            ("codex", "theirs"),
            Wire::Responses,
            Bytes::from_static(b"b's"),
        );
        for i in 0..TENANT_SESSIONS * 5 {
            let id = format!("s{i}");
            seen.note(
                &who("a"),
                ("codex", &id),
                Wire::Responses,
                Bytes::from_static(b"x"),
            );
        }
        {
            let inner = seen.inner.lock().unwrap();
            assert_eq!(inner.usage("a"), Some((TENANT_SESSIONS, TENANT_SESSIONS)));
            assert!(!inner.sessions.keys().any(|k| k.3 == "s0"));
        }
        assert_eq!(&seen.latest(&who("b"), None).unwrap().body[..], b"b's");
        // Bytes too: a tenant's large requests push out its own older ones, not another's.
        let large = Bytes::from(vec![b'x'; TENANT_BYTES / 2 + 1]);
        for i in 0..3 {
            seen.note(
                &who("a"),
                ("claude-code", &format!("big{i}")),
                Wire::AnthropicMessages,
                large.clone(),
            );
        }
        let inner = seen.inner.lock().unwrap();
        let (_, bytes) = inner.usage("a").unwrap();
        assert!(bytes <= TENANT_BYTES);
        assert!(inner.sessions.keys().any(|k| k.3 == "big2"));
        assert!(inner.usage("b").is_some());
    }

    #[test]
    fn past_the_whole_bound_the_largest_tenant_gives_way() {
        let seen = SeenThreads::default();
        let share = Bytes::from(vec![b'x'; TENANT_BYTES - 10]);
        let tenants = MAX_BYTES / TENANT_BYTES + 2;
        seen.note(
            &who("small"),
            ("codex", "s"),
            Wire::Responses,
            Bytes::from_static(b"mine"),
        );
        for t in 0..tenants {
            seen.note(
                &who(&format!("t{t}")),
                ("codex", "s"),
                Wire::Responses,
                share.clone(),
            );
        }
        let inner = seen.inner.lock().unwrap();
        assert!(inner.bytes <= MAX_BYTES);
        assert!(inner.usage("small").is_some());
    }

    #[test]
    fn the_latest_request_always_wins_or_the_session_is_forgotten() {
        let seen = SeenThreads::default();
        let who = who("a");
        seen.note(
            &who,
            ("claude-code", "s1"),
            Wire::AnthropicMessages,
            Bytes::from_static(b"second"),
        );
        // Too large to keep: the older request must not answer for the session.
        seen.note(
            &who,
            ("claude-code", "s1"),
            Wire::AnthropicMessages,
            Bytes::from(vec![b'x'; TENANT_BYTES + 1]),
        );
        assert!(seen.latest(&who, None).is_none());
        seen.note(
            &who,
            ("claude-code", "s1"),
            Wire::AnthropicMessages,
            Bytes::from_static(b"third"),
        );
        seen.forget(&who, ("claude-code", "s1"));
        assert!(seen.latest(&who, None).is_none());
        assert_eq!(seen.inner.lock().unwrap().bytes, 0);
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
