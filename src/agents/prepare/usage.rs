//! The context size the provider reports: what a turn of a session past a quarter of the share
//! really held, read from the answer as it streams by (nothing is held back or copied). Anthropic
//! reports it first (`message_start`: uncached input, cache writes and cache reads, which pi
//! counts together; Claude Code's turns are mostly cache reads), OpenAI last (`response.completed`
//! `input_tokens`, cached ones included; chat `prompt_tokens`). Its ratio to the body's bytes is
//! the session's own bytes a token, which replaces compactd's four for its later turns.

use std::sync::Arc;

use serde_json::Value;

use super::Preparer;

/// The fields of a `usage` object that together are the tokens the request held.
const INPUT_FIELDS: [&str; 4] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "prompt_tokens",
];

/// Bytes a token a report may give and be believed: JSON costs a token per ~1.5 bytes at its
/// densest, prose ~4, a body of escapes or images more; outside it, the report is not of this
/// body (an upstream that reports a fixed or partial count).
const BELIEVED: std::ops::RangeInclusive<f64> = 1.5..=8.0;

/// Reads the usage of one answer for one session.
pub(crate) struct UsageTap {
    pub(super) preparer: Arc<Preparer>,
    pub(super) session: (String, String),
    pub(super) bytes: u64,
    done: bool,
}

impl std::fmt::Debug for UsageTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsageTap")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl UsageTap {
    pub(super) fn new(preparer: Arc<Preparer>, session: (String, String), bytes: u64) -> Self {
        UsageTap {
            preparer,
            session,
            bytes,
            done: false,
        }
    }

    /// Reads `chunk` of the answer, until a usage was found.
    pub(crate) fn read(&mut self, chunk: &[u8]) {
        if self.done {
            return;
        }
        let Some(tokens) = reported(chunk) else {
            return;
        };
        self.done = true;
        let per_token = self.bytes as f64 / tokens as f64;
        if BELIEVED.contains(&per_token) {
            self.preparer.pace.calibrate(&self.session, per_token);
        }
    }
}

/// The input tokens a `usage` object in `chunk` reports, when one is there whole.
pub(super) fn reported(chunk: &[u8]) -> Option<u64> {
    let finder = memchr::memmem::Finder::new(b"\"usage\"");
    finder.find_iter(chunk).find_map(|at| {
        let rest = chunk[at + 7..].trim_ascii_start().strip_prefix(b":")?;
        let rest = rest.trim_ascii_start();
        let usage: Value = serde_json::Deserializer::from_slice(rest)
            .into_iter::<Value>()
            .next()?
            .ok()?;
        let tokens: u64 = INPUT_FIELDS
            .iter()
            .filter_map(|field| usage.get(field)?.as_u64())
            .sum();
        (tokens > 0).then_some(tokens)
    })
}
