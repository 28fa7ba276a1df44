//! Planner and context tests: every edge case of spec §4.9 and the pure reference tests of §11
//! (numbers in the test names refer to those lists).

mod edge_cases;
mod reference;

use super::*;
use crate::session::{Entry, Message, Session};

pub(super) fn path_of(session: &Session) -> Vec<&Entry> {
    session.active_path(None).unwrap()
}

pub(super) fn cut(session: &Session, keep: u64) -> CutPoint {
    let path = path_of(session);
    find_cut_point(&path, 0, path.len(), keep)
}

pub(super) fn settings(keep: u64) -> CompactionSettings {
    CompactionSettings {
        keep_recent_tokens: keep,
        ..CompactionSettings::default()
    }
}

pub(super) fn roles(messages: &[&Message]) -> Vec<String> {
    messages.iter().map(|m| m.role().to_owned()).collect()
}

pub(super) fn texts(context: &SessionContext<'_>) -> Vec<String> {
    context
        .messages()
        .iter()
        .map(|m| match m {
            Message::CompactionSummary { summary, .. } => format!("summary:{summary}"),
            Message::BranchSummary { summary, .. } => format!("branch:{summary}"),
            Message::User { content } => content.joined_text().into_owned(),
            Message::Assistant { content, .. } => {
                crate::session::joined_text_blocks(content).into_owned()
            }
            other => other.role().to_owned(),
        })
        .collect()
}
