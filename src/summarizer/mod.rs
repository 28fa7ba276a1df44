//! Summarizer backends and the fallback chain that routes a summarization request through them.
//!
//! * [`openai`]: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp
//!   server, LM Studio, OpenRouter…).
//! * [`anthropic`]: the Anthropic Messages API.
//! * [`extractive`] (in the core crate): built in, deterministic, no network; the default and the
//!   last resort.
//! * [`chain`]: tries the configured models in order with retries, backoff and a deadline;
//!   [`fold`] fits a conversation longer than a model's window.
//!
//! Callers go through [`crate::pipeline`], which admits, runs the chain and observes it.

pub(crate) mod anthropic;
pub(crate) mod chain;
pub(crate) mod fold;
pub(crate) mod link;
pub(crate) mod openai;
pub(crate) mod overflow;
pub(crate) mod spec;
pub(crate) mod stream;
pub(crate) mod window;

use std::time::Duration;

pub use chain::{AttemptRecord, Chain, ChainError, ChainEvent, Link, RetryPolicy};
pub use compactd_core::extractive;
pub use compactd_core::summary::{
    Flags, RECALL_LINE_START, Summary, SummaryRequest, TokenUsage, clean, is_blank,
};
pub use spec::ModelSpec;

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
    /// An answer that is no summary: a refusal, or none of the structure the prompt asked for.
    #[error("the answer is no summary ({0})")]
    Unusable(&'static str),
    #[error("the input is too long for the model")]
    ContextOverflow(overflow::Overflow),
    #[error("rejected by the upstream (HTTP {status}, {kind})")]
    Rejected { status: u16, kind: String },
}

impl AttemptError {
    /// Worth trying the same model again: rate limits, server errors, timeouts, broken
    /// connections, garbage and empty answers. Rejections and overflows are not.
    pub fn is_retryable(&self) -> bool {
        !matches!(
            self,
            AttemptError::ContextOverflow(_)
                | AttemptError::Rejected { .. }
                | AttemptError::Unusable(_)
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
            AttemptError::Unusable(_) => "unusable_summary",
            AttemptError::ContextOverflow(_) => "context_overflow",
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

/// Largest upstream answer read. A summary is at most tens of kilobytes (the output cap is
/// `COMPACTD_MAX_OUTPUT_TOKENS`); anything far larger is a broken or hostile upstream, and reading
/// it whole would cost memory for every request in flight.
pub const MAX_UPSTREAM_BYTES: usize = 4 * 1024 * 1024;

/// Reads a response body, failing once it passes [`MAX_UPSTREAM_BYTES`] (checked against the
/// declared length first, then as it arrives).
async fn bounded_body(mut response: reqwest::Response) -> Result<Vec<u8>, AttemptError> {
    let too_large = || {
        AttemptError::Malformed(format!(
            "the response is larger than {MAX_UPSTREAM_BYTES} bytes"
        ))
    };
    if response
        .content_length()
        .is_some_and(|n| n > MAX_UPSTREAM_BYTES as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| transport_error(&e))? {
        if body.len() + chunk.len() > MAX_UPSTREAM_BYTES {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Sends a request and returns the response of a 2xx status; any other status is read (bounded)
/// and classified. Headers must arrive before `due`.
async fn send(
    call: reqwest::RequestBuilder,
    due: std::time::Instant,
) -> Result<reqwest::Response, AttemptError> {
    let response = tokio::time::timeout_at(due.into(), call.send())
        .await
        .map_err(|_| AttemptError::Timeout)?
        .map_err(|e| transport_error(&e))?;
    let status = response.status().as_u16();
    if (200..300).contains(&status) {
        return Ok(response);
    }
    let headers = response.headers().clone();
    let body = tokio::time::timeout_at(due.into(), bounded_body(response))
        .await
        .map_err(|_| AttemptError::Timeout)??;
    Err(classify(status, &headers, &body))
}

/// Reads a whole (non-streamed) 2xx body before `deadline`.
async fn read_body(
    response: reqwest::Response,
    deadline: std::time::Instant,
) -> Result<Vec<u8>, AttemptError> {
    tokio::time::timeout_at(deadline.into(), bounded_body(response))
        .await
        .map_err(|_| AttemptError::Timeout)?
}

/// Maps a non-2xx answer to an attempt error. Upstream error bodies are read for their type, code
/// and message only (never kept: they can echo the prompt).
fn classify(status: u16, headers: &reqwest::header::HeaderMap, body: &[u8]) -> AttemptError {
    let fields = overflow::ErrorFields::read(body);
    if let Some(overflow) = fields.overflow(status) {
        return AttemptError::ContextOverflow(overflow);
    }
    match status {
        429 => AttemptError::RateLimited {
            retry_after: retry_after(headers),
        },
        408 | 409 | 500..=599 => AttemptError::Server {
            status,
            retry_after: retry_after(headers),
        },
        _ => AttemptError::Rejected {
            status,
            kind: if fields.kind.is_empty() {
                fields.code
            } else {
                fields.kind
            },
        },
    }
}
