//! The redaction stage, first after admission: everything of a job that would leave for a model
//! (the system prompt, the prompt — conversation, tool calls and results, the previous summary —
//! and pinned text) with its secrets replaced by placeholders. The placeholders are returned so
//! that the answer is redacted with the same names.

use std::borrow::Cow;

use serde_json::Value;

use super::{Job, Pipeline};
use crate::redact::{Placeholders, Redactor};
use crate::summarizer::chain::ChainError;
use crate::transcript::Shape;

/// Texts from this size are redacted off the runtime's threads (the rules scan ~70 MB/s; a
/// smaller text costs less than the hand-off).
const INLINE_BYTES: usize = 64 * 1024;

impl Pipeline {
    /// The job as it may leave compactd, and the placeholders used; past `deadline` (a text that
    /// takes longer to screen than the agent waits), `DeadlineExceeded`: a 503 with
    /// Retry-After, and nothing leaves unscreened.
    pub(super) async fn redact<'a>(
        &self,
        job: &'a Job,
        deadline: std::time::Instant,
    ) -> Result<(Cow<'a, Job>, Placeholders), ChainError> {
        let Some(redactor) = &self.stages.redactor else {
            return Ok((Cow::Borrowed(job), Placeholders::default()));
        };
        if job.request.prompt.len() < INLINE_BYTES {
            return Ok(match redact_job(redactor, job) {
                (Some(redacted), placeholders) => (Cow::Owned(redacted), placeholders),
                (None, placeholders) => (Cow::Borrowed(job), placeholders),
            });
        }
        let (rules, owned) = (redactor.clone(), job.clone());
        // Bounded twice: the work stops itself at the deadline (its thread is free again), and
        // the request does not wait past it for a place to run.
        let screened = tokio::time::timeout_at(
            deadline.into(),
            crate::cpu::off_runtime(move || {
                crate::redact::within(deadline, || redact_job(&rules, &owned))
            }),
        )
        .await
        .map_err(|_| ChainError::DeadlineExceeded)?;
        Ok(match screened {
            Ok(None) => return Err(ChainError::DeadlineExceeded),
            Ok(Some((Some(redacted), placeholders))) => (Cow::Owned(redacted), placeholders),
            Ok(Some((None, placeholders))) => (Cow::Borrowed(job), placeholders),
            // The job panicked off the runtime: redact here rather than let anything leave.
            Err(_) => match redact_job(redactor, job) {
                (Some(redacted), placeholders) => (Cow::Owned(redacted), placeholders),
                (None, placeholders) => (Cow::Borrowed(job), placeholders),
            },
        })
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
    // The typed conversation is what the gate, the extractive summarizer and a fold read: it is
    // redacted with the same placeholders. Its texts are pieces of the prompt's (escapes undone,
    // which the rules also look through), so a prompt with nothing found has nothing here.
    // The same secrets again: counted once, in the prompt.
    let counted = placeholders.counts.clone();
    let shape = redact_shape(redactor, job.request.shape(), &mut placeholders);
    placeholders.counts = counted;
    redacted.request.set_shape(shape);
    redacted.request.system_prompt = system_prompt;
    redacted.request.prompt = prompt;
    redacted.gate.extra = extra;
    redacted.gate.appendix = appendix;
    (Some(redacted), placeholders)
}

/// `shape` with every text it holds redacted: messages (text, thinking, string arguments at any
/// depth), the fragment of a cut conversation, the previous summary and the instructions.
fn redact_shape(redactor: &Redactor, shape: &Shape, placeholders: &mut Placeholders) -> Shape {
    let mut shape = shape.clone();
    for message in &mut shape.conversation.messages {
        message.text = redactor.redact(&message.text, placeholders);
        message.thinking = redactor.redact(&message.thinking, placeholders);
        for call in &mut message.calls {
            for (_, value) in &mut call.arguments {
                redact_value(redactor, value, placeholders);
            }
        }
    }
    let cut = &mut shape.conversation.cut;
    cut.text = redactor.redact(&cut.text, placeholders);
    if let Some(previous) = &mut shape.previous_summary {
        *previous = redactor.redact(previous, placeholders);
    }
    shape.instructions = redactor.redact(&shape.instructions, placeholders);
    shape.before = redactor.redact(&shape.before, placeholders);
    shape
}

fn redact_value(redactor: &Redactor, value: &mut Value, placeholders: &mut Placeholders) {
    match value {
        Value::String(text) => *text = redactor.redact(text, placeholders),
        Value::Array(items) => {
            for item in items {
                redact_value(redactor, item, placeholders);
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                redact_value(redactor, item, placeholders);
            }
        }
        _ => {}
    }
}
