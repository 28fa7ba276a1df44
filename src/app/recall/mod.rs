//! Recall (issue 27): nothing summarized is lost for good. The conversation of every wire
//! summarization is kept, redacted, per tenant, for `COMPACTD_RECALL_RETENTION`, under a recall
//! id that the summary's last line names; the agent searches and reads it back through the MCP
//! tools or the REST API. Shared by the HTTP handlers, the MCP server and the CLI.

pub(crate) mod writer;

use compactd_core::ids::Id;
use std::time::Duration;

use crate::access::Identity;
use crate::app::compaction::compactor::CompactionOutcome;
use crate::app::{App, AppError};
use crate::pipeline::Endpoint;
use crate::summarizer::{Flags, SummaryRequest};
use compactd_core::compaction::typed_conversation;
use compactd_core::redact::Placeholders;
use compactd_core::session::Message as SessionMessage;
use compactd_core::transcript::{Conversation, Message, Role};
use compactd_store::{NewRecall, RecallHit, RecallQuery, RecallTurn, now_ms};

/// Most hits one search returns.
pub(crate) const MAX_HITS: i64 = 50;
/// Most turns one read returns.
pub(crate) const MAX_TURNS: i64 = 50;
/// How often expired conversations are deleted.
const PURGE_EVERY: Duration = Duration::from_secs(600);

/// Argument names whose value is a file path.
const PATH_ARGUMENTS: [&str; 5] = ["path", "file_path", "filePath", "file", "filename"];

impl App {
    /// Keeps the conversation of `request` for recall, redacted (queued: written within moments,
    /// see [`crate::app::recall::writer`]); its id, or `None` when recall is off, there is nothing to
    /// keep, or the queue is full (the summary is answered all the same). `flags`: what the
    /// pipeline did — the secrets it replaced (none means none is in the conversation, whose
    /// texts are pieces of the prompt it searched, so it is kept as it is instead of being
    /// searched again) and the request's cache key (a request kept lately under the same key is
    /// the same conversation: its id is named without reading the prompt).
    pub(crate) fn keep_recall(
        &self,
        who: &Identity,
        endpoint: Endpoint,
        request: &SummaryRequest,
        flags: &Flags,
    ) -> Option<String> {
        let retention = self.limits.recall_retention;
        if retention.is_zero() {
            return None;
        }
        let key = flags.cache_key.as_deref();
        if let Some(id) = key.and_then(|key| self.recall_writer.kept_for(key)) {
            return Some(id);
        }
        let conversation = &request.shape().conversation;
        if conversation.messages.is_empty() {
            return None;
        }
        // The id is the tenant's conversation's: an agent's retry, or a request the summary
        // cache answers, names the conversation already kept instead of keeping it again.
        let id = recall_id(&who.tenant, conversation);
        if self.recall_writer.seen(&id) {
            self.recall_writer.remember(key, &id);
            return Some(id);
        }
        let now = now_ms();
        let recall = NewRecall {
            id: id.clone(),
            tenant: who.tenant.clone(),
            source: endpoint.label().to_owned(),
            session_id: None,
            created_at_ms: now,
            expires_at_ms: now + retention.as_millis() as i64,
            turns: self.recall_turns_of(conversation, flags.redactions > 0),
        };
        if self.recall_writer.queue(recall) {
            self.recall_writer.remember(key, &id);
            Some(id)
        } else {
            self.metrics.recall_dropped.inc();
            None
        }
    }

    /// Keeps the entries a session compaction summarized (from the previous compaction's
    /// boundary to the new first kept entry) as turns of the session's recall, each under its
    /// position in the session, and names the recall in the outcome (and its summary, before
    /// the file lists, when the footer is on). The turns are written before the entry is
    /// appended, so that the id a summary names can be searched; if the store does not take
    /// them, the compaction goes on without naming a recall.
    pub(crate) async fn keep_session_recall(
        &self,
        who: &Identity,
        loaded: &crate::app::compaction::stored_path::StoredPath,
        outcome: &mut CompactionOutcome,
    ) {
        let first_kept = outcome.entry.first_kept_entry_id.as_str();
        let (seqs, mut messages) = {
            let snapshot = loaded.view.read();
            let mut seqs = Vec::new();
            let mut messages = Vec::new();
            let path = loaded.session.active_path(None).unwrap_or_default();
            for entry in path.iter().take_while(|e| e.id != first_kept) {
                let (Some(message), Some(seq)) = (entry.as_message(), snapshot.seq_of(&entry.id))
                else {
                    continue;
                };
                if matches!(message, SessionMessage::CompactionSummary { .. }) {
                    continue;
                }
                let Some(mut typed) = typed_conversation([message]).messages.into_iter().next()
                else {
                    continue;
                };
                // The summarizer sees a tool result cut at 2,000 characters; recall keeps it all.
                if let SessionMessage::ToolResult { content } = message {
                    typed.text = content.joined_text().into_owned();
                }
                seqs.push(seq as i32);
                messages.push(typed);
            }
            (seqs, messages)
        };
        if messages.is_empty() {
            return;
        }
        compactd_core::transcript::name_results(&mut messages);
        let conversation = Conversation::new(compactd_core::transcript::Dialect::Pi, messages);
        // Session entries are stored as uploaded: every turn is searched for secrets.
        let mut turns = self.recall_turns_of(&conversation, true);
        for (turn, seq) in turns.iter_mut().zip(seqs) {
            turn.seq = seq;
        }
        let session_id = &loaded.record.session_id;
        let id = session_recall_id(&who.tenant, session_id);
        let recall = NewRecall {
            id: id.clone(),
            tenant: who.tenant.clone(),
            source: Endpoint::SessionCompaction.label().to_owned(),
            session_id: Some(session_id.clone()),
            created_at_ms: now_ms(),
            expires_at_ms: i64::MAX,
            turns,
        };
        if let Err(error) = self.store.save_recalls(&[recall]).await {
            self.metrics.recall_dropped.inc();
            tracing::warn!(%error, session = %session_id, "recall not kept: the store did not take it");
            return;
        }
        if self.limits.recall_footer {
            let entry = &mut outcome.entry;
            // The file lists stay last, where pi reads them.
            let tags = entry.details.format_tags();
            let body = entry
                .summary
                .strip_suffix(tags.as_str())
                .unwrap_or(&entry.summary);
            entry.summary = with_footer(body, &id) + &tags;
            outcome.line = entry.to_line();
        }
        outcome.flags.recall_id = Some(id);
    }

    /// The turns of a conversation as recall keeps them: secrets replaced as the models saw
    /// them, tool calls written out, the paths they named listed.
    fn recall_turns_of(&self, conversation: &Conversation, has_secrets: bool) -> Vec<RecallTurn> {
        let mut placeholders = Placeholders::default();
        let redactor = Some(self.pipeline.redactor()).filter(|r| has_secrets && r.is_enabled());
        let mut redact = |text: String| match redactor {
            Some(redactor) => redactor.redact(&text, &mut placeholders),
            None => text,
        };
        // A tool result is filed under the paths its call named (the calls of the assistant
        // turn before it).
        let mut call_paths: Vec<String> = Vec::new();
        conversation
            .messages
            .iter()
            .enumerate()
            .map(|(seq, message)| {
                let text = turn_text(message);
                let mut paths = Vec::new();
                if message.role == Role::ToolResult {
                    paths.clone_from(&call_paths);
                }
                for call in &message.calls {
                    for (name, value) in &call.arguments {
                        if PATH_ARGUMENTS.contains(&name.as_str())
                            && let Some(path) = value.as_str()
                        {
                            paths.push(path.to_owned());
                        }
                    }
                }
                if message.role == Role::Assistant {
                    call_paths.clone_from(&paths);
                }
                let tool = match message.role {
                    Role::ToolResult => message.tool.clone(),
                    _ if !message.calls.is_empty() => Some(
                        message
                            .calls
                            .iter()
                            .map(|c| c.name.as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                    ),
                    _ => None,
                };
                RecallTurn {
                    seq: seq as i32,
                    role: match message.role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                        Role::ToolResult => "tool",
                        Role::Developer => "developer",
                    }
                    .to_owned(),
                    tool,
                    paths: redact(paths.join(" ")),
                    text: redact(text),
                }
            })
            .collect()
    }

    /// The caller's turns that hold every word of `query`, best first.
    pub(crate) async fn search_recall(
        &self,
        who: &Identity,
        mut query: RecallQuery,
    ) -> Result<Vec<RecallHit>, AppError> {
        for (param, text) in [
            ("q", Some(&query.text)),
            ("recall_id", query.recall_id.as_ref()),
            ("session_id", query.session_id.as_ref()),
            ("role", query.role.as_ref()),
            ("tool", query.tool.as_ref()),
            ("path", query.path.as_ref()),
        ] {
            no_nul(param, text.map(String::as_str))?;
        }
        if compactd_store::recall::query_words(&query.text).is_empty() {
            return Err(AppError::invalid(
                "q",
                "q: give at least one word to search for",
            ));
        }
        query.limit = query.limit.clamp(1, MAX_HITS);
        query.now_ms = now_ms();
        Ok(self.store.search_recall(&who.tenant, &query).await?)
    }

    /// Turns from the one at `from` on (at most `limit`) of one of the caller's kept
    /// conversations; `NotFound` for another tenant's or an expired one.
    pub(crate) async fn read_recall(
        &self,
        who: &Identity,
        id: &Id,
        from: i32,
        limit: i64,
    ) -> Result<RecallPage, AppError> {
        let limit = limit.clamp(1, MAX_TURNS);
        // One more than asked for tells whether another page follows.
        let (total, mut turns) = self
            .store
            .recall_turns(&who.tenant, id, from.max(0), limit + 1, now_ms())
            .await?
            .ok_or_else(|| AppError::NotFound(format!("no recall {id}")))?;
        let more = turns.len() as i64 > limit;
        turns.truncate(limit as usize);
        // A session's turns are numbered by their entries' positions, with gaps where other
        // entries (model changes, labels) sit: the next page starts after this one's last turn.
        let next = turns.last().map(|t| t.seq + 1).filter(|_| more);
        Ok(RecallPage { total, turns, next })
    }

    /// Deletes expired conversations every ten minutes, for as long as the process runs.
    pub(crate) fn spawn_recall_purge(&self) {
        let store = self.store.clone();
        tokio::spawn(async move {
            let mut every = tokio::time::interval(PURGE_EVERY);
            loop {
                every.tick().await;
                if let Err(error) = store.purge_recalls(now_ms()).await {
                    tracing::warn!(%error, "expired recalls not purged: the store did not answer");
                }
            }
        });
    }
}

/// A turn's text as recall keeps it: the message's text, then each tool call it made as
/// `[call] name({…})`, its arguments the JSON object they came in.
/// A page of a kept conversation's turns.
#[derive(Debug, Clone)]
pub(crate) struct RecallPage {
    /// Turns the conversation has.
    pub(crate) total: i64,
    pub(crate) turns: Vec<RecallTurn>,
    /// The `from` of the next page, when one follows.
    pub(crate) next: Option<i32>,
}

/// 400 for a NUL in what is searched or named: no stored text holds one (PostgreSQL cannot
/// store it), so it can only be a mistake, and both stores answer it the same.
fn no_nul(param: &'static str, text: Option<&str>) -> Result<(), AppError> {
    match text {
        Some(text) if text.contains('\0') => Err(AppError::Malformed {
            param: param.to_owned(),
            message: format!("{param}: must not contain a NUL character"),
        }),
        _ => Ok(()),
    }
}

fn turn_text(message: &Message) -> String {
    let mut text = message.text.clone();
    for call in &message.calls {
        text.push_str("\n[call] ");
        text.push_str(&call.name);
        text.push('(');
        // Written from the pairs, not from a copy of them gathered into a map: a call's
        // arguments can hold a whole file.
        let arguments = ArgumentsObject(&call.arguments);
        text.push_str(&serde_json::to_string(&arguments).unwrap_or_default());
        text.push(')');
    }
    text
}

/// A call's arguments, serialized as the JSON object they were read from.
struct ArgumentsObject<'a>(&'a [(String, serde_json::Value)]);

impl serde::Serialize for ArgumentsObject<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, value)| (name, value)))
    }
}

/// `r_` and 24 hex digits of the SHA-256 of the tenant and the conversation's turns.
fn recall_id(tenant: &str, conversation: &Conversation) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(tenant.as_bytes());
    for message in &conversation.messages {
        hash.update([0, message.role as u8]);
        hash.update(message.text.as_bytes());
        for call in &message.calls {
            hash.update([1]);
            hash.update(call.name.as_bytes());
            // Written into the hash as serialized, without a copy of the JSON.
            let _ = serde_json::to_writer(&mut hash, &call.arguments);
        }
    }
    format!("r_{}", hex::encode(&hash.finalize()[..12]))
}

/// `r_` and 24 hex digits of the SHA-256 of the tenant and a stored session's id: one recall per
/// session, which each of its compactions adds to.
fn session_recall_id(tenant: &str, session_id: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(tenant.as_bytes());
    hash.update([0xff]);
    hash.update(b"session\0");
    hash.update(session_id.as_bytes());
    format!("r_{}", hex::encode(&hash.finalize()[..12]))
}

/// `summary` ending with the line that names its kept conversation. A recall line the summary
/// already holds (its previous summary's, carried on by the model or the extractive summarizer)
/// is dropped: it names the conversation before.
pub(crate) fn with_footer(summary: &str, id: &str) -> String {
    let footer = |body: &str| {
        format!(
            "{}\n\n{} recall_search in compactd (MCP at /mcp), id {id}",
            body.trim_end(),
            crate::summarizer::RECALL_LINE_START
        )
    };
    // The common case, a summary with no footer yet and no `\r` for `lines` to drop, is its own
    // body: not split into lines and joined again (every answer, cache hits included).
    if !summary.contains(crate::summarizer::RECALL_LINE_START) && !summary.contains('\r') {
        return footer(summary);
    }
    let kept: Vec<&str> = summary
        .lines()
        .filter(|line| {
            !line
                .trim_start()
                .starts_with(crate::summarizer::RECALL_LINE_START)
        })
        .collect();
    footer(&kept.join("\n"))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::turn_text;
    use compactd_core::transcript::{Message, Role, ToolCall};

    #[test]
    fn a_turns_calls_are_written_after_its_text_with_their_arguments_in_order() {
        let mut message = Message::with_text(Role::Assistant, "Writing the fix.");
        message.calls = vec![
            ToolCall::new(
                "write",
                vec![
                    ("path".into(), json!("src/a.rs")),
                    ("content".into(), json!("fn main() {\n}\n")),
                    ("mode".into(), json!({"append": false, "n": 1})),
                ],
            ),
            ToolCall::new("bash", vec![("command".into(), json!("cargo test"))]),
        ];
        assert_eq!(
            turn_text(&message),
            "Writing the fix.\n\
             [call] write({\"path\":\"src/a.rs\",\"content\":\"fn main() {\\n}\\n\",\"mode\":{\"append\":false,\"n\":1}})\n\
             [call] bash({\"command\":\"cargo test\"})"
        );
        // The same JSON as the arguments gathered into one object would write.
        for call in &message.calls {
            let object = serde_json::Value::Object(call.arguments.iter().cloned().collect());
            let arguments = super::ArgumentsObject(&call.arguments);
            assert_eq!(
                serde_json::to_string(&arguments).unwrap(),
                object.to_string()
            );
        }
        assert_eq!(
            turn_text(&Message::with_text(Role::User, "no calls")),
            "no calls"
        );
    }

    #[test]
    fn the_footer_replaces_an_earlier_one_and_ends_the_summary() {
        let id = "r_0123456789abcdef01234567";
        let footer = format!(
            "\n\nEarlier detail is searchable: recall_search in compactd (MCP at /mcp), id {id}"
        );
        for (summary, body) in [
            ("## Goal\nShip it.\n\n", "## Goal\nShip it."),
            ("## Goal\r\nShip it.\r\n", "## Goal\nShip it."),
            (
                "## Goal\nShip it.\n\nEarlier detail is searchable: recall_search in compactd (MCP at /mcp), id r_old\n",
                "## Goal\nShip it.",
            ),
            ("", ""),
        ] {
            assert_eq!(
                super::with_footer(summary, id),
                format!("{body}{footer}"),
                "{summary:?}"
            );
        }
    }
}
