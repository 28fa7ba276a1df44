//! The rows the store keeps and returns, and what an append carries.

use compactd_core::session::EntryType;

/// A stored session, without its entries.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRecord {
    pub session_id: String,
    /// The tenant of the key that uploaded it (`""` for anonymous uploads).
    pub tenant: String,
    pub header_id: String,
    pub title_line: Option<String>,
    pub header: String,
    pub source_version: i64,
    pub leaf_id: Option<String>,
    pub entry_count: i64,
    pub byte_size: i64,
    pub context_tokens: i64,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    /// Which derivation of the per-entry facts its rows hold (0: none yet, rows stored before
    /// facts existed).
    pub facts_version: i64,
    /// Compaction entries in the session.
    pub compaction_count: i64,
}

/// A stored entry: its raw line and the fields queries need.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EntryRecord {
    pub entry_id: String,
    pub parent_id: Option<String>,
    #[sqlx(try_from = "String")]
    pub entry_type: EntryType,
    pub raw: String,
}

/// The per-entry facts as stored (see `compactd_core::compaction::entry_facts`): everything appending and
/// planning need about an entry, without its line.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct FactRecord {
    /// Position in the file, from 0.
    pub seq: i64,
    pub entry_id: String,
    /// The resolved parent's position (`None` for a root).
    pub parent_seq: Option<i64>,
    #[sqlx(try_from = "String")]
    pub entry_type: EntryType,
    pub role: Option<String>,
    /// Estimate of the message the entry contributes to a context, if any.
    pub tokens: Option<i64>,
    pub usage_tokens: Option<f64>,
    /// The context estimate at this entry: last valid usage and the estimate after it.
    pub ctx_usage: Option<f64>,
    pub ctx_trailing: i64,
    pub first_kept_id: Option<String>,
}

/// An entry to store: its facts (with its position), its raw `parentId` and its line.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    pub facts: FactRecord,
    pub parent_id: Option<String>,
    pub raw: String,
}

impl NewEntry {
    /// The stored entry as [`crate::Store::entries`] reads it back.
    pub fn record(&self) -> EntryRecord {
        EntryRecord {
            entry_id: self.facts.entry_id.clone(),
            parent_id: self.parent_id.clone(),
            entry_type: self.facts.entry_type.clone(),
            raw: self.raw.clone(),
        }
    }
}

/// A compaction entry compactd wrote, with who wrote it and what it cost.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CompactionRecord {
    pub session_id: String,
    pub entry_id: String,
    pub leaf_id: String,
    pub first_kept_entry_id: String,
    pub model: String,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub latency_ms: i64,
    pub tokens_before: i64,
    pub tokens_after: i64,
    pub summary: String,
    pub created_at_ms: i64,
    /// The fidelity gate's report, as JSON (`fidelity::Report`); `None` for rows written before it.
    pub fidelity: Option<String>,
    /// Flagged as a compaction loop.
    pub loop_detected: bool,
    /// Every summary came from the summary cache.
    pub cached: bool,
}

/// Text pinned to a session.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PinRecord {
    pub pin_id: String,
    pub session_id: String,
    pub text: String,
    pub created_at_ms: i64,
}

/// What [`crate::Store::add_pin`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PinAdded {
    Added,
    /// The session has this text pinned already: that pin.
    Existing(PinRecord),
    /// The session has the most pins it may have.
    Full,
    /// No such session.
    NoSession,
}

/// An API key, as stored: its SHA-256, never its text.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyRecord {
    pub key_id: String,
    pub tenant: String,
    pub name: Option<String>,
    pub key_hash: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// One summarization call, for the call log. `prompt` and `summary` stay `None` unless
/// `COMPACTD_STORE_TEXT=true`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CallRecord {
    /// The way in: `/v1/compact`, `/v1/chat/completions`, `session_compaction`,
    /// `branch_summary`, `cli`.
    pub endpoint: String,
    pub tenant: String,
    /// `prompt`, `history`, `turn_prefix` or `branch`.
    pub purpose: String,
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub outcome: String,
    pub status: i64,
    pub prompt_bytes: i64,
    pub summary_bytes: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub latency_ms: i64,
    pub prompt: Option<String>,
    pub summary: Option<String>,
    pub created_at_ms: i64,
    /// Answered from the summary cache, without a model.
    pub cached: bool,
    /// Input tokens the provider read from its prompt cache.
    pub cached_input_tokens: i64,
    /// `pipeline::loops::fingerprint` (the service's) of the summary written, for loop detection.
    pub summary_fingerprint: Option<String>,
    pub loop_detected: bool,
    /// The tenant's daily budget was spent: the extractive summarizer answered.
    pub budget_exhausted: bool,
    /// The agent the summary was for (`claude-code`, `codex`, `opencode`, `pi`, …; empty when
    /// the way in does not say).
    pub agent: String,
    /// The wire it came by: `anthropic-messages`, `responses`, `chat-completions`,
    /// `remote-endpoint`, `session`, `cli`.
    pub wire: String,
    /// Estimated tokens of what the summary replaces, and of the summary.
    pub tokens_before: i64,
    pub tokens_after: i64,
    /// The fidelity gate's anchors, and how many the summary kept (none when it did not check).
    pub anchors: Option<i64>,
    pub anchors_kept: Option<i64>,
    /// The row's id in the log, once written (0 before): the cursor of a page of calls.
    #[sqlx(default)]
    pub call_id: i64,
}

/// Entries to append to a session, checked by the caller against the session as it was loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct Append {
    /// The entry count the caller saw: the append fails with [`crate::StoreError::Changed`] if another
    /// writer got there first, and the caller re-checks against the new state.
    pub expected_entry_count: i64,
    /// Positioned from `expected_entry_count` on.
    pub entries: Vec<NewEntry>,
    pub leaf_id: Option<String>,
    pub context_tokens: i64,
    /// Written in the same transaction when the appended entry is a compaction compactd made.
    pub compaction: Option<CompactionRecord>,
}

impl Append {
    /// How many of the appended entries are compactions.
    pub fn compactions_added(&self) -> i64 {
        self.entries
            .iter()
            .filter(|e| e.facts.entry_type == EntryType::Compaction)
            .count() as i64
    }
}
