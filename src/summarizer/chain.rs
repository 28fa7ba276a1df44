//! The fallback chain: the configured models tried in order, each with retries (exponential
//! backoff with full jitter, honouring `Retry-After`), all inside one overall deadline that stays
//! below the agent's 180 s timeout. Answers are streamed: an attempt ends when the first token is
//! late or the model stops writing ([`super::stream`]), not after a fixed time. A request is fitted
//! to the model's context window before it is sent ([`super::window`]): its output capped, and a
//! conversation too long for the window folded ([`super::fold`]); a model that reports an
//! overflow teaches the chain its window, and the request is fitted again. An answer that is no
//! summary (blank, a refusal, none of the asked structure: [`compactd_core::fidelity::gate`]) is a failed
//! attempt.

use compactd_core::redact::Redacted;
use std::time::{Duration, Instant};

use super::fold::{Fold, FoldPrompts};
pub use super::link::Link;
use super::stream::Timing;
use super::window::{self, Learnt};
use super::{AttemptError, Summary, SummaryRequest};
use compactd_core::fidelity::gate::{self, Expectation};
use compactd_core::transcript::estimate_tokens;

/// Times a model that reports an overflow is asked again, fitted to what it said.
const MAX_REFITS: u32 = 2;

/// Longest the extractive summarizer may take (it takes milliseconds; this only guards a bug).
const EXTRACTIVE_LIMIT: Duration = Duration::from_secs(30);

/// Timeouts and retries of upstream calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// From sending a request to the model's first token.
    pub first_token_timeout: Duration,
    /// Longest pause between two tokens of an answer.
    pub idle_timeout: Duration,
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
            first_token_timeout: Duration::from_secs(90),
            idle_timeout: Duration::from_secs(30),
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
#[derive(Debug)]
pub struct Chain {
    pub links: Vec<Link>,
    pub policy: RetryPolicy,
    /// Windows learned from the overflows models reported.
    learnt: Learnt,
    /// The instructions of folded windows.
    fold_prompts: FoldPrompts,
}

/// How a request goes to one model.
enum Fitted<'r> {
    /// In one call (its output cap lowered to the window when needed).
    Whole(std::borrow::Cow<'r, SummaryRequest>),
    /// Folded over windows.
    Folded(Fold<'r>, u64),
}

impl Fitted<'_> {
    /// How the request goes: the number of calls and the output cap.
    fn shape(&self) -> (usize, u64) {
        match self {
            Fitted::Whole(request) => (1, request.max_tokens),
            Fitted::Folded(fold, max_tokens) => (fold.len(), *max_tokens),
        }
    }
}

/// Why one model produced no summary.
struct LinkFailure {
    error: AttemptError,
    /// Tokens (estimated) of the prompt that failed, to learn from an overflow.
    sent_tokens: u64,
    /// The longest wait an upstream asked for.
    retry_after: Duration,
}

impl Chain {
    pub(crate) fn new(links: Vec<Link>, policy: RetryPolicy) -> Self {
        Chain {
            links,
            policy,
            learnt: Learnt::default(),
            fold_prompts: FoldPrompts::default(),
        }
    }

    /// The chain folding with these instructions (compactd's templates, as configured).
    pub(crate) fn with_fold_prompts(mut self, prompts: FoldPrompts) -> Self {
        self.fold_prompts = prompts;
        self
    }

    /// Names of the links, in order.
    pub fn names(&self) -> Vec<String> {
        self.links.iter().map(Link::name).collect()
    }

    /// How `request` goes to `link`, as far as its window is known: whole (the output capped),
    /// or folded when the conversation does not fit.
    fn fit<'r>(&self, link: &Link, request: &'r SummaryRequest) -> Fitted<'r> {
        let learned = self.learnt.get(&link.name());
        let Some(window) = link.window().or(learned.and_then(|l| l.window)) else {
            return Fitted::Whole(std::borrow::Cow::Borrowed(request));
        };
        let ratio = learned.map_or(window::DEFAULT_RATIO, |l| l.ratio);
        let budget = window::prompt_budget(window, request, ratio);
        let max_tokens = window::output_cap(request.max_tokens, window);
        // A previous summary of up to `max_tokens` model tokens, in estimated tokens.
        let summary_estimate = (max_tokens as f64 / ratio.max(0.1)).ceil() as u64;
        if estimate_tokens(&request.prompt) > budget
            && let Some(fold) = Fold::plan(request, budget, summary_estimate, &self.fold_prompts)
        {
            return Fitted::Folded(fold, max_tokens);
        }
        if max_tokens == request.max_tokens {
            return Fitted::Whole(std::borrow::Cow::Borrowed(request));
        }
        Fitted::Whole(std::borrow::Cow::Owned(request.with_max_tokens(max_tokens)))
    }

    /// Runs the chain until one model produces a summary or `deadline` passes. `on_event` sees
    /// every attempt as it ends, and every move to the next model.
    pub(crate) async fn summarize(
        &self,
        request: Redacted<&SummaryRequest>,
        deadline: Instant,
        mut on_event: impl FnMut(ChainEvent),
    ) -> Result<Summary, ChainError> {
        // Only a redacted request reaches a model: what the links and folds below send is this
        // request or its parts.
        let request = request.into_inner();
        let mut last_error: Option<AttemptError> = None;
        let mut only_overflows = true;
        let mut longest_retry_after = Duration::ZERO;
        for (index, link) in self.links.iter().enumerate() {
            if index > 0 {
                on_event(ChainEvent::Fallback {
                    from: self.links[index - 1].name(),
                });
            }
            // Each model starts from the whole request, fitted to its own window.
            match self.run_link(link, request, deadline, &mut on_event).await {
                Ok(summary) => return Ok(summary),
                Err(failure) => {
                    only_overflows &= matches!(failure.error, AttemptError::ContextOverflow(_));
                    longest_retry_after = longest_retry_after.max(failure.retry_after);
                    last_error = Some(failure.error);
                }
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

    /// One more call to the model named `model` (a link of the chain), without retries or
    /// folding: the fidelity gate's repair request.
    pub(crate) async fn ask(
        &self,
        model: &str,
        request: Redacted<&SummaryRequest>,
        deadline: Instant,
        mut on_event: impl FnMut(ChainEvent),
    ) -> Result<Summary, AttemptError> {
        let request = request.into_inner();
        let Some(link) = self.links.iter().find(|l| l.name() == model) else {
            return Err(AttemptError::Rejected {
                status: 0,
                kind: "unknown_model".into(),
            });
        };
        let request = match self.fit(link, request) {
            Fitted::Whole(request) => request,
            Fitted::Folded(..) => return Err(AttemptError::ContextOverflow(Default::default())),
        };
        let expect = Expectation::of(request.shape());
        self.attempt(link, &request, &expect, deadline, &mut on_event)
            .await
    }

    /// Everything one model gets: the request fitted to its window (whole or folded), fitted
    /// again after an overflow that taught the window.
    async fn run_link(
        &self,
        link: &Link,
        request: &SummaryRequest,
        deadline: Instant,
        on_event: &mut impl FnMut(ChainEvent),
    ) -> Result<Summary, LinkFailure> {
        let mut refits = 0;
        let mut tried: Option<(usize, u64)> = None;
        let mut last_failure: Option<LinkFailure> = None;
        loop {
            let fitted = self.fit(link, request);
            let shape = fitted.shape();
            // Learning changed nothing about how the request goes: asking again would fail alike.
            if tried == Some(shape)
                && let Some(failure) = last_failure
            {
                return Err(failure);
            }
            tried = Some(shape);
            let result = match fitted {
                Fitted::Whole(request) => {
                    let expect = Expectation::of(request.shape());
                    self.call(link, &request, &expect, deadline, on_event).await
                }
                Fitted::Folded(fold, max_tokens) => {
                    self.fold(link, request, &fold, max_tokens, deadline, on_event)
                        .await
                }
            };
            match result {
                Err(failure) if refits < MAX_REFITS => {
                    let AttemptError::ContextOverflow(overflow) = &failure.error else {
                        return Err(failure);
                    };
                    self.learnt.learn(
                        &link.name(),
                        overflow.window,
                        overflow.prompt_tokens,
                        failure.sent_tokens,
                    );
                    if self
                        .learnt
                        .get(&link.name())
                        .and_then(|l| l.window)
                        .is_none()
                        && link.window().is_none()
                    {
                        // It said nothing of its window: take it for half of what was sent.
                        self.learnt
                            .assume_window(&link.name(), failure.sent_tokens / 2);
                    }
                    refits += 1;
                    last_failure = Some(failure);
                }
                other => return other,
            }
        }
    }

    /// The windows of a fold in order, each with the summary so far as its previous summary.
    async fn fold(
        &self,
        link: &Link,
        request: &SummaryRequest,
        fold: &Fold<'_>,
        max_tokens: u64,
        deadline: Instant,
        on_event: &mut impl FnMut(ChainEvent),
    ) -> Result<Summary, LinkFailure> {
        let mut running: Option<Summary> = None;
        for index in 0..fold.len() {
            let window = fold.window(
                index,
                running.as_ref().map(|s| s.text.as_str()),
                &self.fold_prompts,
                &request.system_prompt,
                max_tokens,
            );
            // Only the last window's answer is the summary: it must have the asked structure;
            // the ones before only carry the story on, in whatever form the model wrote them.
            let expect = if index + 1 == fold.len() {
                Expectation::of(window.shape())
            } else {
                Expectation::default()
            };
            let summary = match self.call(link, &window, &expect, deadline, on_event).await {
                Ok(summary) => summary,
                // Out of time after some windows: what the model wrote is kept, and the
                // extractive summarizer finishes the rest ("anytime" folding).
                Err(failure)
                    if index > 0
                        && (matches!(failure.error, AttemptError::Timeout)
                            || Instant::now() >= deadline) =>
                {
                    let written = running.take().expect("a window before this one");
                    return Ok(fold.finish_extractively(
                        index,
                        written,
                        &self.fold_prompts,
                        &request.system_prompt,
                        max_tokens,
                    ));
                }
                Err(failure) => return Err(failure),
            };
            running = Some(match running {
                None => summary,
                Some(before) => Summary {
                    usage: before.usage.plus(summary.usage),
                    ..summary
                },
            });
        }
        Ok(running.expect("a fold has windows"))
    }

    /// One request to one model, retried after retryable failures while the deadline allows.
    async fn call(
        &self,
        link: &Link,
        request: &SummaryRequest,
        expect: &Expectation,
        deadline: Instant,
        on_event: &mut impl FnMut(ChainEvent),
    ) -> Result<Summary, LinkFailure> {
        let mut longest_retry_after = Duration::ZERO;
        let mut last_error = AttemptError::Timeout;
        let fail = |error, retry_after| LinkFailure {
            error,
            sent_tokens: estimate_tokens(&request.prompt) + estimate_tokens(&request.system_prompt),
            retry_after,
        };
        for attempt in 0..=self.policy.max_retries {
            // The extractive summarizer takes milliseconds and cannot fail by timing out: it
            // runs even when the deadline is close, so a chain ending in it always answers.
            if deadline <= Instant::now() && !matches!(link, Link::Extractive) {
                break;
            }
            let error = match self
                .attempt(link, request, expect, deadline, on_event)
                .await
            {
                Ok(summary) => return Ok(summary),
                Err(error) => error,
            };
            let retryable = error.is_retryable();
            let asked = error.retry_after();
            last_error = error;
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
        Err(fail(last_error, longest_retry_after))
    }

    /// One attempt: the call, the answer cleaned and checked, the event told.
    async fn attempt(
        &self,
        link: &Link,
        request: &SummaryRequest,
        expect: &Expectation,
        deadline: Instant,
        on_event: &mut impl FnMut(ChainEvent),
    ) -> Result<Summary, AttemptError> {
        let timing = Timing {
            first_token: self.policy.first_token_timeout,
            idle: self.policy.idle_timeout,
            deadline,
        };
        let now = Instant::now();
        let limit = match link {
            Link::Extractive => EXTRACTIVE_LIMIT,
            _ => deadline.saturating_duration_since(now),
        };
        let result = match tokio::time::timeout(limit, link.attempt(request, &timing)).await {
            Ok(Ok(mut summary)) => {
                summary.text = super::clean(summary.text);
                if super::is_blank(&summary.text) {
                    Err(AttemptError::Empty)
                } else if let Some(why) = gate::unusable(&summary.text, expect) {
                    Err(AttemptError::Unusable(why.label()))
                } else {
                    Ok(summary)
                }
            }
            Ok(Err(error)) => Err(error),
            Err(_) => Err(AttemptError::Timeout),
        };
        on_event(ChainEvent::Attempt(AttemptRecord {
            model: link.name(),
            outcome: result.as_ref().map(|_| ()).map_err(Clone::clone),
            latency: now.elapsed(),
        }));
        result
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

    #[tokio::test]
    async fn an_extractive_chain_always_answers() {
        let chain = Chain::new(vec![Link::Extractive], RetryPolicy::default());
        let request = SummaryRequest::from_prompt(
            String::new(),
            "<conversation>\n[User]: fix src/main.rs\n</conversation>\n\n## Goal".into(),
            1000,
        );
        let mut seen = Vec::new();
        let summary = chain
            .summarize(
                compactd_core::redact::Redactor::disabled()
                    .seal(request)
                    .as_ref(),
                Instant::now(),
                |a| seen.push(a.clone()),
            )
            .await
            .unwrap();
        assert_eq!(summary.model, "extractive");
        assert!(summary.text.contains("src/main.rs"));
        assert_eq!(seen.len(), 1);
    }
}
