//! Branch summarization (spec §9): when the user leaves a branch for an earlier entry, the
//! abandoned part is summarized and the summary hangs under the new position.

use std::collections::HashSet;

use super::file_ops::FileOperations;
use super::tokens::estimate_tokens;
use crate::session::{EntryKind, Message, Session};

/// `collectEntriesForBranchSummary`: the entries from `old_leaf` back to (not including) the
/// deepest entry that is also an ancestor of `target`, oldest first.
pub fn collect_branch_entries(
    session: &Session,
    old_leaf: Option<usize>,
    target: usize,
) -> Vec<usize> {
    let Some(old_leaf) = old_leaf else {
        return Vec::new();
    };
    let old_path: HashSet<usize> = session.path_indices(old_leaf).into_iter().collect();
    let common = session
        .path_indices(target)
        .into_iter()
        .rev()
        .find(|index| old_path.contains(index));
    let mut collected = Vec::new();
    let mut current = Some(old_leaf);
    while let Some(index) = current {
        if Some(index) == common || collected.len() > session.entries.len() {
            break;
        }
        collected.push(index);
        current = session.parent_of(index);
    }
    collected.reverse();
    collected
}

/// What [`prepare_branch_entries`] selected.
#[derive(Debug, Clone)]
pub struct BranchPreparation<'a> {
    /// Oldest first.
    pub messages: Vec<&'a Message>,
    pub file_ops: FileOperations,
}

/// `prepareBranchEntries`: the newest messages of the branch that fit in `token_budget` (0 means
/// no limit). Tool results are left out (their calls carry the context); a compaction or branch
/// summary that does not fit is still taken while less than 90 % of the budget is used.
pub fn prepare_branch_entries<'a>(
    session: &'a Session,
    entries: &[usize],
    token_budget: u64,
) -> BranchPreparation<'a> {
    let mut file_ops = FileOperations::default();
    for &index in entries {
        file_ops.carry_over_branch(&session.entries[index]);
    }
    let mut selected = Vec::new();
    let mut total = 0u64;
    for &index in entries.iter().rev() {
        let entry = &session.entries[index];
        let Some(message) = entry.as_message() else {
            continue;
        };
        if matches!(message, Message::ToolResult { .. }) {
            continue;
        }
        file_ops.add_tool_calls(message);
        let tokens = estimate_tokens(message);
        if token_budget > 0 && total + tokens > token_budget {
            let summary_like = matches!(
                entry.kind,
                EntryKind::Compaction { .. } | EntryKind::BranchSummary { .. }
            );
            if summary_like && (total as f64) < 0.9 * token_budget as f64 {
                selected.push(message);
            }
            break;
        }
        selected.push(message);
        total += tokens;
    }
    selected.reverse();
    BranchPreparation {
        messages: selected,
        file_ops,
    }
}

/// Where the branch summary goes when navigating to `target`: under the target's parent when the
/// target is a user message or a custom message (its text goes back to the editor), under the
/// target itself otherwise. `None` is the root.
pub fn branch_summary_parent(session: &Session, target: usize) -> Option<usize> {
    match &session.entries[target].kind {
        EntryKind::Message(Message::User { .. }) | EntryKind::CustomMessage { .. } => {
            session.parent_of(target)
        }
        _ => Some(target),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::testkit::{SessionBuilder, chars};

    #[test]
    fn collects_the_abandoned_branch_back_to_the_common_ancestor() {
        let mut b = SessionBuilder::new();
        b.user("start");
        let r1 = b.assistant("r1");
        let q2 = b.user("q2");
        b.tool_call("edit", json!({"path": "src/x.rs"}));
        b.tool_result("done");
        let old_leaf = b.assistant("answer");
        let session = b.session();
        let target = session.index_of(&r1).unwrap();
        let collected = collect_branch_entries(&session, session.index_of(&old_leaf), target);
        let ids: Vec<&str> = collected
            .iter()
            .map(|&i| session.entries[i].id.as_str())
            .collect();
        assert_eq!(ids[0], q2);
        assert_eq!(ids.len(), 4);
        assert!(collect_branch_entries(&session, None, target).is_empty());

        let prep = prepare_branch_entries(&session, &collected, 0);
        // Tool results are left out; the edit's path is tracked.
        assert_eq!(
            prep.messages.iter().map(|m| m.role()).collect::<Vec<_>>(),
            ["user", "assistant", "assistant"]
        );
        assert_eq!(prep.file_ops.lists().modified_files, ["src/x.rs"]);
        // Navigating to an assistant message hangs the summary under it; to a user message,
        // under its parent.
        assert_eq!(branch_summary_parent(&session, target), Some(target));
        assert_eq!(
            branch_summary_parent(&session, session.index_of(&q2).unwrap()),
            Some(target)
        );
        assert_eq!(branch_summary_parent(&session, 0), None);
    }

    #[test]
    fn the_budget_keeps_the_newest_messages() {
        let mut b = SessionBuilder::new();
        let root = b.user("root");
        b.user(&chars(400));
        b.user(&chars(400));
        let leaf = b.user(&chars(40));
        let session = b.session();
        let entries = collect_branch_entries(
            &session,
            session.index_of(&leaf),
            session.index_of(&root).unwrap(),
        );
        assert_eq!(entries.len(), 3);
        let prep = prepare_branch_entries(&session, &entries, 150);
        assert_eq!(prep.messages.len(), 2);
        let total: u64 = prep.messages.iter().map(|m| estimate_tokens(m)).sum();
        assert_eq!(total, 110);
    }
}
