//! pi 1.5's planner (`@earendil-works/pi-coding-agent` 1.5.2, `prepareCompaction`), for sessions
//! pi ≥ 1.5 wrote. It plans on the session's *projection*: the context entries after the newest
//! compaction with each `context_edit` applied (an omitted entry contributes nothing, a replaced
//! one its new content), system messages estimated but never summarized, usage recorded before a
//! later edit or compaction not trusted. Older files keep pi 0.x's planner ([`super::prepare`]).
//! Verified against pi 1.5.2 itself (`scripts/pi15/oracle.mjs`, `scripts/pi15/compare.py`).

mod messages;
mod project;

use serde_json::Value;

use super::file_ops::FileLists;
use super::tokens::CompactionSettings;
use crate::session::{Entry, EntryKind, Message};
pub use messages::{estimate_tokens, serialize};
pub use project::Projection;

/// Which planner a plan follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Planner {
    #[serde(rename = "pi-0.x")]
    Pi0,
    #[serde(rename = "pi-1.5")]
    Pi15,
}

impl Planner {
    /// pi 1.5's when the file shows what only pi ≥ 1.5 writes: a `context_edit` entry, a message
    /// with role `system`, or a compaction carrying its `systemMessage`.
    pub fn of_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Planner {
        let shows_15 = |entry: &Entry| match &entry.kind {
            EntryKind::Unknown { .. } => {
                *entry.entry_type() == crate::session::EntryType::ContextEdit
            }
            EntryKind::Message(Message::Unknown { role }) => role == "system",
            // Few entries are compactions: only theirs are read for the field.
            EntryKind::Compaction { .. } => crate::js_json::from_str::<Value>(&entry.raw)
                .is_ok_and(|line| line.get("systemMessage").is_some_and(|m| !m.is_null())),
            _ => false,
        };
        match entries.into_iter().any(shows_15) {
            true => Planner::Pi15,
            false => Planner::Pi0,
        }
    }
}

/// pi 1.5.2's preparation, as counts, texts and files.
#[derive(Debug, Clone, PartialEq)]
pub struct Preparation15 {
    pub first_kept_entry_id: String,
    pub first_kept_path_index: usize,
    pub turn_start_path_index: Option<usize>,
    pub is_split_turn: bool,
    pub tokens_before: u64,
    pub previous_summary: Option<String>,
    pub messages_to_summarize: usize,
    pub turn_prefix_messages: usize,
    pub conversation: String,
    pub turn_prefix_conversation: String,
    pub files: FileLists,
    pub entry_tokens: Vec<(String, u64)>,
    /// The current system message (every system message of the projection replayed): what a
    /// pi 1.5 compaction entry carries as its `systemMessage`.
    pub system_message: Option<Value>,
    /// The estimate of what the context keeps after the cut (system messages aside).
    pub kept_tokens: u64,
}

/// pi 1.5.2's `prepareCompaction` on `path` (root first); `None` where pi returns no plan.
pub fn prepare(path: &[&Entry], settings: &CompactionSettings) -> Option<Preparation15> {
    let values: Vec<Value> = path
        .iter()
        .map(|e| crate::js_json::from_str(&e.raw).unwrap_or(Value::Null))
        .collect();
    let entry_tokens = values
        .iter()
        .filter(|v| v["type"] == "message")
        .map(|v| {
            let id = v["id"].as_str().unwrap_or_default().to_owned();
            (
                id,
                messages::estimate_tokens(&messages::context_messages(v)[0]),
            )
        })
        .collect();
    if values.last().is_some_and(|v| v["type"] == "compaction") {
        return None;
    }
    let projection = Projection::of_path(&values);
    let cut = projection.prepare(settings.keep_recent_tokens)?;
    let prefix_ids: Vec<&str> = path.iter().map(|e| e.id.as_str()).collect();
    let index_of = |id: &str| prefix_ids.iter().position(|p| *p == id);
    let files = project::file_ops(
        &projection,
        cut.previous_compaction,
        cut.summarized.iter().chain(&cut.prefix),
    )
    .lists();
    let kept_tokens = projection.kept_tokens(&cut.first_kept_id);
    Some(Preparation15 {
        first_kept_path_index: index_of(&cut.first_kept_id).unwrap_or_default(),
        turn_start_path_index: cut.turn_start_id.as_deref().and_then(index_of),
        first_kept_entry_id: cut.first_kept_id,
        is_split_turn: cut.is_split_turn,
        tokens_before: projection.context_tokens(&values),
        previous_summary: cut.previous_summary,
        messages_to_summarize: cut.summarized.len(),
        turn_prefix_messages: cut.prefix.len(),
        conversation: serialize(&cut.summarized.iter().collect::<Vec<_>>()),
        turn_prefix_conversation: serialize(&cut.prefix.iter().collect::<Vec<_>>()),
        files,
        entry_tokens,
        system_message: projection.current_system(),
        kept_tokens,
    })
}

/// What pi 1.5.2's `buildSessionContext` gives the model at the end of `path`: the projection's
/// messages after `convertToLlm`, the thinking level and the model (provider, id).
pub fn context(path: &[&Entry]) -> (Vec<Value>, String, Option<(Value, Value)>) {
    let values: Vec<Value> = path
        .iter()
        .map(|e| crate::js_json::from_str(&e.raw).unwrap_or(Value::Null))
        .collect();
    let mut thinking = "off".to_owned();
    let mut model = None;
    for entry in &values {
        match entry["type"].as_str() {
            Some("thinking_level_change") => {
                thinking = entry["thinkingLevel"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            }
            Some("model_change") => {
                model = Some((entry["provider"].clone(), entry["modelId"].clone()))
            }
            Some("message") if entry["message"]["role"] == "assistant" => {
                let message = &entry["message"];
                model = Some((message["provider"].clone(), message["model"].clone()))
            }
            _ => {}
        }
    }
    let messages = Projection::of_path(&values)
        .entries
        .iter()
        .flat_map(|e| e.messages.iter())
        .filter_map(messages::to_llm)
        .collect();
    (messages, thinking, model)
}
