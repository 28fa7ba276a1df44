//! Prometheus metrics (`GET /metrics`): requests by route and status, upstream calls by model and
//! outcome, tokens, compaction savings, fallbacks, the summarizer queue, anchor retention.
//!
//! One registry per service instance rather than the global one, so that tests see exactly what
//! their own requests did.

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// Latency buckets in seconds: from sub-millisecond handlers to summaries near the deadline.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.025, 0.1, 0.25, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 180.0,
];

pub struct Metrics {
    registry: Registry,
    pub http_requests: IntCounterVec,
    pub http_duration: HistogramVec,
    pub upstream_calls: IntCounterVec,
    pub upstream_duration: HistogramVec,
    pub upstream_tokens: IntCounterVec,
    pub fallbacks: IntCounterVec,
    pub tokens_saved: IntCounter,
    pub compactions: IntCounterVec,
    pub queue_depth: IntGauge,
    pub in_flight: IntGauge,
    pub session_index_bytes: IntGauge,
    pub rejections: IntCounter,
    pub call_log_dropped: IntCounter,
    pub recall_dropped: IntCounter,
    pub recall_refused: IntCounter,
    pub cache_writes_dropped: IntCounter,
    pub anchors: IntCounterVec,
    pub repair_calls: IntCounter,
    pub redactions: IntCounterVec,
    pub summary_cache: IntCounterVec,
    pub budget_exhausted: IntCounter,
    pub budget_unchecked: IntCounter,
    pub loops: IntCounterVec,
    pub upstream_cached_tokens: IntCounterVec,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter_vec = |name: &str, help: &str, labels: &[&str]| {
            let metric = IntCounterVec::new(Opts::new(name, help), labels).expect("a valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("registered once");
            metric
        };
        let histogram_vec = |name: &str, help: &str, labels: &[&str]| {
            let metric = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(BUCKETS.to_vec()),
                labels,
            )
            .expect("a valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("registered once");
            metric
        };
        let counter = |name: &str, help: &str| {
            let metric = IntCounter::new(name, help).expect("a valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("registered once");
            metric
        };
        let gauge = |name: &str, help: &str| {
            let metric = IntGauge::new(name, help).expect("a valid metric");
            registry
                .register(Box::new(metric.clone()))
                .expect("registered once");
            metric
        };
        Metrics {
            http_requests: counter_vec(
                "compactd_http_requests_total",
                "HTTP requests answered, by route, method and status.",
                &["route", "method", "status"],
            ),
            http_duration: histogram_vec(
                "compactd_http_request_duration_seconds",
                "Time to answer an HTTP request, by route, method and status.",
                &["route", "method", "status"],
            ),
            upstream_calls: counter_vec(
                "compactd_upstream_calls_total",
                "Summarizer calls, by model and outcome (ok or the failure kind).",
                &["model", "outcome"],
            ),
            upstream_duration: histogram_vec(
                "compactd_upstream_call_duration_seconds",
                "Duration of summarizer calls, by model and outcome.",
                &["model", "outcome"],
            ),
            upstream_tokens: counter_vec(
                "compactd_upstream_tokens_total",
                "Tokens of successful summarizer calls, by model and direction (input, output).",
                &["model", "direction"],
            ),
            fallbacks: counter_vec(
                "compactd_fallbacks_total",
                "Times the chain moved on from a model to the next one, by the model given up on.",
                &["from_model"],
            ),
            tokens_saved: counter(
                "compactd_compaction_tokens_saved_total",
                "Context tokens removed by compactions compactd wrote (estimate before minus after).",
            ),
            compactions: counter_vec(
                "compactd_compactions_total",
                "Compactions compactd served, by the agent and the wire they came by: summaries answered on an agent's wire, and compaction entries appended to stored sessions (agent pi, wire session).",
                &["agent", "wire"],
            ),
            queue_depth: gauge(
                "compactd_summarizer_queue_depth",
                "Summarizations waiting for a slot.",
            ),
            in_flight: gauge("compactd_summarizer_in_flight", "Summarizations running."),
            session_index_bytes: gauge(
                "compactd_session_index_bytes",
                "Memory held by the indexes of stored sessions (approximate; bounded by COMPACTD_INDEX_CACHE_BYTES).",
            ),
            rejections: counter(
                "compactd_summarizer_rejections_total",
                "Summarizations refused with 429 because the queue was full.",
            ),
            call_log_dropped: counter(
                "compactd_call_log_dropped_total",
                "Call-log rows dropped because the log queue was full.",
            ),
            recall_dropped: counter(
                "compactd_recall_dropped_total",
                "Conversations not kept for recall: its write queue was full or the store refused them.",
            ),
            recall_refused: counter(
                "compactd_recall_refused_total",
                "Conversations the store refused for what they held (the rest of their batch was kept); also counted as dropped.",
            ),
            cache_writes_dropped: counter(
                "compactd_summary_cache_writes_dropped_total",
                "Summaries kept in this replica's memory but not in the store's shared cache: its write queue was full or the store refused them.",
            ),
            anchors: counter_vec(
                "compactd_anchors_total",
                "Anchors the fidelity gate checked, by kind and outcome: kept by the model, \
                 repaired by the repair call, appended by compactd, missing from the summary.",
                &["kind", "outcome"],
            ),
            repair_calls: counter(
                "compactd_repair_calls_total",
                "Repair requests: a model asked once more for the critical anchors it left out.",
            ),
            redactions: counter_vec(
                "compactd_redactions_total",
                "Secrets replaced by placeholders before text left for a model or was returned, \
                 by rule.",
                &["rule"],
            ),
            summary_cache: counter_vec(
                "compactd_summary_cache_total",
                "Summary cache lookups: hit (from memory or the store) or miss.",
                &["outcome"],
            ),
            budget_exhausted: counter(
                "compactd_budget_exhausted_total",
                "Summaries the extractive summarizer wrote because the tenant's daily token budget \
                 was spent.",
            ),
            budget_unchecked: counter(
                "compactd_budget_unchecked_total",
                "Budget checks the store could not answer (applied as COMPACTD_BUDGET_WHEN_STORE_DOWN says).",
            ),
            loops: counter_vec(
                "compactd_loops_total",
                "Summarizations flagged as compaction loops, by endpoint.",
                &["endpoint"],
            ),
            upstream_cached_tokens: counter_vec(
                "compactd_upstream_cached_tokens_total",
                "Input tokens the provider read from its prompt cache, by model.",
                &["model"],
            ),
            registry,
        }
    }

    /// The exposition in Prometheus text format.
    /// The sum of a metric over all its label values (0 when nothing was counted).
    pub fn total(&self, name: &str) -> f64 {
        self.registry
            .gather()
            .iter()
            .filter(|family| family.name() == name)
            .flat_map(|family| family.get_metric())
            .map(|metric| metric.get_counter().get_value())
            .sum()
    }

    /// The value of a counter with one label set to `value`.
    pub fn labelled(&self, name: &str, label: &str, value: &str) -> f64 {
        self.registry
            .gather()
            .iter()
            .filter(|family| family.name() == name)
            .flat_map(|family| family.get_metric())
            .filter(|metric| {
                metric
                    .get_label()
                    .iter()
                    .any(|pair| pair.name() == label && pair.value() == value)
            })
            .map(|metric| metric.get_counter().get_value())
            .sum()
    }

    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .expect("text encoding does not fail");
        String::from_utf8(buffer).expect("the text format is UTF-8")
    }
}
