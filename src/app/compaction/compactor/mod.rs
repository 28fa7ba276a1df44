//! Compacting a session: plan the cut (the pure core), render the prompts, call the summarizer
//! (history and split-turn prefix in parallel), and build the compaction entry in pi's shape.
//! Used by the HTTP API and by `compactd compact`.
//!
//! Where the reference has quirks, compactd does better (spec §4.9-4, §4.9-11): nothing to
//! summarize is an error rather than a summary of nothing, no call is made for an empty
//! conversation, and a split turn whose history part is empty keeps the previous summary.

mod history;
mod pi15;

pub(crate) use history::{History, history};

use std::sync::Arc;
use std::time::Instant;

use crate::app::compaction::ahead::Ahead;
use crate::summarizer::chain::Chain;

use crate::pipeline::{Context, GateInput, Job, Pipeline, Purpose, SummarizeError};
use crate::summarizer::{Flags, Summary, SummaryRequest, TokenUsage};
use compactd_core::compaction::entry::{BranchSummaryEntry, CompactionEntry, strip_file_tags};
use compactd_core::compaction::file_ops::FileLists;
use compactd_core::compaction::output_budget::{
    BRANCH_MAX_TOKENS, history_max_tokens, turn_prefix_max_tokens,
};
use compactd_core::compaction::{
    CompactionSettings, NothingReason, NothingToCompact, branch, build_session_context,
    estimate_tokens, prepare_compaction, serialize_conversation, typed_conversation,
};
use compactd_core::fidelity::{Anchor, Report};
use compactd_core::prompts::Prompts;
use compactd_core::session::{IdSet, Message, Session, UnknownEntry, new_entry_id, time};
use compactd_core::transcript::prompt::{
    branch_prompt, history_prompt, merge_split_turn, turn_prefix_prompt,
};

/// Which compaction to make.
#[derive(Debug, Clone, Default)]
pub struct CompactionRequest {
    /// Compact the path to this entry (default: the last entry).
    pub leaf_id: Option<String>,
    pub settings: CompactionSettings,
    /// The user's focus (`/compact <text>`).
    pub custom_instructions: Option<String>,
    /// Text pinned to the session: carried verbatim by every compaction.
    pub pins: Vec<String>,
    /// The session's summary prepared ahead (issue 67): answers the history when it covers it.
    pub(crate) prepared: Option<Ahead>,
}

/// A compaction entry ready to append, and what it cost.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOutcome {
    pub entry: CompactionEntry,
    /// The entry as a JSONL line (no newline): what the client appends to its file.
    pub line: String,
    /// The model(s) that wrote it; `a+b` when the two parts of a split turn came from different
    /// models, `none` when no call was needed.
    pub model: String,
    pub usage: TokenUsage,
    pub latency_ms: u64,
    /// Heuristic estimate of the context after the compaction (summary plus kept messages).
    pub tokens_after: u64,
    pub summarizer_calls: u32,
    /// What the fidelity gate found in the summaries and did to them.
    pub fidelity: Report,
    /// What the pipeline's stages did: `cached` when every summary came from the cache, the
    /// others when any did; a loop also when the compaction leaves the context at 80 % or more
    /// of what it was (it made no room: the agent will compact again).
    pub flags: Flags,
    /// `None`: no summary was prepared ahead; else whether it answered the history.
    pub prepared: Option<bool>,
}

/// What a compaction takes of its session's summary prepared ahead.
struct FromPrepared {
    /// The history's request, answered from the summary, when it covers the history.
    request: Option<SummaryRequest>,
    /// The chain every part of the compaction then runs on: the extractive summarizer, so that
    /// no part waits for a model.
    chain: Option<Arc<Chain>>,
    used: Option<bool>,
}

/// The history answered from `request`'s summary prepared ahead, when it covers the history
/// `history` gives (asked for only when there is such a summary).
fn from_prepared(
    request: &CompactionRequest,
    history: impl FnOnce() -> Option<History>,
) -> FromPrepared {
    let merged = request
        .prepared
        .as_ref()
        .and_then(|ahead| Some((ahead, ahead.merge(&history()?)?)));
    FromPrepared {
        used: request.prepared.as_ref().map(|_| merged.is_some()),
        chain: merged.as_ref().map(|(ahead, _)| ahead.chain.clone()),
        request: merged.map(|(_, request)| request),
    }
}

/// Below this context size a compaction that frees little is no loop: there was little to free.
const MIN_LOOP_TOKENS: u64 = 1000;

/// Why no compaction was made.
#[derive(Debug, thiserror::Error)]
pub enum CompactError {
    #[error(transparent)]
    UnknownLeaf(#[from] UnknownEntry),
    #[error("nothing to compact: {1}")]
    Nothing(NothingReason, String),
    #[error(transparent)]
    Summarize(#[from] SummarizeError),
}

/// Plans and writes a compaction of `session`, summarizing through `pipeline` for `context`.
pub async fn compact(
    session: &Session,
    taken: &(dyn IdSet + Sync),
    request: &CompactionRequest,
    pipeline: &Pipeline,
    context: &Context,
    prompts: &Prompts,
) -> Result<CompactionOutcome, CompactError> {
    let started = Instant::now();
    let path = session.active_path(request.leaf_id.as_deref())?;
    // A session pi ≥ 1.5 wrote is planned and written as pi 1.5 does.
    if compactd_core::compaction::pi15::Planner::of_entries(path.iter().copied())
        == compactd_core::compaction::pi15::Planner::Pi15
    {
        return pi15::compact(&path, taken, request, pipeline, context, started).await;
    }
    let prep = prepare_compaction(&path, &request.settings).map_err(|nothing| {
        let reason = match nothing {
            NothingToCompact::EmptySession => NothingReason::EmptySession,
            NothingToCompact::AlreadyCompacted => NothingReason::AlreadyCompacted,
            NothingToCompact::NoFirstKeptEntry => NothingReason::NoFirstKeptEntry,
        };
        CompactError::Nothing(reason, nothing.to_string())
    })?;
    if prep.is_empty() {
        return Err(CompactError::Nothing(
            NothingReason::NothingToSummarize,
            "everything since the last compaction fits in keepRecentTokens".into(),
        ));
    }
    let (history_request, prefix_request) = requests(&prep, request, prompts);
    // The plan made above, not a second one (planning is the hot part of a compaction).
    let max_tokens = history_max_tokens(request.settings.reserve_tokens);
    let ahead = from_prepared(request, || {
        let summarizes = !prep.messages_to_summarize.is_empty();
        summarizes.then(|| History::pi0(&prep, prompts, max_tokens))
    });
    let files = prep.file_ops.lists();
    let (history_summary, prefix_summary) = summarize_parts(
        pipeline,
        context,
        ahead.request.or(history_request),
        prefix_request,
        &request.pins,
        &files,
        ahead.chain,
    )
    .await?;
    let merged = merged_summary(history_summary.as_ref(), prefix_summary.as_ref(), || {
        prep.previous_summary.map(strip_file_tags)
    });
    let summary = merged + &files.format_tags();

    let leaf = path.last().expect("a plan has a non-empty path");
    let entry = CompactionEntry::new(
        new_entry_id(taken),
        leaf.id.clone(),
        time::now_iso(),
        summary,
        prep.first_kept_entry_id.to_owned(),
        prep.tokens_before,
        files,
    );

    let tokens_after = tokens_after(&path, &prep, &entry);
    let calls: Vec<&Summary> = history_summary
        .iter()
        .chain(prefix_summary.iter())
        .collect();
    let mut outcome = finish(entry, &calls, started, tokens_after);
    outcome.prepared = ahead.used;
    Ok(outcome)
}

/// The calls a compaction needs, run together: the history summary (unless only the split
/// turn is new) and the split turn's prefix. Each prompt is written from the planned messages,
/// and its typed conversation built from the same messages: no stage reads the text back.
fn requests(
    prep: &compactd_core::compaction::prepare::Preparation<'_>,
    request: &CompactionRequest,
    prompts: &Prompts,
) -> (Option<SummaryRequest>, Option<SummaryRequest>) {
    let reserve = request.settings.reserve_tokens;
    let split = prep.cut.is_split_turn && !prep.turn_prefix_messages.is_empty();
    let history_request = (!prep.messages_to_summarize.is_empty()).then(|| {
        let messages = || prep.messages_to_summarize.iter().copied();
        SummaryRequest::rendered(
            prompts.system.clone(),
            history_prompt(
                prompts,
                &serialize_conversation(messages()),
                prep.previous_summary,
                request.custom_instructions.as_deref(),
            ),
            history_max_tokens(reserve),
            typed_conversation(messages()),
        )
    });
    let prefix_request = split.then(|| {
        let messages = || prep.turn_prefix_messages.iter().copied();
        SummaryRequest::rendered(
            prompts.system.clone(),
            turn_prefix_prompt(prompts, &serialize_conversation(messages())),
            turn_prefix_max_tokens(reserve),
            typed_conversation(messages()),
        )
    });
    (history_request, prefix_request)
}

/// The context's tokens after the compaction: the summary, then the kept entries (spec §8.3,
/// step 5).
fn tokens_after(
    path: &[&compactd_core::session::Entry],
    prep: &compactd_core::compaction::prepare::Preparation<'_>,
    entry: &CompactionEntry,
) -> u64 {
    let summary_message = Message::CompactionSummary {
        summary: entry.summary.clone(),
        tokens_before: prep.tokens_before,
        timestamp: None,
    };
    let kept = build_session_context(&path[prep.cut.first_kept_entry_index..]);
    estimate_tokens(&summary_message)
        + kept
            .messages()
            .iter()
            .filter(|m| !matches!(m, Message::CompactionSummary { .. }))
            .map(|m| estimate_tokens(m))
            .sum::<u64>()
}

/// The summary of a compaction: its history part merged with the split turn's prefix summary.
/// When only the split turn is new, the previous summary (as `previous` gives it) stays as the
/// history part.
fn merged_summary(
    history: Option<&Summary>,
    prefix: Option<&Summary>,
    previous: impl FnOnce() -> Option<String>,
) -> String {
    let history = match history {
        Some(summary) => summary.text.clone(),
        None => previous().unwrap_or_else(|| "No prior history.".to_owned()),
    };
    match prefix {
        Some(prefix) => merge_split_turn(&history, &prefix.text),
        None => history,
    }
}

/// The history summary and the split turn's prefix, summarized side by side. The file lists
/// are appended to the summary afterwards: the gate counts what they hold as kept. Pins ride
/// with the history summary (with the turn prefix when only it is new).
async fn summarize_parts(
    pipeline: &Pipeline,
    context: &Context,
    history: Option<SummaryRequest>,
    prefix: Option<SummaryRequest>,
    pins: &[String],
    files: &FileLists,
    chain: Option<Arc<Chain>>,
) -> Result<(Option<Summary>, Option<Summary>), CompactError> {
    let pins: Vec<Anchor> = pins.iter().map(|p| Anchor::pinned(p)).collect();
    let has_history = history.is_some();
    let has_prefix = prefix.is_some();
    let jobs: Vec<Job> = history
        .into_iter()
        .map(|r| (Purpose::History, r, true))
        .chain(
            prefix
                .into_iter()
                .map(|r| (Purpose::TurnPrefix, r, !has_history)),
        )
        .map(|(purpose, request, pinned)| Job {
            purpose,
            request,
            gate: GateInput {
                extra: if pinned { pins.clone() } else { Vec::new() },
                appendix: files.format_tags(),
            },
            chain: chain.clone(),
            when_spent: Default::default(),
        })
        .collect();
    let mut results = pipeline.run_all(context, jobs).await?.into_iter();
    let mut next = |present: bool| -> Result<Option<Summary>, CompactError> {
        match present {
            // The entry is written from the pipeline's sealed summaries: stored redacted.
            true => Ok(Some(
                results.next().expect("a result per request")?.into_inner(),
            )),
            false => Ok(None),
        }
    };
    let history = next(has_history)?;
    let prefix = next(has_prefix)?;
    Ok((history, prefix))
}

/// The outcome of a compaction whose entry is written: what its calls cost and did.
fn finish(
    entry: CompactionEntry,
    calls: &[&Summary],
    started: Instant,
    tokens_after: u64,
) -> CompactionOutcome {
    let mut models: Vec<&str> = calls.iter().map(|s| s.model.as_str()).collect();
    models.dedup();
    let tokens_before = entry.tokens_before as u64;
    CompactionOutcome {
        line: entry.to_line(),
        entry,
        model: if models.is_empty() {
            "none".to_owned()
        } else {
            models.join("+")
        },
        usage: calls
            .iter()
            .fold(TokenUsage::default(), |sum, s| sum.plus(s.usage)),
        latency_ms: started.elapsed().as_millis() as u64,
        tokens_after,
        // Each summary, and the repair request the fidelity gate made for it.
        summarizer_calls: calls
            .iter()
            .map(|s| 1 + u32::from(s.fidelity.as_ref().is_some_and(|f| f.repair_call)))
            .sum(),
        fidelity: calls
            .iter()
            .filter_map(|s| s.fidelity.clone())
            .fold(Report::default(), Report::merge),
        flags: Flags {
            cached: !calls.is_empty() && calls.iter().all(|s| s.flags.cached),
            budget_exhausted: calls.iter().any(|s| s.flags.budget_exhausted),
            loop_detected: calls.iter().any(|s| s.flags.loop_detected)
                || (tokens_before >= MIN_LOOP_TOKENS && tokens_after * 10 >= tokens_before * 8),
            redactions: calls.iter().map(|s| s.flags.redactions).sum(),
            model_windows: calls.iter().find_map(|s| s.flags.model_windows),
            recall_id: None,
            cache_key: None,
        },
        prepared: None,
    }
}

/// Which branch summary to make.
#[derive(Debug, Clone, Default)]
pub struct BranchSummaryRequest {
    /// The entry the user navigates to.
    pub target_id: String,
    /// The leaf being left (default: the last entry).
    pub from_leaf_id: Option<String>,
    /// Tokens reserved for the answer; the branch may use `context_window − reserve` tokens.
    pub reserve_tokens: u64,
    pub context_window: u64,
    pub custom_instructions: Option<String>,
    /// Custom instructions replace the template instead of being appended.
    pub replace_instructions: bool,
}

/// A branch-summary entry ready to append.
#[derive(Debug, Clone, PartialEq)]
pub struct BranchSummaryOutcome {
    pub entry: BranchSummaryEntry,
    pub line: String,
    pub model: String,
    pub usage: TokenUsage,
    pub latency_ms: u64,
    pub fidelity: Report,
}

/// Summarizes the branch left when navigating from the leaf to `target` (spec §9).
pub async fn summarize_branch(
    session: &Session,
    request: &BranchSummaryRequest,
    pipeline: &Pipeline,
    context: &Context,
    prompts: &Prompts,
) -> Result<BranchSummaryOutcome, CompactError> {
    let started = Instant::now();
    let target = session
        .index_of(&request.target_id)
        .ok_or_else(|| UnknownEntry(request.target_id.clone()))?;
    let old_leaf = session.resolve_leaf(request.from_leaf_id.as_deref())?;
    let collected = branch::collect_branch_entries(session, old_leaf, target);
    if collected.is_empty() {
        return Err(CompactError::Nothing(
            NothingReason::NothingToSummarize,
            "the target is on the current path: no branch is left behind".into(),
        ));
    }
    let budget = request
        .context_window
        .saturating_sub(request.reserve_tokens);
    let prep = branch::prepare_branch_entries(session, &collected, budget);
    let files = prep.file_ops.lists();
    let (summary, call) = if prep.messages.is_empty() {
        ("No content to summarize".to_owned(), None)
    } else {
        let conversation = serialize_conversation(prep.messages.iter().copied());
        let prompt = branch_prompt(
            prompts,
            &conversation,
            request.custom_instructions.as_deref(),
            request.replace_instructions,
        );
        // Replaced instructions may ask for anything: what they ask is read from them.
        let job = Job {
            purpose: Purpose::Branch,
            request: SummaryRequest::rendered(
                prompts.system.clone(),
                prompt,
                BRANCH_MAX_TOKENS,
                typed_conversation(prep.messages.iter().copied()),
            ),
            gate: GateInput {
                extra: Vec::new(),
                appendix: files.format_tags(),
            },
            chain: None,
            when_spent: Default::default(),
        };
        let result = pipeline
            .run_all(context, vec![job])
            .await?
            .pop()
            .expect("one result per job")?
            .into_inner();
        let text = format!(
            "{}\n\n{}{}",
            prompts.branch_preamble,
            result.text,
            files.format_tags()
        );
        (text, Some(result))
    };
    let parent =
        branch::branch_summary_parent(session, target).map(|i| session.entries[i].id.clone());
    let entry = BranchSummaryEntry::new(
        new_entry_id(session.ids()),
        parent,
        time::now_iso(),
        summary,
        files,
    );
    Ok(BranchSummaryOutcome {
        line: entry.to_line(),
        entry,
        model: call.as_ref().map_or("none".to_owned(), |c| c.model.clone()),
        usage: call.as_ref().map(|c| c.usage).unwrap_or_default(),
        latency_ms: started.elapsed().as_millis() as u64,
        fidelity: call.and_then(|c| c.fidelity).unwrap_or_default(),
    })
}
