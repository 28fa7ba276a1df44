//! When a session is prepared: a fixed share of its window is too late for a session that grows
//! faster than the model summarizes (at 0.3 s a turn, the last fifth of a window passes in
//! ~8 s, less than a 10 s summarization), and too early for one that crawls. So the preparer
//! keeps, per session on this replica, how fast it grows (tokens a second, smoothed over its
//! turns), and, for the replica, how long a preparation takes; a session is prepared once what
//! it will hold by the time its summary is ready reaches the point where agents compact.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::REFRESH_SHARE;

/// The share of its window at which an agent is expected to compact: the earliest of the agents'
/// automatic compactions (Claude Code's is its window less its output and a buffer, about 83 %
/// of 200,000 tokens; OpenCode's its window less its output; Codex's 90 %), rounded down.
pub(super) const COMPACTS_AT: f64 = 0.8;

/// How much earlier than the projection a preparation starts: the projection is a guess, and a
/// summary that lands a little early costs only a longer part merged after it.
const MARGIN: f64 = 1.5;

/// A preparation's duration before any was measured on this replica.
const FIRST_GUESS: Duration = Duration::from_secs(30);

/// The weight of the newest observation in the smoothed rate and duration.
const WEIGHT: f64 = 0.3;

/// Two turns closer than this are taken as this far apart (an agent's parallel requests).
const MIN_GAP: f64 = 0.05;

/// A session's growth, as last seen.
#[derive(Debug, Clone, Copy)]
struct Growth {
    at: Instant,
    tokens: u64,
    /// Tokens a second, smoothed.
    rate: f64,
    /// The session's bytes a token, as its provider's reports tell (`None`: compactd's four).
    bytes_per_token: Option<f64>,
}

/// A turn as [`Pace::observe`] notes it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Observed {
    pub(super) tokens: u64,
    /// Tokens a second, smoothed.
    pub(super) rate: f64,
    /// A turn of the session was seen before (lately, on this replica).
    pub(super) seen: bool,
}

/// The sessions' growth and the replica's preparation time.
#[derive(Debug)]
pub(super) struct Pace {
    sessions: moka::sync::Cache<(String, String), Growth>,
    /// How long a preparation takes, smoothed, in milliseconds.
    took_ms: AtomicU64,
}

impl Pace {
    pub(super) fn new() -> Pace {
        Pace {
            sessions: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_idle(Duration::from_secs(60 * 60))
                .build(),
            took_ms: AtomicU64::new(FIRST_GUESS.as_millis() as u64),
        }
    }

    /// Notes a turn of `session` of `bytes` at `now`: its tokens (at the session's bytes a token
    /// once its provider reported them, compactd's four before), its growth in tokens a second
    /// (0 until two turns were seen, and again after it shrank: a compaction starts it afresh),
    /// and whether a turn of it was seen before. One read of the session's record.
    pub(super) fn observe(&self, session: (String, String), bytes: u64, now: Instant) -> Observed {
        let last = self.sessions.get(&session);
        let bytes_per_token = last.and_then(|last| last.bytes_per_token);
        let tokens = (bytes as f64 / bytes_per_token.unwrap_or(super::BYTES_PER_TOKEN)) as u64;
        Observed {
            tokens,
            rate: self.grew(session, last, tokens, now, 0.0),
            seen: last.is_some(),
        }
    }

    /// Notes that `session` holds `tokens` at `now` as its agent counts them (a stored pi
    /// session: pi's own estimate); its growth in tokens a second, as [`Pace::observe`] gives it,
    /// but kept across a compaction: the session is the one its id names, and goes on at its
    /// pace (its first turns after a compaction are when the pace matters).
    pub(super) fn observe_tokens(
        &self,
        session: (String, String),
        tokens: u64,
        now: Instant,
    ) -> f64 {
        let last = self.sessions.get(&session);
        let before = last.map_or(0.0, |last| last.rate);
        self.grew(session, last, tokens, now, before)
    }

    /// The session's growth to `tokens` since `last`, kept; `shrunk` when it holds less.
    fn grew(
        &self,
        session: (String, String),
        last: Option<Growth>,
        tokens: u64,
        now: Instant,
        shrunk: f64,
    ) -> f64 {
        let bytes_per_token = last.and_then(|last| last.bytes_per_token);
        let rate = match last {
            Some(last) if tokens >= last.tokens => {
                let seconds = now.duration_since(last.at).as_secs_f64().max(MIN_GAP);
                let latest = (tokens - last.tokens) as f64 / seconds;
                if last.rate == 0.0 {
                    latest
                } else {
                    WEIGHT * latest + (1.0 - WEIGHT) * last.rate
                }
            }
            Some(_) => shrunk,
            None => 0.0,
        };
        self.sessions.insert(
            session,
            Growth {
                at: now,
                tokens,
                rate,
                bytes_per_token,
            },
        );
        rate
    }

    /// The bytes a token of `session`, when its provider reported its size.
    #[cfg(test)]
    pub(super) fn bytes_per_token(&self, session: &(String, String)) -> Option<f64> {
        self.sessions.get(session)?.bytes_per_token
    }

    /// Takes `bytes_per_token` as `session`'s from now on (its latest size restated in it, so
    /// that the change of measure is no growth).
    pub(super) fn calibrate(&self, session: &(String, String), bytes_per_token: f64) {
        let Some(mut growth) = self.sessions.get(session) else {
            return;
        };
        let before = growth.bytes_per_token.unwrap_or(super::BYTES_PER_TOKEN);
        growth.tokens = (growth.tokens as f64 * before / bytes_per_token) as u64;
        growth.bytes_per_token = Some(bytes_per_token);
        self.sessions.insert(session.clone(), growth);
    }

    /// Notes how long a preparation took.
    pub(super) fn took(&self, duration: Duration) {
        let latest = duration.as_millis() as f64;
        let _ = self
            .took_ms
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |before| {
                Some((WEIGHT * latest + (1.0 - WEIGHT) * before as f64) as u64)
            });
    }

    /// How long a preparation takes, in seconds.
    pub(super) fn takes(&self) -> f64 {
        self.took_ms.load(Ordering::Relaxed) as f64 / 1000.0
    }
}

/// Where a session stands, for the decision to prepare it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Standing {
    pub(super) tokens: u64,
    pub(super) window: u64,
    /// Tokens a second.
    pub(super) rate: f64,
    /// Seconds a preparation takes.
    pub(super) takes: f64,
    /// The tokens it held when its kept summary was prepared, if one is kept.
    pub(super) prepared_at: Option<u64>,
}

impl Standing {
    /// The tokens past which a session is prepared: `share` of its window, or earlier when at its
    /// pace it would reach [`COMPACTS_AT`] before a summary started then is ready, never under
    /// half the share.
    pub(super) fn starts_at(&self, share: f64) -> f64 {
        let window = self.window as f64;
        let ahead = self.rate * self.takes * MARGIN;
        (COMPACTS_AT * window - ahead).clamp(share / 2.0 * window, share * window)
    }

    /// Whether the session is to be prepared now.
    pub(super) fn due(&self, share: f64) -> bool {
        if (self.tokens as f64) < self.starts_at(share) {
            return false;
        }
        let Some(at) = self.prepared_at else {
            return true;
        };
        if fresh(at, self.tokens, self.window) {
            return false;
        }
        if at > self.tokens {
            // Kept before a compaction since: prepared afresh.
            return true;
        }
        let (window, tokens) = (self.window as f64, self.tokens as f64);
        // A refresh that would be ready only after the agent compacts is paid for nothing: the
        // compaction is answered from the summary kept.
        let compacts = COMPACTS_AT * window;
        !(self.rate > 0.0
            && tokens < compacts
            && (compacts - tokens) / self.rate < self.takes * MARGIN)
    }
}

/// Whether a summary prepared at `at` tokens still serves a session now at `tokens`: it has not
/// grown by a tenth of its window since, nor shrunk (a compaction since then starts it afresh).
pub(super) fn fresh(at: u64, tokens: u64, window: u64) -> bool {
    at <= tokens && (tokens as f64) < at as f64 + window as f64 * REFRESH_SHARE
}
