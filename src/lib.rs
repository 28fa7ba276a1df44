//! compactd: context compaction for LLM coding agents.
//!
//! # Layout
//! The layers, top to bottom, with a paragraph per folder: `docs/architecture.md` (its layers
//! block is what `tests/it/service/layers.rs` holds every `crate::` path to).
//! * [`cli`], [`http`]: the ways in; `main.rs` only calls [`cli::run`].
//! * `agents`: compactd at an agent's model base URL, one module a wire.
//! * [`app`]: the operations, for a caller, by resource (a session's compaction in
//!   `app::compaction`).
//! * [`pipeline`]: every summarization's stages; [`summarizer`] the models and the chain.
//! * [`access`], [`store`], [`config`]: keys and tenants, storage, the settings as data.
//! * The pure core: [`fidelity`], [`compaction`], [`transcript`], [`session`], [`js_json`].

pub mod access;
pub(crate) mod agents;
pub mod app;
pub mod cli;
pub mod config;
pub(crate) mod cpu;
pub mod http;
pub(crate) mod log_throttle;
pub mod metrics;
pub mod openapi;
pub mod pipeline;
pub(crate) mod session_file;
pub mod summarizer;
pub(crate) mod tls;
