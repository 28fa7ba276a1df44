//! Compacting a session pi ≥ 1.5 wrote, as pi 1.5.2 compacts it: its planner
//! ([`compactd_core::compaction::pi15`]), its prompts (`prompts/pi15/`: the split update prompt, the turn
//! prefix as `# Conversation` / `# Instructions`), the previous summary kept as it is when only
//! the split turn is new, and its entry: `usage` and the current `systemMessage` written with it.
//! Every summary goes through compactd's pipeline like the others.

use std::time::Instant;

use serde_json::{Value, json};

use crate::app::compaction::compactor::{
    CompactError, CompactionOutcome, CompactionRequest, History, finish, from_prepared,
    merged_summary, summarize_parts,
};
use crate::pipeline::{Context, Pipeline};
use crate::summarizer::{Summary, SummaryRequest, TokenUsage};
use compactd_core::compaction::NothingReason;
use compactd_core::compaction::entry::CompactionEntry;
use compactd_core::compaction::output_budget::{history_max_tokens, turn_prefix_max_tokens};
use compactd_core::compaction::pi15::prepare;
use compactd_core::js_json::utf16_len;
use compactd_core::session::{Entry, IdSet, new_entry_id, time};
use compactd_core::transcript::prompt::{conversation_block, previous_block};

use compactd_core::prompts::pi15::{SUMMARY, SYSTEM, TURN_PREFIX, UPDATE};

/// pi 1.5.2's usage shape (`input`, `output`, `cacheRead`, `cacheWrite`, `totalTokens`, `cost`):
/// compactd's models are compactd's to pay for, so the cost is 0.
fn pi_usage(usage: TokenUsage) -> Value {
    json!({"input": usage.input_tokens, "output": usage.output_tokens,
        "cacheRead": usage.cached_input_tokens, "cacheWrite": 0,
        "totalTokens": usage.input_tokens + usage.output_tokens,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
}

pub(super) async fn compact(
    path: &[&Entry],
    taken: &(dyn IdSet + Sync),
    request: &CompactionRequest,
    pipeline: &Pipeline,
    context: &Context,
    started: Instant,
) -> Result<CompactionOutcome, CompactError> {
    let prep = prepare(path, &request.settings).ok_or_else(|| {
        CompactError::Nothing(
            NothingReason::NothingToSummarize,
            "pi 1.5's planner finds nothing to summarize: already compacted, or everything fits in keepRecentTokens".into(),
        )
    })?;
    let reserve = request.settings.reserve_tokens;
    let focus = |prompt: String| with_focus(prompt, request.custom_instructions.as_deref());
    let summarizes = prep.messages_to_summarize > 0;
    let ahead = from_prepared(request, || {
        summarizes.then(|| History::pi15(&prep, history_max_tokens(reserve)))
    });
    let history_request = ahead.request.or_else(|| {
        summarizes.then(|| {
            history_request(
                &prep.conversation,
                prep.previous_summary.as_deref(),
                request.custom_instructions.as_deref(),
                history_max_tokens(reserve),
            )
        })
    });
    let split = prep.is_split_turn && prep.turn_prefix_messages > 0;
    let prefix_request = split.then(|| {
        let prompt = format!(
            "# Conversation\n{}\n\n# Instructions\n{TURN_PREFIX}",
            prep.turn_prefix_conversation
        );
        SummaryRequest::from_prompt(
            SYSTEM.to_owned(),
            focus(prompt),
            turn_prefix_max_tokens(reserve),
        )
    });
    let files = prep.files.clone();
    let (history, prefix) = summarize_parts(
        pipeline,
        context,
        history_request,
        prefix_request,
        &request.pins,
        &files,
        ahead.chain,
    )
    .await?;
    // pi 1.5 keeps the previous summary as it is when only the split turn is new.
    let merged = merged_summary(history.as_ref(), prefix.as_ref(), || {
        prep.previous_summary.clone()
    });
    let calls: Vec<&Summary> = history.iter().chain(prefix.iter()).collect();
    let usage = calls
        .iter()
        .fold(TokenUsage::default(), |sum, s| sum.plus(s.usage));
    let leaf = path.last().expect("a plan has a non-empty path");
    let timestamp = time::now_iso();
    let mut entry = CompactionEntry::new(
        new_entry_id(taken),
        leaf.id.clone(),
        timestamp.clone(),
        merged + &files.format_tags(),
        prep.first_kept_entry_id.clone(),
        prep.tokens_before as f64,
        files,
    );
    entry.usage = Some(pi_usage(usage));
    entry.system_message = prep.system_message.clone().map(|mut system| {
        let ms = time::iso_to_epoch_ms(&timestamp).unwrap_or_default();
        system["timestamp"] = compactd_core::js_json::number_value(ms);
        system
    });
    let tokens_after = (utf16_len(&entry.summary) as u64).div_ceil(4) + prep.kept_tokens;
    let mut outcome = finish(entry, &calls, started, tokens_after);
    outcome.prepared = ahead.used;
    Ok(outcome)
}

/// pi 1.5.2's history prompt: the conversation, the previous summary it updates (if any), the
/// instructions, and the user's focus.
pub(super) fn history_request(
    conversation: &str,
    previous: Option<&str>,
    focus: Option<&str>,
    max_tokens: u64,
) -> SummaryRequest {
    let mut prompt = conversation_block(conversation);
    let instructions = match previous {
        Some(previous) => {
            prompt.push_str(&previous_block(previous));
            UPDATE
        }
        None => SUMMARY,
    };
    prompt.push_str(&with_focus(instructions.to_owned(), focus));
    SummaryRequest::from_prompt(SYSTEM.to_owned(), prompt, max_tokens)
}

/// pi 1.5's instructions with the user's focus (`/compact <focus>`) appended.
fn with_focus(prompt: String, focus: Option<&str>) -> String {
    match focus {
        Some(focus) if !focus.trim().is_empty() => format!("{prompt}\n\nAdditional focus: {focus}"),
        _ => prompt,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactd_core::fidelity::anchors;

    /// The split turn's prefix, framed as pi 1.5 frames it: its headings are not the user's words,
    /// neither in the extractive summary nor in the anchors a model's summary is checked against.
    #[test]
    fn the_turn_prefixs_framing_is_never_content() {
        let prompt = format!(
            "# Conversation\n[User]: Fix the parser in src/parse.rs; it drops the last token.\n\n[Assistant tool calls]: edit(path=\"src/parse.rs\", oldText=\"a\", newText=\"b\")\n\n[Tool result]: edited\n\n# Instructions\n{TURN_PREFIX}"
        );
        let request = SummaryRequest::from_prompt(SYSTEM.to_owned(), prompt, 2000);
        let summary = compactd_core::extractive::summarize(&request);
        for framing in ["# Conversation", "# Instructions", "[User]:"] {
            assert!(
                !summary.text.contains(framing),
                "{framing}: {}",
                summary.text
            );
        }
        assert!(
            summary.text.contains("## Original Request"),
            "{}",
            summary.text
        );
        let anchors = anchors::of_shape(request.shape(), request.max_tokens);
        let latest = anchors
            .iter()
            .find(|a| a.kind == anchors::AnchorKind::LatestRequest)
            .unwrap();
        assert_eq!(
            latest.text,
            "Fix the parser in src/parse.rs; it drops the last token."
        );
        assert!(anchors.iter().any(|a| a.text == "src/parse.rs"));
    }
}
