//! Summarizer backends and the fallback chain that routes a summarization request through them.
//!
//! * [`openai`]: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp
//!   server, LM Studio, OpenRouter…).
//! * [`anthropic`]: the Anthropic Messages API.
//! * [`extractive`]: built in, deterministic, no network; the default and the last resort.
//! * [`chain`]: tries the configured models in order with retries, backoff and a deadline;
//!   [`fold`] fits a conversation longer than a model's window.
//!
//! Callers go through [`crate::pipeline`], which admits, runs the chain and observes it.

pub(crate) mod anthropic;
pub(crate) mod chain;
pub mod extractive;
pub(crate) mod fold;
pub(crate) mod link;
pub(crate) mod openai;
pub(crate) mod overflow;
pub(crate) mod spec;
pub(crate) mod stream;
pub(crate) mod window;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::fidelity::facts::Facts;
use crate::transcript::Shape;

pub use chain::{AttemptRecord, Chain, ChainError, ChainEvent, Link, RetryPolicy};
pub use spec::ModelSpec;

/// One summarization call: a system prompt, one user prompt, an output cap — and the prompt's
/// parts typed ([`Shape`], see [`SummaryRequest::shape`]), which every stage reads instead of the
/// text.
#[derive(Debug, Clone)]
pub struct SummaryRequest {
    pub system_prompt: String,
    pub prompt: String,
    pub max_tokens: u64,
    /// Given, or read from `prompt` at its first use: a request the summary cache answers is
    /// never read (reading an agent's conversation was a sixth of a cache hit's work). Shared by
    /// clones, so that it is read at most once per request; a request whose prompt is rewritten
    /// (redaction) gets its shape set with it.
    shape: Arc<OnceLock<Shape>>,
    /// The facts of the conversation, extracted at the first stage that needs them (the
    /// extractive summarizer, the fidelity gate) and then shared, as the shape is.
    facts: Arc<OnceLock<Facts>>,
}

impl PartialEq for SummaryRequest {
    fn eq(&self, other: &SummaryRequest) -> bool {
        self.system_prompt == other.system_prompt
            && self.prompt == other.prompt
            && self.max_tokens == other.max_tokens
            && self.shape() == other.shape()
    }
}

impl SummaryRequest {
    /// A request for an agent's prompt: its conversation is read at the first stage that needs
    /// it, once.
    pub fn from_prompt(system_prompt: String, prompt: String, max_tokens: u64) -> SummaryRequest {
        SummaryRequest {
            system_prompt,
            prompt,
            max_tokens,
            shape: Arc::default(),
            facts: Arc::default(),
        }
    }

    /// A request whose prompt was rendered from `shape` (nothing is read back).
    pub fn with_shape(
        system_prompt: String,
        prompt: String,
        max_tokens: u64,
        shape: Shape,
    ) -> SummaryRequest {
        SummaryRequest {
            system_prompt,
            prompt,
            max_tokens,
            shape: Arc::new(OnceLock::from(shape)),
            facts: Arc::default(),
        }
    }

    /// The prompt's parts, typed: read from the prompt here the first time it is asked for.
    pub fn shape(&self) -> &Shape {
        self.shape.get_or_init(|| Shape::of_prompt(&self.prompt))
    }

    /// Whether the shape was given or read yet (tests of the stages that must not read it).
    #[cfg(test)]
    pub(crate) fn shape_is_read(&self) -> bool {
        self.shape.get().is_some()
    }

    /// Replaces the shape (of a prompt that was rewritten).
    pub fn set_shape(&mut self, shape: Shape) {
        self.shape = Arc::new(OnceLock::from(shape));
        self.facts = Arc::default();
    }

    /// The facts of the conversation: extracted here the first time they are asked for, once
    /// per request however many stages read them.
    pub fn facts(&self) -> &Facts {
        self.facts
            .get_or_init(|| Facts::extract(&self.shape().conversation.messages))
    }

    /// A request for a prompt compactd rendered from `conversation`: its layout is taken from
    /// the prompt, its conversation is the typed one it was written from.
    pub fn rendered(
        system_prompt: String,
        prompt: String,
        max_tokens: u64,
        conversation: crate::transcript::Conversation,
    ) -> SummaryRequest {
        let shape = Shape::of_rendered(&prompt, conversation);
        SummaryRequest::with_shape(system_prompt, prompt, max_tokens, shape)
    }

    /// A request that carries no conversation (a repair request).
    pub fn plain(system_prompt: String, prompt: String, max_tokens: u64) -> SummaryRequest {
        SummaryRequest::with_shape(system_prompt, prompt, max_tokens, Shape::none())
    }
}

/// Token counts reported by the model (estimated for the extractive summarizer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input tokens, those the provider read from its prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TokenUsage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> TokenUsage {
        TokenUsage {
            input_tokens,
            output_tokens,
            cached_input_tokens: 0,
        }
    }

    /// The usage of two calls together.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_input_tokens: self.cached_input_tokens + other.cached_input_tokens,
        }
    }
}

/// How the line that ends a summary whose conversation recall kept starts (`app::recall`).
pub const RECALL_LINE_START: &str = "Earlier detail is searchable:";

/// What the pipeline's stages did to a summary besides writing it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Answered from the summary cache: no model was asked.
    pub cached: bool,
    /// The tenant's daily token budget is spent: the extractive summarizer wrote it.
    pub budget_exhausted: bool,
    /// The request looks like a compaction loop.
    pub loop_detected: bool,
    /// Secrets replaced by placeholders in what was sent and what came back.
    pub redactions: u64,
    /// A conversation folded over windows whose model finished only some before the deadline:
    /// (windows the model summarized, windows); the extractive summarizer carried its summary
    /// through the rest.
    pub model_windows: Option<(u32, u32)>,
    /// The recall id its conversation was kept under (wire requests; see `app::recall`).
    pub recall_id: Option<String>,
    /// The summary cache's key of the request (when the cache is on), on a hit and a miss alike:
    /// the same key is the same prompt, so recall finds the conversation it kept for it by this
    /// key without reading the prompt again.
    pub cache_key: Option<String>,
}

/// A finished summary and who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    /// `provider:model`, e.g. `openai:gpt-4.1-mini` or `extractive`.
    pub model: String,
    pub usage: TokenUsage,
    /// What the fidelity gate found and did; `None` until the summary has been through it.
    pub fidelity: Option<crate::fidelity::Report>,
    pub flags: Flags,
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

/// Whether a summary says nothing: empty once whitespace and zero-width characters (which models
/// sometimes emit alone) are removed. Such an answer is a failed attempt, never a summary.
pub use crate::fidelity::gate::is_blank;

/// A model's text made safe to store and return: NUL characters (which no database text column
/// holds and no agent wants) removed.
pub(crate) fn clean(mut text: String) -> String {
    if text.contains('\0') {
        text.retain(|c| c != '\0');
    }
    text
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
