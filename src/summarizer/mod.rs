//! Summarizer backends and the fallback chain that routes a summarization request through them.
//!
//! * [`openai`]: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp
//!   server, LM Studio, OpenRouter…).
//! * [`anthropic`]: the Anthropic Messages API.
//! * [`extractive`]: built in, deterministic, no network; the default and the last resort.
//! * [`chain`]: tries the configured models in order with retries, backoff and a deadline.
//! * [`limiter`]: bounds concurrent summarizations and the queue in front of them.

pub mod anthropic;
pub mod chain;
pub mod extractive;
pub mod limiter;
pub mod openai;
pub mod shrink;

use std::time::Duration;

use serde::Serialize;

pub use chain::{Chain, ChainError, ChainEvent, Link, ModelSpec, RetryPolicy};
pub use limiter::{Busy, Limiter};

/// One summarization call: a system prompt, one user prompt, an output cap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryRequest {
    pub system_prompt: String,
    pub prompt: String,
    pub max_tokens: u64,
}

/// Token counts reported by the model (estimated for the extractive summarizer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
}

/// A finished summary and who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    /// `provider:model`, e.g. `openai:gpt-4.1-mini` or `extractive`.
    pub model: String,
    pub usage: TokenUsage,
}

/// Why one call to one model failed. Upstream error bodies are never kept whole: they can echo
/// the request, which holds the user's code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttemptError {
    #[error("rate limited (HTTP 429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("upstream server error (HTTP {status})")]
    Server {
        status: u16,
        retry_after: Option<Duration>,
    },
    #[error("timed out")]
    Timeout,
    #[error("connection failed")]
    Connection,
    #[error("malformed response: {0}")]
    Malformed(String),
    #[error("the model returned an empty summary")]
    Empty,
    #[error("the input is too long for the model")]
    ContextOverflow,
    #[error("rejected by the upstream (HTTP {status}, {kind})")]
    Rejected { status: u16, kind: String },
}

impl AttemptError {
    /// Worth trying the same model again: rate limits, server errors, timeouts, broken
    /// connections, garbage and empty answers. Rejections and overflows are not.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            AttemptError::ContextOverflow | AttemptError::Rejected { .. }
        )
    }

    /// The wait the upstream asked for.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::RateLimited { retry_after }
            | AttemptError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// A short label for logs and metrics.
    pub fn label(&self) -> &'static str {
        match self {
            AttemptError::RateLimited { .. } => "rate_limited",
            AttemptError::Server { .. } => "server_error",
            AttemptError::Timeout => "timeout",
            AttemptError::Connection => "connection_error",
            AttemptError::Malformed(_) => "malformed_response",
            AttemptError::Empty => "empty_summary",
            AttemptError::ContextOverflow => "context_overflow",
            AttemptError::Rejected { .. } => "rejected",
        }
    }
}

/// Classifies a transport error from reqwest.
fn transport_error(error: &reqwest::Error) -> AttemptError {
    if error.is_timeout() {
        AttemptError::Timeout
    } else if error.is_decode() || error.is_body() {
        AttemptError::Malformed("the response body could not be read".into())
    } else {
        AttemptError::Connection
    }
}

/// `Retry-After` in seconds (the HTTP-date form is rare from model APIs and is ignored).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    value
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The error fields of a non-2xx answer, in the `{"error": {"type", "code", "message"}}` shape
/// that both OpenAI and Anthropic use (missing fields read as empty).
struct ErrorReply {
    status: u16,
    headers: reqwest::header::HeaderMap,
    kind: String,
    code: String,
    message: String,
}

impl ErrorReply {
    /// The attempt error, given whether this provider reads the reply as a context overflow.
    fn into_error(self, overflow: impl FnOnce(&ErrorReply) -> bool) -> AttemptError {
        let overflow = overflow(&self);
        let kind = if self.kind.is_empty() {
            self.code
        } else {
            self.kind
        };
        status_error(self.status, &self.headers, kind, overflow)
    }
}

/// Sends a request and reads the whole answer: the body of a 2xx, or the error fields of any
/// other status. Transport failures are attempt errors.
async fn exchange(
    call: reqwest::RequestBuilder,
) -> Result<Result<axum::body::Bytes, ErrorReply>, AttemptError> {
    let response = call.send().await.map_err(|e| transport_error(&e))?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.map_err(|e| transport_error(&e))?;
    if (200..300).contains(&status) {
        return Ok(Ok(body));
    }
    let parsed = serde_json::from_slice::<serde_json::Value>(&body).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get("error"))
            .and_then(|e| e.get(name))
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Ok(Err(ErrorReply {
        status,
        headers,
        kind: field("type"),
        code: field("code"),
        message: field("message"),
    }))
}

/// Maps a non-2xx status to an error; `overflow` says whether the error body reports a context
/// overflow (each provider words it differently).
fn status_error(
    status: u16,
    headers: &reqwest::header::HeaderMap,
    kind: String,
    overflow: bool,
) -> AttemptError {
    match status {
        _ if overflow => AttemptError::ContextOverflow,
        413 => AttemptError::ContextOverflow,
        429 => AttemptError::RateLimited {
            retry_after: retry_after(headers),
        },
        408 | 409 | 500..=599 => AttemptError::Server {
            status,
            retry_after: retry_after(headers),
        },
        _ => AttemptError::Rejected { status, kind },
    }
}

/// Whether an error message reports that the input is too long, in the words providers use.
fn is_overflow_message(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "token limit",
        "input is too long",
        "too long for the model",
    ]
    .iter()
    .any(|needle| m.contains(needle))
}

/// The chain behind the limiter: what every caller (HTTP handlers, the compactor, the CLI) uses
/// to get a summary.
#[derive(Debug)]
pub struct Summarizer {
    pub chain: Chain,
    pub limiter: Limiter,
    pub metrics: std::sync::Arc<crate::metrics::Metrics>,
}

/// Why a summarization produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    #[error(transparent)]
    Busy(#[from] Busy),
    #[error(transparent)]
    Chain(#[from] ChainError),
}

impl Summarizer {
    pub fn new(
        chain: Chain,
        limiter: Limiter,
        metrics: std::sync::Arc<crate::metrics::Metrics>,
    ) -> Self {
        Summarizer {
            chain,
            limiter,
            metrics,
        }
    }

    /// Waits for a slot (within the deadline) and runs the chain; every attempt is logged and
    /// counted, without its text.
    pub async fn summarize(&self, request: &SummaryRequest) -> Result<Summary, SummarizeError> {
        let mut results = self.summarize_all(std::slice::from_ref(request)).await?;
        results.pop().expect("one result per request")
    }

    /// Several summarizations that belong together (the two parts of a split turn): admitted as
    /// one, with as many slots as the limiter allows (up to one each), so that they never
    /// compete with each other for a slot. Results come in the order of `requests`.
    pub async fn summarize_all(
        &self,
        requests: &[SummaryRequest],
    ) -> Result<Vec<Result<Summary, SummarizeError>>, SummarizeError> {
        let deadline = std::time::Instant::now() + self.chain.policy.deadline;
        let admitted = match tokio::time::timeout_at(
            deadline.into(),
            self.limiter.acquire_many(requests.len()),
        )
        .await
        {
            Ok(admitted) => admitted,
            Err(_) => Err(Busy),
        };
        let (_slots, parallel) = admitted.inspect_err(|_| self.metrics.rejections.inc())?;
        let mut results = Vec::with_capacity(requests.len());
        for batch in requests.chunks(parallel) {
            let calls: Vec<_> = batch
                .iter()
                .map(|request| self.run_chain(request, deadline))
                .collect();
            results.extend(futures_util::future::join_all(calls).await);
        }
        Ok(results)
    }

    async fn run_chain(
        &self,
        request: &SummaryRequest,
        deadline: std::time::Instant,
    ) -> Result<Summary, SummarizeError> {
        let metrics = &self.metrics;
        let summary = self
            .chain
            .summarize(request, deadline, |event| match event {
                ChainEvent::Attempt(attempt) => {
                    let latency_ms = attempt.latency.as_millis() as u64;
                    let outcome = attempt
                        .outcome
                        .as_ref()
                        .map_or_else(|e| e.label(), |()| "ok");
                    metrics
                        .upstream_calls
                        .with_label_values(&[attempt.model.as_str(), outcome])
                        .inc();
                    metrics
                        .upstream_duration
                        .with_label_values(&[attempt.model.as_str(), outcome])
                        .observe(attempt.latency.as_secs_f64());
                    match &attempt.outcome {
                        Ok(()) => {
                            tracing::info!(model = %attempt.model, latency_ms, "summary written")
                        }
                        Err(error) => tracing::warn!(
                            model = %attempt.model, latency_ms, outcome,
                            "summarizer attempt failed: {error}"
                        ),
                    }
                }
                ChainEvent::Fallback { from } => {
                    metrics.fallbacks.with_label_values(&[from.as_str()]).inc();
                }
            })
            .await?;
        for (direction, tokens) in [
            ("input", summary.usage.input_tokens),
            ("output", summary.usage.output_tokens),
        ] {
            self.metrics
                .upstream_tokens
                .with_label_values(&[summary.model.as_str(), direction])
                .inc_by(tokens);
        }
        Ok(summary)
    }
}
