//! The redaction stage, first after admission: everything of a job that would leave for a model
//! (the system prompt, the prompt — conversation, tool calls and results, the previous summary —
//! and pinned text) with its secrets replaced by placeholders. The placeholders are returned so
//! that the answer is redacted with the same names. The model chain takes only a
//! [`Redacted`] request, so nothing reaches a model another way.

use super::{Job, Pipeline};
use crate::summarizer::chain::ChainError;
use crate::summarizer::{Summary, SummaryRequest};
use compactd_core::redact::{Placeholders, Redacted, Redactor, Screen, Screening};

/// Texts from this size are redacted off the runtime's threads (the rules scan ~70 MB/s; a
/// smaller text costs less than the hand-off).
const INLINE_BYTES: usize = 64 * 1024;

impl Pipeline {
    /// The job as it may leave compactd, and the placeholders used; past `deadline` (a text that
    /// takes longer to screen than the agent waits), `DeadlineExceeded`: a 503 with
    /// Retry-After, and nothing leaves unscreened.
    pub(super) async fn redact(
        &self,
        job: &Job,
        deadline: std::time::Instant,
    ) -> Result<(Redacted<Job>, Placeholders), ChainError> {
        let redactor = &self.stages.redactor;
        if job.request.prompt.len() < INLINE_BYTES || !redactor.is_enabled() {
            return Ok(redact_job(redactor, job));
        }
        let (rules, owned) = (redactor.clone(), job.clone());
        // Bounded twice: the work stops itself at the deadline (its thread is free again), and
        // the request does not wait past it for a place to run.
        let screened = tokio::time::timeout_at(
            deadline.into(),
            crate::cpu::off_runtime(move || {
                compactd_core::redact::within(deadline, || redact_job(&rules, &owned))
            }),
        )
        .await
        .map_err(|_| ChainError::DeadlineExceeded)?;
        match screened {
            Ok(Some(redacted)) => Ok(redacted),
            Ok(None) => Err(ChainError::DeadlineExceeded),
            // The job panicked off the runtime: redact here rather than let anything leave.
            Err(_) => Ok(redact_job(redactor, job)),
        }
    }

    /// The summary as it may leave compactd: its texts redacted with the placeholders of its
    /// request (the same secret, the same name).
    pub(super) fn seal(
        &self,
        summary: Summary,
        placeholders: &mut Placeholders,
    ) -> Redacted<Summary> {
        self.stages.redactor.seal_with(summary, placeholders)
    }

    /// A request made of redacted texts (the gate's repair: the redacted job's anchors and the
    /// redacted answer), screened again before it goes to a model.
    pub(super) fn seal_request(&self, request: SummaryRequest) -> Redacted<SummaryRequest> {
        self.stages.redactor.seal(request)
    }
}

/// The redacted copy of `job` and the placeholders used.
fn redact_job(redactor: &Redactor, job: &Job) -> (Redacted<Job>, Placeholders) {
    let mut placeholders = Placeholders::default();
    let redacted = redactor.seal_with(job.clone(), &mut placeholders);
    (redacted, placeholders)
}

impl Screen for Job {
    fn screen(&mut self, screening: &mut Screening<'_>) {
        self.request.screen(screening);
        for anchor in &mut self.gate.extra {
            screening.text(&mut anchor.text);
        }
        screening.text(&mut self.gate.appendix);
    }
}
