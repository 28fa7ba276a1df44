//! The call log: one row per summarization, success or failure, whoever asked (endpoint, tenant,
//! session, purpose, model, outcome, latency, tokens). Rows are written by a background task
//! from a bounded queue, in batches (one transaction each: as many rows as have queued while the
//! last batch was written, up to [`BATCH`]), so that the log keeps up with the service's peak
//! rate and a slow or stopped database never delays or fails a summary. A row that cannot be
//! queued (the queue full) or written (the store down) is dropped, counted in
//! `compactd_call_log_dropped_total`, and logged at most once a minute.
//!
//! Until its batch is written, a row's upstream tokens are counted here per tenant
//! ([`CallLog::unwritten_tokens`]): the daily budgets add them to what the store has.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::events::{Event, Observer, Run};
use crate::log_throttle::Throttle;
use compactd_core::transcript::estimate_tokens;
use compactd_store::behind::WriteBehind;
use compactd_store::{CallRecord, Store, now_ms};

/// Rows waiting to be written, at most, and their bytes at most (with `COMPACTD_STORE_TEXT` a
/// row holds a prompt and its summary).
const QUEUE: usize = 65_536;
const QUEUE_BYTES: usize = 256 << 20;
/// Rows written in one transaction, at most.
const BATCH: usize = 16_384;

/// What the writer and the queueing side share.
#[derive(Default)]
struct Shared {
    /// Upstream tokens of the rows queued and not yet written (or dropped), per tenant.
    unwritten: Mutex<HashMap<String, i64>>,
    dropped_queue_full: Throttle,
    dropped_store: Throttle,
}

impl Shared {
    fn add(&self, tenant: &str, tokens: i64) {
        if tokens == 0 {
            return;
        }
        let mut unwritten = self.unwritten.lock().unwrap_or_else(|e| e.into_inner());
        let left = unwritten.entry(tenant.to_owned()).or_default();
        *left += tokens;
        if *left <= 0 {
            unwritten.remove(tenant);
        }
    }
}

/// The upstream tokens a row counts against its tenant's budget (as the store sums them: model
/// calls, not cache hits or the extractive summarizer).
fn budget_tokens(call: &CallRecord) -> i64 {
    let free = call.cached || call.model.as_deref().is_none_or(|m| m == "extractive");
    if free {
        0
    } else {
        call.input_tokens + call.output_tokens
    }
}

#[derive(Clone)]
pub struct CallLog {
    rows: WriteBehind<CallRecord>,
    store_text: bool,
    metrics: Arc<crate::metrics::Metrics>,
    shared: Arc<Shared>,
}

impl CallLog {
    /// Starts the writer task.
    pub fn spawn(
        store: Arc<dyn Store>,
        store_text: bool,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> CallLog {
        let shared = Arc::new(Shared::default());
        let rows = {
            let (shared, metrics) = (shared.clone(), metrics.clone());
            WriteBehind::spawn(QUEUE, QUEUE_BYTES, BATCH, move |rows: Vec<CallRecord>| {
                let (store, shared, metrics) = (store.clone(), shared.clone(), metrics.clone());
                async move { write_batch(rows, &*store, &shared, &metrics).await }
            })
        };
        CallLog {
            rows,
            store_text,
            metrics,
            shared,
        }
    }

    /// Waits until every row queued so far is written (the CLI, before it exits).
    pub async fn flush(&self) {
        self.rows.flush().await;
    }

    /// Upstream tokens of `tenant`'s rows queued and not yet in the store.
    pub fn unwritten_tokens(&self, tenant: &str) -> i64 {
        let unwritten = self
            .shared
            .unwritten
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        unwritten.get(tenant).copied().unwrap_or(0)
    }

    fn queue(&self, call: CallRecord) {
        let (tenant, tokens) = (call.tenant.clone(), budget_tokens(&call));
        self.shared.add(&tenant, tokens);
        if self.rows.queue(call).is_err() {
            self.shared.add(&tenant, -tokens);
            self.metrics.call_log_dropped.inc();
            if let Some(n) = self.shared.dropped_queue_full.hit() {
                tracing::warn!(rows = n, "call log queue full: rows dropped");
            }
        }
    }
}

/// Writes one batch of rows (one transaction) and takes their tokens off the unwritten count.
async fn write_batch(
    rows: Vec<CallRecord>,
    store: &dyn Store,
    shared: &Shared,
    metrics: &crate::metrics::Metrics,
) {
    if let Err(error) = store.log_calls(&rows).await {
        metrics.call_log_dropped.inc_by(rows.len() as u64);
        if let Some(n) = shared.dropped_store.hit() {
            tracing::warn!(%error, batches = n, "call log rows not written: the store did not take them");
        }
    }
    for call in &rows {
        shared.add(&call.tenant, -budget_tokens(call));
    }
}

impl Observer for CallLog {
    fn observe(&self, run: Run<'_>, event: &Event<'_>) {
        let Event::Finished {
            request,
            outcome,
            latency,
        } = event
        else {
            return;
        };
        let (model, label, status, summary) = match outcome {
            Ok(summary) => (Some(summary.model.clone()), "ok", 200, Some(*summary)),
            Err(error) => (None, error.label(), http_status(error), None),
        };
        let prompt_bytes = request.system_prompt.len() + request.prompt.len();
        let (agent, wire) = run.context.endpoint.agent_and_wire();
        let fidelity = summary.and_then(|s| s.fidelity.as_ref());
        self.queue(CallRecord {
            endpoint: run.context.endpoint.label().to_owned(),
            tenant: run.context.tenant.clone(),
            purpose: run.purpose.label().to_owned(),
            session_id: run.context.session_id.clone(),
            model,
            outcome: label.to_owned(),
            status,
            prompt_bytes: prompt_bytes as i64,
            summary_bytes: summary.map_or(0, |s| s.text.len() as i64),
            input_tokens: summary.map_or(0, |s| s.usage.input_tokens as i64),
            output_tokens: summary.map_or(0, |s| s.usage.output_tokens as i64),
            latency_ms: latency.as_millis() as i64,
            prompt: self.store_text.then(|| request.prompt.clone()),
            summary: summary.filter(|_| self.store_text).map(|s| s.text.clone()),
            created_at_ms: now_ms(),
            cached: summary.is_some_and(|s| s.flags.cached),
            cached_input_tokens: summary.map_or(0, |s| s.usage.cached_input_tokens as i64),
            summary_fingerprint: summary.and_then(|s| super::loops::fingerprint(&s.text)),
            loop_detected: summary.is_some_and(|s| s.flags.loop_detected),
            budget_exhausted: summary.is_some_and(|s| s.flags.budget_exhausted),
            agent: agent.to_owned(),
            wire: wire.to_owned(),
            tokens_before: super::replaced_tokens(request) as i64,
            tokens_after: summary.map_or(0, |s| estimate_tokens(&s.text) as i64),
            anchors: fidelity.map(|f| f.anchors as i64),
            anchors_kept: fidelity.map(|f| (f.anchors - f.missing.len()) as i64),
            call_id: 0,
        });
    }
}

/// The status an HTTP caller gets for a failed summarization (the CLI's rows say the same).
fn http_status(error: &super::SummarizeError) -> i64 {
    use crate::summarizer::ChainError;
    match error {
        super::SummarizeError::Busy(_) => 429,
        super::SummarizeError::Chain(ChainError::ContextOverflow) => 400,
        super::SummarizeError::Chain(_) | super::SummarizeError::BudgetSpent => 503,
    }
}
