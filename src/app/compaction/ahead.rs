//! A stored pi session's summary prepared ahead of its compaction (issue 67). As the pi extension
//! appends each turn, a session past a share of its model's window has its history — what pi's
//! planner would summarize if it compacted now, written as the planner writes it — summarized in
//! the background, up to its last message, and kept in the store where every replica finds it.
//! When the session compacts, the history the planner writes then must begin with the very same
//! text (the same previous summary, the same bytes up to a message's start): then the kept
//! summary answers, the messages after it merged in by the extractive summarizer (no model
//! call), checked by the gate like every summary. Anything else — an edit, a rewind onto another
//! branch, a new compaction in between, a focus — takes the normal path.

use sha2::{Digest, Sha256};
use std::sync::Arc;

use compactd_core::compaction::CompactionSettings;
use compactd_core::ids::Id;
use compactd_store::PreparedRow;

use super::compactor::{self, CompactionRequest, History};
use crate::access::Identity;
use crate::app::{App, AppError};
use crate::pipeline::{Endpoint, GateInput, Job, Purpose, WhenSpent};
use crate::summarizer::chain::{Chain, Link};

/// The agent the call log names for a stored session's preparation.
const AGENT: &str = "pi";

/// The labels pi writes each message of a serialized conversation under: where a history may be
/// cut between two messages.
const MESSAGE_STARTS: &[&str] = &[
    "[User]:",
    "[Assistant]:",
    "[Assistant thinking]:",
    "[Assistant tool calls]:",
    "[Tool result]:",
];

/// A stored session's key among prepared summaries (a gateway session's are `agent:id` or
/// `opening:hash`).
pub(crate) fn session_key(id: &str) -> String {
    format!("pi:{id}")
}

/// The hash a prepared summary keeps of what it summarized: the previous summary it updated and
/// the history's text.
fn prefix_hash(previous: Option<&str>, text: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(previous.unwrap_or_default().as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    hex::encode(hash.finalize())
}

/// Where `text` (a serialized conversation, messages separated by a blank line) is cut to leave
/// its last message out: the start of that message's separator; `None` for one message.
fn before_last_message(text: &str) -> Option<usize> {
    let mut end = text.len();
    while let Some(at) = text[..end].rfind("\n\n[") {
        let next = &text[at + 2..];
        if MESSAGE_STARTS.iter().any(|label| next.starts_with(label)) {
            return Some(at);
        }
        end = at;
    }
    None
}

/// What of `text` comes after the part `row` summarized, when `row` summarized its beginning:
/// the same previous summary, the same bytes, ending where a message of `text` starts.
fn rest<'a>(row: &PreparedRow, previous: Option<&str>, text: &'a str) -> Option<&'a str> {
    let covered = usize::try_from(row.prefix_items).ok()?;
    let after = text.get(covered..)?;
    let rest = after.strip_prefix("\n\n")?;
    (covered > 0 && prefix_hash(previous, &text[..covered]) == row.prefix_hash).then_some(rest)
}

/// What the agent appending a session says of how it will compact it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Hints {
    /// Its planner's settings: the history prepared is the one they plan.
    pub settings: CompactionSettings,
    /// Its model's window, when it says.
    pub window: Option<u64>,
}

/// A compaction's prepared summary, and the chain its merge runs on.
#[derive(Debug, Clone)]
pub(crate) struct Ahead {
    pub row: PreparedRow,
    /// The extractive summarizer alone: the merge makes no model call.
    pub chain: Arc<Chain>,
}

impl Ahead {
    /// The request that answers `history` from this summary: the history's messages after the
    /// part summarized, as an update of the summary; `None` when it does not cover the history.
    pub(crate) fn merge(&self, history: &History) -> Option<crate::summarizer::SummaryRequest> {
        let rest = rest(&self.row, history.previous.as_deref(), &history.text)?;
        Some(history.request(rest, Some(&self.row.summary)))
    }
}

impl App {
    /// `who`'s summary prepared ahead for stored session `id`, ready to answer `request`: none
    /// for a request with a focus, which asks for what a summary prepared without it cannot
    /// answer.
    pub(crate) async fn ahead_of(
        &self,
        who: &Identity,
        id: &Id,
        request: &CompactionRequest,
    ) -> Option<Ahead> {
        let focus = request.custom_instructions.as_deref();
        if focus.is_some_and(|focus| !focus.trim().is_empty()) {
            return None;
        }
        let row = self.prepared(who, &session_key(id)).await?;
        let chain = Chain::new(vec![Link::Extractive], self.configured_chain().policy);
        Some(Ahead {
            row,
            chain: Arc::new(chain),
        })
    }

    /// A compaction took the session's prepared summary: `used` when it answered, else it no
    /// longer covered the session (wasted). Either way it is done with.
    pub(crate) async fn prepared_taken(&self, ahead: &Ahead, used: bool) {
        let outcome = if used { "used" } else { "wasted" };
        self.metrics.prepared.with_label_values(&[outcome]).inc();
        self.drop_prepared(&ahead.row).await;
    }

    /// Prepares `who`'s stored session `id` ahead of its compaction: its history as pi's planner
    /// would write it now, up to its last message, summarized through the pipeline (paid for as
    /// `gateway:prepared`) and kept. `Ok(None)`: nothing to prepare (too short, nothing before the
    /// kept part, or the budget refused).
    pub(crate) async fn prepare_session(
        &self,
        who: &Identity,
        id: &Id,
        settings: &CompactionSettings,
    ) -> Result<Option<PreparedRow>, AppError> {
        let loaded = self.load_path(who, id, None).await?;
        let Some(history) = compactor::history(&loaded.session, None, settings, &self.prompts)
        else {
            return Ok(None);
        };
        let Some(cut) = before_last_message(&history.text) else {
            return Ok(None);
        };
        let text = &history.text[..cut];
        let pins = self.store.pins(id).await?;
        let context = self
            .pipeline_context(who, Endpoint::Prepared(AGENT))
            .for_session(id);
        let job = Job {
            purpose: Purpose::History,
            request: history.request(text, history.previous.as_deref()),
            gate: GateInput {
                extra: pins
                    .iter()
                    .map(|p| compactd_core::fidelity::anchors::Anchor::pinned(&p.text))
                    .collect(),
                appendix: String::new(),
            },
            chain: None,
            when_spent: WhenSpent::Refuse,
        };
        let Some(result) = self.pipeline.run_all(&context, vec![job]).await?.pop() else {
            return Ok(None);
        };
        let summary = result?.into_inner();
        let row = PreparedRow {
            tenant: who.tenant.clone(),
            session_key: session_key(id),
            opening: String::new(),
            prefix_items: cut as i64,
            prefix_hash: prefix_hash(history.previous.as_deref(), text),
            loose_hash: String::new(),
            prefix_tokens: loaded.record.context_tokens,
            summary: summary.text,
            model: summary.model,
            created_at_ms: compactd_store::now_ms(),
        };
        Ok(self.keep_prepared(&row).await.then_some(row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(previous: Option<&str>, text: &str) -> PreparedRow {
        PreparedRow {
            tenant: "t".into(),
            session_key: session_key("s"),
            opening: String::new(),
            prefix_items: text.len() as i64,
            prefix_hash: prefix_hash(previous, text),
            loose_hash: String::new(),
            prefix_tokens: 0,
            summary: "## Goal\nx".into(),
            model: "m".into(),
            created_at_ms: 0,
        }
    }

    #[test]
    fn a_history_is_cut_before_its_last_message_only() {
        let text = "[User]: fix it\n\n[Assistant]: a line\n\n[not a label] still the answer\n\n[Tool result]: ok";
        let cut = before_last_message(text).unwrap();
        assert_eq!(&text[cut..], "\n\n[Tool result]: ok");
        let one = "[User]: only\n\n[quoted] text";
        assert_eq!(before_last_message(one), None);
    }

    #[test]
    fn a_prepared_summary_covers_only_the_same_bytes_after_the_same_summary() {
        let prepared = "[User]: fix the lexer\n\n[Assistant]: reading src/lex.rs";
        let now = format!("{prepared}\n\n[Tool result]: ok\n\n[User]: now the parser");
        let row = row(Some("earlier"), prepared);
        assert_eq!(
            rest(&row, Some("earlier"), &now),
            Some("[Tool result]: ok\n\n[User]: now the parser")
        );
        // Another previous summary (a compaction in between), none, an edit, a cut mid-message.
        assert_eq!(rest(&row, Some("other"), &now), None);
        assert_eq!(rest(&row, None, &now), None);
        assert_eq!(
            rest(&row, Some("earlier"), &now.replace("lexer", "lexor")),
            None
        );
        let longer = format!("{prepared} and more\n\n[User]: x");
        assert_eq!(rest(&row, Some("earlier"), &longer), None);
        // A history that ends where the summary does leaves nothing to merge: not covered.
        assert_eq!(rest(&row, Some("earlier"), prepared), None);
    }
}
