//! A compaction answered from its session's prepared summary: found by the session the request
//! names (its header) or, for a request that names none (a pi-family agent's remote endpoint), by
//! how its conversation opens; used only when it covers the first messages of the conversation as
//! they read now, and the request asks for nothing of its own.

use std::sync::Arc;

use axum::http::HeaderMap;

use super::reading::{loose_hashes, opening_key, prefix_hashes, session_key};
use super::{Compaction, Gateway};
use crate::access::Identity;
use crate::app::App;
use crate::app::wire::{Policy, WireRequest};
use crate::pipeline::{Endpoint, WhenSpent};
use crate::summarizer::Summary;
use crate::summarizer::chain::{Chain, Link};
use compactd_core::redact::Redacted;
use compactd_core::transcript::{Conversation, Shape};
use compactd_store::PreparedRow;

/// How often a compaction waiting for another replica's preparation asks the store whether it
/// ended (the mark bounds the wait: it expires).
const REMOTE_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// What Claude Code appends to its compaction instruction when `/compact` is given a focus.
const CLAUDE_FOCUS: &str = "\n\nAdditional Instructions:\n";

/// The line pi and oh-my-pi add to their summarization instructions for `/compact <focus>`.
const PI_FOCUS: &str = "\nAdditional focus:";

/// What a compaction asks of the preparer.
struct Asked<'a> {
    request: &'a WireRequest,
    /// It asks for something of its own, which a summary prepared without it cannot answer.
    focus: bool,
    /// Its conversation is written the way pi-family agents write it into their summarization
    /// prompt (tool output cut, no reasoning): matched as [`loose_hashes`] read it.
    loose: bool,
    /// Where the answer is logged.
    endpoint: Endpoint,
}

/// Whether a compaction asks for something of its own, which a summary prepared without it
/// cannot answer: Claude Code's `/compact <focus>`, a pi-family agent's, or instructions given
/// to a provider's compaction.
fn has_focus(compaction: &Compaction) -> bool {
    let instructions = &compaction.request.prompt;
    if compaction.agent == super::super::anthropic_messages::CLAUDE_CODE {
        return instructions.contains(CLAUDE_FOCUS);
    }
    if compaction.agent.name == super::super::rendered::RENDERED_MESSAGES.name {
        return instructions.contains(PI_FOCUS);
    }
    // The providers' APIs take `instructions` only to change what the summary holds.
    super::super::recognize::is_provider_api(compaction.agent) && !instructions.trim().is_empty()
}

/// The compaction answered from its session's prepared summary, when one covers the first
/// messages of its conversation as they read now: the summary of those, with the messages after
/// them merged in by the extractive summarizer, through the pipeline (redaction, the gate,
/// standing rules, the call log). `None`: the normal path.
pub(crate) async fn answered(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    headers: &HeaderMap,
    compaction: &Compaction,
) -> Option<Redacted<Summary>> {
    let asked = Asked {
        request: &compaction.request,
        focus: has_focus(compaction),
        loose: compaction.agent.name == super::super::rendered::RENDERED_MESSAGES.name,
        endpoint: Endpoint::Gateway(compaction.agent),
    };
    answered_as(app, gateway, who, headers, asked).await
}

/// A pi-family agent's remote endpoint (`POST /v1/compact`, oh-my-pi's `remoteEndpoint`)
/// answered from the prepared summary of the session whose turns passed through the gateway:
/// its prompt is the conversation as the agent writes it, the request names no session.
pub(crate) async fn answered_remote(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    headers: &HeaderMap,
    request: &WireRequest,
) -> Option<Redacted<Summary>> {
    let asked = Asked {
        request,
        focus: request.prompt.contains(PI_FOCUS),
        loose: true,
        endpoint: Endpoint::Compact,
    };
    answered_as(app, gateway, who, headers, asked).await
}

/// The `## ` headings of a text, in order.
fn headings(text: &str) -> Vec<&str> {
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(str::trim)
        .collect()
}

/// Whether instructions written by the agent ask for the kind of summary `summary` is: sections,
/// at least half of the summary's among them (one compactd adds, such as the rules in force,
/// aside); a request for something else, such as a pull request's description from the same
/// conversation, is not answered with a handoff summary.
fn asks_for(instructions: &str, summary: &str) -> bool {
    let asked = headings(instructions);
    let written = headings(summary);
    let matching = written.iter().filter(|h| asked.contains(h)).count();
    matching > 0 && 2 * matching >= written.len()
}

async fn answered_as(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    headers: &HeaderMap,
    asked: Asked<'_>,
) -> Option<Redacted<Summary>> {
    if !gateway.preparer.serves(who) {
        return None;
    }
    // An agent that renders its conversation into the compaction prompt (OpenCode, the
    // pi family) is read from the text, as its compaction is summarized.
    let rendered = match &asked.request.conversation {
        Some(_) => None,
        None => Some(Shape::of_prompt(&asked.request.prompt)),
    };
    let conversation = match (&asked.request.conversation, &rendered) {
        (Some(conversation), _) => conversation,
        (None, Some(shape)) if !shape.conversation.messages.is_empty() => &shape.conversation,
        _ => return None,
    };
    let messages = &conversation.messages;
    // A request that names no session is known by how its conversation opens.
    let by_opening = asked.loose && crate::app::threads::seen::agent_session(headers).is_none();
    let key = match by_opening {
        false => session_key(headers, messages)?,
        true => opening_key(messages)?,
    };
    // The session compacts now: the turn it waited with when idle is done with.
    let session = (who.tenant.clone(), key.clone());
    gateway.preparer.compacting(&session);
    let hashes = match asked.loose {
        true => loose_hashes(messages),
        false => prefix_hashes(messages),
    };
    let covers = |row: &PreparedRow| {
        let stored = if asked.loose {
            &row.loose_hash
        } else {
            &row.prefix_hash
        };
        let format = match &rendered {
            Some(shape) if asked.loose => asks_for(&shape.instructions, &row.summary),
            _ => true,
        };
        format
            && usize::try_from(row.prefix_items).is_ok_and(|covered| {
                covered > 0
                    && hashes
                        .get(covered - 1)
                        .is_some_and(|hash| hex::encode(hash) == *stored)
            })
    };
    let row = match by_opening {
        false => kept(app, gateway, who, &key, asked.focus, &covers).await?,
        // Found by its opening, the summary may be another session's that opens alike: one
        // that does not cover this conversation is left to it.
        true => app
            .prepared_opening(who, &key)
            .await
            .filter(|row| covers(row))?,
    };
    let usable = !asked.focus && covers(&row);
    if !usable && asked.loose {
        // A written request may be another of the agent's summarizations of the session (a
        // split turn's prefix, a pull request's description): the summary stays for its
        // compaction.
        return None;
    }
    // Used or outdated, the summary is done with: the session's next preparation starts afresh
    // (and the session found by its opening waits no more for its idle preparation).
    let recent = (who.tenant.clone(), row.session_key.clone());
    gateway.preparer.recent.invalidate(&recent);
    gateway.preparer.compacting(&recent);
    if !usable {
        app.metrics.prepared.with_label_values(&["wasted"]).inc();
        app.drop_prepared(&row).await;
        return None;
    }
    merged(app, who, &asked, conversation, rendered.as_ref(), row).await
}

/// The session's kept summary when it covers the conversation; else the one a preparation under
/// way keeps, waited for (most of the way there, rather than the whole of a new summarization).
async fn kept(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    key: &str,
    focus: bool,
    covers: &impl Fn(&PreparedRow) -> bool,
) -> Option<PreparedRow> {
    // A kept summary that covers this conversation answers at once, even while a newer one is
    // being prepared.
    let mut row = app.prepared(who, key).await;
    if !focus
        && !row.as_ref().is_some_and(covers)
        && let Some(waited) = after_running(app, &gateway.preparer, who, key).await
    {
        row = waited;
    }
    row
}

/// The prepared summary of the covered messages with the messages after them merged in.
async fn merged(
    app: &App,
    who: &Identity,
    asked: &Asked<'_>,
    conversation: &Conversation,
    rendered: Option<&Shape>,
    row: PreparedRow,
) -> Option<Redacted<Summary>> {
    let covered = row.prefix_items as usize;
    // What came after the prepared part (at least the latest message, which the merge keeps
    // verbatim when it is the user's).
    let from = covered.min(conversation.messages.len().saturating_sub(1));
    let mut request = asked.request.clone();
    request.conversation = Some(Conversation {
        messages: conversation.messages[from..].to_vec(),
        ..conversation.clone()
    });
    if let Some(shape) = rendered {
        // The rendered prompt's own instructions (its template), the conversation typed.
        request.prompt = shape.instructions.clone();
    }
    request.previous_summary = Some(row.summary.clone());
    let extractive = Chain::new(vec![Link::Extractive], app.configured_chain().policy);
    let policy = Policy {
        chain: Some(Arc::new(extractive)),
        when_spent: WhenSpent::Refuse,
    };
    match app
        .summarize_prompt_with(who, asked.endpoint, request, policy)
        .await
    {
        Ok(summary) => {
            app.metrics.prepared.with_label_values(&["used"]).inc();
            app.drop_prepared(&row).await;
            Some(summary)
        }
        Err(error) => {
            tracing::warn!(error = %error, "prepare: a prepared summary could not be merged; the normal path answers");
            None
        }
    }
}

/// Waits for the session's preparation under way, if any, and reads what it kept (`None`: none
/// was under way). On this replica its sender goes when it ends (`changed` then fails, which is
/// the signal); on another, its mark in the store does — waited for at most twice as long as a
/// preparation takes (a replica that died mid-way leaves its mark until it expires, and the
/// agent should not wait that out).
pub(super) async fn after_running(
    app: &App,
    preparer: &super::Preparer,
    who: &Identity,
    key: &str,
) -> Option<Option<PreparedRow>> {
    let session = (who.tenant.clone(), key.to_owned());
    if let Some(mut running) = super::InFlight::running(&preparer.in_flight, &session) {
        let _ = running.changed().await;
    } else if app.preparing(who, key).await {
        let takes = std::time::Duration::from_secs_f64(2.0 * preparer.pace.takes());
        let until = std::time::Instant::now() + takes;
        while std::time::Instant::now() < until && app.preparing(who, key).await {
            tokio::time::sleep(REMOTE_POLL).await;
        }
    } else {
        return None;
    }
    Some(app.prepared(who, key).await)
}

#[cfg(test)]
mod tests {
    use super::asks_for;

    #[test]
    fn a_summary_answers_instructions_that_ask_for_its_sections() {
        let pi = "You MUST use this format:\n\n## Goal\n[goals]\n\n## Constraints & Preferences\n- x\n\n\
                  ## Progress\n### Done\n\n## Next Steps\n1. y\n\n## Critical Context\n- z";
        let summary =
            "## Goal\nFix the lexer.\n\n## Progress\n### Done\n- a\n\n## Next Steps\n1. b";
        assert!(asks_for(pi, summary));
        let with_rules = format!("{summary}\n\n## Rules in force\n- never push to main");
        assert!(asks_for(pi, &with_rules), "one section of compactd's own");
        let description = "Summarize conversation changes as a pull request description.\n\
                           MUST 2-3 sentences; first person.";
        assert!(!asks_for(description, summary));
        assert!(!asks_for(
            pi,
            "## Objective\nsomething else\n\n## Files\n- a"
        ));
        assert!(!asks_for(pi, "no sections at all"));
    }
}
