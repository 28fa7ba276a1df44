//! The conversation as the summarizer reads it (spec §6.1), and the LLM-facing form of messages
//! (`convertToLlm`, spec §2.4 and §8.5).
//!
//! Byte-identical to the reference, with one documented exception: the sentences that introduce a
//! compaction or branch summary turned into a user message are compactd's own wording, in the
//! shape the spec describes (the compaction suffix has a newline before `</summary>`, the branch
//! suffix has none).

mod streamed;

use serde_json::{Value, json};

use crate::js_json;
use crate::session::{BashExecution, Block, Content, Message, joined_text_blocks};
use crate::transcript::pi;

pub use streamed::write_conversation_json;

/// Introduces a compaction summary in the context.
pub const COMPACTION_SUMMARY_PREFIX: &str =
    "Earlier turns of this conversation were condensed into the summary below.\n\n<summary>\n";
pub const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
/// Introduces a branch summary in the context.
pub const BRANCH_SUMMARY_PREFIX: &str = "Below is a summary of a conversation branch that was explored before returning to this point.\n\n<summary>\n";
pub const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// A message after `convertToLlm`: the user text of a converted message, or the message itself.
pub enum LlmMessage<'a> {
    /// user, assistant and toolResult messages pass through unchanged.
    Native(&'a Message),
    /// A bash execution, custom message or summary, now a user message with this content.
    User {
        content: UserContent<'a>,
        timestamp: Option<f64>,
    },
}

/// The content of a user message made by the conversion.
pub enum UserContent<'a> {
    /// One text block.
    Text(String),
    /// A custom message's own blocks (images included).
    Blocks(&'a [Block]),
}

/// `convertToLlm` for one message; `None` for messages the LLM never sees (bash executions marked
/// `excludeFromContext`, roles this version does not know).
pub fn to_llm(message: &Message) -> Option<LlmMessage<'_>> {
    Some(match message {
        Message::User { .. } | Message::Assistant { .. } | Message::ToolResult { .. } => {
            LlmMessage::Native(message)
        }
        Message::BashExecution(bash) if bash.exclude_from_context => return None,
        Message::BashExecution(bash) => LlmMessage::User {
            content: UserContent::Text(bash_execution_text(bash)),
            timestamp: bash.timestamp,
        },
        Message::Custom { content, timestamp } => LlmMessage::User {
            content: match content {
                Content::Text(text) => UserContent::Text(text.clone()),
                Content::Blocks(blocks) => UserContent::Blocks(blocks),
            },
            timestamp: *timestamp,
        },
        Message::BranchSummary { summary, timestamp } => LlmMessage::User {
            content: UserContent::Text(format!(
                "{BRANCH_SUMMARY_PREFIX}{summary}{BRANCH_SUMMARY_SUFFIX}"
            )),
            timestamp: *timestamp,
        },
        Message::CompactionSummary {
            summary, timestamp, ..
        } => LlmMessage::User {
            content: UserContent::Text(format!(
                "{COMPACTION_SUMMARY_PREFIX}{summary}{COMPACTION_SUMMARY_SUFFIX}"
            )),
            timestamp: *timestamp,
        },
        Message::Unknown { .. } => return None,
    })
}

/// The user-message text of a bash execution (`bashExecutionToText`).
pub fn bash_execution_text(bash: &BashExecution) -> String {
    let mut text = format!("Ran `{}`\n", bash.command);
    if bash.output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str("```\n");
        text.push_str(&bash.output);
        text.push_str("\n```");
    }
    if bash.cancelled {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = bash.exit_code.filter(|&c| c != 0.0) {
        text.push_str("\n\nCommand exited with code ");
        text.push_str(&js_json::f64_to_js_string(code));
    }
    if bash.truncated
        && let Some(path) = &bash.full_output_path
    {
        text.push_str("\n\n[Output truncated. Full output: ");
        text.push_str(path);
        text.push(']');
    }
    text
}

/// What each message takes written at most. Many messages are sized in two halves at once: sizing
/// the 19,000 messages of a 21 MB session's conversation was 3 % of planning's instructions, run
/// on one core before the writing could be split. Below 4,096 messages (about a millisecond of
/// sizing) a thread's start would eat much of what it saves.
fn size_hints(messages: &[&Message]) -> Vec<usize> {
    let hint = |part: &[&Message]| part.iter().map(|m| size_hint(m)).collect();
    if messages.len() < 4096 {
        return hint(messages);
    }
    crate::parallel::in_two(messages, messages.len() / 2, hint)
}

/// `serializeConversation(convertToLlm(messages))`: the text inside `<conversation>` tags.
pub fn serialize_conversation<'a>(messages: impl IntoIterator<Item = &'a Message>) -> String {
    let messages: Vec<&Message> = messages.into_iter().collect();
    let hints = size_hints(&messages);
    let total: usize = hints.iter().sum();
    // Sized up front: grown by doubling, a conversation of megabytes was copied and its fresh
    // pages zeroed several times over (a tenth of planning a 20 MB session, BENCHMARKS.md).
    let mut out = String::with_capacity(total);
    if crate::parallel::threads_for(total, 2) < 2 {
        write_parts(&mut out, &messages);
        return out;
    }
    // A long conversation is written in two halves at once (a fifth of planning a 20 MB session
    // was this one thread's work). Parts are independent but for the blank line between them,
    // which the join puts back.
    let middle = crate::parallel::half_way(hints.iter().copied());
    let (first, second) = messages.split_at(middle);
    let rest = std::thread::scope(|scope| {
        let rest = scope.spawn(|| {
            let mut rest = String::with_capacity(hints[middle..].iter().sum());
            write_parts(&mut rest, second);
            rest
        });
        write_parts(&mut out, first);
        rest.join().expect("serializing does not panic")
    });
    pi::join_parts(&mut out, &rest);
    out
}

fn write_parts(out: &mut String, messages: &[&Message]) {
    for message in messages {
        let Some(llm) = to_llm(message) else { continue };
        write_part(out, &llm);
    }
}

/// About the bytes `message` takes in the serialized conversation: its texts, its tool calls'
/// arguments as JSON, and a little for the labels around them. Too low a guess grows the buffer
/// by copies into fresh memory.
fn size_hint(message: &Message) -> usize {
    let content = |content: &Content| match content {
        Content::Text(text) => text.len(),
        Content::Blocks(blocks) => blocks.iter().map(block_hint).sum(),
    };
    32 + match message {
        Message::User { content: c }
        | Message::ToolResult { content: c }
        | Message::Custom { content: c, .. } => content(c),
        Message::Assistant { content, .. } => content.iter().map(block_hint).sum(),
        Message::BashExecution(bash) => bash.command.len() + bash.output.len(),
        Message::BranchSummary { summary, .. } | Message::CompactionSummary { summary, .. } => {
            summary.len() + 128
        }
        Message::Unknown { .. } => 0,
    }
}

fn block_hint(block: &Block) -> usize {
    match block {
        Block::Text(text) | Block::Thinking(text) => text.len() + 16,
        Block::ToolCall { name, arguments } => {
            name.len() + 16 + arguments.as_ref().map_or(0, js_json::stringified_len)
        }
        Block::Image | Block::Other => 0,
    }
}

fn write_part(out: &mut String, message: &LlmMessage<'_>) {
    match message {
        LlmMessage::User { content, .. } => {
            let text = match content {
                UserContent::Text(text) => text.as_str().into(),
                UserContent::Blocks(blocks) => joined_text_blocks(blocks),
            };
            if !text.is_empty() {
                pi::begin_part(out, pi::USER).push_str(&text);
            }
        }
        LlmMessage::Native(Message::User { content }) => {
            let text = content.joined_text();
            if !text.is_empty() {
                pi::begin_part(out, pi::USER).push_str(&text);
            }
        }
        LlmMessage::Native(Message::Assistant { content, .. }) => write_assistant(out, content),
        LlmMessage::Native(Message::ToolResult { content }) => {
            let text = content.joined_text();
            if !text.is_empty() {
                pi::write_tool_result(out, &text);
            }
        }
        LlmMessage::Native(_) => {}
    }
}

/// The same messages typed, as [`serialize_conversation`] writes them (user text, a tool result
/// cut as the serializer cuts it, an assistant message's thinking and text blocks each joined by
/// newlines, its calls): what the pipeline's stages read instead of reading the text back.
pub fn typed_conversation<'a>(
    messages: impl IntoIterator<Item = &'a Message>,
) -> crate::transcript::Conversation {
    use crate::transcript::{Conversation, Dialect, Message as Typed, Role, ToolCall};
    let mut out = Vec::new();
    for message in messages {
        let Some(llm) = to_llm(message) else { continue };
        let text = match &llm {
            LlmMessage::User { content, .. } => Some(match content {
                UserContent::Text(text) => text.clone(),
                UserContent::Blocks(blocks) => joined_text_blocks(blocks).into_owned(),
            }),
            LlmMessage::Native(Message::User { content }) => {
                Some(content.joined_text().into_owned())
            }
            _ => None,
        };
        match (&llm, text) {
            (_, Some(text)) if !text.is_empty() => out.push(Typed::with_text(Role::User, text)),
            (_, Some(_)) => {}
            (LlmMessage::Native(Message::ToolResult { content }), None) => {
                let text = content.joined_text();
                if !text.is_empty() {
                    let clipped = pi::clip_tool_result(&text).into_owned();
                    out.push(Typed::tool_result(clipped, None, false));
                }
            }
            (LlmMessage::Native(Message::Assistant { content, .. }), None) => {
                let joined = |pick: fn(&Block) -> Option<&str>| {
                    content
                        .iter()
                        .filter_map(pick)
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let calls = content
                    .iter()
                    .filter_map(|block| match block {
                        Block::ToolCall { name, arguments } => Some(ToolCall::new(
                            name.clone(),
                            match arguments {
                                Some(Value::Object(map)) => js_json::js_key_order(map)
                                    .into_iter()
                                    .map(|(k, v)| (k.clone(), v.clone()))
                                    .collect(),
                                Some(Value::Array(items)) => items
                                    .iter()
                                    .enumerate()
                                    .map(|(i, v)| (i.to_string(), v.clone()))
                                    .collect(),
                                _ => Vec::new(),
                            },
                        )),
                        _ => None,
                    })
                    .collect();
                out.push(Typed {
                    thinking: joined(|b| match b {
                        Block::Thinking(t) => Some(t.as_str()),
                        _ => None,
                    }),
                    text: joined(|b| match b {
                        Block::Text(t) => Some(t.as_str()),
                        _ => None,
                    }),
                    calls,
                    ..Typed::new(Role::Assistant)
                });
            }
            _ => {}
        }
    }
    let mut conversation = Conversation::new(Dialect::Pi, out);
    crate::transcript::name_results(&mut conversation.messages);
    conversation
}

/// Thinking, then text, then tool calls, each part only when there is something of its kind.
fn write_assistant(out: &mut String, content: &[Block]) {
    let mut wrote_marker = false;
    for block in content {
        if let Block::Thinking(thinking) = block {
            if wrote_marker {
                out.push('\n');
            } else {
                pi::begin_part(out, pi::THINKING);
                wrote_marker = true;
            }
            out.push_str(thinking);
        }
    }
    // A text block makes the part even when it is empty (`[Assistant]: `).
    let mut wrote_marker = false;
    for block in content {
        if let Block::Text(text) = block {
            if wrote_marker {
                out.push('\n');
            } else {
                pi::begin_part(out, pi::ASSISTANT);
                wrote_marker = true;
            }
            out.push_str(text);
        }
    }
    let mut wrote_marker = false;
    for block in content {
        if let Block::ToolCall { name, arguments } = block {
            if wrote_marker {
                out.push_str("; ");
            } else {
                pi::begin_part(out, pi::TOOL_CALLS);
                wrote_marker = true;
            }
            pi::write_call(out, name, arguments.as_ref());
        }
    }
}

/// The LLM-facing JSON of a converted message, for `compactd context` and the context endpoint.
/// `native` supplies the stored JSON of a message that passes through unchanged.
pub fn llm_message_json(message: &LlmMessage<'_>, native: impl FnOnce() -> Value) -> Value {
    match message {
        LlmMessage::Native(_) => native(),
        LlmMessage::User { content, timestamp } => {
            let content = match content {
                UserContent::Text(text) => json!([{ "type": "text", "text": text }]),
                UserContent::Blocks(blocks) => {
                    Value::Array(blocks.iter().map(block_json).collect())
                }
            };
            let mut object = json!({ "role": "user", "content": content });
            if let Some(ts) = timestamp {
                object["timestamp"] = js_json::number_value(*ts);
            }
            object
        }
    }
}

fn block_json(block: &Block) -> Value {
    match block {
        Block::Text(text) => json!({ "type": "text", "text": text }),
        Block::Thinking(thinking) => json!({ "type": "thinking", "thinking": thinking }),
        Block::ToolCall { name, arguments } => {
            json!({ "type": "toolCall", "name": name, "arguments": arguments })
        }
        Block::Image => json!({ "type": "image" }),
        Block::Other => json!({}),
    }
}

#[cfg(test)]
mod tests;
