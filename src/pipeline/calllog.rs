//! The call log: one row per summarization, success or failure, whoever asked (endpoint, tenant,
//! session, purpose, model, outcome, latency, tokens). Rows are written by a background task
//! from a bounded queue, so that a slow or stopped database never delays or fails a summary:
//! when the queue is full a row is dropped, and counted.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use super::events::{Event, Observer, Run};
use crate::store::{CallRecord, Store, now_ms};

/// Rows waiting to be written, at most.
const QUEUE: usize = 1024;

enum Message {
    Row(Box<CallRecord>),
    /// Answered once every row queued before it is written (or failed).
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
pub struct CallLog {
    sender: mpsc::Sender<Message>,
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
        let (sender, mut receiver) = mpsc::channel::<Message>(QUEUE);
        tokio::spawn(async move {
            while let Some(message) = receiver.recv().await {
                match message {
                    Message::Row(call) => {
                        if let Err(error) = store.log_call(&call).await {
                            tracing::debug!(error = %error, "call log row not written");
                        }
                    }
                    Message::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        CallLog {
            sender,
            store_text,
            metrics,
        }
    }

    /// Waits until every row queued so far is written (the CLI, before it exits).
    pub async fn flush(&self) {
        let (done, written) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).await.is_ok() {
            let _ = written.await;
        }
    }

    fn queue(&self, call: CallRecord) {
        if self.sender.try_send(Message::Row(Box::new(call))).is_err() {
            self.metrics.call_log_dropped.inc();
            tracing::warn!("call log queue full: row dropped");
        }
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
        });
    }
}

/// The status an HTTP caller gets for a failed summarization (the CLI's rows say the same).
fn http_status(error: &super::SummarizeError) -> i64 {
    use crate::summarizer::ChainError;
    match error {
        super::SummarizeError::Busy(_) => 429,
        super::SummarizeError::Chain(ChainError::ContextOverflow) => 400,
        super::SummarizeError::Chain(_) => 503,
    }
}
