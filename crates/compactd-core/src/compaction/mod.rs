//! The compaction core: token accounting, cut-point planning, file-operation tracking,
//! serialization for the summarizer and context rebuild (spec §3–§8).
//!
//! Pure and synchronous: it reads a parsed [`Session`](crate::session::Session) path and returns
//! values. The CLI, the HTTP handlers and the benchmarks all call it.

pub mod branch;
pub mod cut_point;
pub mod entry;
pub mod entry_facts;
pub mod file_ops;
pub mod output_budget;
pub mod pi15;
pub mod plan;
pub mod prepare;
pub mod serialize;
pub mod session_context;
pub mod tokens;

pub use cut_point::{CutPoint, find_cut_point, find_turn_start_index, find_valid_cut_points};
pub use file_ops::{FileLists, FileOperations};
pub use plan::{NothingReason, Plan, PlanOutcome};
pub use prepare::{NothingToCompact, Preparation, prepare_compaction};
pub use serialize::{serialize_conversation, typed_conversation};
pub use session_context::{ModelRef, SessionContext, build_session_context};
pub use tokens::{
    CompactionSettings, ContextEstimate, calculate_context_tokens, estimate_context_tokens,
    estimate_tokens, last_assistant_usage, should_compact,
};

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
