//! The fallback chain: the configured models tried in order, each with a per-attempt timeout and
//! retries (exponential backoff with full jitter, honouring `Retry-After`), all inside one overall
//! deadline that stays below the agent's 180 s timeout.

use std::time::{Duration, Instant};

use super::anthropic::AnthropicClient;
use super::extractive;
use super::openai::OpenAiClient;
use super::shrink;
use super::{AttemptError, Summary, SummaryRequest};

/// Times a model that reports an overflow is asked again with half the conversation.
const MAX_SHRINKS: u32 = 2;

/// Prompts below this size are summarized extractively on the request's own task.
const INLINE_EXTRACTIVE_BYTES: usize = 64 * 1024;

/// A link of the chain as configured: `openai:MODEL`, `anthropic:MODEL` or `extractive`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelSpec {
    OpenAi(String),
    Anthropic(String),
    Extractive,
}

impl std::str::FromStr for ModelSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        match text.split_once(':') {
            None if text == "extractive" => Ok(ModelSpec::Extractive),
            Some(("openai", model)) if !model.is_empty() => Ok(ModelSpec::OpenAi(model.to_owned())),
            Some(("anthropic", model)) if !model.is_empty() => {
                Ok(ModelSpec::Anthropic(model.to_owned()))
            }
            _ => Err(format!(
                "{text:?} is not a model: use openai:MODEL, anthropic:MODEL or extractive \
                 (Ollama, vLLM, LM Studio and OpenRouter are openai: with COMPACTD_OPENAI_BASE_URL)"
            )),
        }
    }
}

impl std::fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelSpec::OpenAi(model) => write!(f, "openai:{model}"),
            ModelSpec::Anthropic(model) => write!(f, "anthropic:{model}"),
            ModelSpec::Extractive => f.write_str("extractive"),
        }
    }
}

/// A model with the client that reaches it.
#[derive(Debug, Clone)]
pub enum Link {
    OpenAi {
        client: OpenAiClient,
        model: String,
    },
    Anthropic {
        client: AnthropicClient,
        model: String,
    },
    Extractive,
}

impl Link {
    pub fn name(&self) -> String {
        match self {
            Link::OpenAi { model, .. } => format!("openai:{model}"),
            Link::Anthropic { model, .. } => format!("anthropic:{model}"),
            Link::Extractive => "extractive".to_owned(),
        }
    }

    async fn attempt(&self, request: &SummaryRequest) -> Result<Summary, AttemptError> {
        match self {
            Link::OpenAi { client, model } => client.complete(model, request).await,
            Link::Anthropic { client, model } => client.complete(model, request).await,
            // Small prompts take microseconds: a hand-off to the blocking pool would cost more
            // than the work. Large ones (up to megabytes) stay off the async workers.
            Link::Extractive if request.prompt.len() < INLINE_EXTRACTIVE_BYTES => {
                Ok(extractive::summarize(request))
            }
            Link::Extractive => {
                let request = request.clone();
                tokio::task::spawn_blocking(move || extractive::summarize(&request))
                    .await
                    .map_err(|_| AttemptError::Malformed("the extractive summarizer failed".into()))
            }
        }
    }
}

/// Timeouts and retries of upstream calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Limit of one call to one model.
    pub attempt_timeout: Duration,
    /// Retries of the same model after the first attempt.
    pub max_retries: u32,
    /// First backoff; doubles with each retry, with full jitter.
    pub base_backoff: Duration,
    /// Longest single wait, including a `Retry-After`.
    pub max_backoff: Duration,
    /// Limit of the whole chain for one request, queueing included.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempt_timeout: Duration::from_secs(60),
            max_retries: 2,
            base_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(20),
            deadline: Duration::from_secs(150),
        }
    }
}

/// Why the chain produced no summary.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    /// Every model that answered said the input is too long.
    #[error("the input is too long for every configured model")]
    ContextOverflow,
    /// Every model failed; `retry_after` is a hint for the client.
    #[error("no model could summarize: {last}")]
    Exhausted {
        last: AttemptError,
        retry_after: Duration,
    },
    /// The deadline passed before any model answered.
    #[error("no summary within the deadline")]
    DeadlineExceeded,
}

/// What happened on one attempt, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRecord {
    pub model: String,
    pub outcome: Result<(), AttemptError>,
    pub latency: Duration,
}

/// What the chain reports while it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainEvent {
    /// One call to one model ended.
    Attempt(AttemptRecord),
    /// The chain gave up on `from` and moves on to the next model.
    Fallback { from: String },
}

/// The configured models in order.
#[derive(Debug, Clone)]
pub struct Chain {
    pub links: Vec<Link>,
    pub policy: RetryPolicy,
}

impl Chain {
    pub fn new(links: Vec<Link>, policy: RetryPolicy) -> Self {
        Chain { links, policy }
    }

    /// Names of the links, in order.
    pub fn names(&self) -> Vec<String> {
        self.links.iter().map(Link::name).collect()
    }

    /// Runs the chain until one model produces a non-empty summary or `deadline` passes.
    /// `on_event` sees every attempt as it ends, and every move to the next model.
    pub async fn summarize(
        &self,
        request: &SummaryRequest,
        deadline: Instant,
        mut on_event: impl FnMut(ChainEvent),
    ) -> Result<Summary, ChainError> {
        let mut last_error: Option<AttemptError> = None;
        let mut only_overflows = true;
        let mut longest_retry_after = Duration::ZERO;
        for (index, link) in self.links.iter().enumerate() {
            if index > 0 {
                on_event(ChainEvent::Fallback {
                    from: self.links[index - 1].name(),
                });
            }
            // A model that says the prompt is too long is asked again with a smaller
            // conversation (spec §10.4); the next model starts from the whole prompt.
            let mut current = std::borrow::Cow::Borrowed(request);
            let mut shrinks = 0;
            for attempt in 0..=self.policy.max_retries {
                let now = Instant::now();
                // The extractive summarizer takes milliseconds and cannot fail by timing out: it
                // runs even when the deadline is close, so a chain ending in it always answers.
                let remaining = deadline.saturating_duration_since(now);
                if remaining.is_zero() && !matches!(link, Link::Extractive) {
                    break;
                }
                let limit = match link {
                    Link::Extractive => self.policy.attempt_timeout,
                    _ => self.policy.attempt_timeout.min(remaining),
                };
                let result = match tokio::time::timeout(limit, link.attempt(&current)).await {
                    Ok(Ok(summary)) if summary.text.trim().is_empty() => Err(AttemptError::Empty),
                    Ok(result) => result,
                    Err(_) => Err(AttemptError::Timeout),
                };
                on_event(ChainEvent::Attempt(AttemptRecord {
                    model: link.name(),
                    outcome: result.as_ref().map(|_| ()).map_err(Clone::clone),
                    latency: now.elapsed(),
                }));
                let error = match result {
                    Ok(summary) => return Ok(summary),
                    Err(error) => error,
                };
                only_overflows &= error == AttemptError::ContextOverflow;
                if error == AttemptError::ContextOverflow
                    && shrinks < MAX_SHRINKS
                    && let Some(prompt) = shrink::shrink_conversation(&current.prompt, 0.5)
                {
                    shrinks += 1;
                    current = std::borrow::Cow::Owned(SummaryRequest {
                        prompt,
                        ..request.clone()
                    });
                    last_error = Some(error);
                    continue;
                }
                let retryable = error.is_retryable();
                let asked = error.retry_after();
                last_error = Some(error);
                if !retryable || attempt == self.policy.max_retries {
                    break;
                }
                let delay = asked.unwrap_or_else(|| self.backoff(attempt));
                longest_retry_after = longest_retry_after.max(delay);
                // A wait that would outlast the deadline or the backoff cap goes to the next model.
                if delay > self.policy.max_backoff || Instant::now() + delay >= deadline {
                    break;
                }
                tokio::time::sleep(delay).await;
            }
        }
        match last_error {
            None => Err(ChainError::DeadlineExceeded),
            Some(_) if only_overflows => Err(ChainError::ContextOverflow),
            Some(AttemptError::Timeout) if Instant::now() >= deadline => {
                Err(ChainError::DeadlineExceeded)
            }
            Some(last) => Err(ChainError::Exhausted {
                last,
                retry_after: longest_retry_after.max(Duration::from_secs(1)),
            }),
        }
    }

    /// Full jitter: a random wait between 0 and `base × 2^attempt`, capped.
    fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self
            .policy
            .base_backoff
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.policy.max_backoff);
        ceiling.mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_specs_parse_and_print() {
        assert_eq!(
            "openai:gpt-4.1-mini".parse(),
            Ok(ModelSpec::OpenAi("gpt-4.1-mini".into()))
        );
        assert_eq!(
            " anthropic:claude-haiku-4-5".parse(),
            Ok(ModelSpec::Anthropic("claude-haiku-4-5".into()))
        );
        assert_eq!("extractive".parse(), Ok(ModelSpec::Extractive));
        assert_eq!(
            "openai:a:b".parse::<ModelSpec>().unwrap().to_string(),
            "openai:a:b"
        );
        for bad in ["", "ollama:llama3", "openai:", "gpt-4"] {
            assert!(bad.parse::<ModelSpec>().is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn an_extractive_chain_always_answers() {
        let chain = Chain::new(vec![Link::Extractive], RetryPolicy::default());
        let request = SummaryRequest {
            system_prompt: String::new(),
            prompt: "<conversation>\n[User]: fix src/main.rs\n</conversation>\n\n## Goal".into(),
            max_tokens: 1000,
        };
        let mut seen = Vec::new();
        let summary = chain
            .summarize(&request, Instant::now(), |a| seen.push(a.clone()))
            .await
            .unwrap();
        assert_eq!(summary.model, "extractive");
        assert!(summary.text.contains("src/main.rs"));
        assert_eq!(seen.len(), 1);
    }
}
