//! Recall's writer: conversations are kept write-behind, like the call log — queued (bounded) on
//! the request path, written by one task in batches (one transaction each, see
//! [`compactd_store::behind`]), so that a summarization does not wait for the store and SQLite's
//! single writer is not asked once per request. A conversation the queue has no room for is not
//! kept, and its summary names no recall id.

use std::sync::Arc;

use crate::log_throttle::Throttle;
use crate::metrics::Metrics;
use compactd_store::behind::{Weigh, WriteBehind};
use compactd_store::{NewRecall, Store, StoreError};

/// Conversations waiting to be written, at most, and their bytes at most (a conversation may be
/// megabytes). The queue holds four batches: at the peak miss rate a batch takes about a
/// second on a 2-core VM while thousands more arrive, so a queue of one batch dropped a sixth to
/// a third of the conversations (BENCHMARKS.md).
const QUEUE: usize = 4 * BATCH;
const QUEUE_BYTES: usize = 256 << 20;
/// Most conversations one batch (one transaction) writes. The writer's turn comes after the
/// cache's and the call log's batches (55-330 ms of waiting a turn at the peak), so a batch is
/// what it can write per cycle: capped at 4,096 it wrote ~5,000 conversations a second at most,
/// and at ~6,500 misses a second dropped a fifth to a quarter of them in 20 s; at 8,192 it drops
/// a thirteenth (BENCHMARKS.md, issue 26). Capped all the same, because a transaction holds
/// SQLite's one write lock throughout and every other write waits for it, a request's within the
/// busy timeout (`COMPACTD_DB_ACQUIRE_TIMEOUT_SECS`, 3 s): at 8,192 a session uploaded during
/// that peak waited 1.35 s at most (1.0-1.4 s at 4,096).
const BATCH: usize = 8192;

/// Ids queued lately, remembered so that the same conversation is not queued again.
const SEEN: u64 = 100_000;

#[derive(Clone, Debug)]
pub(crate) struct RecallWriter {
    recalls: WriteBehind<NewRecall>,
    seen: moka::sync::Cache<String, ()>,
    /// The id queued lately for a request, by the request's summary-cache key.
    by_key: moka::sync::Cache<String, String>,
}

impl RecallWriter {
    /// Starts the writer task.
    pub(crate) fn spawn(
        store: Arc<dyn Store>,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> RecallWriter {
        let recalls =
            WriteBehind::spawn(QUEUE, QUEUE_BYTES, BATCH, move |batch: Vec<NewRecall>| {
                let (store, metrics) = (store.clone(), metrics.clone());
                async move { save(&*store, &metrics, &batch).await }
            });
        RecallWriter {
            recalls,
            seen: remembered(),
            by_key: remembered(),
        }
    }

    /// Whether this conversation was queued in the last ten minutes.
    pub(crate) fn seen(&self, id: &str) -> bool {
        self.seen.contains_key(id)
    }

    /// The id of the conversation queued in the last ten minutes for the request whose cache key
    /// is `key`.
    pub(crate) fn kept_for(&self, key: &str) -> Option<String> {
        self.by_key.get(key)
    }

    /// Notes that the request whose cache key is `key` (if any) names the conversation `id`.
    pub(crate) fn remember(&self, key: Option<&str>, id: &str) {
        if let Some(key) = key {
            self.by_key.insert(key.to_owned(), id.to_owned());
        }
    }

    /// Queues a conversation; `false` when the queue is full.
    pub(crate) fn queue(&self, recall: NewRecall) -> bool {
        let id = recall.id.clone();
        let queued = self.recalls.queue(recall).is_ok();
        if queued {
            self.seen.insert(id, ());
        }
        queued
    }

    /// Waits until every conversation queued so far is written (or failed).
    pub(crate) async fn flush(&self) {
        self.recalls.flush().await;
    }
}

/// Refusals logged at most once a minute (each is counted).
static REFUSED: Throttle = Throttle::new();

/// Writes a batch. When the store refuses it for what it holds rather than for being down (a
/// row PostgreSQL cannot index, say), the batch is split in halves and each written alone, down
/// to the conversations that are refused by themselves: one bad row never takes the others with
/// it. Those are counted (`compactd_recall_dropped_total`, `compactd_recall_refused_total`) and
/// logged once a minute.
async fn save(store: &dyn Store, metrics: &Metrics, batch: &[NewRecall]) {
    let mut pending = vec![batch];
    while let Some(part) = pending.pop() {
        match store.save_recalls(part).await {
            Ok(()) => {}
            Err(StoreError::Other(_) | StoreError::Conflict(_)) if part.len() > 1 => {
                let (first, second) = part.split_at(part.len() / 2);
                pending.push(second);
                pending.push(first);
            }
            Err(error @ (StoreError::Other(_) | StoreError::Conflict(_))) => {
                metrics.recall_dropped.inc();
                metrics.recall_refused.inc();
                if let Some(times) = REFUSED.hit() {
                    let turns = part[0].turns.len();
                    let bytes = part[0].weight();
                    tracing::warn!(%error, times, turns, bytes, "recall: the store refused a conversation; the others of its batch were kept");
                }
            }
            Err(error) => {
                metrics.recall_dropped.inc_by(part.len() as u64);
                tracing::warn!(%error, conversations = part.len(), "recall not kept: the store did not take it");
            }
        }
    }
}

/// At most [`SEEN`] keys (a set of ids, or ids by cache key), each remembered for ten minutes.
fn remembered<V: Clone + Send + Sync + 'static>() -> moka::sync::Cache<String, V> {
    moka::sync::Cache::builder()
        .max_capacity(SEEN)
        .time_to_live(std::time::Duration::from_secs(600))
        .build()
}
