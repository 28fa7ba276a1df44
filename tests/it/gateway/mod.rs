//! The gateway at the agents' model base URL: recorded requests, the agent mode, hostile use, the providers' compaction APIs, standing rules and zero-wait compaction.

pub mod agent_mode;
pub mod context_edits;
pub mod hostile;
pub mod prepare;
pub mod prepare_idle;
pub mod prepare_spend;
pub mod prepare_written;
pub mod provider_compaction;
pub mod recorded;
pub mod standing;
