//! The fidelity gate, a stage of every run after the chain: the summary is checked against the
//! anchors of the text it replaces ([`compactd_core::fidelity`]). When it leaves out critical anchors the
//! same model is asked once more to put them back (when the deadline leaves time for a call as
//! long as the first); what is still missing is appended verbatim where it belongs. The summary
//! comes back with its [`Report`].

use std::time::{Duration, Instant};

use super::events::{AnchorOutcome, Event};
use super::{Job, Pipeline, Run};
use crate::summarizer::{ChainEvent, Summary, SummaryRequest};
use compactd_core::fidelity::gate::{
    Expectation, append_missing, check, drop_withdrawn, repair_prompt, unusable,
};
use compactd_core::fidelity::{Anchor, AnchorKind, Missing, Report, Weight, anchors};
use compactd_core::transcript::prompt::Asks;

/// What a caller adds to the anchors of the prompt.
#[derive(Debug, Clone, Default)]
pub struct GateInput {
    /// Anchors the prompt does not show (pinned text).
    pub extra: Vec<Anchor>,
    /// Text the caller appends to the summary afterwards (the file lists of a compaction): what
    /// it holds counts as kept.
    pub appendix: String,
}

/// A repair call is made only when at least this much time is left, besides the first call's.
const MIN_REPAIR_TIME: Duration = Duration::from_secs(1);

/// The anchors a summary of one job is checked against, and how it is checked.
struct Checked<'j> {
    job: &'j Job,
    anchors: Vec<Anchor>,
}

impl<'j> Checked<'j> {
    /// The anchors of `job`'s conversation, with the ones its caller adds (pinned text).
    fn of(job: &'j Job) -> Checked<'j> {
        let shape = job.request.shape();
        let facts = job.request.facts();
        let mut anchors = anchors::of_facts(facts, shape.earlier_summary(), job.request.max_tokens);
        for extra in &job.gate.extra {
            if !anchors.iter().any(|a| a.text == extra.text) {
                anchors.push(extra.clone());
            }
        }
        Checked { job, anchors }
    }

    /// Which anchors `text` keeps (with what the caller appends to it counted).
    fn check(&self, text: &str) -> Vec<bool> {
        if self.job.gate.appendix.is_empty() {
            check(text, &self.anchors)
        } else {
            check(
                &format!("{text}\n\n{}", self.job.gate.appendix),
                &self.anchors,
            )
        }
    }

    /// The critical anchors a check did not find.
    fn missing_critical(&self, kept: &[bool]) -> Vec<&Anchor> {
        self.anchors
            .iter()
            .zip(kept)
            .filter(|(a, kept)| !**kept && a.weight() == Weight::Critical)
            .map(|(a, _)| a)
            .collect()
    }

    /// The missing anchors worth a repair call. The user's earlier messages are appended as they
    /// wrote them, never worth a model call of their own: a model that reworded one still has
    /// the rest of what it must keep asked.
    fn worth_a_call(&self, kept: &[bool]) -> Vec<&Anchor> {
        self.missing_critical(kept)
            .into_iter()
            .filter(|a| a.kind != AnchorKind::UserMessage)
            .collect()
    }

    /// What the gate did, from the checks of the model's first answer, the repaired one and the
    /// summary returned.
    fn report(
        &self,
        first: &[bool],
        repaired: &[bool],
        last: &[bool],
        repair_call: bool,
    ) -> (Report, Vec<AnchorOutcome>) {
        let anchors = &self.anchors;
        let outcomes: Vec<AnchorOutcome> = anchors
            .iter()
            .enumerate()
            .map(|(i, anchor)| AnchorOutcome {
                kind: anchor.kind,
                outcome: if first[i] {
                    "kept"
                } else if repaired[i] {
                    "repaired"
                } else if last[i] {
                    "appended"
                } else {
                    "missing"
                },
            })
            .collect();
        let report = Report {
            rules: anchors
                .iter()
                .filter(|a| a.kind == AnchorKind::Constraint)
                .map(|a| a.text.clone())
                .collect(),
            anchors: anchors.len(),
            kept: first.iter().filter(|k| **k).count(),
            repaired: first.iter().zip(last).filter(|(f, l)| !**f && **l).count(),
            appended: outcomes.iter().filter(|o| o.outcome == "appended").count(),
            repair_call,
            missing: anchors
                .iter()
                .zip(last)
                .filter(|(_, kept)| !**kept)
                .map(|(a, _)| Missing {
                    kind: a.kind,
                    text: a.text.clone(),
                })
                .collect(),
            dialect: Some(&self.job.request.shape().conversation)
                .filter(|c| !c.messages.is_empty())
                .map(|c| c.dialect.name().to_owned()),
        };
        (report, outcomes)
    }
}

impl Pipeline {
    /// Checks `summary` against the anchors of `job`, repairs it, and reports.
    pub(super) async fn gate(
        &self,
        run: Run<'_>,
        job: &Job,
        mut summary: Summary,
        answered_in: Duration,
        deadline: Instant,
    ) -> Summary {
        let checked = Checked::of(job);
        let facts = job.request.facts();
        let first = checked.check(&summary.text);
        // A 2–3 sentence summary has no room for what a checkpoint must carry: it is reported on,
        // never repaired.
        let repairable = job.request.shape().asks != Asks::Short;
        let left = deadline.saturating_duration_since(Instant::now());
        let missing = checked.worth_a_call(&first);
        // A summary prepared ahead is checked again, merged, when it answers: a repair call
        // there would only double the time before it is ready (what is missing is appended).
        let ahead = matches!(run.context.endpoint, super::Endpoint::Prepared(_));
        let call = repairable
            && !ahead
            && !missing.is_empty()
            && summary.model != "extractive"
            && left >= answered_in + MIN_REPAIR_TIME;
        let repaired_check = if call {
            self.repaired(run, &checked, &mut summary, &missing, deadline)
                .await
        } else {
            None
        };
        // Each check is made once per text: an unchanged summary keeps its first result.
        let repaired = repaired_check.unwrap_or_else(|| first.clone());
        let appended: Vec<&Anchor> = if repairable {
            checked.missing_critical(&repaired)
        } else {
            Vec::new()
        };
        let before = summary.text.len();
        if !appended.is_empty() {
            summary.text = crate::summarizer::clean(append_missing(&summary.text, &appended));
        }
        // A rule the user withdrew is replaced by the withdrawal, not kept beside it.
        if !facts.withdrawals.is_empty() {
            summary.text = drop_withdrawn(&summary.text, |item| facts.withdrawn(item));
        }
        let last = if appended.is_empty() && summary.text.len() == before {
            repaired.clone()
        } else {
            checked.check(&summary.text)
        };
        let (report, outcomes) = checked.report(&first, &repaired, &last, call);
        self.tell(
            run,
            &Event::Gated {
                report: &report,
                anchors: &outcomes,
            },
        );
        summary.fidelity = Some(report);
        summary
    }

    /// Asks the model once more for the critical anchors it left out (`missing`): takes its
    /// answer into `summary` unless it loses more than it restores, and answers the answer's
    /// check. Its usage counts either way.
    async fn repaired(
        &self,
        run: Run<'_>,
        checked: &Checked<'_>,
        summary: &mut Summary,
        missing: &[&Anchor],
        deadline: Instant,
    ) -> Option<Vec<bool>> {
        let repaired = self
            .repair(run, checked.job, summary, missing, deadline)
            .await?;
        let before = missing.len();
        let check = checked.check(&repaired.text);
        let after = checked.worth_a_call(&check).len();
        summary.usage = summary.usage.plus(repaired.usage);
        // A repair that loses more than it restores is not taken.
        (after <= before).then(|| {
            summary.text = repaired.text;
            check
        })
    }

    /// The model's answer to the repair request, when it is a usable summary.
    async fn repair(
        &self,
        run: Run<'_>,
        job: &Job,
        summary: &Summary,
        missing: &[&Anchor],
        deadline: Instant,
    ) -> Option<Summary> {
        let request = self.seal_request(SummaryRequest::plain(
            job.request.system_prompt.clone(),
            repair_prompt(&summary.text, missing),
            job.request.max_tokens,
        ));
        let repaired = self
            .chain_of(job)
            .ask(&summary.model, request.as_ref(), deadline, |event| {
                if let ChainEvent::Attempt(attempt) = &event {
                    self.tell(run, &Event::Attempt(attempt));
                }
            })
            .await
            .ok()?;
        // It must still be the summary the request asked for.
        unusable(&repaired.text, &Expectation::of(job.request.shape()))
            .is_none()
            .then_some(repaired)
    }
}
