//! The application layer: what compactd does, for the HTTP handlers and the CLI alike.
//!
//! * [`sessions`]: upload, list, read, delete, append to stored sessions — each for a caller, who
//!   sees only their tenant's sessions.
//! * [`plans`]: what a compaction would cut, and the context the LLM sees, of stored sessions and
//!   of session files.
//! * [`compactions`]: compact a stored session or summarize a branch of it — leaf locks, dedupe of
//!   concurrent requests, the optimistic append and its retry, the stored record; [`history`]
//!   the compactions on record, a page at a time.
//! * [`pins`]: text pinned to a session, carried verbatim by every later compaction.
//! * [`wire`]: summarize an agent's rendered prompt (the two remote-endpoint wires).
//!
//! Every summarization goes through the [`Pipeline`]; storage through the [`Store`]. Handlers
//! extract, call one function here, and map the result to a response.

mod build;
pub mod compaction;
mod error;
mod health;
pub(crate) mod prepared;
pub(crate) mod recall;
pub(crate) mod sessions;
pub(crate) mod threads;
pub(crate) mod views;
pub(crate) mod wire;

use std::sync::Arc;

pub use build::{access_config, build_chain, build_pipeline, build_stages, store_config};
pub use error::AppError;

use crate::access::Identity;
use crate::metrics::Metrics;
use crate::pipeline::calllog::CallLog;
use crate::pipeline::{Context, Endpoint, Pipeline};
use compactd_core::prompts::Prompts;
use compactd_store::Store;

/// Limits and defaults of the operations (the HTTP layer has its own for bodies and time).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest line of an uploaded or appended session.
    pub max_line_bytes: usize,
    /// Most entries a stored session may have.
    pub max_entries: usize,
    /// Largest system prompt plus prompt of a summarization request.
    pub max_prompt_bytes: usize,
    /// Output cap of a request that gives none.
    pub default_max_tokens: u64,
    /// Highest output cap a request may ask for.
    pub max_output_tokens: u64,
    /// Context window assumed for branch summaries.
    pub context_window: u64,
    /// Memory for the indexes of stored sessions, in bytes.
    pub index_cache_bytes: u64,
    /// How long wire conversations stay searchable by recall; zero: not kept.
    pub recall_retention: std::time::Duration,
    /// Whether a summary of a kept conversation ends with its recall line.
    pub recall_footer: bool,
}

/// Everything the operations need; cheap to clone (one shared [`AppParts`]: the HTTP layer clones
/// it for every request, and cloning each part was ~4 % of a summarization's CPU).
#[derive(Clone)]
pub struct App(Arc<AppParts>);

impl std::ops::Deref for App {
    type Target = AppParts;

    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What an [`App`] holds. The store, the pipeline and the agent-session record are the
/// application's own: the layers above (HTTP, the agents' wires, the command line) reach them
/// only through its operations, and the compiler holds them to it.
pub struct AppParts {
    pub(in crate::app) store: Arc<dyn Store>,
    pub(in crate::app) pipeline: Arc<Pipeline>,
    pub prompts: Arc<Prompts>,
    pub metrics: Arc<Metrics>,
    pub calls: CallLog,
    pub limits: Limits,
    leaf_locks: compaction::LeafLocks,
    /// The facts of recently used sessions (see [`sessions::index`]).
    pub(crate) index_cache: sessions::index::IndexCache,
    recall_writer: recall::writer::RecallWriter,
    /// The latest request of each agent session the gateway saw (see [`threads::seen`]).
    pub(in crate::app) seen: threads::seen::SeenThreads,
}

impl App {
    /// Waits until what is written behind the requests — the call log, the summaries for the
    /// shared cache, the conversations kept for recall — is in the store (before the process
    /// ends).
    pub async fn flush_writes(&self) {
        self.calls.flush().await;
        self.pipeline.flush_cache().await;
        self.recall_writer.flush().await;
    }

    pub fn new(
        store: Arc<dyn Store>,
        pipeline: Arc<Pipeline>,
        prompts: Prompts,
        metrics: Arc<Metrics>,
        calls: CallLog,
        limits: Limits,
    ) -> App {
        let recall_writer = recall::writer::RecallWriter::spawn(store.clone(), metrics.clone());
        App(Arc::new(AppParts {
            recall_writer,
            store,
            pipeline,
            prompts: Arc::new(prompts),
            metrics,
            calls,
            limits,
            leaf_locks: compaction::LeafLocks::default(),
            index_cache: sessions::index::IndexCache::new(limits.index_cache_bytes),
            seen: threads::seen::SeenThreads::default(),
        }))
    }

    /// Whether a model writes before the extractive summarizer: the extractive link is the whole
    /// chain when no provider is configured. Handoff drafts and thread answers have their own
    /// extractive forms, better than a summary of their prompts.
    pub(crate) fn has_model(&self) -> bool {
        !matches!(
            self.pipeline.chain.links.first(),
            None | Some(crate::summarizer::Link::Extractive)
        )
    }

    /// The deadline of CPU work on a request's input that starts now (`COMPACTD_DEADLINE_SECS`,
    /// the one a summary has): past it the work stops and the caller gets a 503.
    pub(crate) fn work_deadline(&self) -> compactd_core::deadline::Deadline {
        compactd_core::deadline::Deadline::at(
            std::time::Instant::now() + self.pipeline.chain.policy.deadline,
        )
    }

    /// The configured chain of models (the gateway's `agent` mode builds its own beside it).
    pub(crate) fn configured_chain(&self) -> &crate::summarizer::Chain {
        &self.pipeline.chain
    }

    /// The secret the replicas share under `name`: the stored one, or `candidate` when none is
    /// stored yet (the first replica to ask stores it).
    pub(crate) async fn shared_secret(
        &self,
        name: &str,
        candidate: &str,
    ) -> Result<String, compactd_store::StoreError> {
        self.store
            .shared_secret(name, candidate, compactd_store::now_ms())
            .await
    }

    /// The pipeline context of a call by `who` through `endpoint`.
    pub fn pipeline_context(&self, who: &Identity, endpoint: Endpoint) -> Context {
        Context::new(endpoint, &who.tenant, who.key_id.as_deref())
    }
}
