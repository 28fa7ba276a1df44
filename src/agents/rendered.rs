//! A pi-family agent's rendered summarization prompt (oh-my-pi's, pi's, their forks'), on every
//! wire: the one user message is the conversation in `<conversation>` tags followed by the
//! instructions, and a system prompt says what to do with it. On the chat wire compactd reads it
//! as its own API does ([`super::chat_completions::is_rendered_summarization`]); on the
//! Anthropic Messages and OpenAI Responses wires — where oh-my-pi 18.3.4 sends its own
//! summarization (a split turn's prefix, or the whole history when its native lane fails and no
//! `remoteEndpoint` is set) through the model's provider — these recognizers answer it in the
//! wire.

use axum::http::HeaderMap;
use serde_json::Value;

use super::Wire;
use super::recognize::{Compaction, Form, model_of, stream_of};
use crate::app::wire::{WireRequest, token_count};
use crate::pipeline::Agent;
use compactd_core::transcript::structured;

/// A pi-family agent's rendered summarization on the Anthropic Messages wire.
pub(crate) const RENDERED_MESSAGES: Agent = Agent {
    name: "pi-family",
    endpoint: "gateway:pi-family",
    wire: Wire::AnthropicMessages,
};

/// A pi-family agent's rendered summarization on the OpenAI Responses wire.
pub(crate) const RENDERED_RESPONSES: Agent = Agent {
    name: "pi-family",
    endpoint: "gateway:pi-family",
    wire: Wire::Responses,
};

/// The marker of a rendered summarization prompt ([`is_rendered_prompt`]).
pub(super) const RENDERED_MARKER: &str = "<conversation>";

/// A pi-family agent's rendered summarization prompt, by where the agent puts each part (spec
/// §6.2, §7.1): the one user message *is* the conversation in `<conversation>` tags followed by
/// the instructions — a previous summary in its tags, or a format template with its headings —
/// and a system prompt says what to do with it. A message that merely mentions or quotes the
/// tag, or a transcript pasted with a question after it, is the agent's ordinary turn: a false
/// compaction answers the user with a summary, a missed one costs only a provider call.
pub(super) fn is_rendered_prompt(system: &[String], user: &str) -> bool {
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

/// Whether a body offers the model tools (a summarization offers none).
pub(super) fn has_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

/// On the Messages wire: the system prompt in `system`, one user message, no tools.
pub(super) fn messages(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let system = body.get("system").map(structured::content_text);
    let [message] = body.get("messages")?.as_array()?.as_slice() else {
        return None;
    };
    rendered(agent, body, system, message, "max_tokens")
}

/// On the Responses wire: the system prompt in `instructions` (or a system or developer item),
/// one user message, no tools.
pub(super) fn responses(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let input = body.get("input")?.as_array()?;
    let is_instruction = |item: &&Value| {
        matches!(
            item.get("role").and_then(Value::as_str),
            Some("system" | "developer")
        )
    };
    let mut system: Vec<String> = body
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .into_iter()
        .collect();
    system.extend(
        input
            .iter()
            .filter(is_instruction)
            .filter_map(|m| m.get("content"))
            .map(structured::content_text),
    );
    let rest: Vec<&Value> = input.iter().filter(|m| !is_instruction(m)).collect();
    let [message] = rest.as_slice() else {
        return None;
    };
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    rendered(agent, body, system, message, "max_output_tokens")
}

/// The compaction a rendered prompt is: summarized as compactd's own API summarizes one, and
/// answered as text in the wire.
fn rendered(
    agent: Agent,
    body: &Value,
    system: Option<String>,
    message: &Value,
    cap: &str,
) -> Option<Compaction> {
    if has_tools(body) || message.get("role").and_then(Value::as_str) != Some("user") {
        return None;
    }
    let user = structured::content_text(message.get("content")?);
    let system = system?;
    if !is_rendered_prompt(std::slice::from_ref(&system), &user) {
        return None;
    }
    Some(Compaction {
        agent,
        request: WireRequest {
            system_prompt: Some(system),
            prompt: user,
            conversation: None,
            previous_summary: None,
            max_tokens: token_count(body.get(cap), cap).ok().flatten(),
            prompt_field: "messages",
        },
        answer: Form::Text,
        stream: stream_of(body),
        model: model_of(body),
    })
}
