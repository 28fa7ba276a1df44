//! Compacting a session: plan the cut (the pure core), render the prompts, call the summarizer
//! (history and split-turn prefix in parallel), and build the compaction entry in pi's shape.
//! Used by the HTTP API and by `compactd compact`.
//!
//! Where the reference has quirks, compactd does better (spec §4.9-4, §4.9-11): nothing to
//! summarize is an error rather than a summary of nothing, no call is made for an empty
//! conversation, and a split turn whose history part is empty keeps the previous summary.

use std::time::Instant;

use crate::compaction::entry::{BranchSummaryEntry, CompactionEntry, strip_file_tags};
use crate::compaction::prompt::{
    BRANCH_MAX_TOKENS, branch_prompt, history_max_tokens, history_prompt, merge_split_turn,
    turn_prefix_max_tokens, turn_prefix_prompt,
};
use crate::compaction::{
    CompactionSettings, NothingReason, NothingToCompact, branch, build_session_context,
    estimate_tokens, prepare_compaction, serialize_conversation,
};
use crate::prompts::Prompts;
use crate::session::{Message, Session, UnknownEntry, new_entry_id, time};
use crate::summarizer::{SummarizeError, Summarizer, Summary, SummaryRequest, TokenUsage};

/// Which compaction to make.
#[derive(Debug, Clone, Default)]
pub struct CompactionRequest {
    /// Compact the path to this entry (default: the last entry).
    pub leaf_id: Option<String>,
    pub settings: CompactionSettings,
    /// The user's focus (`/compact <text>`).
    pub custom_instructions: Option<String>,
}

/// A compaction entry ready to append.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionOutcome {
    pub entry_id: String,
    /// The entry as a JSONL line (no newline): what the client appends to its file.
    pub line: String,
    pub leaf_id: String,
    pub first_kept_entry_id: String,
    pub summary: String,
    /// The model(s) that wrote it; `a+b` when the two parts of a split turn came from different
    /// models, `none` when no call was needed.
    pub model: String,
    pub usage: TokenUsage,
    pub latency_ms: u64,
    pub tokens_before: f64,
    /// Heuristic estimate of the context after the compaction (summary plus kept messages).
    pub tokens_after: u64,
    pub summarizer_calls: u32,
}

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

/// Plans and writes a compaction of `session`.
pub async fn compact(
    session: &Session,
    request: &CompactionRequest,
    summarizer: &Summarizer,
    prompts: &Prompts,
) -> Result<CompactionOutcome, CompactError> {
    let started = Instant::now();
    let path = session.active_path(request.leaf_id.as_deref())?;
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
    let reserve = request.settings.reserve_tokens;
    let split = prep.cut.is_split_turn && !prep.turn_prefix_messages.is_empty();

    // The calls this compaction needs, run together: the history summary (unless only the split
    // turn is new) and the split turn's prefix.
    let history_request = (!prep.messages_to_summarize.is_empty()).then(|| {
        let conversation = serialize_conversation(prep.messages_to_summarize.iter().copied());
        SummaryRequest {
            system_prompt: prompts.system.clone(),
            prompt: history_prompt(
                prompts,
                &conversation,
                prep.previous_summary,
                request.custom_instructions.as_deref(),
            ),
            max_tokens: history_max_tokens(reserve),
        }
    });
    let prefix_request = split.then(|| {
        let conversation = serialize_conversation(prep.turn_prefix_messages.iter().copied());
        SummaryRequest {
            system_prompt: prompts.system.clone(),
            prompt: turn_prefix_prompt(prompts, &conversation),
            max_tokens: turn_prefix_max_tokens(reserve),
        }
    });
    let requests: Vec<SummaryRequest> = history_request
        .iter()
        .chain(prefix_request.iter())
        .cloned()
        .collect();
    let mut results = summarizer.summarize_all(&requests).await?.into_iter();
    let history_summary = match history_request {
        Some(_) => Some(results.next().expect("a result per request")?),
        None => None,
    };
    let prefix_summary = match prefix_request {
        Some(_) => Some(results.next().expect("a result per request")?),
        None => None,
    };
    let history_text = match &history_summary {
        Some(summary) => summary.text.clone(),
        // Only the split turn is new: the previous summary stays as the history part.
        None => prep
            .previous_summary
            .map(strip_file_tags)
            .unwrap_or_else(|| "No prior history.".to_owned()),
    };

    let merged = match &prefix_summary {
        Some(prefix) => merge_split_turn(&history_text, &prefix.text),
        None => history_text,
    };
    let files = prep.file_ops.lists();
    let summary = merged + &files.format_tags();

    let leaf = path.last().expect("a plan has a non-empty path");
    let entry_id = new_entry_id(session.ids());
    let timestamp = time::now_iso();
    let line = CompactionEntry {
        id: &entry_id,
        parent_id: &leaf.id,
        timestamp: &timestamp,
        summary: &summary,
        first_kept_entry_id: prep.first_kept_entry_id,
        tokens_before: prep.tokens_before,
        files: &files,
    }
    .to_line();

    // The context after: the summary, then the kept entries (spec §8.3, step 5).
    let summary_message = Message::CompactionSummary {
        summary: summary.clone(),
        tokens_before: prep.tokens_before,
        timestamp: None,
    };
    let kept = build_session_context(&path[prep.cut.first_kept_entry_index..]);
    let tokens_after = estimate_tokens(&summary_message)
        + kept
            .messages()
            .iter()
            .filter(|m| !matches!(m, Message::CompactionSummary { .. }))
            .map(|m| estimate_tokens(m))
            .sum::<u64>();

    let calls: Vec<&Summary> = history_summary
        .iter()
        .chain(prefix_summary.iter())
        .collect();
    let mut models: Vec<&str> = calls.iter().map(|s| s.model.as_str()).collect();
    models.dedup();
    Ok(CompactionOutcome {
        entry_id,
        line,
        leaf_id: leaf.id.clone(),
        first_kept_entry_id: prep.first_kept_entry_id.to_owned(),
        summary,
        model: if models.is_empty() {
            "none".to_owned()
        } else {
            models.join("+")
        },
        usage: TokenUsage {
            input_tokens: calls.iter().map(|s| s.usage.input_tokens).sum(),
            output_tokens: calls.iter().map(|s| s.usage.output_tokens).sum(),
        },
        latency_ms: started.elapsed().as_millis() as u64,
        tokens_before: prep.tokens_before,
        tokens_after,
        summarizer_calls: calls.len() as u32,
    })
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
    pub entry_id: String,
    pub line: String,
    /// Where it hangs (`None`: at the root).
    pub parent_id: Option<String>,
    pub summary: String,
    pub model: String,
    pub usage: TokenUsage,
    pub latency_ms: u64,
}

/// Summarizes the branch left when navigating from the leaf to `target` (spec §9).
pub async fn summarize_branch(
    session: &Session,
    request: &BranchSummaryRequest,
    summarizer: &Summarizer,
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
        let result = summarizer
            .summarize(&SummaryRequest {
                system_prompt: prompts.system.clone(),
                prompt,
                max_tokens: BRANCH_MAX_TOKENS,
            })
            .await?;
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
    let entry_id = new_entry_id(session.ids());
    let timestamp = time::now_iso();
    let line = BranchSummaryEntry {
        id: &entry_id,
        parent_id: parent.as_deref(),
        timestamp: &timestamp,
        summary: &summary,
        files: &files,
    }
    .to_line();
    Ok(BranchSummaryOutcome {
        entry_id,
        line,
        parent_id: parent,
        summary,
        model: call.as_ref().map_or("none".to_owned(), |c| c.model.clone()),
        usage: call.map(|c| c.usage).unwrap_or_default(),
        latency_ms: started.elapsed().as_millis() as u64,
    })
}
