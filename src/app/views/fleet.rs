//! The fleet at a glance, for the console: a tenant's summarization calls over the last day, by
//! model and outcome, and its compactions by the agent and wire they came by, from the call log;
//! and what this replica counted since it started (the metrics: compactions, fallbacks,
//! redactions, cache hits, loops, tokens saved).

use std::collections::BTreeMap;

use crate::access::Identity;
use crate::app::{App, AppError};
use compactd_store::{CallRecord, now_ms};

/// Calls of the call log the view reads at most (the newest).
const MAX_CALLS: i64 = 5000;
/// One bar per hour, for a day.
const BUCKET_MS: i64 = 3_600_000;
const BUCKETS: usize = 24;

/// Calls in one hour, by series (a model that answered, or `failed: OUTCOME`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Bucket {
    pub(crate) start_ms: i64,
    pub(crate) total: u64,
    pub(crate) by_series: BTreeMap<String, u64>,
}

/// The calls of one series.
#[derive(Debug, Clone, Default)]
pub(crate) struct SeriesTotals {
    pub(crate) name: String,
    pub(crate) calls: u64,
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
    /// Median latency of its calls.
    pub(crate) latency_p50_ms: i64,
}

/// The compactions one agent had served on one wire.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct AgentTotals {
    pub(crate) agent: String,
    pub(crate) wire: String,
    pub(crate) compactions: u64,
    /// Estimated tokens of what the summaries replaced, and of the summaries.
    pub(crate) tokens_before: i64,
    pub(crate) tokens_after: i64,
    /// The fidelity gate's anchors over those summaries, and how many they kept.
    pub(crate) anchors: i64,
    pub(crate) anchors_kept: i64,
}

/// The calls of the newest page the fleet page lists one by one.
pub(crate) const RECENT: usize = 25;

/// A tenant's call log, summed.
#[derive(Debug, Clone, Default)]
pub(crate) struct CallTotals {
    pub(crate) calls: u64,
    pub(crate) failed: u64,
    /// Compactions served, on any wire or appended to a session.
    pub(crate) compactions: u64,
    /// Their estimated tokens before less after.
    pub(crate) tokens_saved: i64,
    pub(crate) session_compactions: u64,
    pub(crate) cache_hits: u64,
    pub(crate) loops: u64,
    pub(crate) budget_exhausted: u64,
    /// Summaries prepared ahead of a compaction (spend of their own), and their tokens.
    pub(crate) prepared: u64,
    pub(crate) prepared_tokens: i64,
    /// Answered by the extractive summarizer (no model, or every model failed).
    pub(crate) extractive: u64,
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
}

/// What this replica counted since it started.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplicaTotals {
    pub(crate) compactions: f64,
    pub(crate) tokens_saved: f64,
    pub(crate) fallbacks: f64,
    pub(crate) redactions: f64,
    pub(crate) cache_hits: f64,
    pub(crate) loops: f64,
    /// Prepared summaries that answered a compaction, and those dropped unused.
    pub(crate) prepared_used: f64,
    pub(crate) prepared_wasted: f64,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Fleet {
    pub(crate) buckets: Vec<Bucket>,
    pub(crate) series: Vec<SeriesTotals>,
    pub(crate) totals: CallTotals,
    /// Compactions by agent and wire, most first.
    pub(crate) agents: Vec<AgentTotals>,
    /// The newest calls (at most [`RECENT`]), newest first.
    pub(crate) recent: Vec<CallRecord>,
    /// Calls read from the log (at most [`MAX_CALLS`]).
    pub(crate) calls_read: usize,
    pub(crate) replica: ReplicaTotals,
}

impl App {
    /// `who`'s tenant's calls of the last day, and this replica's counters.
    pub(crate) async fn fleet(&self, who: &Identity) -> Result<Fleet, AppError> {
        let calls = self.store.calls(&who.tenant, None, MAX_CALLS).await?;
        let mut fleet = summarize(&calls, now_ms());
        let m = &self.metrics;
        fleet.replica = ReplicaTotals {
            compactions: m.total("compactd_compactions_total"),
            tokens_saved: m.total("compactd_compaction_tokens_saved_total"),
            fallbacks: m.total("compactd_fallbacks_total"),
            redactions: m.total("compactd_redactions_total"),
            cache_hits: m.labelled("compactd_summary_cache_total", "outcome", "hit"),
            loops: m.total("compactd_loops_total"),
            prepared_used: m.labelled("compactd_prepared_summaries_total", "outcome", "used"),
            prepared_wasted: m.labelled("compactd_prepared_summaries_total", "outcome", "wasted"),
        };
        Ok(fleet)
    }
}

/// Whether a call of the log is a compaction served: a summary of an agent's prompt or history
/// written (not a branch summary or a split turn's prefix, each a part of another). A gateway
/// compaction over the budget is no summary (`budget_spent`): it went to the agent's provider. A
/// summary prepared ahead is none either until a compaction is answered from it (that one counts).
fn is_compaction(call: &CallRecord) -> bool {
    let part = call.purpose == "branch" || call.purpose == "turn_prefix";
    call.outcome == "ok" && !part && !is_prepared(call)
}

fn is_prepared(call: &CallRecord) -> bool {
    call.endpoint == crate::pipeline::PREPARED
}

/// The series a call counts under.
fn series_of(call: &CallRecord) -> String {
    match (&call.model, call.outcome.as_str()) {
        // Decided before any work: the agent's own provider compacted.
        (_, "budget_spent") => "forwarded: budget spent".to_owned(),
        (Some(model), "ok") => model.clone(),
        (_, outcome) => format!("failed: {outcome}"),
    }
}

fn summarize(calls: &[CallRecord], now: i64) -> Fleet {
    let end = (now / BUCKET_MS + 1) * BUCKET_MS;
    let start = end - BUCKET_MS * BUCKETS as i64;
    let mut buckets: Vec<Bucket> = (0..BUCKETS)
        .map(|n| Bucket {
            start_ms: start + n as i64 * BUCKET_MS,
            ..Bucket::default()
        })
        .collect();
    let mut series: BTreeMap<String, (SeriesTotals, Vec<i64>)> = BTreeMap::new();
    let mut totals = CallTotals::default();
    let mut agents: BTreeMap<(String, String), AgentTotals> = BTreeMap::new();
    for call in calls {
        if is_compaction(call) {
            let key = (call.agent.clone(), call.wire.clone());
            let entry = agents.entry(key).or_insert_with(|| AgentTotals {
                agent: call.agent.clone(),
                wire: call.wire.clone(),
                ..AgentTotals::default()
            });
            entry.compactions += 1;
            entry.tokens_before += call.tokens_before;
            entry.tokens_after += call.tokens_after;
            entry.anchors += call.anchors.unwrap_or(0);
            entry.anchors_kept += call.anchors_kept.unwrap_or(0);
            totals.compactions += 1;
            totals.tokens_saved += (call.tokens_before - call.tokens_after).max(0);
        }
        let name = series_of(call);
        if call.created_at_ms >= start && call.created_at_ms < end {
            let bucket = &mut buckets[((call.created_at_ms - start) / BUCKET_MS) as usize];
            bucket.total += 1;
            *bucket.by_series.entry(name.clone()).or_default() += 1;
        }
        let (entry, latencies) = series.entry(name.clone()).or_default();
        entry.name = name;
        entry.calls += 1;
        entry.input_tokens += call.input_tokens;
        entry.output_tokens += call.output_tokens;
        latencies.push(call.latency_ms);
        totals.calls += 1;
        totals.failed += u64::from(call.outcome != "ok" && call.outcome != "budget_spent");
        totals.session_compactions +=
            u64::from(call.endpoint == "session_compaction" && call.purpose == "history");
        totals.cache_hits += u64::from(call.cached);
        totals.loops += u64::from(call.loop_detected);
        totals.budget_exhausted += u64::from(call.budget_exhausted);
        if is_prepared(call) {
            totals.prepared += 1;
            totals.prepared_tokens += call.input_tokens + call.output_tokens;
        }
        totals.extractive += u64::from(call.model.as_deref() == Some("extractive"));
        totals.input_tokens += call.input_tokens;
        totals.output_tokens += call.output_tokens;
    }
    let mut series: Vec<SeriesTotals> = series
        .into_values()
        .map(|(mut totals, mut latencies)| {
            latencies.sort_unstable();
            totals.latency_p50_ms = latencies[latencies.len() / 2];
            totals
        })
        .collect();
    series.sort_by(|a, b| b.calls.cmp(&a.calls).then_with(|| a.name.cmp(&b.name)));
    let mut agents: Vec<AgentTotals> = agents.into_values().collect();
    agents.sort_by_key(|a| std::cmp::Reverse(a.compactions));
    Fleet {
        buckets,
        series,
        totals,
        agents,
        recent: calls.iter().take(RECENT).cloned().collect(),
        calls_read: calls.len(),
        replica: ReplicaTotals::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(model: Option<&str>, outcome: &str, at: i64, latency: i64) -> CallRecord {
        CallRecord {
            endpoint: "session_compaction".into(),
            tenant: "t".into(),
            purpose: "history".into(),
            session_id: None,
            model: model.map(str::to_owned),
            outcome: outcome.into(),
            status: 200,
            prompt_bytes: 10,
            summary_bytes: 5,
            input_tokens: 100,
            output_tokens: 10,
            latency_ms: latency,
            prompt: None,
            summary: None,
            created_at_ms: at,
            cached: model == Some("extractive"),
            cached_input_tokens: 0,
            summary_fingerprint: None,
            loop_detected: false,
            budget_exhausted: false,
            agent: "pi".into(),
            wire: "session".into(),
            tokens_before: 1000,
            tokens_after: 100,
            anchors: Some(4),
            anchors_kept: Some(3),
            call_id: at,
        }
    }

    #[test]
    fn calls_fall_in_hourly_buckets_by_series() {
        let now = 100 * BUCKET_MS + 10;
        let calls = [
            call(Some("openai:gpt"), "ok", now - 5, 300),
            call(Some("openai:gpt"), "ok", now - BUCKET_MS, 100),
            call(Some("extractive"), "ok", now - BUCKET_MS, 1),
            call(None, "timeout", now - 2, 150_000),
            // Older than a day: in the totals, in no bar.
            call(Some("openai:gpt"), "ok", now - 30 * BUCKET_MS, 200),
        ];
        let fleet = summarize(&calls, now);
        assert_eq!(fleet.buckets.len(), BUCKETS);
        let last = fleet.buckets.last().unwrap();
        assert_eq!(last.start_ms, 100 * BUCKET_MS);
        assert_eq!(last.total, 2);
        assert_eq!(last.by_series["failed: timeout"], 1);
        assert_eq!(fleet.buckets[BUCKETS - 2].by_series["extractive"], 1);
        assert_eq!(fleet.buckets.iter().map(|b| b.total).sum::<u64>(), 4);
        assert_eq!(fleet.series[0].name, "openai:gpt");
        assert_eq!(
            (fleet.series[0].calls, fleet.series[0].latency_p50_ms),
            (3, 200)
        );
        assert_eq!(
            (
                fleet.totals.calls,
                fleet.totals.failed,
                fleet.totals.cache_hits,
                fleet.totals.extractive
            ),
            (5, 1, 1, 1)
        );
    }

    #[test]
    fn compactions_count_by_agent_and_wire_whatever_the_way_in() {
        let now = 100 * BUCKET_MS;
        let gateway = |agent: &str, wire: &str, outcome: &str| CallRecord {
            endpoint: format!("gateway:{agent}"),
            purpose: "prompt".into(),
            agent: agent.into(),
            wire: wire.into(),
            ..call(Some("extractive"), outcome, now, 5)
        };
        let calls = [
            gateway("claude-code", "anthropic-messages", "ok"),
            gateway("claude-code", "anthropic-messages", "ok"),
            gateway("opencode", "chat-completions", "ok"),
            // Over the budget, the agent's own compaction went to its provider unsummarized.
            gateway("codex", "responses", "budget_spent"),
            call(Some("openai:gpt"), "ok", now, 300),
            // Part of the session compaction above, not one of its own.
            CallRecord {
                purpose: "turn_prefix".into(),
                ..call(Some("openai:gpt"), "ok", now, 300)
            },
            call(None, "timeout", now, 300),
        ];
        let fleet = summarize(&calls, now);
        let by: Vec<(&str, &str, u64)> = fleet
            .agents
            .iter()
            .map(|a| (a.agent.as_str(), a.wire.as_str(), a.compactions))
            .collect();
        assert_eq!(
            by,
            [
                ("claude-code", "anthropic-messages", 2),
                ("opencode", "chat-completions", 1),
                ("pi", "session", 1)
            ]
        );
        assert_eq!(fleet.totals.compactions, 4);
        assert_eq!(fleet.totals.tokens_saved, 4 * 900);
        assert_eq!(
            (fleet.agents[0].anchors, fleet.agents[0].anchors_kept),
            (8, 6)
        );
        assert_eq!(fleet.recent.len(), calls.len());
    }
}
