//! The documented shape of the core's types that responses carry. The core derives no web
//! framework's traits (`compactd_core` depends on no HTTP or OpenAPI crate), so each type a
//! response holds is described here once, by a twin of the same name, fields, docs and serde
//! attributes, which `/openapi.json` names and fields of the service's own types point to
//! (`#[schema(value_type = …)]`). The twins are never built: responses serialize the core's
//! types themselves, and every answer the tests receive is checked against `/openapi.json`
//! (`tests/it/service/conformance.rs`), so a twin that drifts from its type fails them.
#![allow(dead_code)]

/// What the gate did to one summary: how many anchors it checked, how many the model's answer
/// kept, how many were repaired (by the repair call or appended), and the important anchors the
/// summary does not keep (what the agent will no longer know). Critical anchors are never
/// missing: what the model leaves out is appended.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub anchors: usize,
    /// Kept by the model's first answer.
    pub kept: usize,
    /// Missing from the first answer, present in the summary returned.
    pub repaired: usize,
    /// Of the repaired, the ones compactd appended verbatim.
    pub appended: usize,
    /// Whether the model was asked once more to include what it left out.
    pub repair_call: bool,
    /// Anchors the returned summary does not keep.
    pub missing: Vec<Missing>,
    /// The user's standing rules the summary carries (its constraint anchors, verbatim): every
    /// one is kept, repaired or appended, so this is what the agent will still be told to obey.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The dialect the conversation was read in (`generic` when it was in none compactd knows:
    /// its anchors are a best guess). Absent when there was no conversation to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub dialect: Option<String>,
}

/// An anchor a summary does not keep.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct Missing {
    pub kind: AnchorKind,
    pub text: String,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AnchorKind {
    /// The user's latest request, verbatim (clipped).
    LatestRequest,
    /// A file written or edited.
    ModifiedFile,
    /// In-progress and next-step items of the previous summary not since done; open todo items.
    OpenWork,
    /// A standing rule or preference the user stated (`fidelity::standing`), or one a previous
    /// summary carried.
    Constraint,
    /// Text the user pinned to the session.
    Pinned,
    /// An earlier message of the user's, in their own words: the ledger a summary carries in its
    /// Goal (`fidelity::ledger`).
    UserMessage,
    /// An error still unresolved at the end of the span.
    UnresolvedError,
    /// A command that failed.
    FailedCommand,
    /// A file read.
    ReadFile,
    /// An identifier named in the user's requests.
    Identifier,
}

/// Token counts reported by the model (estimated for the extractive summarizer).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input tokens, those the provider read from its prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

/// `{"plan": {...}}` or `{"plan": null, "reason": "..."}`.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct PlanOutcome {
    pub plan: Option<Plan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A compaction plan. Path indices count entries from the root (0), without the header.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Whose rules made it: `pi-0.x` for files older pis wrote, `pi-1.5` for files that show pi
    /// 1.5's entries (`context_edit`, system messages, a compaction's `systemMessage`).
    pub planner: String,
    pub first_kept_entry_id: String,
    pub first_kept_path_index: usize,
    pub is_split_turn: bool,
    pub turn_start_path_index: Option<usize>,
    pub tokens_before: f64,
    pub previous_summary: Option<String>,
    pub messages_to_summarize: usize,
    pub turn_prefix_messages: usize,
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
    /// The summarized messages serialized for the summarizer (spec §6.1).
    pub conversation: String,
    /// The split turn's prefix serialized ("" when the turn is not split).
    pub turn_prefix_conversation: String,
    /// Estimate of every `message` entry on the path, by id, in path order.
    pub entry_tokens: std::collections::HashMap<String, u64>,
}

/// The model in force at the end of the path.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelRef {
    pub provider: Option<String>,
    pub model_id: Option<String>,
}

/// The kinds of problems a session file can have.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParseErrorKind {
    Empty,
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
    InvalidHeader,
    MissingType,
    MissingId,
    MissingMessage,
    InvalidField,
    DuplicateId,
    DanglingParent,
    ParentCycle,
    /// A line over `ParseOptions::max_line_bytes`.
    LineTooLong,
    /// More entries than `ParseOptions::max_entries`.
    TooManyEntries,
    /// JSON nested deeper than `session::JSON_DEPTH_LIMIT`.
    TooDeep,
    /// A session header (or title slot) where an entry was expected: appended lines are entries.
    UnexpectedHeader,
}

/// A line that lenient reading skipped or repaired.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct LineIssue {
    pub line: usize,
    pub kind: ParseErrorKind,
    pub message: String,
}

/// A compaction entry: child of the leaf it was made from. Serializes in pi's key order:
/// `{"type":"compaction","id","parentId","timestamp","summary","firstKeptEntryId",
/// "tokensBefore","details":{"readFiles","modifiedFiles"},"fromHook":false}`.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    /// Always `compaction`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: String,
    pub timestamp: String,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: f64,
    pub details: FileLists,
    /// pi 1.5: what the summary cost (pi's usage shape), written before `fromHook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub usage: Option<serde_json::Value>,
    pub from_hook: bool,
    /// pi 1.5: the system prompt as it stands (every system message replayed), which the
    /// compaction carries past the messages it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub system_message: Option<serde_json::Value>,
}

/// A branch-summary entry: `parentId` is the attach point (`null` at the root) and `fromId` the
/// same id or `"root"` (the reference's behaviour, spec §8.2).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryEntry {
    /// Always `branch_summary`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub from_id: String,
    pub summary: String,
    pub details: FileLists,
    pub from_hook: bool,
}

/// The sorted lists stored in a compaction entry's `details` and appended to its summary.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileLists {
    /// Files only read (a file also modified is listed only as modified).
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
