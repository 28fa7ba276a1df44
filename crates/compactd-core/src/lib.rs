//! compactd's pure core: what a compaction is, without I/O or async. Everything that reads or
//! writes the world (HTTP, storage, model providers, the runtime) is in the crates above it; what
//! is here is called by all of them — the service's handlers, its command line, the benchmarks —
//! and is tested on its own (`cargo test -p compactd-core` needs neither a database nor a runtime).
//!
//! From the bottom up:
//! * [`js_json`]: JSON and string lengths as JavaScript sees them; [`parallel`]: splitting work
//!   on a large input over threads; [`ids`], [`deadline`].
//! * [`session`]: pi's session format, every version, its entry tree and active path.
//! * [`transcript`]: the typed conversation, read from and written in each agent's dialect.
//! * [`compaction`]: pi's planner, serialization and context rebuild (0.x and 1.5/1.6 rules).
//! * [`fidelity`]: a conversation's facts and anchors, the gate's checks, standing rules.
//! * [`redact`]: secret redaction, and [`redact::Redacted`], the type of what may leave.
//! * [`summary`], [`extractive`], [`prompts`]: a summarization's request and result, the
//!   built-in summarizer, the prompt templates.
//! * [`handoff`], [`threads`]: a new thread's first prompt for a goal; answering from a thread.
//! * [`wire`]: the wires agents speak to their models, each with its conversation and session.

pub mod compaction;
pub mod deadline;
pub mod extractive;
pub mod fidelity;
pub mod handoff;
pub mod ids;
pub mod js_json;
pub mod parallel;
#[cfg(feature = "probe")]
pub mod probe;
pub mod prompts;
pub mod redact;
pub mod session;
pub mod summary;
pub mod threads;
pub mod transcript;
pub mod wire;

#[cfg(test)]
mod testkit;
