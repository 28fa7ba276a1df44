//! Which requests are compactions: one table of recognizers, a row an agent on a wire, each
//! recognizing its agent's compactions by their shape — the markers recorded from the real CLIs
//! (`tests/fixtures/agent-requests/`, whose README says how each was run). The functions live in
//! their wire's module and name the release they were recorded from; `tests/it/gateway/recorded.rs`
//! replays those recordings.

use std::sync::LazyLock;

use axum::http::HeaderMap;
use memchr::memmem::Finder;
use serde_json::Value;

use super::anthropic_compaction::{self, ANTHROPIC_COMPACTION};
use super::anthropic_messages::{self, CLAUDE_CODE};
use super::chat_completions::{self, OPENCODE};
use super::rendered::{self, RENDERED_MARKER, RENDERED_MESSAGES, RENDERED_RESPONSES};
use super::responses::{self, CODEX_LOCAL, CODEX_REMOTE};
use super::responses_compact::RESPONSES_COMPACT;
use super::{Wire, carried, inline};
use crate::app::wire::WireRequest;
use crate::pipeline::Agent;
use compactd_core::fidelity::standing;
use compactd_core::transcript::{Conversation, Role};

/// A compaction request: what the pipeline summarizes, typed, and how the agent wants its answer.
#[derive(Debug, Clone)]
pub(crate) struct Compaction {
    pub(crate) agent: Agent,
    /// The history (typed), the agent's instructions (empty: compactd's history prompt) and the
    /// summary of its previous compaction, taken out of the user message that carried it
    /// ([`super::carried`]).
    pub(crate) request: WireRequest,
    /// How the answer is written.
    pub(crate) answer: Form,
    /// Whether the client asked for a stream.
    pub(crate) stream: bool,
    /// The model the agent asked for.
    pub(crate) model: String,
}

/// What a compaction's answer holds, in its wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// The summary as text.
    Text,
    /// The summary in `<summary>` tags (Claude Code keeps only what is inside them).
    SummaryTags,
    /// One sealed `compaction` item that compactd reads back ([`super::codex`]).
    SealedItem,
    /// One Anthropic `compaction` block alone, signed with compactd's seal
    /// ([`super::anthropic_compaction`]).
    CompactionBlock,
    /// compactd's block or item first, then the upstream's reply to the compacted request
    /// ([`super::inline`]).
    Inline,
}

/// One agent's compactions on one wire: adding an agent on a wire compactd serves is one row
/// here (and its function, samples and tests).
pub(crate) struct Recognizer {
    pub(crate) agent: Agent,
    pub(crate) wire: Wire,
    /// Bytes every compaction of this agent holds: a body with none of its wire's markers is
    /// passed through unparsed (the ordinary turns that are most of the traffic, and tens of
    /// kilobytes each).
    pub(crate) marker: &'static str,
    /// The compaction the body is, if it is one.
    pub(crate) recognize: fn(Agent, &HeaderMap, &Value) -> Option<Compaction>,
}

/// Every agent whose compactions compactd answers, by wire.
pub(crate) const RECOGNIZERS: &[Recognizer] = &[
    Recognizer {
        agent: ANTHROPIC_COMPACTION,
        wire: Wire::AnthropicMessages,
        marker: anthropic_compaction::ON_DEMAND_MARKER,
        recognize: anthropic_compaction::on_demand,
    },
    Recognizer {
        agent: ANTHROPIC_COMPACTION,
        wire: Wire::AnthropicMessages,
        marker: inline::anthropic::EDIT_MARKER,
        recognize: inline::anthropic::over_trigger,
    },
    Recognizer {
        agent: RESPONSES_COMPACT,
        wire: Wire::Responses,
        marker: inline::responses::THRESHOLD_MARKER,
        recognize: inline::responses::over_threshold,
    },
    Recognizer {
        agent: CLAUDE_CODE,
        wire: Wire::AnthropicMessages,
        marker: anthropic_messages::CLAUDE_TASK,
        recognize: anthropic_messages::claude_code,
    },
    Recognizer {
        agent: CODEX_REMOTE,
        wire: Wire::Responses,
        marker: responses::REMOTE_TRIGGER,
        recognize: responses::codex_remote,
    },
    Recognizer {
        agent: CODEX_LOCAL,
        wire: Wire::Responses,
        marker: responses::CODEX_PROMPT,
        recognize: responses::codex_local,
    },
    Recognizer {
        agent: RENDERED_MESSAGES,
        wire: Wire::AnthropicMessages,
        marker: RENDERED_MARKER,
        recognize: rendered::messages,
    },
    Recognizer {
        agent: RENDERED_RESPONSES,
        wire: Wire::Responses,
        marker: RENDERED_MARKER,
        recognize: rendered::responses,
    },
    Recognizer {
        agent: OPENCODE,
        wire: Wire::ChatCompletions,
        marker: chat_completions::OPENCODE_SYSTEM,
        recognize: chat_completions::opencode,
    },
];

/// Whether `agent` is one of the providers' own compaction APIs (rather than an agent's
/// compaction prompt): what a tenant may leave to the provider.
pub(crate) fn is_provider_api(agent: Agent) -> bool {
    agent == ANTHROPIC_COMPACTION || agent == RESPONSES_COMPACT
}

/// The compaction a body of `wire` is, by the first recognizer that knows it.
pub(crate) fn compaction(wire: Wire, headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    RECOGNIZERS
        .iter()
        .filter(|r| r.wire == wire)
        .find_map(|r| (r.recognize)(r.agent, headers, body))
}

/// Whether a body of `wire` may be a compaction or a summarization request, by the markers'
/// bytes alone. Every ordinary turn is scanned: the searchers are built once.
pub(crate) fn may_be_compaction(wire: Wire, body: &[u8]) -> bool {
    static MARKERS: LazyLock<Vec<(Wire, Finder<'static>)>> = LazyLock::new(|| {
        let rendered = (Wire::ChatCompletions, RENDERED_MARKER);
        RECOGNIZERS
            .iter()
            .map(|r| (r.wire, r.marker))
            .chain([rendered])
            .map(|(wire, marker)| (wire, Finder::new(marker.as_bytes())))
            .collect()
    });
    MARKERS
        .iter()
        .any(|(of, finder)| *of == wire && finder.find(body).is_some())
}

/// A compaction of `agent` over `conversation`: the agent's system and developer text left out
/// (its own instructions, environment notes, reminders and tool lists, which are not the work to
/// summarize and are most of the bytes) but for a project rules file it pasted, whose rules are
/// the user's; the summary it carried (`previous_summary`, or a handoff message in the
/// conversation) taken out.
pub(super) fn of_history(
    agent: Agent,
    answer: Form,
    body: &Value,
    mut conversation: Conversation,
    instructions: String,
    previous_summary: Option<String>,
) -> Compaction {
    conversation
        .messages
        .retain(|m| m.role != Role::Developer || standing::pastes_rules_file(&m.text));
    let previous_summary = previous_summary.or_else(|| carried::take(&mut conversation));
    Compaction {
        agent,
        request: WireRequest {
            system_prompt: None,
            prompt: instructions,
            conversation: Some(conversation),
            previous_summary,
            max_tokens: None,
            prompt_field: "messages",
        },
        answer,
        stream: stream_of(body),
        model: model_of(body),
    }
}

pub(super) fn stream_of(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

pub(super) fn model_of(body: &Value) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
