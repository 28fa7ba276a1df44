//! Session entries and the header (spec §1.2–§1.4).

use bytestring::ByteString;
use serde::Deserialize;
use serde_json::Value;

use super::EntryType;
use super::message::{Content, Message};

/// One non-header line of a session file.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// 1-based physical line number in the file it was read from (0 for entries made in memory).
    pub line: usize,
    /// The JSON line exactly as stored. For v3 input it is the uploaded line byte for byte; for
    /// migrated input it is the line as pi would have rewritten it. Unknown fields live only here.
    /// Read from a whole file it is a slice of the file's one buffer, not a copy of its own.
    pub raw: ByteString,
    pub id: String,
    /// `None` for a root.
    pub parent_id: Option<String>,
    pub timestamp: Option<String>,
    pub kind: EntryKind,
}

/// What an entry is, with the fields compaction reads.
#[derive(Debug, Clone, PartialEq)]
pub enum EntryKind {
    Message(Message),
    ThinkingLevelChange {
        thinking_level: Option<String>,
    },
    ModelChange {
        provider: Option<String>,
        model_id: Option<String>,
    },
    /// `message` is always [`Message::CompactionSummary`]: the form the entry takes in the context.
    Compaction {
        first_kept_entry_id: Option<String>,
        details: Option<Value>,
        from_hook: bool,
        message: Message,
    },
    /// `message` is always [`Message::BranchSummary`].
    BranchSummary {
        from_id: Option<String>,
        details: Option<Value>,
        from_hook: bool,
        message: Message,
    },
    /// Extension state; never part of the LLM context.
    Custom {
        custom_type: Option<String>,
    },
    /// `message` is always [`Message::Custom`].
    CustomMessage {
        custom_type: Option<String>,
        message: Message,
    },
    Label {
        target_id: Option<String>,
        label: Option<String>,
    },
    SessionInfo {
        name: Option<String>,
    },
    /// An entry type this version does not know: kept byte for byte, on the path, no effect.
    Unknown {
        entry_type: EntryType,
    },
}

impl Entry {
    /// The entry's `type` as written in the file (read once, when the line was).
    pub fn entry_type(&self) -> &EntryType {
        match &self.kind {
            EntryKind::Message(_) => &EntryType::Message,
            EntryKind::ThinkingLevelChange { .. } => &EntryType::ThinkingLevelChange,
            EntryKind::ModelChange { .. } => &EntryType::ModelChange,
            EntryKind::Compaction { .. } => &EntryType::Compaction,
            EntryKind::BranchSummary { .. } => &EntryType::BranchSummary,
            EntryKind::Custom { .. } => &EntryType::Custom,
            EntryKind::CustomMessage { .. } => &EntryType::CustomMessage,
            EntryKind::Label { .. } => &EntryType::Label,
            EntryKind::SessionInfo { .. } => &EntryType::SessionInfo,
            EntryKind::Unknown { entry_type } => entry_type,
        }
    }

    /// The message of a `message` entry.
    pub fn stored_message(&self) -> Option<&Message> {
        match &self.kind {
            EntryKind::Message(m) => Some(m),
            _ => None,
        }
    }

    /// The message this entry contributes to a conversation (`toMessage`, spec §4.1): message,
    /// custom-message, branch-summary and compaction entries; nothing for the others.
    pub fn as_message(&self) -> Option<&Message> {
        match &self.kind {
            EntryKind::Message(message)
            | EntryKind::Compaction { message, .. }
            | EntryKind::BranchSummary { message, .. }
            | EntryKind::CustomMessage { message, .. } => Some(message),
            _ => None,
        }
    }

    pub fn is_compaction(&self) -> bool {
        matches!(self.kind, EntryKind::Compaction { .. })
    }

    /// The `summary` of a compaction or branch-summary entry.
    pub fn summary(&self) -> Option<&str> {
        match &self.kind {
            EntryKind::Compaction {
                message: Message::CompactionSummary { summary, .. },
                ..
            }
            | EntryKind::BranchSummary {
                message: Message::BranchSummary { summary, .. },
                ..
            } => Some(summary),
            _ => None,
        }
    }
}

/// The `type:"session"` header line.
#[derive(Debug, Clone, PartialEq)]
pub struct Header {
    pub line: usize,
    /// As stored (v3 input) or as rewritten by the migration.
    pub raw: ByteString,
    pub id: String,
    pub version: u32,
    pub cwd: Option<String>,
    pub timestamp: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Every field any entry type uses, flat, decoded in one pass (see `message.rs` for why).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireEntry<'a> {
    /// Borrowed: type names have no escapes, so reading one allocates nothing.
    #[serde(rename = "type", borrow)]
    pub kind: Option<std::borrow::Cow<'a, str>>,
    pub id: Option<String>,
    pub parent_id: Option<String>,
    pub timestamp: Option<String>,
    message: Option<Message>,
    thinking_level: Option<String>,
    provider: Option<String>,
    model_id: Option<String>,
    /// oh-my-pi writes `model: "provider/modelId"` in `model_change` entries.
    model: Option<String>,
    summary: Option<String>,
    first_kept_entry_id: Option<String>,
    tokens_before: Option<f64>,
    details: Option<Value>,
    from_hook: Option<bool>,
    /// oh-my-pi's name for `fromHook`.
    from_extension: Option<bool>,
    from_id: Option<String>,
    custom_type: Option<String>,
    content: Option<Content>,
    target_id: Option<String>,
    label: Option<String>,
    name: Option<String>,
}

/// The required field a decoded line lacks, or holds in a form ids cannot have.
pub(super) enum Missing {
    Type,
    Id,
    Message,
    /// An `id` or `parentId` with a NUL character: ids are stored as database text, which cannot
    /// hold it.
    NulInId,
}

impl WireEntry<'_> {
    /// Builds the entry around its raw line. Messages made from entries carry the entry's ISO
    /// timestamp as epoch milliseconds (spec §2.2).
    pub(super) fn into_entry(
        self,
        line: usize,
    ) -> Result<impl FnOnce(ByteString) -> Entry + use<>, Missing> {
        let entry_type = self.kind.ok_or(Missing::Type)?;
        let id = self.id.ok_or(Missing::Id)?;
        if id.contains('\0') || self.parent_id.as_deref().is_some_and(|p| p.contains('\0')) {
            return Err(Missing::NulInId);
        }
        let timestamp_ms = self
            .timestamp
            .as_deref()
            .and_then(super::time::iso_to_epoch_ms);
        let from_hook = self.from_hook.or(self.from_extension).unwrap_or(false);
        let kind = match entry_type.as_ref() {
            "message" => EntryKind::Message(self.message.ok_or(Missing::Message)?),
            "thinking_level_change" => EntryKind::ThinkingLevelChange {
                thinking_level: self.thinking_level,
            },
            "model_change" => {
                let (provider, model_id) = match (self.provider, self.model_id, self.model) {
                    (None, None, Some(model)) => match model.split_once('/') {
                        Some((p, m)) => (Some(p.to_owned()), Some(m.to_owned())),
                        None => (None, Some(model)),
                    },
                    (provider, model_id, _) => (provider, model_id),
                };
                EntryKind::ModelChange { provider, model_id }
            }
            "compaction" => EntryKind::Compaction {
                first_kept_entry_id: self.first_kept_entry_id,
                details: self.details,
                from_hook,
                message: Message::CompactionSummary {
                    summary: self.summary.unwrap_or_default(),
                    tokens_before: self.tokens_before.unwrap_or(0.0),
                    timestamp: timestamp_ms,
                },
            },
            "branch_summary" => EntryKind::BranchSummary {
                from_id: self.from_id,
                details: self.details,
                from_hook,
                message: Message::BranchSummary {
                    summary: self.summary.unwrap_or_default(),
                    timestamp: timestamp_ms,
                },
            },
            "custom" => EntryKind::Custom {
                custom_type: self.custom_type,
            },
            "custom_message" => EntryKind::CustomMessage {
                custom_type: self.custom_type,
                message: Message::Custom {
                    content: self.content.unwrap_or(Content::Blocks(Vec::new())),
                    timestamp: timestamp_ms,
                },
            },
            "label" => EntryKind::Label {
                target_id: self.target_id,
                label: self.label,
            },
            "session_info" => EntryKind::SessionInfo { name: self.name },
            other => EntryKind::Unknown {
                entry_type: EntryType::of(other),
            },
        };
        let (parent_id, timestamp) = (self.parent_id, self.timestamp);
        Ok(move |raw| Entry {
            line,
            raw,
            id,
            parent_id,
            timestamp,
            kind,
        })
    }
}

/// The fields of the header line that compactd reads.
#[derive(Deserialize)]
pub(super) struct WireHeader {
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub id: Option<Value>,
    pub version: Option<f64>,
    pub cwd: Option<String>,
    pub timestamp: Option<String>,
    /// Only on title-slot lines (`{"type":"title","v":1,…}`) of newer oh-my-pi files.
    pub v: Option<Value>,
}
