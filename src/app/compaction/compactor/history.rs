//! The history part of a compaction as its planner writes it (pi 0.x's or pi 1.5's): the
//! serialized conversation and the previous summary it updates. What a summary prepared ahead
//! summarizes, and what it is matched against when the compaction comes (`compaction::ahead`).

use compactd_core::compaction::output_budget::history_max_tokens;
use compactd_core::compaction::pi15::{Planner, Preparation15, prepare as prepare15};
use compactd_core::compaction::prepare::Preparation;
use compactd_core::compaction::{CompactionSettings, prepare_compaction, serialize_conversation};
use compactd_core::prompts::Prompts;
use compactd_core::session::Session;
use compactd_core::transcript::prompt::history_prompt;

use crate::summarizer::SummaryRequest;

/// A history to summarize, as the planner that wrote the session writes it.
pub(crate) struct History {
    /// The conversation, serialized as the planner serializes it.
    pub text: String,
    /// The summary of the compaction before, which this one updates.
    pub previous: Option<String>,
    max_tokens: u64,
    /// pi 0.x's prompts; `None` for pi 1.5's (fixed).
    prompts: Option<Prompts>,
}

impl History {
    /// A pi 0.x plan's history.
    pub(crate) fn pi0(prep: &Preparation<'_>, prompts: &Prompts, max_tokens: u64) -> History {
        History {
            text: serialize_conversation(prep.messages_to_summarize.iter().copied()),
            previous: prep.previous_summary.map(str::to_owned),
            max_tokens,
            prompts: Some(prompts.clone()),
        }
    }

    /// A pi 1.5 plan's history.
    pub(crate) fn pi15(prep: &Preparation15, max_tokens: u64) -> History {
        History {
            text: prep.conversation.clone(),
            previous: prep.previous_summary.clone(),
            max_tokens,
            prompts: None,
        }
    }

    /// The summarization request of `text` updating `previous`, written as the compaction writes
    /// its history prompt (without a focus: a summary prepared ahead never has one).
    pub(crate) fn request(&self, text: &str, previous: Option<&str>) -> SummaryRequest {
        match &self.prompts {
            Some(prompts) => SummaryRequest::from_prompt(
                prompts.system.clone(),
                history_prompt(prompts, text, previous, None),
                self.max_tokens,
            ),
            None => super::pi15::history_request(text, previous, None, self.max_tokens),
        }
    }
}

/// The history a compaction of `session` at `leaf` (its last entry when `None`) would summarize
/// under `settings`; `None` when it would summarize none.
pub(crate) fn history(
    session: &Session,
    leaf: Option<&str>,
    settings: &CompactionSettings,
    prompts: &Prompts,
) -> Option<History> {
    let path = session.active_path(leaf).ok()?;
    let max_tokens = history_max_tokens(settings.reserve_tokens);
    if Planner::of_entries(path.iter().copied()) == Planner::Pi15 {
        let prep = prepare15(&path, settings)?;
        return (prep.messages_to_summarize > 0).then(|| History::pi15(&prep, max_tokens));
    }
    let prep = prepare_compaction(&path, settings).ok()?;
    (!prep.messages_to_summarize.is_empty()).then(|| History::pi0(&prep, prompts, max_tokens))
}
