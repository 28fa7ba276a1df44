//! The redaction stage, first after admission: everything of a job that would leave for a model
//! (the system prompt, the prompt — conversation, tool calls and results, the previous summary —
//! and pinned text) with its secrets replaced by placeholders. The placeholders are returned so
//! that the answer is redacted with the same names.

use std::borrow::Cow;

use super::{Job, Pipeline};
use crate::redact::Placeholders;

impl Pipeline {
    /// The job as it may leave compactd, and the placeholders used.
    pub(super) fn redact<'a>(&self, job: &'a Job) -> (Cow<'a, Job>, Placeholders) {
        let mut placeholders = Placeholders::default();
        let Some(redactor) = &self.stages.redactor else {
            return (Cow::Borrowed(job), placeholders);
        };
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
            return (Cow::Borrowed(job), placeholders);
        }
        let mut redacted = job.clone();
        redacted.request.system_prompt = system_prompt;
        redacted.request.prompt = prompt;
        redacted.gate.extra = extra;
        redacted.gate.appendix = appendix;
        (Cow::Owned(redacted), placeholders)
    }
}
