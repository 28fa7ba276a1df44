//! Handoff of a stored session (issue 57): the draft of a new thread's first prompt for a goal
//! ([`crate::handoff`]), and the new session that starts with it, its header naming the old one
//! as its parent (as pi's own forks do), ready to download or to open in pi.

use serde_json::json;

use super::sessions::Uploaded;
use super::{App, AppError};
use crate::access::Identity;
use crate::fidelity::AnchorKind;
use crate::handoff::Draft;
use crate::session::{Header, Session};

/// Longest goal, in characters: a goal is a sentence or a paragraph, not a document.
pub(crate) const MAX_GOAL_CHARS: usize = 4000;

impl App {
    /// The draft for `goal` from `who`'s session `id` along its path to `leaf_id` (its leaf by
    /// default), and the new session that starts with the draft's prompt.
    pub(crate) async fn handoff(
        &self,
        who: &Identity,
        id: &str,
        goal: &str,
        leaf_id: Option<&str>,
    ) -> Result<(Draft, Uploaded), AppError> {
        let goal = checked_goal(goal)?;
        let loaded = self.load(who, id).await?;
        let (leaf_id, parent) = (leaf_id.map(str::to_owned), id.to_owned());
        let (draft, file) = crate::cpu::off_runtime(move || {
            handoff_of(&loaded.session, &parent, &goal, leaf_id.as_deref())
        })
        .await??;
        let uploaded = self.upload(who, file, false).await?;
        Ok((draft, uploaded))
    }
}

/// `goal`, trimmed, when it is one: not empty, at most [`MAX_GOAL_CHARS`].
pub(crate) fn checked_goal(goal: &str) -> Result<String, AppError> {
    let goal = goal.trim();
    if goal.is_empty() {
        return Err(AppError::invalid(
            "goal",
            "goal is required: what the new thread is for",
        ));
    }
    if goal.chars().count() > MAX_GOAL_CHARS {
        return Err(AppError::invalid(
            "goal",
            format!("goal is longer than {MAX_GOAL_CHARS} characters"),
        ));
    }
    Ok(goal.to_owned())
}

/// The draft for `goal` from `session` along its path to `leaf_id`, and the new session's file,
/// whose header names `parent` (a stored session's id, or the file's path as pi writes it).
pub(crate) fn handoff_of(
    session: &Session,
    parent: &str,
    goal: &str,
    leaf_id: Option<&str>,
) -> Result<(Draft, String), AppError> {
    let path = session
        .active_path(leaf_id)
        .map_err(|e| AppError::invalid("leafId", e.to_string()))?;
    // The rules the thread's compactions carried (its latest summary holds them all) and the
    // messages of the whole path: compactd keeps what compaction dropped.
    let previous = path
        .iter()
        .rev()
        .find_map(|e| e.is_compaction().then(|| e.summary()).flatten());
    let messages = crate::compaction::typed_conversation(
        path.iter()
            .filter(|e| !e.is_compaction())
            .filter_map(|e| e.as_message()),
    )
    .messages;
    let facts = crate::fidelity::facts::Facts::extract(&messages);
    let rules: Vec<String> = crate::fidelity::anchors::of_facts(&facts, previous, 16_384)
        .into_iter()
        .filter(|a| a.kind == AnchorKind::Constraint)
        .map(|a| a.text)
        .collect();
    let draft = crate::handoff::draft(goal, &messages, &rules, parent);
    let file = handoff_file(&session.header, parent, &draft.prompt);
    Ok((draft, file))
}

/// A pi v3 session whose header names `parent` and whose one entry is the user's first message,
/// `prompt`.
pub(crate) fn handoff_file(header: &Header, parent: &str, prompt: &str) -> String {
    let message = json!({
        "type": "message",
        "id": crate::session::new_entry_id(&std::collections::HashSet::new()),
        "parentId": null,
        "timestamp": crate::session::time::now_iso(),
        "message": {
            "role": "user",
            "content": [{"type": "text", "text": prompt}],
            "timestamp": crate::store::now_ms(),
        },
    });
    format!("{}\n{message}\n", super::fork::child_header(header, parent))
}
