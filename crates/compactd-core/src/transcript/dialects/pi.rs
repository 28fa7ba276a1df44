//! pi's transcript form (spec §6.1): parts joined by a blank line, each opened by a role marker.
//!
//! ```text
//! [User]: fix the parser
//!
//! [Assistant thinking]: …
//!
//! [Assistant]: Looking.
//!
//! [Assistant tool calls]: read(path="src/parse.rs"); bash(command="cargo test", timeout=30)
//!
//! [Tool result]: error[E0308]: mismatched types
//! ```
//!
//! The writing half is what `compaction::serialize` renders sessions with, byte for byte as the
//! reference does; the reading half turns such text (also oh-my-pi's `[Think]`, `[Tool Call]`,
//! `[Tool Result]` variant) back into messages.

use serde_json::Value;

use crate::js_json::{self, utf16_len, utf16_prefix_byte_len};
use crate::transcript::{Message, Role, ToolCall, calls};

pub const USER: &str = "[User]: ";
pub const ASSISTANT: &str = "[Assistant]: ";
pub const THINKING: &str = "[Assistant thinking]: ";
pub const TOOL_CALLS: &str = "[Assistant tool calls]: ";
pub const TOOL_RESULT: &str = "[Tool result]: ";

/// Tool results longer than this (in UTF-16 units) are cut for the summarizer.
pub const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// What a part holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    User,
    Thinking,
    Text,
    Calls,
    Result,
}

/// pi's markers and oh-my-pi's older ones.
const MARKERS: [(&str, Part); 8] = [
    (USER, Part::User),
    (ASSISTANT, Part::Text),
    (THINKING, Part::Thinking),
    (TOOL_CALLS, Part::Calls),
    (TOOL_RESULT, Part::Result),
    ("[Think]: ", Part::Thinking),
    ("[Tool Call]: ", Part::Calls),
    ("[Tool Result]: ", Part::Result),
];

fn marker_at(text: &str) -> Option<(Part, usize)> {
    MARKERS
        .iter()
        .find(|(marker, _)| text.starts_with(marker))
        .map(|(marker, part)| (*part, marker.len()))
}

/// Whether `text` opens with one of the markers.
pub fn starts_with_marker(text: &str) -> bool {
    marker_at(text).is_some()
}

// ---- writing ------------------------------------------------------------------------------------

/// Parts are joined with a blank line.
pub const PART_SEPARATOR: &str = "\n\n";

/// Starts a new part of `out`.
pub fn begin_part<'o>(out: &'o mut String, marker: &str) -> &'o mut String {
    if !out.is_empty() {
        out.push_str(PART_SEPARATOR);
    }
    out.push_str(marker);
    out
}

/// Appends the parts written separately in `more` to those of `out`.
pub fn join_parts(out: &mut String, more: &str) {
    if !out.is_empty() && !more.is_empty() {
        out.push_str(PART_SEPARATOR);
    }
    out.push_str(more);
}

/// `name(k1=JSON, k2=JSON)`: `Object.entries(args).map(([k, v]) => k + "=" +
/// JSON.stringify(v)).join(", ")` inside the parentheses.
pub fn write_call(out: &mut String, name: &str, arguments: Option<&Value>) {
    out.push_str(name);
    out.push('(');
    let entries: Vec<(String, &Value)> = match arguments {
        Some(Value::Object(map)) => js_json::js_key_order(map)
            .into_iter()
            .map(|(k, v)| (k.clone(), v))
            .collect(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), v))
            .collect(),
        // Object.entries of other values has nothing a tool call would carry.
        _ => Vec::new(),
    };
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&key);
        out.push('=');
        js_json::write_value(out, value);
    }
    out.push(')');
}

/// A tool result's text as a part (see [`clip_tool_result`]).
pub fn write_tool_result(out: &mut String, text: &str) {
    let out = begin_part(out, TOOL_RESULT);
    let (kept, cut) = clip(text);
    out.push_str(kept);
    if let Some(cut) = cut {
        push_cut_marker(out, cut);
    }
}

/// A tool result's text, cut after [`TOOL_RESULT_MAX_CHARS`] UTF-16 units with the reference's
/// marker. A cut that would split a surrogate pair drops the broken half; the count still says
/// `length − 2000`.
pub fn clip_tool_result(text: &str) -> std::borrow::Cow<'_, str> {
    match clip(text) {
        (kept, None) => kept.into(),
        (kept, Some(cut)) => {
            let mut clipped = String::with_capacity(kept.len() + 48);
            clipped.push_str(kept);
            push_cut_marker(&mut clipped, cut);
            clipped.into()
        }
    }
}

/// The part of a tool result that is kept, and how many UTF-16 units were cut (if any).
fn clip(text: &str) -> (&str, Option<usize>) {
    // A text has no more UTF-16 units than UTF-8 bytes: a short one is not counted.
    if text.len() <= TOOL_RESULT_MAX_CHARS {
        return (text, None);
    }
    let length = utf16_len(text);
    if length <= TOOL_RESULT_MAX_CHARS {
        return (text, None);
    }
    (
        &text[..utf16_prefix_byte_len(text, TOOL_RESULT_MAX_CHARS)],
        Some(length - TOOL_RESULT_MAX_CHARS),
    )
}

fn push_cut_marker(out: &mut String, cut: usize) {
    use std::fmt::Write as _;
    let _ = write!(out, "\n\n[... {cut} more characters truncated]");
}

// ---- typed ------------------------------------------------------------------------------------

/// `messages` in pi's form: thinking, text and calls of an assistant message as three parts (each
/// when there is something of its kind), results and user text as one part each (results are
/// written as they are: a session's are cut when its messages are typed, see
/// `compaction::serialize`).
pub fn write(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        match message.role {
            Role::User => begin_part(&mut out, USER).push_str(&message.text),
            // pi has no form for it: the text as the user's.
            Role::Developer => begin_part(&mut out, USER).push_str(&message.text),
            Role::ToolResult => begin_part(&mut out, TOOL_RESULT).push_str(&message.text),
            Role::Assistant => {
                if !message.thinking.is_empty() {
                    begin_part(&mut out, THINKING).push_str(&message.thinking);
                }
                if !message.text.is_empty() {
                    begin_part(&mut out, ASSISTANT).push_str(&message.text);
                }
                for (i, call) in message.calls.iter().enumerate() {
                    if i == 0 {
                        begin_part(&mut out, TOOL_CALLS);
                    } else {
                        out.push_str("; ");
                    }
                    out.push_str(&render_call(call));
                }
            }
        }
    }
    out
}

/// Splits the conversation into parts at markers that start a line after a blank line; text
/// before the first marker (a free-form prompt) counts as the user's. Each part's text is kept
/// exactly, so that [`write`] gives the text back.
pub fn read(conversation: &str) -> Vec<Message> {
    let mut starts: Vec<(usize, Part, usize)> = Vec::new();
    if let Some((part, len)) = marker_at(conversation) {
        starts.push((0, part, len));
    } else if !conversation.trim().is_empty() {
        starts.push((0, Part::User, 0));
    }
    for found in memchr::memmem::find_iter(conversation.as_bytes(), b"\n\n[") {
        if let Some((part, len)) = marker_at(&conversation[found + 2..]) {
            starts.push((found + 2, part, len));
        }
    }
    let mut messages: Vec<Message> = Vec::new();
    // The kind of the last assistant part, to tell when a new assistant message begins: pi
    // writes thinking, text and calls of one message in that order.
    let mut last_assistant_part: Option<Part> = None;
    for (i, &(start, part, len)) in starts.iter().enumerate() {
        let end = starts
            .get(i + 1)
            .map_or(conversation.len(), |next| next.0 - 2);
        let text = &conversation[start + len..end];
        match part {
            Part::User => {
                messages.push(Message::with_text(Role::User, text));
                last_assistant_part = None;
            }
            Part::Result => {
                messages.push(Message::tool_result(text, None, false));
                last_assistant_part = None;
            }
            Part::Thinking | Part::Text | Part::Calls => {
                if last_assistant_part.is_none_or(|last| last >= part) {
                    messages.push(Message::new(Role::Assistant));
                }
                last_assistant_part = Some(part);
                let message = messages.last_mut().expect("pushed above");
                match part {
                    Part::Thinking => message.thinking.push_str(text),
                    Part::Text => message.text.push_str(text),
                    _ => message.calls.extend(calls::parse(text, "; ")),
                }
            }
        }
    }
    messages
}

/// A call as pi renders it: `name(k1=JSON, k2=JSON)` (lone surrogates kept as escapes).
pub fn render_call(call: &ToolCall) -> String {
    let object = crate::transcript::markup::arguments_object(&call.arguments);
    let Value::Object(map) = &object else {
        unreachable!("an object")
    };
    let mut out = format!("{}(", call.name);
    for (i, (key, value)) in js_json::js_key_order(map).into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
        out.push('=');
        out.push_str(&crate::transcript::markup::stringify(value));
    }
    out.push(')');
    out
}
