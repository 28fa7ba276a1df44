//! What the pipeline reports while it runs, and who listens: the metrics and the call log see
//! the same events, so that every summarization is counted and logged the same way whoever asked.

use std::time::Duration;

use super::{Context, Purpose, SummarizeError};
use crate::metrics::Metrics;
use crate::summarizer::{AttemptRecord, Summary, SummaryRequest};

/// One thing that happened during a run.
#[derive(Debug)]
pub enum Event<'a> {
    /// One call to one model ended.
    Attempt(&'a AttemptRecord),
    /// The chain gave up on a model and moves on to the next.
    Fallback { from: &'a str },
    /// Admission refused the run: the queue or the caller's slots were full.
    Refused,
    /// The fidelity gate checked (and repaired) a summary.
    Gated {
        report: &'a compactd_core::fidelity::Report,
        anchors: &'a [AnchorOutcome],
    },
    /// Secrets were replaced by placeholders (counts by rule).
    Redacted {
        counts: &'a std::collections::BTreeMap<String, u64>,
    },
    /// The summary cache was asked: a hit (and from where) or a miss.
    Cache { hit: Option<super::cache::Tier> },
    /// The tenant's daily budget is spent: the extractive summarizer answers.
    BudgetExhausted,
    /// The summarization looks like a compaction loop.
    Loop,
    /// The run ended, with a summary or without one.
    Finished {
        request: &'a SummaryRequest,
        outcome: Result<&'a Summary, &'a SummarizeError>,
        latency: Duration,
    },
}

/// What became of one anchor: `kept` (by the model's answer), `repaired` (by the repair call),
/// `appended` (by compactd) or `missing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnchorOutcome {
    pub kind: compactd_core::fidelity::AnchorKind,
    pub outcome: &'static str,
}

/// The run an event belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    pub context: &'a Context,
    pub purpose: Purpose,
}

/// Listens to the pipeline. Called inline: an observer must not block (the call log queues).
pub trait Observer: Send + Sync {
    fn observe(&self, run: Run<'_>, event: &Event<'_>);
}

/// The Prometheus metrics of summarizations.
pub struct MetricsObserver(pub std::sync::Arc<Metrics>);

impl Observer for MetricsObserver {
    fn observe(&self, run: Run<'_>, event: &Event<'_>) {
        let metrics = &self.0;
        match event {
            Event::Attempt(attempt) => {
                let outcome = attempt
                    .outcome
                    .as_ref()
                    .map_or_else(|e| e.label(), |()| "ok");
                let labels = [attempt.model.as_str(), outcome];
                metrics.upstream_calls.with_label_values(&labels).inc();
                metrics
                    .upstream_duration
                    .with_label_values(&labels)
                    .observe(attempt.latency.as_secs_f64());
                let latency_ms = attempt.latency.as_millis() as u64;
                match &attempt.outcome {
                    Ok(()) => tracing::info!(model = %attempt.model, latency_ms, "summary written"),
                    Err(error) => tracing::warn!(
                        model = %attempt.model, latency_ms, outcome,
                        "summarizer attempt failed: {error}"
                    ),
                }
            }
            Event::Fallback { from } => metrics.fallbacks.with_label_values(&[from]).inc(),
            Event::Redacted { counts } => {
                for (rule, n) in *counts {
                    metrics
                        .redactions
                        .with_label_values(&[rule.as_str()])
                        .inc_by(*n);
                }
            }
            Event::Cache { hit } => {
                let outcome = if hit.is_some() { "hit" } else { "miss" };
                metrics.summary_cache.with_label_values(&[outcome]).inc();
            }
            Event::BudgetExhausted => {
                metrics.budget_exhausted.inc();
                tracing::info!(tenant = %run.context.tenant, "daily token budget spent: extractive summary");
            }
            Event::Loop => {
                let endpoint = run.context.endpoint.label();
                metrics.loops.with_label_values(&[endpoint]).inc();
                tracing::warn!(endpoint, tenant = %run.context.tenant,
                    session = run.context.session_id.as_deref().unwrap_or("-"),
                    "compaction loop: compacted again with little new content, or without making room");
            }
            Event::Refused => metrics.rejections.inc(),
            Event::Gated { report, anchors } => {
                for anchor in *anchors {
                    metrics
                        .anchors
                        .with_label_values(&[anchor.kind.label(), anchor.outcome])
                        .inc();
                }
                if report.repair_call {
                    metrics.repair_calls.inc();
                }
            }
            Event::Finished {
                outcome: Ok(summary),
                request,
                ..
            } => {
                count_served(metrics, run, request, summary);
                if !summary.flags.cached {
                    count_upstream(metrics, summary);
                }
            }
            _ => {}
        }
    }
}

/// A compaction served on an agent's wire as it is written: counted with its agent and wire, and
/// the tokens it saved. (A session's is counted when its entry is appended; a gateway compaction
/// over the tenant's budget is refused before it is summarized, and goes to the agent's own
/// provider.)
fn count_served(metrics: &Metrics, run: Run<'_>, request: &SummaryRequest, summary: &Summary) {
    let endpoint = run.context.endpoint;
    let compaction = matches!(run.purpose, Purpose::Prompt | Purpose::History);
    if !endpoint.serves_on_the_wire() || !compaction {
        return;
    }
    let (agent, wire) = endpoint.agent_and_wire();
    metrics.compactions.with_label_values(&[agent, wire]).inc();
    let after = compactd_core::transcript::estimate_tokens(&summary.text);
    metrics
        .tokens_saved
        .inc_by(super::replaced_tokens(request).saturating_sub(after));
}

/// The tokens a summary took from its model.
fn count_upstream(metrics: &Metrics, summary: &Summary) {
    if summary.usage.cached_input_tokens > 0 {
        metrics
            .upstream_cached_tokens
            .with_label_values(&[summary.model.as_str()])
            .inc_by(summary.usage.cached_input_tokens);
    }
    for (direction, tokens) in [
        ("input", summary.usage.input_tokens),
        ("output", summary.usage.output_tokens),
    ] {
        metrics
            .upstream_tokens
            .with_label_values(&[summary.model.as_str(), direction])
            .inc_by(tokens);
    }
}
