//! The redaction stage, first after admission: everything of a job that would leave for a model
//! (the system prompt, the prompt — conversation, tool calls and results, the previous summary —
//! and pinned text) with its secrets replaced by placeholders. The placeholders are returned so
//! that the answer is redacted with the same names.

use std::borrow::Cow;

use super::{Job, Pipeline};
use crate::redact::{Placeholders, Redactor};

/// Texts from this size are redacted off the runtime's threads (the rules scan ~70 MB/s; a
/// smaller text costs less than the hand-off).
const INLINE_BYTES: usize = 64 * 1024;

impl Pipeline {
    /// The job as it may leave compactd, and the placeholders used.
    pub(super) async fn redact<'a>(&self, job: &'a Job) -> (Cow<'a, Job>, Placeholders) {
        let Some(redactor) = &self.stages.redactor else {
            return (Cow::Borrowed(job), Placeholders::default());
        };
        if job.request.prompt.len() < INLINE_BYTES {
            return match redact_job(redactor, job) {
                (Some(redacted), placeholders) => (Cow::Owned(redacted), placeholders),
                (None, placeholders) => (Cow::Borrowed(job), placeholders),
            };
        }
        let (rules, owned) = (redactor.clone(), job.clone());
        match crate::cpu::off_runtime(move || redact_job(&rules, &owned)).await {
            Ok((Some(redacted), placeholders)) => (Cow::Owned(redacted), placeholders),
            Ok((None, placeholders)) => (Cow::Borrowed(job), placeholders),
            // The job panicked off the runtime: redact here rather than let anything leave.
            Err(_) => match redact_job(redactor, job) {
                (Some(redacted), placeholders) => (Cow::Owned(redacted), placeholders),
                (None, placeholders) => (Cow::Borrowed(job), placeholders),
            },
        }
    }
}

/// The redacted copy of `job` (`None` when nothing was found) and the placeholders used.
fn redact_job(redactor: &Redactor, job: &Job) -> (Option<Job>, Placeholders) {
    let mut placeholders = Placeholders::default();
    let system_prompt = redactor.redact(&job.request.system_prompt, &mut placeholders);
    let prompt = redactor.redact(&job.request.prompt, &mut placeholders);
    let extra = job
        .gate
        .extra
        .iter()
        .map(|anchor| {
            let mut anchor = anchor.clone();
            anchor.text = redactor.redact(&anchor.text, &mut placeholders);
            anchor
        })
        .collect();
    let appendix = redactor.redact(&job.gate.appendix, &mut placeholders);
    if placeholders.total() == 0 {
        return (None, placeholders);
    }
    let mut redacted = job.clone();
    redacted.request.system_prompt = system_prompt;
    redacted.request.prompt = prompt;
    redacted.gate.extra = extra;
    redacted.gate.appendix = appendix;
    (Some(redacted), placeholders)
}
