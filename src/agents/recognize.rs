//! Which requests are compactions, by agent and version, recognized by their shape — the markers
//! recorded from the real CLIs (`tests/fixtures/agent-requests/`, whose README says how each was
//! run). Every detector names the release it was recorded from; the samples next to them are
//! tested in `tests/it/gateway.rs` against those recordings.

use axum::http::HeaderMap;
use serde_json::Value;

use super::{Wire, carried};
use crate::app::wire::WireRequest;
use crate::pipeline::Agent;
use crate::transcript::{Conversation, Role, structured};

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

/// Claude Code (2.1.330): `/v1/messages` with its summary instruction appended.
pub(crate) const CLAUDE_CODE: Agent = Agent {
    name: "claude-code",
    endpoint: "gateway:claude-code",
};
/// Codex (0.169.0) with a custom provider: local "memento" compaction over `/v1/responses`.
pub(crate) const CODEX_LOCAL: Agent = Agent {
    name: "codex",
    endpoint: "gateway:codex",
};
/// Codex (0.169.0) with the `openai` provider: remote compaction v2, a `compaction_trigger`.
pub(crate) const CODEX_REMOTE: Agent = Agent {
    name: "codex-remote",
    endpoint: "gateway:codex-remote",
};
/// OpenCode (1.18.33): chat completions with its summarization system prompt.
pub(crate) const OPENCODE: Agent = Agent {
    name: "opencode",
    endpoint: "gateway:opencode",
};

/// Every agent whose compactions compactd answers, by wire.
pub(crate) const RECOGNIZERS: &[Recognizer] = &[
    Recognizer {
        agent: CLAUDE_CODE,
        wire: Wire::AnthropicMessages,
        marker: CLAUDE_TASK,
        recognize: claude_code,
    },
    Recognizer {
        agent: CODEX_REMOTE,
        wire: Wire::Responses,
        marker: "compaction_trigger",
        recognize: codex_remote,
    },
    Recognizer {
        agent: CODEX_LOCAL,
        wire: Wire::Responses,
        marker: CODEX_PROMPT,
        recognize: codex_local,
    },
    Recognizer {
        agent: OPENCODE,
        wire: Wire::ChatCompletions,
        marker: OPENCODE_SYSTEM,
        recognize: opencode,
    },
];

/// The compaction a body of `wire` is, by the first recognizer that knows it.
pub(crate) fn compaction(wire: Wire, headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    RECOGNIZERS
        .iter()
        .filter(|r| r.wire == wire)
        .find_map(|r| (r.recognize)(r.agent, headers, body))
}

/// The marker of a rendered summarization prompt on the chat wire ([`is_rendered_summarization`]).
const RENDERED_MARKER: &str = "<conversation>";

/// Claude Code 2.1.330: the last message is the user's and opens with this.
const CLAUDE_OPENING: &str = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.";
/// … and holds this.
const CLAUDE_TASK: &str = "Your task is to create a detailed summary of the conversation so far";
/// Codex 0.169.0's local compaction prompt opens with this.
const CODEX_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION.";
/// OpenCode 1.18.33's summarization system prompt opens with this.
const OPENCODE_SYSTEM: &str = "You are a context summarization agent.";

/// Whether a body of `wire` may be a compaction or a summarization request, by the markers'
/// bytes alone.
pub(crate) fn may_be_compaction(wire: Wire, body: &[u8]) -> bool {
    let rendered = (wire == Wire::ChatCompletions).then_some(RENDERED_MARKER);
    RECOGNIZERS
        .iter()
        .filter(|r| r.wire == wire)
        .map(|r| r.marker)
        .chain(rendered)
        .any(|marker| memchr::memmem::find(body, marker.as_bytes()).is_some())
}

/// A Claude Code compaction on the Anthropic Messages wire.
fn claude_code(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let messages = body.get("messages")?.as_array()?;
    let (last, history) = messages.split_last()?;
    if last.get("role")?.as_str()? != "user" {
        return None;
    }
    let content = last.get("content")?;
    // The instruction is the last message's text; after a tool call Claude Code appends it to
    // the message that carries the tool's result (recorded from 2.1.330), which stays history.
    let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
    let at = blocks
        .iter()
        .position(|b| {
            b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim_start().starts_with(CLAUDE_OPENING))
        })
        .unwrap_or(0);
    let instructions = match content {
        Value::Array(_) => structured::content_text(&Value::from(blocks[at..].to_vec())),
        other => structured::content_text(other),
    };
    if !instructions.trim_start().starts_with(CLAUDE_OPENING) || !instructions.contains(CLAUDE_TASK)
    {
        return None;
    }
    let mut history = history.to_vec();
    if at > 0 {
        let mut kept = last.clone();
        kept["content"] = Value::from(blocks[..at].to_vec());
        history.push(kept);
    }
    let conversation = structured::from_anthropic(&history);
    Some(of_history(
        agent,
        Form::SummaryTags,
        body,
        conversation,
        instructions,
    ))
}

/// A Codex remote compaction (v2) on the Responses wire: a `compaction_trigger` last.
fn codex_remote(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let (last, history) = body.get("input")?.as_array()?.split_last()?;
    if last.get("type").and_then(Value::as_str) != Some("compaction_trigger") {
        return None;
    }
    let conversation = structured::from_responses(&Value::from(history.to_vec()));
    Some(of_history(
        agent,
        Form::SealedItem,
        body,
        conversation,
        String::new(),
    ))
}

/// A Codex local compaction on the Responses wire: its prompt last, and no tools or the turn
/// metadata's `request_kind: compaction` (the header, or the same JSON in `client_metadata`).
fn codex_local(agent: Agent, headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let (last, history) = body.get("input")?.as_array()?.split_last()?;
    let text = last
        .get("content")
        .map(structured::content_text)
        .unwrap_or_default();
    let tools_off = body
        .get("tools")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let prompt = last.get("role").and_then(Value::as_str) == Some("user")
        && text.trim_start().starts_with(CODEX_PROMPT);
    let asked = || codex_request_kind(headers, body).as_deref() == Some("compaction");
    if !(prompt && (tools_off || asked())) {
        return None;
    }
    let conversation = structured::from_responses(&Value::from(history.to_vec()));
    Some(of_history(agent, Form::Text, body, conversation, text))
}

/// A compaction of `agent` over `conversation`: the agent's system and developer text left out
/// (its own instructions, environment notes and tool lists, which are not the work to summarize
/// and are most of the bytes), the summary it carried taken out of its message.
fn of_history(
    agent: Agent,
    answer: Form,
    body: &Value,
    mut conversation: Conversation,
    instructions: String,
) -> Compaction {
    conversation.messages.retain(|m| m.role != Role::Developer);
    let previous_summary = carried::take(&mut conversation);
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

/// `request_kind` of Codex's turn metadata (the header, or the same JSON in `client_metadata`).
fn codex_request_kind(headers: &HeaderMap, body: &Value) -> Option<String> {
    let text = headers
        .get("x-codex-turn-metadata")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            body.pointer("/client_metadata/x-codex-turn-metadata")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })?;
    let metadata: Value = serde_json::from_str(&text).ok()?;
    metadata
        .get("request_kind")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// An OpenCode compaction on the chat wire: its summarization system prompt, and no tools.
fn opencode(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let messages = body.get("messages")?.as_array()?;
    let opencode = messages.iter().any(|m| {
        m.get("role").and_then(Value::as_str) == Some("system")
            && m.get("content")
                .map(structured::content_text)
                .is_some_and(|s| s.trim_start().starts_with(OPENCODE_SYSTEM))
    });
    if !opencode || has_tools(body) {
        return None;
    }
    // A compaction whose fields compactd cannot read goes upstream as it came.
    let read = super::chat_completions::read(body).ok()?;
    Some(Compaction {
        agent,
        request: read.request,
        answer: Form::Text,
        stream: read.stream,
        model: read.model,
    })
}

/// Whether a chat-completions body is a rendered summarization prompt as pi-family agents send
/// it (a system message and one user message holding `<conversation>`), and no tools.
pub(crate) fn is_rendered_summarization(body: &Value) -> bool {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return false;
    };
    if has_tools(body) {
        return false;
    }
    let text_of = |role: &str| -> Vec<String> {
        messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some(role))
            .map(|m| {
                m.get("content")
                    .map(structured::content_text)
                    .unwrap_or_default()
            })
            .collect()
    };
    let mut instructed = text_of("system");
    instructed.extend(text_of("developer"));
    let users = text_of("user");
    let others = messages.len() - instructed.len() - users.len();
    users.len() == 1 && others == 0 && is_rendered_prompt(&instructed, &users[0])
}

fn has_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

/// A pi-family agent's rendered summarization prompt, by where the agent puts each part (spec
/// §6.2, §7.1): the one user message *is* the conversation in `<conversation>` tags followed by
/// the instructions — a previous summary in its tags, or a format template with its headings —
/// and a system prompt says what to do with it. A message that merely mentions or quotes the
/// tag, or a transcript pasted with a question after it, is the agent's ordinary turn: a false
/// compaction answers the user with a summary, a missed one costs only a provider call.
fn is_rendered_prompt(system: &[String], user: &str) -> bool {
    let Some(rest) = user.trim_start().strip_prefix("<conversation>") else {
        return false;
    };
    let Some(end) = rest.rfind("</conversation>") else {
        return false;
    };
    let instructions = rest[end + "</conversation>".len()..].trim_start();
    let templated = instructions.starts_with("<previous-summary>")
        || instructions
            .lines()
            .any(|line| line.starts_with("## ") || line.starts_with("# "));
    let summarizing = system
        .iter()
        .any(|s| s.to_ascii_lowercase().contains("summar"));
    templated && summarizing
}

fn stream_of(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool).unwrap_or(false)
}

fn model_of(body: &Value) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}
