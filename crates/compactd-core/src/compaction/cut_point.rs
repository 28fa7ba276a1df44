//! Where to cut: valid cut points, the backward walk, the metadata pull-in and split-turn
//! detection (spec §4.2–§4.5), exactly as the reference does them, quirks included (§4.9-9,
//! §4.9-10 and §4.9-12 do not change what is kept, only how the summarized part is split).

use serde::Serialize;

use super::tokens::estimate_tokens;
use crate::session::{Entry, EntryKind, Message};

/// The outcome of [`find_cut_point`]; indices are positions on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CutPoint {
    /// First entry kept verbatim.
    pub first_kept_entry_index: usize,
    /// Start of the turn being split (`None` when the turn is not split).
    pub turn_start_index: Option<usize>,
    pub is_split_turn: bool,
}

/// A message that may open the kept region: anything but a tool result (its call must stay
/// before it) and roles this version does not know.
fn is_cut_point(entry: &Entry) -> bool {
    match &entry.kind {
        EntryKind::Message(message) => matches!(
            message,
            Message::User { .. }
                | Message::Assistant { .. }
                | Message::BashExecution(_)
                | Message::Custom { .. }
                | Message::BranchSummary { .. }
                | Message::CompactionSummary { .. }
        ),
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage { .. } => true,
        _ => false,
    }
}

/// Whether `entry` starts a turn: a user or bash-execution message, a branch summary or a custom
/// message.
fn is_turn_start(entry: &Entry) -> bool {
    match &entry.kind {
        EntryKind::Message(message) => {
            matches!(message, Message::User { .. } | Message::BashExecution(_))
        }
        EntryKind::BranchSummary { .. } | EntryKind::CustomMessage { .. } => true,
        _ => false,
    }
}

/// `findValidCutPoints`: the cut points in `[start, end)`, ascending.
pub fn find_valid_cut_points(path: &[&Entry], start: usize, end: usize) -> Vec<usize> {
    (start..end).filter(|&i| is_cut_point(path[i])).collect()
}

/// `findTurnStartIndex`: walking down from `index` to `start` inclusive, the first turn start.
pub fn find_turn_start_index(path: &[&Entry], index: usize, start: usize) -> Option<usize> {
    (start..=index).rev().find(|&i| is_turn_start(path[i]))
}

/// `findCutPoint`: keep about `keep_recent_tokens` of the newest messages in `[start, end)`.
///
/// Walks back from the newest entry adding up the estimates of `message` entries only (custom
/// messages and branch summaries add nothing, §4.9-12). Once the sum reaches the budget, the cut
/// moves to the nearest cut point at or after that entry; then the run of non-message entries
/// right before the cut is pulled into the kept region (§4.4).
pub fn find_cut_point(
    path: &[&Entry],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let cut_points = find_valid_cut_points(path, start, end);
    let Some(&first) = cut_points.first() else {
        return CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        };
    };

    let mut cut = first;
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        let Some(message) = path[i].stored_message() else {
            continue;
        };
        accumulated += estimate_tokens(message);
        if accumulated >= keep_recent_tokens {
            let at_or_after = cut_points.partition_point(|&c| c < i);
            if let Some(&c) = cut_points.get(at_or_after) {
                cut = c;
            }
            break;
        }
    }

    while cut > start {
        let previous = path[cut - 1];
        if matches!(
            previous.kind,
            EntryKind::Compaction { .. } | EntryKind::Message(_)
        ) {
            break;
        }
        cut -= 1;
    }

    let cut_at_user = matches!(path[cut].kind, EntryKind::Message(Message::User { .. }));
    let turn_start_index = if cut_at_user {
        None
    } else {
        find_turn_start_index(path, cut, start)
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index,
        is_split_turn: turn_start_index.is_some(),
    }
}
