//! The summary cache, a stage before the chain: an identical summarization request (same tenant,
//! model chain, system prompt, prompt, pins, output cap and pipeline version) is answered without
//! asking a model. Agents retry on timeouts and 5xx; forks and subagents compact the same prefix.
//! Two tiers: this replica's memory (bounded by bytes, with a TTL) and the store, so that a retry
//! that lands on another replica is a hit too. The store is read only where memory misses, and
//! written behind: new summaries are queued (bounded) and written in batches by one task, one
//! transaction each, so that a miss does not wait for the store's writer.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Job;
use crate::metrics::Metrics;
use crate::summarizer::{Summary, TokenUsage};
use compactd_store::behind::WriteBehind;
use compactd_store::{CachedSummaryRow, Store, now_ms};

/// Changes whenever the stages change what a summary holds for the same request (the gate, the
/// extractive renderer, redaction): older entries are then never read.
pub(crate) const PIPELINE_VERSION: &str = "compactd-pipeline-2";

/// A summary as the cache keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cached {
    text: String,
    model: String,
    usage: TokenUsage,
    fidelity: Option<compactd_core::fidelity::Report>,
    /// The secrets replaced in the request when it was summarized: a hit reports them without
    /// searching the request again.
    #[serde(default)]
    redactions: u64,
}

impl Cached {
    fn weight(&self) -> u32 {
        let fidelity: usize = self
            .fidelity
            .as_ref()
            .map_or(0, |r| r.missing.iter().map(|m| m.text.len() + 16).sum());
        u32::try_from(self.text.len() + self.model.len() + fidelity + 128).unwrap_or(u32::MAX)
    }
}

/// Where a hit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    Memory,
    Store,
}

#[derive(Clone)]
pub struct SummaryCache {
    memory: moka::future::Cache<String, Arc<Cached>>,
    store: Arc<dyn Store>,
    ttl: Duration,
    /// Summaries on their way to the store.
    writes: WriteBehind<CachedSummaryRow>,
    metrics: Arc<Metrics>,
}

/// Summaries waiting to be written to the store; past this, new ones stay in memory only. Four
/// batches, as recall's writer (`app::recall_writer`): its batches hold SQLite's write lock for
/// about a second at the peak miss rate, and this writer waits for them.
const WRITE_QUEUE: usize = 4 * WRITE_BATCH;
/// And their bytes, at most.
const WRITE_QUEUE_BYTES: usize = 64 << 20;
/// Most summaries one transaction writes: as many as the call log's rows, a row each. The writer
/// takes its turn after recall's and the call log's batches (a cycle of about a second at the
/// peak miss rate), and a batch is what it can write per cycle: capped at 4,096 it kept up with
/// ~5,000 misses a second at most, and at ~6,800 dropped a sixth of the summaries
/// (BENCHMARKS.md, issue 26). A row is a small summary; 16,384 of them write in a fraction of
/// recall's turn.
const WRITE_BATCH: usize = 16_384;

impl std::fmt::Debug for SummaryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummaryCache")
            .field("entries", &self.memory.entry_count())
            .field("ttl", &self.ttl)
            .finish()
    }
}

impl SummaryCache {
    /// A cache of at most `max_bytes` of summaries in memory, each kept for `ttl` (in memory and
    /// in the store); starts the task that writes to the store.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        max_bytes: u64,
        ttl: Duration,
        metrics: Arc<Metrics>,
    ) -> SummaryCache {
        let writes = {
            let (store, metrics) = (store.clone(), metrics.clone());
            WriteBehind::spawn(
                WRITE_QUEUE,
                WRITE_QUEUE_BYTES,
                WRITE_BATCH,
                move |rows: Vec<CachedSummaryRow>| {
                    let (store, metrics) = (store.clone(), metrics.clone());
                    async move {
                        if let Err(error) = store.put_cached_summaries(&rows).await {
                            metrics.cache_writes_dropped.inc_by(rows.len() as u64);
                            tracing::warn!(%error, summaries = rows.len(), "summary cache: the store did not keep them");
                        }
                    }
                },
            )
        };
        SummaryCache {
            memory: moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_key, value: &Arc<Cached>| value.weight())
                .time_to_live(ttl)
                .build(),
            store,
            ttl,
            writes,
            metrics,
        }
    }

    /// The key of a job for `tenant` through the chain of `models`: of the job as the agent sent
    /// it, before redaction, so that a hit is found without searching the request for secrets
    /// (the same request redacts the same way; the key is a hash, and keeps no text).
    pub(crate) fn key(tenant: &str, models: &[String], job: &Job) -> String {
        let mut hash = Sha256::new();
        let mut field = |bytes: &[u8]| {
            // Length-prefixed, so that no two different requests hash the same fields.
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        };
        field(PIPELINE_VERSION.as_bytes());
        field(tenant.as_bytes());
        field(models.join(",").as_bytes());
        field(job.purpose.label().as_bytes());
        field(job.request.system_prompt.as_bytes());
        field(job.request.prompt.as_bytes());
        field(&job.request.max_tokens.to_le_bytes());
        for pin in &job.gate.extra {
            field(pin.text.as_bytes());
        }
        field(job.gate.appendix.as_bytes());
        hex::encode(hash.finalize())
    }

    /// The cached summary of `key`, if any. Store trouble is a miss: the cache never fails a
    /// summarization.
    pub(crate) async fn get(&self, key: &str) -> Option<(Summary, Tier)> {
        if let Some(hit) = self.memory.get(key).await {
            return Some((summary(&hit), Tier::Memory));
        }
        let stored = match self.store.cached_summary(key, now_ms()).await {
            Ok(stored) => stored?,
            Err(error) => {
                tracing::warn!(error = %error, "summary cache: the store did not answer");
                return None;
            }
        };
        let cached: Cached = serde_json::from_str(&stored).ok()?;
        let hit = summary(&cached);
        self.memory.insert(key.to_owned(), Arc::new(cached)).await;
        Some((hit, Tier::Store))
    }

    /// Keeps `summary` under `key`: in memory now, in the store within moments (queued; when the
    /// queue is full, in memory only — the store's copy only spares another replica a call).
    pub(crate) async fn put(&self, key: &str, summary: &Summary) {
        let cached = Cached {
            text: summary.text.clone(),
            model: summary.model.clone(),
            usage: summary.usage,
            fidelity: summary.fidelity.clone(),
            redactions: summary.flags.redactions,
        };
        let json = serde_json::to_string(&cached).expect("a summary serializes");
        self.memory.insert(key.to_owned(), Arc::new(cached)).await;
        let now = now_ms();
        let row = CachedSummaryRow {
            key: key.to_owned(),
            summary: json,
            created_at_ms: now,
            expires_at_ms: now + self.ttl.as_millis() as i64,
        };
        if self.writes.queue(row).is_err() {
            self.metrics.cache_writes_dropped.inc();
        }
    }

    /// Waits until every summary queued so far is in the store (at shutdown, and for tests that
    /// read the shared tier at once).
    pub(crate) async fn flush(&self) {
        self.writes.flush().await;
    }
}

fn summary(cached: &Cached) -> Summary {
    Summary {
        text: cached.text.clone(),
        model: cached.model.clone(),
        usage: cached.usage,
        fidelity: cached.fidelity.clone(),
        flags: crate::summarizer::Flags {
            cached: true,
            redactions: cached.redactions,
            ..Default::default()
        },
    }
}
