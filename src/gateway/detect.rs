//! Which requests are compactions, by agent and version, recognized by their shape — the markers
//! recorded from the real CLIs (`tests/fixtures/agent-requests/`, whose README says how each was
//! run). Every detector names the release it was recorded from; the samples next to them are
//! tested in `tests/it/gateway.rs` against those recordings.

use axum::http::HeaderMap;
use serde_json::Value;

use super::carried;
use crate::transcript::{Conversation, Role, structured};

/// The agent a compaction came from, and how it asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (2.1.330): `/v1/messages` with its summary instruction appended.
    ClaudeCode,
    /// Codex (0.169.0) with a custom provider: local "memento" compaction over `/v1/responses`.
    CodexLocal,
    /// Codex (0.169.0) with the `openai` provider: remote compaction v2, a `compaction_trigger`.
    CodexRemote,
    /// OpenCode (1.18.33): chat completions with its summarization system prompt.
    OpenCode,
}

impl Agent {
    pub fn label(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::CodexLocal => "codex",
            Agent::CodexRemote => "codex-remote",
            Agent::OpenCode => "opencode",
        }
    }
}

/// A compaction request: the history to summarize (typed), the agent's instructions, and what
/// the answer must look like.
#[derive(Debug, Clone)]
pub struct Compaction {
    pub agent: Agent,
    pub conversation: Conversation,
    /// The agent's own summarization instructions (empty: compactd's history prompt).
    pub instructions: String,
    /// The summary of the agent's previous compaction, taken out of the user message that
    /// carried it ([`super::carried`]).
    pub previous_summary: Option<String>,
    /// Whether the client asked for a stream.
    pub stream: bool,
    pub model: String,
}

/// Claude Code 2.1.330: the last message is the user's and opens with this.
const CLAUDE_OPENING: &str = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.";
/// … and holds this.
const CLAUDE_TASK: &str = "Your task is to create a detailed summary of the conversation so far";
/// Codex 0.169.0's local compaction prompt opens with this.
const CODEX_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION.";
/// OpenCode 1.18.33's summarization system prompt opens with this.
const OPENCODE_SYSTEM: &str = "You are a context summarization agent.";

/// Whether a body may be a compaction of some agent, by the markers' bytes alone: the ordinary
/// turns that are most of the traffic (and tens of kilobytes each) pass through unparsed.
pub fn may_be_compaction(body: &[u8]) -> bool {
    const MARKERS: [&str; 5] = [
        CLAUDE_TASK,
        CODEX_PROMPT,
        "compaction_trigger",
        OPENCODE_SYSTEM,
        "<conversation>",
    ];
    MARKERS
        .iter()
        .any(|marker| memchr::memmem::find(body, marker.as_bytes()).is_some())
}

/// A Claude Code compaction on the Anthropic Messages wire.
pub fn anthropic_messages(body: &Value) -> Option<Compaction> {
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
    let mut conversation = without_developer(structured::from_anthropic(&history));
    Some(Compaction {
        agent: Agent::ClaudeCode,
        previous_summary: carried::take(&mut conversation),
        conversation,
        instructions,
        stream: body.get("stream").and_then(Value::as_bool).unwrap_or(false),
        model: model_of(body),
    })
}

/// A Codex compaction on the Responses wire: local (its prompt last, no tools) or remote v2 (a
/// `compaction_trigger` last); the turn metadata header says `request_kind: compaction` for both.
pub fn responses(headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let input = body.get("input")?.as_array()?;
    let (last, history) = input.split_last()?;
    let kind = codex_request_kind(headers, body);
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    if last.get("type").and_then(Value::as_str) == Some("compaction_trigger") {
        let mut conversation =
            without_developer(structured::from_responses(&Value::from(history.to_vec())));
        return Some(Compaction {
            agent: Agent::CodexRemote,
            previous_summary: carried::take(&mut conversation),
            conversation,
            instructions: String::new(),
            stream,
            model: model_of(body),
        });
    }
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
    if !(prompt && (tools_off || kind.as_deref() == Some("compaction"))) {
        return None;
    }
    let mut conversation =
        without_developer(structured::from_responses(&Value::from(history.to_vec())));
    Some(Compaction {
        agent: Agent::CodexLocal,
        previous_summary: carried::take(&mut conversation),
        conversation,
        instructions: text,
        stream,
        model: model_of(body),
    })
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

/// Whether a chat-completions body asks for a summary: OpenCode's compaction (its system prompt),
/// or a rendered summarization prompt as pi-family agents send it (a system message and one user
/// message holding `<conversation>`), and no tools.
pub fn is_chat_summarization(body: &Value) -> bool {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return false;
    };
    if body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
    {
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
    let system = text_of("system");
    if system
        .iter()
        .any(|s| s.trim_start().starts_with(OPENCODE_SYSTEM))
    {
        return true;
    }
    let mut instructed = system;
    instructed.extend(text_of("developer"));
    let users = text_of("user");
    let others = messages.len() - instructed.len() - users.len();
    users.len() == 1 && others == 0 && is_rendered_prompt(&instructed, &users[0])
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

/// OpenCode's compaction, if a chat body is one (for the call log's agent).
pub fn chat_agent(body: &Value) -> Option<Agent> {
    let messages = body.get("messages")?.as_array()?;
    messages
        .iter()
        .any(|m| {
            m.get("role").and_then(Value::as_str) == Some("system")
                && m.get("content")
                    .map(structured::content_text)
                    .is_some_and(|s| s.trim_start().starts_with(OPENCODE_SYSTEM))
        })
        .then_some(Agent::OpenCode)
}

fn model_of(body: &Value) -> String {
    body.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// The history without system and developer text: the agent's own instructions, environment
/// notes and tool lists, which are not the work to summarize (and are most of the bytes).
fn without_developer(mut conversation: Conversation) -> Conversation {
    conversation.messages.retain(|m| m.role != Role::Developer);
    conversation
}
