//! The summarization pipeline: every summary compactd makes goes through [`Pipeline`], whoever
//! asked — the two agent wires, session compactions, branch summaries, the CLI — with a
//! [`Context`] saying who asked and a [`Purpose`] saying what for.
//!
//! The stages of a run, in order (see [`Pipeline::run_all`]):
//! 1. **admission** ([`admission`]): a slot of the caller's key and a place among the runs of this
//!    process, or a refusal;
//! 2. **the model chain** ([`crate::summarizer::Chain`]): each model in turn, the request fitted to
//!    its window (folded when too long), the answer streamed, checked for being a summary at all,
//!    retried;
//! 3. **the fidelity gate** ([`gate`]): the summary checked against the anchors of the text it
//!    replaces, repaired by one more call and by appending what is still missing, reported;
//! 4. **observation** ([`events`]): every attempt, fallback, refusal, gate report and result is
//!    told to the observers — the metrics and the call log see the same events.
//!
//! A new stage (a rewrite of the request before the chain, a check of the summary after it) is a
//! module here, called from `run_one` in its place.

pub mod admission;
pub mod calllog;
mod context;
pub mod events;
mod gate;
pub mod limiter;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use admission::Admission;
pub use context::{Context, Endpoint, Purpose};
pub use events::{Event, Observer, Run};
pub use gate::GateInput;
pub use limiter::{Busy, Limiter};

use crate::summarizer::{Chain, ChainError, ChainEvent, Summary, SummaryRequest};

/// Why a summarization produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    #[error(transparent)]
    Busy(#[from] Busy),
    #[error(transparent)]
    Chain(#[from] ChainError),
}

impl SummarizeError {
    /// A short label for the call log.
    pub fn label(&self) -> &'static str {
        match self {
            SummarizeError::Busy(_) => "busy",
            SummarizeError::Chain(ChainError::ContextOverflow) => "context_overflow",
            SummarizeError::Chain(ChainError::Exhausted { .. }) => "upstream_unavailable",
            SummarizeError::Chain(ChainError::DeadlineExceeded) => "deadline_exceeded",
        }
    }
}

/// One summarization of a run: what it is for, the request, and what the gate adds.
#[derive(Debug, Clone)]
pub struct Job {
    pub purpose: Purpose,
    pub request: SummaryRequest,
    pub gate: GateInput,
}

impl Job {
    pub fn new(purpose: Purpose, request: SummaryRequest) -> Job {
        Job {
            purpose,
            request,
            gate: GateInput::default(),
        }
    }
}

pub struct Pipeline {
    pub chain: Chain,
    pub admission: Admission,
    observers: Vec<Arc<dyn Observer>>,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("chain", &self.chain.names())
            .field("observers", &self.observers.len())
            .finish()
    }
}

impl Pipeline {
    pub fn new(chain: Chain, admission: Admission, observers: Vec<Arc<dyn Observer>>) -> Self {
        Pipeline {
            chain,
            admission,
            observers,
        }
    }

    fn tell(&self, run: Run<'_>, event: &Event<'_>) {
        for observer in &self.observers {
            observer.observe(run, event);
        }
    }

    /// One summarization.
    pub async fn summarize(
        &self,
        context: &Context,
        purpose: Purpose,
        request: SummaryRequest,
    ) -> Result<Summary, SummarizeError> {
        let mut results = self
            .run_all(context, vec![Job::new(purpose, request)])
            .await?;
        results.pop().expect("one result per job")
    }

    /// Summarizations that belong together (the two parts of a split turn): admitted as one,
    /// with as many places as the limiter allows (up to one each), so that they never compete
    /// with each other; then run side by side. Results come in the order of `jobs`; the outer
    /// error is a refusal of the whole run.
    pub async fn run_all(
        &self,
        context: &Context,
        jobs: Vec<Job>,
    ) -> Result<Vec<Result<Summary, SummarizeError>>, SummarizeError> {
        let deadline = Instant::now() + self.chain.policy.deadline;
        let admitted = self
            .admission
            .admit(&context.bucket(), jobs.len(), deadline)
            .await;
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(busy) => {
                let error = SummarizeError::Busy(busy);
                for job in &jobs {
                    let run = Run {
                        context,
                        purpose: job.purpose,
                    };
                    self.tell(run, &Event::Refused);
                    self.tell(
                        run,
                        &Event::Finished {
                            request: &job.request,
                            outcome: Err(&error),
                            latency: Duration::ZERO,
                        },
                    );
                }
                return Err(error);
            }
        };
        let mut results = Vec::with_capacity(jobs.len());
        for batch in jobs.chunks(admitted.parallel.max(1)) {
            let runs = batch.iter().map(|job| self.run_one(context, job, deadline));
            results.extend(futures_util::future::join_all(runs).await);
        }
        Ok(results)
    }

    /// The stages of one admitted summarization.
    async fn run_one(
        &self,
        context: &Context,
        job: &Job,
        deadline: Instant,
    ) -> Result<Summary, SummarizeError> {
        let run = Run {
            context,
            purpose: job.purpose,
        };
        let started = Instant::now();
        let result = self
            .chain
            .summarize(&job.request, deadline, |event| match &event {
                ChainEvent::Attempt(attempt) => self.tell(run, &Event::Attempt(attempt)),
                ChainEvent::Fallback { from } => self.tell(run, &Event::Fallback { from }),
            })
            .await
            .map_err(SummarizeError::from);
        let result = match result {
            Ok(summary) => Ok(self
                .gate(run, job, summary, started.elapsed(), deadline)
                .await),
            Err(error) => Err(error),
        };
        self.tell(
            run,
            &Event::Finished {
                request: &job.request,
                outcome: result.as_ref(),
                latency: started.elapsed(),
            },
        );
        result
    }
}
