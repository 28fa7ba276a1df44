//! The cut-point plan as `compactd plan` and the plan endpoints report it: the preparation with
//! its conversations serialized and the token estimate of every message entry on the path.

use serde::{Serialize, Serializer};

use super::pi15::Planner;
use super::prepare::{NothingToCompact, Preparation, prepare_compaction};
use super::serialize::{serialize_conversation, write_conversation_json};
use super::tokens::{CompactionSettings, estimate_tokens};
use crate::js_json;
use crate::session::Entry;

/// `{"plan": {...}}` or `{"plan": null, "reason": "..."}`.
#[derive(Debug, Clone, Serialize)]
pub struct PlanOutcome {
    pub plan: Option<Plan>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Machine-readable form of `reason`.
    #[serde(skip)]
    pub nothing: Option<NothingReason>,
}

/// Why a plan is null.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NothingReason {
    EmptySession,
    AlreadyCompacted,
    NoFirstKeptEntry,
    /// Everything since the boundary fits in `keepRecentTokens`.
    NothingToSummarize,
}

/// A compaction plan. Path indices count entries from the root (0), without the header.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Whose rules made it: `pi-0.x` for files older pis wrote, `pi-1.5` for files that show pi
    /// 1.5's entries (`context_edit`, system messages, a compaction's `systemMessage`).
    pub planner: Planner,
    pub first_kept_entry_id: String,
    pub first_kept_path_index: usize,
    pub is_split_turn: bool,
    pub turn_start_path_index: Option<usize>,
    #[serde(serialize_with = "js_json::serialize_number")]
    pub tokens_before: f64,
    pub previous_summary: Option<String>,
    pub messages_to_summarize: usize,
    pub turn_prefix_messages: usize,
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
    /// The summarized messages serialized for the summarizer (spec §6.1).
    pub conversation: String,
    /// The split turn's prefix serialized ("" when the turn is not split).
    pub turn_prefix_conversation: String,
    /// Estimate of every `message` entry on the path, by id, in path order.
    #[serde(serialize_with = "ordered_map")]
    pub entry_tokens: Vec<(String, u64)>,
}

impl PlanOutcome {
    /// Plans a compaction of `path` (root first) with the planner of the pi that wrote it.
    pub fn for_path(path: &[&Entry], settings: &CompactionSettings) -> PlanOutcome {
        let planner = Planner::of_entries(path.iter().copied());
        PlanOutcome::for_path_with(path, settings, planner)
    }

    /// Plans a compaction of `path` with `planner`, or the one of the pi that wrote it.
    pub fn for_path_choosing(
        path: &[&Entry],
        settings: &CompactionSettings,
        planner: Option<Planner>,
    ) -> PlanOutcome {
        match planner {
            Some(planner) => PlanOutcome::for_path_with(path, settings, planner),
            None => PlanOutcome::for_path(path, settings),
        }
    }

    /// Plans a compaction of `path` with the given planner.
    pub fn for_path_with(
        path: &[&Entry],
        settings: &CompactionSettings,
        planner: Planner,
    ) -> PlanOutcome {
        if planner == Planner::Pi15 {
            return match super::pi15::prepare(path, settings) {
                Some(prep) => PlanOutcome {
                    plan: Some(Plan::of_pi15(prep)),
                    reason: None,
                    nothing: None,
                },
                None => PlanOutcome::nothing(
                    NothingReason::NothingToSummarize,
                    "nothing to summarize (pi 1.5's planner: already compacted, or everything fits in keepRecentTokens)".to_owned(),
                ),
            };
        }
        match prepare_compaction(path, settings) {
            Ok(prep) if !prep.is_empty() => PlanOutcome {
                plan: Some(Plan::new(path, &prep)),
                reason: None,
                nothing: None,
            },
            prepared => PlanOutcome::not_prepared(prepared),
        }
    }

    /// Plans `path` as [`PlanOutcome::for_path_choosing`] and writes the outcome as
    /// [`PlanOutcome::write_json`] would, but with pi 0.x's conversations serialized straight into
    /// `out` ([`write_conversation_json`]), never held whole: what `compactd plan` prints and
    /// what the plan endpoints answer. `adjust` sees the outcome before it is written (a stored
    /// session's plan, made of its tail, renumbers its indices to the whole path); pi 0.x's
    /// conversations are empty in it then.
    pub fn write_json_for_path(
        path: &[&Entry],
        settings: &CompactionSettings,
        planner: Option<Planner>,
        adjust: impl FnOnce(PlanOutcome) -> PlanOutcome,
        out: &mut impl std::io::Write,
    ) -> std::io::Result<()> {
        let planner = planner.unwrap_or_else(|| Planner::of_entries(path.iter().copied()));
        if planner == Planner::Pi15 {
            return adjust(PlanOutcome::for_path_with(path, settings, planner)).write_json(out);
        }
        match prepare_compaction(path, settings) {
            Ok(prep) if !prep.is_empty() => adjust(PlanOutcome {
                plan: Some(Plan::outline(path, &prep)),
                reason: None,
                nothing: None,
            })
            .write_json_with(
                out,
                |out| write_conversation_json(out, prep.messages_to_summarize.iter().copied()),
                |out| write_conversation_json(out, prep.turn_prefix_messages.iter().copied()),
            ),
            prepared => adjust(PlanOutcome::not_prepared(prepared)).write_json(out),
        }
    }

    /// The outcome of a preparation that found nothing to summarize.
    fn not_prepared(prepared: Result<Preparation<'_>, NothingToCompact>) -> PlanOutcome {
        match prepared {
            Err(nothing) => {
                let reason = match nothing {
                    NothingToCompact::EmptySession => NothingReason::EmptySession,
                    NothingToCompact::AlreadyCompacted => NothingReason::AlreadyCompacted,
                    NothingToCompact::NoFirstKeptEntry => NothingReason::NoFirstKeptEntry,
                };
                PlanOutcome::nothing(reason, nothing.to_string())
            }
            Ok(_) => PlanOutcome::nothing(
                NothingReason::NothingToSummarize,
                "nothing to summarize: everything since the last compaction fits in keepRecentTokens"
                    .to_owned(),
            ),
        }
    }

    /// Writes the outcome as JSON, byte for byte as `serde_json` writes it, but with the
    /// conversations (most of a long session's plan) escaped by [`js_json::escape`] rather than
    /// one byte at a time after everything else (BENCHMARKS.md).
    pub fn write_json(mut self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let (conversation, prefix) = match self.plan.as_mut() {
            Some(plan) => (
                std::mem::take(&mut plan.conversation),
                std::mem::take(&mut plan.turn_prefix_conversation),
            ),
            None => Default::default(),
        };
        self.write_json_with(
            out,
            |out| js_json::escape::write_str(out, &conversation),
            |out| js_json::escape::write_str(out, &prefix),
        )
    }

    /// Writes the outcome as JSON with the plan's two conversations (empty in it) written as
    /// JSON strings by `conversation` and `prefix`.
    fn write_json_with<W: std::io::Write>(
        self,
        out: &mut W,
        conversation: impl FnOnce(&mut W) -> std::io::Result<()>,
        prefix: impl FnOnce(&mut W) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        /// The emptied fields, next to each other in field order. Found only where serde wrote
        /// them: inside a string value a quote follows a backslash, never a letter (`n"`), and
        /// the one map of the plan (`entryTokens`, after them) has numbers for values.
        const EMPTIED: &[u8] = br#""conversation":"","turnPrefixConversation":"""#;
        if self.plan.is_none() {
            return Ok(serde_json::to_writer(out, &self)?);
        }
        let json = serde_json::to_vec(&self)?;
        let at = memchr::memmem::find(&json, EMPTIED).expect("serde writes fields in order");
        out.write_all(&json[..at])?;
        out.write_all(br#""conversation":"#)?;
        conversation(out)?;
        out.write_all(br#","turnPrefixConversation":"#)?;
        prefix(out)?;
        out.write_all(&json[at + EMPTIED.len()..])
    }

    fn nothing(nothing: NothingReason, reason: String) -> PlanOutcome {
        PlanOutcome {
            plan: None,
            reason: Some(reason),
            nothing: Some(nothing),
        }
    }
}

impl Plan {
    /// A plan of pi 1.5's planner.
    fn of_pi15(prep: super::pi15::Preparation15) -> Plan {
        Plan {
            planner: Planner::Pi15,
            first_kept_entry_id: prep.first_kept_entry_id,
            first_kept_path_index: prep.first_kept_path_index,
            is_split_turn: prep.is_split_turn,
            turn_start_path_index: prep.turn_start_path_index,
            tokens_before: prep.tokens_before as f64,
            previous_summary: prep.previous_summary,
            messages_to_summarize: prep.messages_to_summarize,
            turn_prefix_messages: prep.turn_prefix_messages,
            read_files: prep.files.read_files,
            modified_files: prep.files.modified_files,
            conversation: prep.conversation,
            turn_prefix_conversation: prep.turn_prefix_conversation,
            entry_tokens: prep.entry_tokens,
        }
    }

    pub fn new(path: &[&Entry], prep: &Preparation<'_>) -> Plan {
        Plan {
            conversation: serialize_conversation(prep.messages_to_summarize.iter().copied()),
            turn_prefix_conversation: serialize_conversation(
                prep.turn_prefix_messages.iter().copied(),
            ),
            ..Plan::outline(path, prep)
        }
    }

    /// The plan without its conversations (both empty).
    fn outline(path: &[&Entry], prep: &Preparation<'_>) -> Plan {
        let lists = prep.file_ops.lists();
        Plan {
            planner: Planner::Pi0,
            first_kept_entry_id: prep.first_kept_entry_id.to_owned(),
            first_kept_path_index: prep.cut.first_kept_entry_index,
            is_split_turn: prep.cut.is_split_turn,
            turn_start_path_index: prep.cut.turn_start_index.filter(|_| prep.cut.is_split_turn),
            tokens_before: prep.tokens_before,
            previous_summary: prep.previous_summary.map(str::to_owned),
            messages_to_summarize: prep.messages_to_summarize.len(),
            turn_prefix_messages: prep.turn_prefix_messages.len(),
            read_files: lists.read_files,
            modified_files: lists.modified_files,
            conversation: String::new(),
            turn_prefix_conversation: String::new(),
            entry_tokens: entry_tokens(path),
        }
    }
}

/// The estimate of every `message` entry of `path`, by id, in path order. A long path is
/// measured in two halves at once: measuring every message, tool-call arguments included, ran on
/// one core between reading and writing, 7 % of the instructions of planning a 21 MB session.
fn entry_tokens(path: &[&Entry]) -> Vec<(String, u64)> {
    let measure = |entries: &[&Entry]| -> Vec<(String, u64)> {
        entries
            .iter()
            .filter_map(|e| {
                e.stored_message()
                    .map(|m| (e.id.clone(), estimate_tokens(m)))
            })
            .collect()
    };
    let sizes = path.iter().map(|e| e.raw.len());
    if crate::parallel::threads_for(sizes.clone().sum(), 2) < 2 {
        return measure(path);
    }
    crate::parallel::in_two(path, crate::parallel::half_way(sizes), measure)
}

fn ordered_map<S: Serializer>(pairs: &[(String, u64)], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_map(pairs.iter().map(|(k, v)| (k, v)))
}
