//! compactd: context compaction for LLM coding agents.
//!
//! # Layout
//! * [`session`]: the pi session model — reading JSONL files of every version, migration, the
//!   entry tree and the active path.
//! * [`compaction`]: the pure compaction core — token estimates, the cut-point planner, file
//!   tracking, serialization for the summarizer, context rebuild.
//! * [`js_json`]: JSON and string lengths as JavaScript sees them, for exact parity with pi.
//! * [`transcript`]: the conversation as text — pi's form written, every agent dialect read —
//!   and the summarization prompt around it.
//! * [`summarizer`]: the summarizer backends (OpenAI-compatible, Anthropic, extractive) and the
//!   fallback chain with retries, deadline and back-pressure.
//! * [`http`]: the axum service; [`config`] its settings; [`prompts`] the prompt templates.
//! * [`cli`]: the command-line interface; `main.rs` only calls [`cli::run`]; [`session_file`] writes a
//!   user's session file in place safely.

pub mod access;
pub(crate) mod agents;
pub mod app;
pub mod cli;
pub mod compaction;
pub mod compactor;
pub mod config;
pub(crate) mod cpu;
pub mod fidelity;
pub mod http;
pub mod js_json;
pub(crate) mod log_throttle;
pub mod metrics;
pub mod pipeline;
pub(crate) mod probe;
pub mod prompts;
pub mod redact;
pub mod session;
pub(crate) mod session_file;
pub mod store;
pub mod summarizer;
#[doc(hidden)]
pub mod test_tiers;
pub mod transcript;

#[cfg(test)]
mod testkit;
