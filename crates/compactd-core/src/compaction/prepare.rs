//! `prepareCompaction` with PI-NEXT semantics (spec §4.1, §4.10): what to summarize, what to keep,
//! the previous summary, `tokensBefore` and the file operations.
//!
//! PI-NEXT fixes the loss of kept messages on a second compaction: the boundary starts at the
//! previous compaction's first kept entry rather than after the compaction, compaction entries in
//! the range are not fed back as conversation (the old summary reaches the prompt as
//! `previousSummary`), and `tokensBefore` is the estimate over the context the LLM sees now.

use serde::Serialize;

use super::cut_point::{CutPoint, find_cut_point};
use super::file_ops::FileOperations;
use super::session_context::build_session_context;
use super::tokens::{CompactionSettings, estimate_context_tokens};
use crate::session::{Entry, EntryKind, Message};

/// Everything a compaction needs, borrowed from the session.
#[derive(Debug, Clone)]
pub struct Preparation<'a> {
    /// First path index considered for summarizing.
    pub boundary_start: usize,
    /// Path index of the latest compaction entry, if any.
    pub previous_compaction_index: Option<usize>,
    pub cut: CutPoint,
    pub first_kept_entry_id: &'a str,
    /// `[boundary_start, history_end)`: summarized into the history summary.
    pub messages_to_summarize: Vec<&'a Message>,
    /// `[turn_start, first_kept)` of a split turn: summarized on its own.
    pub turn_prefix_messages: Vec<&'a Message>,
    pub tokens_before: f64,
    /// The raw `summary` of the latest compaction on the path.
    pub previous_summary: Option<&'a str>,
    pub file_ops: FileOperations,
}

impl Preparation<'_> {
    /// Both parts are empty: there is nothing new to summarize (everything since the boundary
    /// fits in `keepRecentTokens`, spec §4.9-4/5).
    pub fn is_empty(&self) -> bool {
        self.messages_to_summarize.is_empty() && self.turn_prefix_messages.is_empty()
    }
}

/// Why there is no preparation (pi's `prepareCompaction` returning `undefined`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NothingToCompact {
    #[error("the session has no entries")]
    EmptySession,
    #[error("already compacted: the last entry on the path is a compaction")]
    AlreadyCompacted,
    #[error("no entry to keep on the path")]
    NoFirstKeptEntry,
}

/// The message an entry contributes to the summarized range: compaction entries contribute none.
fn message_for_compaction(entry: &Entry) -> Option<&Message> {
    if entry.is_compaction() {
        None
    } else {
        entry.as_message()
    }
}

/// `prepareCompaction(path, settings)` (PI-NEXT).
pub fn prepare_compaction<'a>(
    path: &[&'a Entry],
    settings: &CompactionSettings,
) -> Result<Preparation<'a>, NothingToCompact> {
    let Some(last) = path.last() else {
        return Err(NothingToCompact::EmptySession);
    };
    if last.is_compaction() {
        return Err(NothingToCompact::AlreadyCompacted);
    }

    let previous_compaction_index = path.iter().rposition(|e| e.is_compaction());
    let (boundary_start, previous_summary) = match previous_compaction_index {
        None => (0, None),
        Some(prev) => {
            let compaction = path[prev];
            let first_kept = match &compaction.kind {
                EntryKind::Compaction {
                    first_kept_entry_id,
                    ..
                } => first_kept_entry_id.as_deref(),
                _ => None,
            };
            let start = first_kept
                .and_then(|id| path.iter().position(|e| e.id == id))
                .unwrap_or(prev + 1);
            (start, compaction.summary())
        }
    };
    let end = path.len();

    let context = build_session_context(path);
    let tokens_before = estimate_context_tokens(&context.messages()).tokens;

    let cut = find_cut_point(path, boundary_start, end, settings.keep_recent_tokens);
    let first_kept = path
        .get(cut.first_kept_entry_index)
        .filter(|e| !e.id.is_empty())
        .ok_or(NothingToCompact::NoFirstKeptEntry)?;

    let history_end = match cut.turn_start_index {
        Some(turn_start) if cut.is_split_turn => turn_start,
        _ => cut.first_kept_entry_index,
    };
    let messages_to_summarize: Vec<&Message> = path[boundary_start..history_end]
        .iter()
        .filter_map(|e| message_for_compaction(e))
        .collect();
    let turn_prefix_messages: Vec<&Message> = match cut.turn_start_index {
        Some(turn_start) if cut.is_split_turn => path[turn_start..cut.first_kept_entry_index]
            .iter()
            .filter_map(|e| message_for_compaction(e))
            .collect(),
        _ => Vec::new(),
    };

    let mut file_ops = FileOperations::default();
    if let Some(prev) = previous_compaction_index {
        file_ops.carry_over(path[prev]);
    }
    for message in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_tool_calls(message);
    }

    Ok(Preparation {
        boundary_start,
        previous_compaction_index,
        cut,
        first_kept_entry_id: &first_kept.id,
        messages_to_summarize,
        turn_prefix_messages,
        tokens_before,
        previous_summary,
        file_ops,
    })
}
