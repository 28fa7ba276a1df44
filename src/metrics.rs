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
    pub prepared: IntCounterVec,
    pub preparing: IntGauge,
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
        let registrar = Registrar {
            registry: Registry::new(),
        };
        Metrics {
            http_requests: registrar.counter_vec(&HTTP_REQUESTS),
            http_duration: registrar.histogram_vec(&HTTP_DURATION),
            upstream_calls: registrar.counter_vec(&UPSTREAM_CALLS),
            upstream_duration: registrar.histogram_vec(&UPSTREAM_DURATION),
            upstream_tokens: registrar.counter_vec(&UPSTREAM_TOKENS),
            fallbacks: registrar.counter_vec(&FALLBACKS),
            tokens_saved: registrar.counter(&TOKENS_SAVED),
            compactions: registrar.counter_vec(&COMPACTIONS),
            queue_depth: registrar.gauge(&QUEUE_DEPTH),
            in_flight: registrar.gauge(&IN_FLIGHT),
            session_index_bytes: registrar.gauge(&SESSION_INDEX_BYTES),
            rejections: registrar.counter(&REJECTIONS),
            call_log_dropped: registrar.counter(&CALL_LOG_DROPPED),
            recall_dropped: registrar.counter(&RECALL_DROPPED),
            recall_refused: registrar.counter(&RECALL_REFUSED),
            cache_writes_dropped: registrar.counter(&CACHE_WRITES_DROPPED),
            anchors: registrar.counter_vec(&ANCHORS),
            repair_calls: registrar.counter(&REPAIR_CALLS),
            redactions: registrar.counter_vec(&REDACTIONS),
            summary_cache: registrar.counter_vec(&SUMMARY_CACHE),
            budget_exhausted: registrar.counter(&BUDGET_EXHAUSTED),
            budget_unchecked: registrar.counter(&BUDGET_UNCHECKED),
            loops: registrar.counter_vec(&LOOPS),
            upstream_cached_tokens: registrar.counter_vec(&UPSTREAM_CACHED_TOKENS),
            prepared: registrar.counter_vec(&PREPARED),
            preparing: registrar.gauge(&PREPARING),
            registry: registrar.registry,
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

/// A metric's name, help text and labels (none for a plain counter or gauge).
struct Def {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
}

impl Def {
    const fn plain(name: &'static str, help: &'static str) -> Def {
        Def {
            name,
            help,
            labels: &[],
        }
    }

    const fn labelled(
        name: &'static str,
        help: &'static str,
        labels: &'static [&'static str],
    ) -> Def {
        Def { name, help, labels }
    }
}

/// Makes each metric and registers it once.
struct Registrar {
    registry: Registry,
}

impl Registrar {
    fn register<M: prometheus::core::Collector + Clone + 'static>(&self, metric: M) -> M {
        self.registry
            .register(Box::new(metric.clone()))
            .expect("registered once");
        metric
    }

    fn counter_vec(&self, def: &Def) -> IntCounterVec {
        let metric = IntCounterVec::new(Opts::new(def.name, def.help), def.labels);
        self.register(metric.expect("a valid metric"))
    }

    fn histogram_vec(&self, def: &Def) -> HistogramVec {
        let opts = HistogramOpts::new(def.name, def.help).buckets(BUCKETS.to_vec());
        self.register(HistogramVec::new(opts, def.labels).expect("a valid metric"))
    }

    fn counter(&self, def: &Def) -> IntCounter {
        self.register(IntCounter::new(def.name, def.help).expect("a valid metric"))
    }

    fn gauge(&self, def: &Def) -> IntGauge {
        self.register(IntGauge::new(def.name, def.help).expect("a valid metric"))
    }
}

// What each metric is.

const HTTP_REQUESTS: Def = Def::labelled(
    "compactd_http_requests_total",
    "HTTP requests answered, by route, method and status.",
    &["route", "method", "status"],
);

const HTTP_DURATION: Def = Def::labelled(
    "compactd_http_request_duration_seconds",
    "Time to answer an HTTP request, by route, method and status.",
    &["route", "method", "status"],
);

const UPSTREAM_CALLS: Def = Def::labelled(
    "compactd_upstream_calls_total",
    "Summarizer calls, by model and outcome (ok or the failure kind).",
    &["model", "outcome"],
);

const UPSTREAM_DURATION: Def = Def::labelled(
    "compactd_upstream_call_duration_seconds",
    "Duration of summarizer calls, by model and outcome.",
    &["model", "outcome"],
);

const UPSTREAM_TOKENS: Def = Def::labelled(
    "compactd_upstream_tokens_total",
    "Tokens of successful summarizer calls, by model and direction (input, output).",
    &["model", "direction"],
);

const FALLBACKS: Def = Def::labelled(
    "compactd_fallbacks_total",
    "Times the chain moved on from a model to the next one, by the model given up on.",
    &["from_model"],
);

const TOKENS_SAVED: Def = Def::plain(
    "compactd_compaction_tokens_saved_total",
    "Context tokens removed by compactions compactd wrote (estimate before minus after).",
);

const COMPACTIONS: Def = Def::labelled(
    "compactd_compactions_total",
    "Compactions compactd served, by the agent and the wire they came by: summaries answered on an agent's wire, and compaction entries appended to stored sessions (agent pi, wire session).",
    &["agent", "wire"],
);

const QUEUE_DEPTH: Def = Def::plain(
    "compactd_summarizer_queue_depth",
    "Summarizations waiting for a slot.",
);

const IN_FLIGHT: Def = Def::plain("compactd_summarizer_in_flight", "Summarizations running.");

const SESSION_INDEX_BYTES: Def = Def::plain(
    "compactd_session_index_bytes",
    "Memory held by the indexes of stored sessions (approximate; bounded by COMPACTD_INDEX_CACHE_BYTES).",
);

const REJECTIONS: Def = Def::plain(
    "compactd_summarizer_rejections_total",
    "Summarizations refused with 429 because the queue was full.",
);

const CALL_LOG_DROPPED: Def = Def::plain(
    "compactd_call_log_dropped_total",
    "Call-log rows dropped because the log queue was full.",
);

const RECALL_DROPPED: Def = Def::plain(
    "compactd_recall_dropped_total",
    "Conversations not kept for recall: its write queue was full or the store refused them.",
);

const RECALL_REFUSED: Def = Def::plain(
    "compactd_recall_refused_total",
    "Conversations the store refused for what they held (the rest of their batch was kept); also counted as dropped.",
);

const CACHE_WRITES_DROPPED: Def = Def::plain(
    "compactd_summary_cache_writes_dropped_total",
    "Summaries kept in this replica's memory but not in the store's shared cache: its write queue was full or the store refused them.",
);

const ANCHORS: Def = Def::labelled(
    "compactd_anchors_total",
    "Anchors the fidelity gate checked, by kind and outcome: kept by the model, \
                 repaired by the repair call, appended by compactd, missing from the summary.",
    &["kind", "outcome"],
);

const REPAIR_CALLS: Def = Def::plain(
    "compactd_repair_calls_total",
    "Repair requests: a model asked once more for the critical anchors it left out.",
);

const REDACTIONS: Def = Def::labelled(
    "compactd_redactions_total",
    "Secrets replaced by placeholders before text left for a model or was returned, \
                 by rule.",
    &["rule"],
);

const SUMMARY_CACHE: Def = Def::labelled(
    "compactd_summary_cache_total",
    "Summary cache lookups: hit (from memory or the store) or miss.",
    &["outcome"],
);

const BUDGET_EXHAUSTED: Def = Def::plain(
    "compactd_budget_exhausted_total",
    "Summaries the extractive summarizer wrote because the tenant's daily token budget \
                 was spent.",
);

const BUDGET_UNCHECKED: Def = Def::plain(
    "compactd_budget_unchecked_total",
    "Budget checks the store could not answer (applied as COMPACTD_BUDGET_WHEN_STORE_DOWN says).",
);

const LOOPS: Def = Def::labelled(
    "compactd_loops_total",
    "Summarizations flagged as compaction loops, by endpoint.",
    &["endpoint"],
);

const PREPARED: Def = Def::labelled(
    "compactd_prepared_summaries_total",
    "Summaries prepared ahead of an agent session's compaction, by outcome: prepared (made and \
     kept), refreshed (made again over a longer prefix), used (a compaction answered from one), \
     wasted (a compaction whose prefix no longer matched, or a focus of its own), failed.",
    &["outcome"],
);

const PREPARING: Def = Def::plain(
    "compactd_preparing",
    "Agent sessions whose summary is being prepared ahead now (from the turn that started it).",
);

const UPSTREAM_CACHED_TOKENS: Def = Def::labelled(
    "compactd_upstream_cached_tokens_total",
    "Input tokens the provider read from its prompt cache, by model.",
    &["model"],
);
