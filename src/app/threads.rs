//! Thread references (issue 57): `read_thread` over a stored session of the caller's tenant
//! ([`crate::threads`]): the entries of its active path, each with its role and text, a tool
//! call marked failed when its result was an error.

use std::collections::HashSet;

use serde_json::Value;

use super::{App, AppError};
use crate::access::Identity;
use crate::session::Session;
use crate::threads::{Entry, Reading};

/// Longest question, in characters.
pub(crate) const MAX_QUESTION_CHARS: usize = 2000;
/// The answer's budget, in characters (about a thousand tokens), however long the thread.
pub(crate) const ANSWER_CHARS: usize = 4000;

impl App {
    /// The answer to `question` from `who`'s session `thread`.
    pub(crate) async fn read_thread(
        &self,
        who: &Identity,
        thread: &str,
        question: &str,
    ) -> Result<Reading, AppError> {
        let question = question.trim().to_owned();
        if question.is_empty() || question.chars().count() > MAX_QUESTION_CHARS {
            return Err(AppError::invalid(
                "question",
                format!("question must be 1 to {MAX_QUESTION_CHARS} characters"),
            ));
        }
        if thread.trim().is_empty() {
            return Err(AppError::invalid(
                "thread",
                "thread is required: a session id",
            ));
        }
        let loaded = self.load(who, thread.trim()).await?;
        crate::cpu::off_runtime(move || {
            let entries = thread_entries(&loaded.session)?;
            Ok(crate::threads::read(&entries, &question, ANSWER_CHARS))
        })
        .await?
    }
}

/// The entries of `session`'s active path as the reader sees them.
fn thread_entries(session: &Session) -> Result<Vec<Entry>, AppError> {
    let path = session
        .active_path(None)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("{e}")))?;
    let mut failed_calls: HashSet<String> = HashSet::new();
    let mut entries = Vec::new();
    let mut calls: Vec<(usize, Vec<String>)> = Vec::new();
    for entry in path {
        let raw: Value = serde_json::from_str(&entry.raw).unwrap_or(Value::Null);
        if let Some(summary) = entry.summary() {
            entries.push(Entry {
                id: entry.id.clone(),
                role: raw["type"].as_str().unwrap_or("summary").to_owned(),
                text: summary.to_owned(),
                failed: false,
            });
            continue;
        }
        let message = &raw["message"];
        let Some(role) = message["role"].as_str() else {
            continue;
        };
        let mut text = Vec::new();
        let mut ids = Vec::new();
        match &message["content"] {
            Value::String(s) => text.push(s.clone()),
            Value::Array(blocks) => {
                for block in blocks {
                    match block["type"].as_str() {
                        Some("text") => text.extend(block["text"].as_str().map(str::to_owned)),
                        Some("toolCall") => {
                            text.push(format!(
                                "{}({})",
                                block["name"].as_str().unwrap_or("tool"),
                                block["arguments"]
                            ));
                            ids.extend(block["id"].as_str().map(str::to_owned));
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
        let failed = role == "toolResult" && message["isError"].as_bool() == Some(true);
        if failed {
            failed_calls.extend(message["toolCallId"].as_str().map(str::to_owned));
        }
        if !ids.is_empty() {
            calls.push((entries.len(), ids));
        }
        entries.push(Entry {
            id: entry.id.clone(),
            role: role.to_owned(),
            text: text.join("\n"),
            failed,
        });
    }
    // A call is trusted only when its result shows it worked.
    for (at, ids) in calls {
        entries[at].failed = ids.iter().any(|id| failed_calls.contains(id));
    }
    Ok(entries)
}
