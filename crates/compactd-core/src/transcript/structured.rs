//! Conversations that arrive as structured messages instead of text: OpenAI chat messages
//! (`tool_calls`, `tool` messages, content parts), Anthropic Messages (`tool_use`, `tool_result`,
//! `thinking` blocks; `system` messages mid-history, as Claude Code sends them) and OpenAI
//! Responses input items (`message`, `function_call`, `function_call_output`, `reasoning`). Each
//! becomes the same typed [`Conversation`]; images and other attachments are elided to a
//! placeholder. The model is then sent it in pi's form.

use serde_json::Value;

use super::agent_text::{self, Piece};
use super::markup::{object_entries, parse_json, stringify};
use super::{Conversation, Dialect, Message, Role, ToolCall};

/// What an attachment is replaced by in the text.
const IMAGE: &str = "[image]";

/// The text of a content: a string, or the text of its parts (`text`, `input_text`,
/// `output_text`, Anthropic's text blocks); images and files become [`IMAGE`].
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(parts) => {
            let mut out = String::new();
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
                let piece = match kind {
                    "text" | "input_text" | "output_text" | "refusal" => part
                        .get("text")
                        .or_else(|| part.get("refusal"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    "image" | "image_url" | "input_image" | "file" | "input_file" | "document" => {
                        Some(IMAGE.to_owned())
                    }
                    _ => part.get("text").and_then(Value::as_str).map(str::to_owned),
                };
                if let Some(piece) = piece {
                    if !out.is_empty() {
                        out.push('\n');
                    }
                    out.push_str(&piece);
                }
            }
            out
        }
        Value::Null => String::new(),
        other => stringify(other),
    }
}

/// A call's arguments: a JSON object, or a string holding one (as chat and Responses send them).
fn arguments_of(value: Option<&Value>) -> Vec<(String, Value)> {
    match value {
        Some(Value::String(text)) => match parse_json(text) {
            Some(Value::Object(map)) => map.into_iter().collect(),
            Some(other) => vec![("input".into(), other)],
            None if text.trim().is_empty() => Vec::new(),
            None => vec![("input".into(), Value::String(text.clone()))],
        },
        Some(value @ Value::Object(_)) => object_entries(value.clone()),
        Some(Value::Null) | None => Vec::new(),
        Some(other) => vec![("input".into(), other.clone())],
    }
}

/// The role of a wire message (its `role` field; a message without one is the user's).
fn role_of(message: &Value) -> Role {
    match message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("user")
    {
        "assistant" | "model" => Role::Assistant,
        "tool" | "function" => Role::ToolResult,
        "system" | "developer" => Role::Developer,
        _ => Role::User,
    }
}

/// OpenAI chat messages.
pub fn from_chat(messages: &[Value]) -> Conversation {
    let mut out: Vec<Message> = Vec::new();
    for message in messages {
        let role = role_of(message);
        let text = message.get("content").map(content_text).unwrap_or_default();
        if role == Role::User {
            push_user_text(&mut out, &text);
            continue;
        }
        let mut typed = Message::with_text(role, text);
        match role {
            Role::Assistant => {
                typed.thinking = message
                    .get("reasoning_content")
                    .or_else(|| message.get("reasoning"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                for call in message
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let function = call.get("function").unwrap_or(call);
                    typed.calls.push(ToolCall {
                        id: call.get("id").and_then(Value::as_str).map(str::to_owned),
                        name: function
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_owned(),
                        arguments: arguments_of(function.get("arguments")),
                        raw_strings: Vec::new(),
                    });
                }
            }
            Role::ToolResult => {
                typed.call_id = message
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                typed.tool = message
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
            _ => {}
        }
        out.push(typed);
    }
    finish(out)
}

/// Anthropic Messages (`system` given apart is not part of the conversation).
pub fn from_anthropic(messages: &[Value]) -> Conversation {
    let mut out: Vec<Message> = Vec::new();
    for message in messages {
        let role = role_of(message);
        let content = message.get("content").cloned().unwrap_or(Value::Null);
        let blocks = match content {
            Value::String(text) if role == Role::User => {
                push_user_text(&mut out, &text);
                continue;
            }
            Value::String(text) => {
                out.push(Message::with_text(role, text));
                continue;
            }
            Value::Array(blocks) => blocks,
            _ => continue,
        };
        let mut current = Message::new(role);
        let mut commands = Commands::default();
        for block in &blocks {
            let kind = block
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or_default();
            match kind {
                // A user's text may hold the agent's reminders and echoes: those are the agent's.
                "text" if role == Role::User => {
                    let text = block.get("text").and_then(Value::as_str);
                    push_user_block(
                        &mut out,
                        &mut current,
                        text.unwrap_or_default(),
                        &mut commands,
                    );
                }
                "text" => push_line(&mut current.text, block.get("text")),
                "thinking" => push_line(&mut current.thinking, block.get("thinking")),
                "redacted_thinking" => {}
                "tool_use" | "server_tool_use" => current.calls.push(ToolCall {
                    id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: block
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: arguments_of(block.get("input")),
                    raw_strings: Vec::new(),
                }),
                "tool_result" => {
                    // Results interrupt a user message: what came before is its own.
                    flush(&mut out, &mut current);
                    out.push(Message {
                        call_id: block
                            .get("tool_use_id")
                            .and_then(Value::as_str)
                            .map(str::to_owned),
                        ..Message::tool_result(
                            block.get("content").map(content_text).unwrap_or_default(),
                            None,
                            block.get("is_error").and_then(Value::as_bool) == Some(true),
                        )
                    });
                }
                "image" | "document" => push_text(&mut current.text, IMAGE),
                _ => {}
            }
        }
        if !current.is_empty() || current.role == Role::Assistant && out.is_empty() {
            out.push(current);
        }
    }
    finish(out)
}

/// A command the user ran that the agent expands into a prompt (a custom command, a skill): the
/// text after its echo is the agent's expansion, not the user's words.
#[derive(Default)]
struct Commands {
    /// The message echoes a command the agent ran itself (no expansion follows).
    local: bool,
    /// A command's echo was read: the next text block is its expansion.
    expansion_due: bool,
}

/// The message read so far goes out (when it holds anything); a new one of its role begins.
fn flush(out: &mut Vec<Message>, current: &mut Message) {
    if !current.is_empty() {
        let role = current.role;
        out.push(std::mem::replace(current, Message::new(role)));
    }
}

/// One text block of a user message in Anthropic's form: the user's words into `current`, the
/// agent's reminders, echoes and command expansions into messages of their own.
fn push_user_block(
    out: &mut Vec<Message>,
    current: &mut Message,
    text: &str,
    commands: &mut Commands,
) {
    if std::mem::take(&mut commands.expansion_due) && !text.trim_start().starts_with('<') {
        flush(out, current);
        out.push(Message::with_text(Role::Developer, text));
        return;
    }
    let pieces = agent_text::pieces(text);
    commands.local |= agent_text::is_local_command(&pieces);
    let command = agent_text::command_of(&pieces).filter(|_| !commands.local);
    for piece in pieces {
        match piece {
            Piece::User(text) => push_text(&mut current.text, text),
            other => {
                flush(out, current);
                out.push(message_of(other));
            }
        }
    }
    // The command as the user typed it is theirs; its expansion follows.
    if let Some(command) = command {
        push_text(&mut current.text, &command);
        commands.expansion_due = true;
    }
}

/// OpenAI Responses input items (a string input is one user message).
pub fn from_responses(input: &Value) -> Conversation {
    let items = match input {
        Value::String(text) => return finish(vec![Message::with_text(Role::User, text.clone())]),
        Value::Array(items) => items.as_slice(),
        _ => &[],
    };
    let mut out: Vec<Message> = Vec::new();
    for item in items {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        match kind {
            "message" => {
                let role = role_of(item);
                let text = item.get("content").map(content_text).unwrap_or_default();
                match role {
                    Role::User => push_user_text(&mut out, &text),
                    _ => out.push(Message::with_text(role, text)),
                }
            }
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                let call = ToolCall {
                    id: item
                        .get("call_id")
                        .or_else(|| item.get("id"))
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    name: item
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or(kind)
                        .to_owned(),
                    arguments: arguments_of(
                        item.get("arguments")
                            .or_else(|| item.get("input"))
                            .or_else(|| item.get("action")),
                    ),
                    raw_strings: Vec::new(),
                };
                // Calls that follow an assistant message belong to it.
                match out.last_mut() {
                    Some(last) if last.role == Role::Assistant => last.calls.push(call),
                    _ => out.push(Message {
                        calls: vec![call],
                        ..Message::new(Role::Assistant)
                    }),
                }
            }
            "function_call_output" | "custom_tool_call_output" | "local_shell_call_output" => {
                out.push(Message {
                    call_id: item
                        .get("call_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    ..Message::tool_result(
                        item.get("output").map(content_text).unwrap_or_default(),
                        None,
                        false,
                    )
                });
            }
            "reasoning" => {
                let summary = item.get("summary").map(content_text).unwrap_or_default();
                let mut message = Message::new(Role::Assistant);
                message.thinking = summary;
                if !message.thinking.is_empty() {
                    out.push(message);
                }
            }
            // Opaque items (compaction summaries a provider encrypted, web searches…) carry
            // nothing compactd can read.
            _ => {}
        }
    }
    finish(out)
}

/// The messages of a user's text: the user's words, and the agent's text, replayed calls and
/// shell commands in it ([`agent_text`]) as what they are.
fn push_user_text(out: &mut Vec<Message>, text: &str) {
    let pieces = agent_text::pieces(text);
    let only_users = pieces.iter().all(|p| matches!(p, Piece::User(_)));
    if only_users {
        // The text as it came (a turn of the user's own is not trimmed or split).
        out.push(Message::with_text(Role::User, text));
        return;
    }
    let mut current = Message::new(Role::User);
    for piece in pieces {
        match piece {
            Piece::User(text) => push_text(&mut current.text, text),
            other => {
                if !current.is_empty() {
                    out.push(std::mem::replace(&mut current, Message::new(Role::User)));
                }
                out.push(message_of(other));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
}

/// The message a piece of the agent's text in a user turn stands for.
fn message_of(piece: Piece<'_>) -> Message {
    match piece {
        Piece::User(text) => Message::with_text(Role::User, text),
        Piece::Agent(text) => Message::with_text(Role::Developer, text),
        // pi's form of a command the user ran, which the facts read as one.
        Piece::Command { command, output } => {
            Message::with_text(Role::User, format!("Ran `{command}`\n{output}"))
        }
        Piece::Call { tool, arguments } => Message {
            calls: vec![ToolCall {
                id: None,
                name: tool.to_owned(),
                arguments: arguments_of(Some(&arguments)),
                raw_strings: Vec::new(),
            }],
            ..Message::new(Role::Assistant)
        },
        Piece::Result { tool, text } => Message::tool_result(text, Some(tool.to_owned()), false),
    }
}

fn push_line(text: &mut String, piece: Option<&Value>) {
    if let Some(piece) = piece.and_then(Value::as_str) {
        push_text(text, piece);
    }
}

fn push_text(text: &mut String, piece: &str) {
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(piece);
}

/// Names the results by their calls (by id where there is one, else by order) and clips their
/// texts as pi clips a session's for its summarizer (tool outputs are what a summary needs
/// least of, and what makes a conversation long).
fn finish(mut messages: Vec<Message>) -> Conversation {
    for message in &mut messages {
        if message.role == Role::ToolResult
            && let std::borrow::Cow::Owned(clipped) = super::pi::clip_tool_result(&message.text)
        {
            message.text = clipped;
        }
    }
    let mut names: std::collections::HashMap<String, String> = Default::default();
    for message in &messages {
        for call in &message.calls {
            if let Some(id) = &call.id {
                names.insert(id.clone(), call.name.clone());
            }
        }
    }
    for message in &mut messages {
        if message.role == Role::ToolResult
            && message.tool.is_none()
            && let Some(id) = &message.call_id
        {
            message.tool = names.get(id).cloned();
        }
    }
    super::name_results(&mut messages);
    Conversation::new(Dialect::Pi, messages)
}

#[cfg(test)]
#[path = "structured_tests.rs"]
mod tests;
