//! Recall of what compaction dropped.

pub mod endpoint;
pub mod sessions;
pub mod upgrade;
