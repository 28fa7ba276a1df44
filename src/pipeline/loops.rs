//! Compaction loops, a check after the chain: an agent whose context is still too full after a
//! compaction compacts again at once, and again, each time paying for a summary. A summarization
//! is flagged as a loop when
//! * its previous summary is one compactd wrote for the same tenant a short time ago (the loop
//!   window) and the conversation added since is small (the new-content threshold): the agent
//!   compacted again with little new content; or
//! * its summary is not much smaller than what it replaces (at least 80 %): compacting did not
//!   make room, so the agent will compact again.
//!
//! Flagged summaries are counted, logged at warn (with the session), and marked in the response;
//! they are still returned — a loop is the agent's to break, and the summary is correct.

use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::summarizer::SummaryRequest;
use compactd_core::transcript::estimate_tokens;
use compactd_store::{Store, now_ms};

/// The first characters of a summary that identify it. pi appends file lists to the summary it
/// stores, so the previous summary of the next request is the summary compactd wrote plus more:
/// its beginning is the same.
const FINGERPRINT_CHARS: usize = 256;

/// Below this many estimated tokens, what a summary replaces is too small to judge by size.
const MIN_REPLACED_TOKENS: u64 = 1000;

/// The fingerprint of a summary, for finding it again as a previous summary; `None` for a
/// summary too short to tell apart.
pub(crate) fn fingerprint(summary: &str) -> Option<String> {
    let summary = summary.trim_start();
    let end = summary.char_indices().nth(FINGERPRINT_CHARS)?.0;
    Some(hex::encode(
        &Sha256::digest(&summary.as_bytes()[..end])[..16],
    ))
}

#[derive(Clone)]
pub struct Loops {
    store: Arc<dyn Store>,
    window: Duration,
    new_tokens: u64,
}

impl std::fmt::Debug for Loops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loops")
            .field("window", &self.window)
            .field("new_tokens", &self.new_tokens)
            .finish()
    }
}

impl Loops {
    pub(crate) fn new(store: Arc<dyn Store>, window: Duration, new_tokens: u64) -> Loops {
        Loops {
            store,
            window,
            new_tokens,
        }
    }

    /// Whether summarizing `request` into `summary` for `tenant` looks like a loop.
    pub(crate) async fn detect(
        &self,
        tenant: &str,
        request: &SummaryRequest,
        summary: &str,
    ) -> bool {
        let shape = request.shape();
        let conversation = shape.conversation_tokens;
        let previous = shape.previous_summary.as_deref().map_or(0, estimate_tokens);
        let replaced = conversation + previous;
        if replaced >= MIN_REPLACED_TOKENS && estimate_tokens(summary) * 10 >= replaced * 8 {
            return true;
        }
        let Some(fingerprint) = shape.previous_summary.as_deref().and_then(fingerprint) else {
            return false;
        };
        if conversation >= self.new_tokens {
            return false;
        }
        let since = now_ms() - self.window.as_millis() as i64;
        match self
            .store
            .summary_written_since(tenant, &fingerprint, since)
            .await
        {
            Ok(found) => found,
            Err(error) => {
                tracing::warn!(error = %error, "loop check skipped: the store did not answer");
                false
            }
        }
    }
}
