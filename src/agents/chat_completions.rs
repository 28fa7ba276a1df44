//! The chat-completions wire: OpenAI's `POST /v1/chat/completions`, for agent forks whose
//! `remoteEndpoint` ends in `/chat/completions`, for any OpenAI client, and (with the gateway on)
//! OpenCode at its provider's `baseURL`. The system messages become the system prompt, the
//! other messages the prompt; the answer (written by the HTTP layer, whose type it documents) is
//! the summary.

use axum::http::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::recognize::{Compaction, Form};
use super::rendered::{has_tools, is_rendered_prompt};

use super::Wire;
use crate::app::AppError;
use crate::app::wire::{WireRequest, token_count};
use crate::pipeline::Agent;
use compactd_core::transcript::structured;

// A chat request as compactd reads it, and its schema in the API's description: what is
// documented is what is read.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
pub(crate) struct ChatRequest {
    /// The client's model name; compactd routes through its own chain and reports the model that
    /// wrote the answer instead.
    #[serde(default)]
    model: Option<String>,
    /// Chat messages: `system`/`developer` ones make the system prompt. One user message is a
    /// rendered prompt; a longer history (with `tool_calls`, `tool` messages, content parts) is a
    /// conversation whose last user message, when it is last, is the instructions.
    #[schema(value_type = Vec<Object>)]
    messages: Vec<Value>,
    #[schema(value_type = Option<u64>)]
    max_tokens: Option<Value>,
    #[schema(value_type = Option<u64>)]
    max_completion_tokens: Option<Value>,
    #[serde(default)]
    stream: bool,
}

/// What a chat request asks to summarize, and how it wants the answer.
#[derive(Debug)]
pub(crate) struct ChatRead {
    pub(crate) request: WireRequest,
    pub(crate) stream: bool,
    /// The client's model name (`agent` mode asks it; compactd reports its own otherwise).
    pub(crate) model: String,
}

/// Reads a chat request's body (parsed once, by whoever parsed it); a field of the wrong shape is
/// an [`AppError::Invalid`] naming it.
pub(crate) fn read(body: &Value) -> Result<ChatRead, AppError> {
    let request: ChatRequest = serde_path_to_error::deserialize(body).map_err(|error| {
        let path = error.path().to_string();
        let param = if path == "." { "body".to_owned() } else { path };
        let message = error.into_inner().to_string();
        AppError::invalid(&param, format!("{param}: {message}"))
    })?;
    let (system, prompt) = split_messages(&request.messages)?;
    let (prompt, conversation) = match prompt {
        WirePrompt::Text(prompt) => (prompt, None),
        WirePrompt::Conversation(conversation, instructions) => (instructions, Some(conversation)),
    };
    let max_tokens = match token_count(
        request.max_completion_tokens.as_ref(),
        "max_completion_tokens",
    )? {
        Some(n) => Some(n),
        None => token_count(request.max_tokens.as_ref(), "max_tokens")?,
    };
    Ok(ChatRead {
        request: WireRequest {
            system_prompt: Some(system),
            prompt,
            conversation,
            previous_summary: None,
            max_tokens,
            prompt_field: "messages",
        },
        stream: request.stream,
        model: request.model.unwrap_or_default(),
    })
}

/// The text of a message's content: a string, or the `text` of its parts joined together.
fn content_text(content: &Value, at: usize) -> Result<String, AppError> {
    match content {
        Value::String(text) => Ok(text.clone()),
        Value::Null => Ok(String::new()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect()),
        other => {
            let param = format!("messages[{at}].content");
            let message = format!("{param} must be a string or an array of parts, not {other}");
            Err(AppError::invalid(&param, message))
        }
    }
}

/// What a chat request asks to summarize, split: the system prompt, and either a rendered prompt
/// (one user message, as oh-my-pi sends it) or a structured conversation and its instructions.
fn split_messages(messages: &[Value]) -> Result<(String, WirePrompt), AppError> {
    let mut system = Vec::new();
    let mut rest = Vec::new();
    for (at, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).ok_or_else(|| {
            let param = format!("messages[{at}].role");
            AppError::invalid(&param, format!("{param} must be a string"))
        })?;
        let content = message.get("content").unwrap_or(&Value::Null);
        let text = content_text(content, at)?;
        match role {
            "system" | "developer" => system.push(text),
            _ => rest.push((role, text, message)),
        }
    }
    let structured = rest.len() > 1
        || rest
            .iter()
            .any(|(role, _, message)| *role != "user" || message.get("tool_calls").is_some());
    if !structured {
        let prompt = rest.into_iter().map(|(_, text, _)| text).collect();
        return Ok((system.join("\n\n"), WirePrompt::Text(prompt)));
    }
    // The instruction an agent appends to its history to have it summarized.
    let instructions = match rest.last() {
        Some(("user", text, message)) if message.get("tool_calls").is_none() => {
            let text = text.clone();
            rest.pop();
            text
        }
        _ => String::new(),
    };
    let history: Vec<Value> = rest.into_iter().map(|(_, _, m)| m.clone()).collect();
    let conversation = Wire::ChatCompletions.messages(&history);
    Ok((
        system.join("\n\n"),
        WirePrompt::Conversation(conversation, instructions),
    ))
}

enum WirePrompt {
    Text(String),
    Conversation(compactd_core::transcript::Conversation, String),
}

/// OpenCode (1.18.33): chat completions with its summarization system prompt.
pub(crate) const OPENCODE: Agent = Agent {
    name: "opencode",
    endpoint: "gateway:opencode",
    wire: Wire::ChatCompletions,
};

/// OpenCode 1.18.33's summarization system prompt opens with this.
pub(super) const OPENCODE_SYSTEM: &str = "You are a context summarization agent.";

/// An OpenCode compaction on the chat wire: its summarization system prompt, and no tools.
pub(super) fn opencode(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
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
