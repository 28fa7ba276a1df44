//! The summarization pipeline: every summary compactd makes goes through [`Pipeline`], whoever
//! asked — the two agent wires, session compactions, branch summaries, the CLI — with a
//! [`Context`] saying who asked and a [`Purpose`] saying what for.
//!
//! The stages of a run, in order (see [`Pipeline::run_all`]):
//! 1. **admission** ([`admission`]): a slot of the caller's key and a place among the runs of this
//!    process, or a refusal;
//! 2. **the summary cache** ([`cache`]): an identical request answered without a model (looked
//!    up on the request as sent: a hit needs no redaction, nothing leaves);
//! 3. **redaction** ([`redaction`]): secrets in everything that would leave for a model replaced
//!    by placeholders;
//! 4. **the budget** ([`budget`]): a tenant past its daily token budget gets the extractive
//!    summarizer;
//! 5. **the model chain** ([`crate::summarizer::Chain`]): each model in turn, the request fitted to
//!    its window (folded when too long), the answer streamed, checked for being a summary at all,
//!    retried;
//! 6. **the fidelity gate** ([`gate`]): the summary checked against the anchors of the text it
//!    replaces, repaired by one more call and by appending what is still missing, reported;
//! 7. **redaction of the answer**, with the same placeholders, then **loop detection**
//!    ([`loops`]), then the summary kept in the cache;
//! 8. **observation** ([`events`]): every attempt, fallback, refusal, redaction, cache lookup,
//!    gate report and result is told to the observers — the metrics and the call log see the
//!    same events.
//!
//! A new stage (a rewrite of the request before the chain, a check of the summary after it) is a
//! module here, called from `run_one` in its place, and a row of [`STAGES`].

pub(crate) mod admission;
pub(crate) mod budget;
pub(crate) mod cache;
pub mod calllog;
mod context;
pub mod events;
mod gate;
pub(crate) mod limiter;
pub(crate) mod loops;
mod redaction;

use compactd_core::redact::Redacted;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use admission::Admission;
pub use budget::Budgets;
pub use cache::SummaryCache;
pub use context::{Agent, Context, Endpoint, PREPARED, Purpose};
pub use events::{Event, Observer, Run};
pub use gate::GateInput;
pub use limiter::{Busy, Limiter};
pub use loops::Loops;

use crate::summarizer::{Chain, ChainError, ChainEvent, Summary, SummaryRequest};

/// The estimated tokens of what a summary of `request` replaces: its prompt, which is the
/// conversation but for a few lines of instructions (read as text: the conversation itself is not
/// parsed for it, which a cache hit never does).
pub(crate) fn replaced_tokens(request: &SummaryRequest) -> u64 {
    compactd_core::transcript::estimate_tokens(&request.prompt)
}

/// One stage of a run: its name and the module it lives in (under `src/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stage {
    pub name: &'static str,
    pub module: &'static str,
}

/// Every stage of a run, in the order [`Pipeline::run_all`] and `run_one` take them: what
/// docs/architecture.md lists (a test holds the two together), and where a new stage is added.
pub const STAGES: [Stage; 8] = [
    Stage {
        name: "admission",
        module: "pipeline/admission.rs",
    },
    Stage {
        name: "cache",
        module: "pipeline/cache.rs",
    },
    Stage {
        name: "redaction",
        module: "pipeline/redaction.rs",
    },
    Stage {
        name: "budget",
        module: "pipeline/budget.rs",
    },
    Stage {
        name: "chain",
        module: "summarizer/chain.rs",
    },
    Stage {
        name: "gate",
        module: "pipeline/gate.rs",
    },
    Stage {
        name: "answer redaction",
        module: "pipeline/redaction.rs",
    },
    Stage {
        name: "loops",
        module: "pipeline/loops.rs",
    },
];

/// Why a summarization produced nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    #[error(transparent)]
    Busy(#[from] Busy),
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// The tenant's budget is spent and the job says to stop there ([`WhenSpent::Refuse`]):
    /// nothing was summarized.
    #[error("the tenant's token budget is spent")]
    BudgetSpent,
}

impl SummarizeError {
    /// A short label for the call log.
    pub fn label(&self) -> &'static str {
        match self {
            SummarizeError::Busy(_) => "busy",
            SummarizeError::Chain(ChainError::ContextOverflow) => "context_overflow",
            SummarizeError::Chain(ChainError::Exhausted { .. }) => "upstream_unavailable",
            SummarizeError::Chain(ChainError::DeadlineExceeded) => "deadline_exceeded",
            SummarizeError::BudgetSpent => "budget_spent",
        }
    }
}

/// One summarization of a run: what it is for, the request, and what the gate adds.
#[derive(Debug, Clone)]
pub struct Job {
    pub purpose: Purpose,
    pub request: SummaryRequest,
    pub gate: GateInput,
    /// The models of this job instead of the configured chain (the gateway's `agent` mode:
    /// the agent's own model and credentials); every stage runs the same.
    pub chain: Option<Arc<Chain>>,
    /// What a spent budget means for it, decided by whoever asks before the run starts.
    pub when_spent: WhenSpent,
}

/// What a job does when its tenant's daily budget is spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WhenSpent {
    /// The extractive summarizer writes it (the caller has no one else to ask).
    #[default]
    Extractive,
    /// Nothing is summarized: [`SummarizeError::BudgetSpent`], before any model, the gate or
    /// recall run (the gateway sends the agent's own compaction to its provider instead).
    Refuse,
}

impl Job {
    pub fn new(purpose: Purpose, request: SummaryRequest) -> Job {
        Job {
            purpose,
            request,
            gate: GateInput::default(),
            chain: None,
            when_spent: WhenSpent::Extractive,
        }
    }

    /// The job summarized by `chain` instead of the configured one.
    pub fn with_chain(mut self, chain: Option<Arc<Chain>>) -> Job {
        self.chain = chain;
        self
    }
}

pub struct Pipeline {
    pub chain: Chain,
    pub admission: Admission,
    observers: Vec<Arc<dyn Observer>>,
    stages: Stages,
    /// What a tenant past its budget gets: the extractive summarizer alone.
    budget_chain: Chain,
}

/// The optional stages around the chain; each is off when `None`.
#[derive(Debug, Clone, Default)]
pub struct Stages {
    /// The redaction stage's rules (none when `COMPACTD_REDACT=false`).
    pub redactor: compactd_core::redact::Redactor,
    pub cache: Option<SummaryCache>,
    pub budgets: Option<Budgets>,
    pub loops: Option<Loops>,
}

impl Pipeline {
    /// Whether `tenant` has used less than `share` of its daily budget (always, without one, or
    /// with budgets off).
    pub(crate) async fn budget_under_share(&self, tenant: &str, share: f64) -> bool {
        match &self.stages.budgets {
            Some(budgets) => budgets.under_share(tenant, share).await,
            None => true,
        }
    }
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
        let budget_chain = Chain::new(vec![crate::summarizer::Link::Extractive], chain.policy);
        Pipeline {
            chain,
            admission,
            observers,
            stages: Stages::default(),
            budget_chain,
        }
    }

    /// The redaction stage's rules (no rules when redaction is off): what compactd returns,
    /// stores or shows is sealed by them.
    pub fn redactor(&self) -> &compactd_core::redact::Redactor {
        &self.stages.redactor
    }

    /// The same pipeline with these stages around the chain.
    /// Waits until the summaries the cache writes behind are in the store.
    pub async fn flush_cache(&self) {
        if let Some(cache) = &self.stages.cache {
            cache.flush().await;
        }
    }

    pub fn with_stages(mut self, stages: Stages) -> Self {
        self.stages = stages;
        self
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
    ) -> Result<Redacted<Summary>, SummarizeError> {
        self.summarize_job(context, Job::new(purpose, request))
            .await
    }

    /// One job through every stage.
    pub async fn summarize_job(
        &self,
        context: &Context,
        job: Job,
    ) -> Result<Redacted<Summary>, SummarizeError> {
        let mut results = self.run_all(context, vec![job]).await?;
        results.pop().expect("one result per job")
    }

    /// The models that write `job`'s summary.
    pub(crate) fn chain_of<'a>(&'a self, job: &'a Job) -> &'a Chain {
        job.chain.as_deref().unwrap_or(&self.chain)
    }

    /// Summarizations that belong together (the two parts of a split turn): admitted as one,
    /// with as many places as the limiter allows (up to one each), so that they never compete
    /// with each other; then run side by side. Results come in the order of `jobs`; the outer
    /// error is a refusal of the whole run.
    pub async fn run_all(
        &self,
        context: &Context,
        jobs: Vec<Job>,
    ) -> Result<Vec<Result<Redacted<Summary>, SummarizeError>>, SummarizeError> {
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
    ) -> Result<Redacted<Summary>, SummarizeError> {
        let run = Run {
            context,
            purpose: job.purpose,
        };
        let started = Instant::now();
        // The cache first, on the request as sent: a hit needs no redaction (nothing leaves).
        let models = self.chain_of(job).names();
        let key = self
            .stages
            .cache
            .as_ref()
            .map(|_| SummaryCache::key(&context.tenant, &models, job));
        if let (Some(cache), Some(key)) = (&self.stages.cache, &key) {
            let hit = cache.get(key).await;
            self.tell(
                run,
                &Event::Cache {
                    hit: hit.as_ref().map(|(_, tier)| *tier),
                },
            );
            if let Some((mut summary, _)) = hit {
                summary.flags.cache_key = Some(key.clone());
                // Stored redacted; sealed again as every answer is (no new secret is found).
                let summary = self.seal(summary, &mut Default::default());
                return self.finished(run, &job.request, Ok(summary), started);
            }
        }
        // Nothing below sees the secrets: not the models, the gate's anchors (which are appended
        // to summaries), nor the call log.
        let (redacted_job, mut placeholders) = match self.redact(job, deadline).await {
            Ok(redacted) => redacted,
            Err(error) => return self.finished(run, &job.request, Err(error.into()), started),
        };
        let job = redacted_job.get();
        // The budget's reservation is held until the call-log row is queued (by `Finished`), so
        // that what the call used is always counted somewhere.
        let mut reservation = None;
        let result = self
            .summarize_redacted(
                run,
                &redacted_job,
                key.as_deref(),
                &mut placeholders,
                &mut reservation,
                deadline,
                started,
            )
            .await;
        if placeholders.total() > 0 {
            self.tell(
                run,
                &Event::Redacted {
                    counts: &placeholders.counts,
                },
            );
        }
        let result = self.finished(run, &job.request, result, started);
        drop(reservation);
        result.map(|summary| {
            summary.map(|mut summary| {
                summary.flags.cache_key = key;
                summary
            })
        })
    }

    /// Tells the observers how a run ended (the call log's row), and passes the result on.
    fn finished(
        &self,
        run: Run<'_>,
        request: &SummaryRequest,
        result: Result<Redacted<Summary>, SummarizeError>,
        started: Instant,
    ) -> Result<Redacted<Summary>, SummarizeError> {
        self.tell(
            run,
            &Event::Finished {
                request,
                outcome: result.as_ref().map(|summary| summary.get()),
                latency: started.elapsed(),
            },
        );
        result
    }

    /// The stages after redaction: the budget, the chain, the gate, loop detection, the summary
    /// kept in the cache under `key` (the cache missed).
    #[allow(clippy::too_many_arguments)]
    async fn summarize_redacted(
        &self,
        run: Run<'_>,
        redacted_job: &Redacted<Job>,
        key: Option<&str>,
        placeholders: &mut compactd_core::redact::Placeholders,
        reservation: &mut Option<budget::Reservation>,
        deadline: Instant,
        started: Instant,
    ) -> Result<Redacted<Summary>, SummarizeError> {
        let context = run.context;
        let job = redacted_job.get();
        let models = self.chain_of(job).names();
        let exhausted = match &self.stages.budgets {
            Some(budgets) => {
                let request = &job.request;
                // One call's cost: the prompt's tokens (4 characters each) and the output cap.
                let estimate = (request.system_prompt.len() + request.prompt.len()) as u64 / 4
                    + request.max_tokens;
                match budgets.reserve(&context.tenant, estimate).await {
                    budget::Decision::Go(reserved) => {
                        *reservation = reserved;
                        false
                    }
                    budget::Decision::Spent => true,
                }
            }
            None => false,
        };
        if exhausted {
            self.tell(run, &Event::BudgetExhausted);
            if job.when_spent == WhenSpent::Refuse {
                return Err(SummarizeError::BudgetSpent);
            }
        }
        let chain = if exhausted {
            &self.budget_chain
        } else {
            self.chain_of(job)
        };
        let summary = chain
            .summarize(
                redacted_job.part(|job| &job.request),
                deadline,
                |event| match &event {
                    ChainEvent::Attempt(attempt) => self.tell(run, &Event::Attempt(attempt)),
                    ChainEvent::Fallback { from } => self.tell(run, &Event::Fallback { from }),
                },
            )
            .await?;
        // A model can echo a secret it was not shown (from a summary it remembers): the answer is
        // redacted before the gate sends it back in a repair request, and sealed after it.
        let summary = self.seal(summary, placeholders).into_inner();
        let mut summary = self
            .gate(run, job, summary, started.elapsed(), deadline)
            .await;
        summary.flags.budget_exhausted = exhausted;
        if let Some(loops) = &self.stages.loops
            && matches!(job.purpose, Purpose::Prompt | Purpose::History)
            && loops
                .detect(&context.tenant, &job.request, &summary.text)
                .await
        {
            summary.flags.loop_detected = true;
            self.tell(run, &Event::Loop);
        }
        // Only what the first choice of the chain wrote is kept: a fallback's summary (after a
        // timeout or an outage) would answer the agent's retry, which hopes for the model.
        let first_choice = models.first() == Some(&summary.model);
        // Counted before it is cached: a hit reports the secrets its request had.
        summary.flags.redactions = placeholders.total();
        let summary = self.seal(summary, placeholders);
        if let (Some(cache), Some(key)) = (&self.stages.cache, key)
            && first_choice
            && !exhausted
        {
            cache.put(key, &summary).await;
        }
        Ok(summary)
    }
}
