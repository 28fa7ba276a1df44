//! The call log: one row per summarization, written by a background task from a bounded queue so
//! that a slow or stopped database never delays or fails a summary. When the queue is full the
//! row is dropped (and counted in the log) rather than waited for.

use std::sync::Arc;

use tokio::sync::mpsc;

use crate::store::{CallRecord, Store, now_ms};
use crate::summarizer::Summary;

/// Rows waiting to be written, at most.
const QUEUE: usize = 1024;

#[derive(Clone)]
pub struct CallLog {
    sender: mpsc::Sender<CallRecord>,
    store_text: bool,
    metrics: Arc<crate::metrics::Metrics>,
}

impl CallLog {
    /// Starts the writer task.
    pub fn spawn(
        store: Arc<dyn Store>,
        store_text: bool,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> CallLog {
        let (sender, mut receiver) = mpsc::channel::<CallRecord>(QUEUE);
        tokio::spawn(async move {
            while let Some(call) = receiver.recv().await {
                if let Err(error) = store.log_call(&call).await {
                    tracing::debug!(error = %error, "call log row not written");
                }
            }
        });
        CallLog {
            sender,
            store_text,
            metrics,
        }
    }

    /// Queues a row for a summarization that `outcome` describes.
    pub fn record(
        &self,
        endpoint: &str,
        session_id: Option<&str>,
        prompt: &str,
        outcome: Result<&Summary, (&str, u16)>,
        latency_ms: u64,
    ) {
        let (model, label, status, summary) = match outcome {
            Ok(summary) => (Some(summary.model.clone()), "ok", 200, Some(summary)),
            Err((label, status)) => (None, label, status, None),
        };
        let call = CallRecord {
            endpoint: endpoint.to_owned(),
            session_id: session_id.map(str::to_owned),
            model,
            outcome: label.to_owned(),
            status: i64::from(status),
            prompt_bytes: prompt.len() as i64,
            summary_bytes: summary.map_or(0, |s| s.text.len() as i64),
            input_tokens: summary.map_or(0, |s| s.usage.input_tokens as i64),
            output_tokens: summary.map_or(0, |s| s.usage.output_tokens as i64),
            latency_ms: latency_ms as i64,
            prompt: self.store_text.then(|| prompt.to_owned()),
            summary: summary.filter(|_| self.store_text).map(|s| s.text.clone()),
            created_at_ms: now_ms(),
        };
        if self.sender.try_send(call).is_err() {
            self.metrics.call_log_dropped.inc();
            tracing::warn!("call log queue full: row dropped");
        }
    }
}
