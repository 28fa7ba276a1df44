//! Rebuilding what the LLM sees from the active path (`buildSessionContext`, spec §8.3): the
//! latest compaction's summary, the entries it kept, everything after it; plus the thinking level
//! and model in force.

use serde::Serialize;
use serde_json::Value;

use super::serialize::{llm_message_json, to_llm};
use crate::session::{Entry, EntryKind, Message};

/// The model in force at the end of the path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    pub provider: Option<String>,
    pub model_id: Option<String>,
}

/// The context of a path: the entries that contribute a message, in order, and the session state.
#[derive(Debug, Clone)]
pub struct SessionContext<'a> {
    /// Each of these has a message ([`Entry::as_message`] is `Some`).
    pub entries: Vec<&'a Entry>,
    pub thinking_level: Option<String>,
    pub model: Option<ModelRef>,
}

impl<'a> SessionContext<'a> {
    /// The messages, as `buildSessionContext(...).messages` (before `convertToLlm`).
    pub fn messages(&self) -> Vec<&'a Message> {
        self.entries.iter().filter_map(|e| e.as_message()).collect()
    }

    /// The LLM-facing messages as JSON: user, assistant and tool-result messages exactly as stored,
    /// the others converted to user messages (spec §2.4, §8.4).
    pub fn llm_json(&self) -> Vec<Value> {
        self.entries
            .iter()
            .filter_map(|entry| {
                let message = entry.as_message()?;
                let llm = to_llm(message)?;
                Some(llm_message_json(&llm, || stored_message_json(entry)))
            })
            .collect()
    }
}

/// The `message` object of a message entry, from its raw line (which was valid JSON when read).
fn stored_message_json(entry: &Entry) -> Value {
    crate::js_json::from_str::<Value>(&entry.raw)
        .ok()
        .and_then(|mut line| line.get_mut("message").map(Value::take))
        .unwrap_or(Value::Null)
}

/// `buildSessionContext` over an active path (root first).
pub fn build_session_context<'a>(path: &[&'a Entry]) -> SessionContext<'a> {
    let mut thinking_level = Some("off".to_owned());
    let mut model = None;
    let mut latest_compaction = None;
    for (index, entry) in path.iter().enumerate() {
        match &entry.kind {
            EntryKind::ThinkingLevelChange {
                thinking_level: level,
            } => thinking_level = level.clone(),
            EntryKind::ModelChange { provider, model_id } => {
                model = Some(ModelRef {
                    provider: provider.clone(),
                    model_id: model_id.clone(),
                });
            }
            EntryKind::Message(Message::Assistant {
                provider,
                model: model_id,
                ..
            }) => {
                model = Some(ModelRef {
                    provider: provider.clone(),
                    model_id: model_id.clone(),
                });
            }
            EntryKind::Compaction { .. } => latest_compaction = Some(index),
            _ => {}
        }
    }

    let contributes = |entry: &&Entry| match &entry.kind {
        EntryKind::Message(_) | EntryKind::CustomMessage { .. } => true,
        EntryKind::BranchSummary { .. } => entry.summary().is_some_and(|s| !s.is_empty()),
        _ => false,
    };
    let entries = match latest_compaction {
        None => path.iter().copied().filter(contributes).collect(),
        Some(ci) => {
            let compaction = path[ci];
            let first_kept = match &compaction.kind {
                EntryKind::Compaction {
                    first_kept_entry_id,
                    ..
                } => first_kept_entry_id.as_deref(),
                _ => None,
            };
            // Kept entries start at the first kept entry; none when it is not on the path.
            let kept_from = first_kept
                .and_then(|id| path[..ci].iter().position(|e| e.id == id))
                .unwrap_or(ci);
            std::iter::once(compaction)
                .chain(path[kept_from..ci].iter().copied().filter(contributes))
                .chain(path[ci + 1..].iter().copied().filter(contributes))
                .collect()
        }
    };
    SessionContext {
        entries,
        thinking_level,
        model,
    }
}
