//! OpenCode's transcript (1.18), as its compaction writes the conversation it summarizes:
//!
//! ```text
//! [User]: fix the parser
//!
//! [Assistant reasoning]: …
//! [Assistant]: Looking.
//! [Assistant tool call]: read({"filePath":"/w/src/parse.rs"})
//! [Tool result]: <path>/w/src/parse.rs</path>
//! <content>1: fn parse() {}</content>
//! [Assistant tool call]: edit({"filePath":"/w/src/parse.rs","oldString":"a","newString":"b"})
//! [Tool error]: could not find oldString
//! ```
//!
//! Messages are joined by a blank line, the parts of one message (its text, reasoning, each call
//! and its result) by a newline; calls carry their input as JSON. A part whose line is not one of
//! these is kept as written.

use crate::transcript::markup::parse_json;
use crate::transcript::{Message, Role, ToolCall};

const USER: &str = "[User]: ";
const TEXT: &str = "[Assistant]: ";
const REASONING: &str = "[Assistant reasoning]: ";
pub(super) const CALL: &str = "[Assistant tool call]: ";
const RESULT: &str = "[Tool result]: ";
const ERROR: &str = "[Tool error]: ";

/// The markers only OpenCode writes (its call, reasoning and error lines), each after the newline
/// that starts its line: what dialect detection looks for, without a string built per request.
pub(super) const LINE_MARKERS: [&str; 3] = [
    "\n[Assistant tool call]: ",
    "\n[Assistant reasoning]: ",
    "\n[Tool error]: ",
];

/// Whether `text` has a marker only OpenCode writes (`has`: whether it holds a string).
pub(super) fn is_opencode(text: &str, has: impl Fn(&str) -> bool) -> bool {
    LINE_MARKERS
        .iter()
        .any(|line| text.starts_with(&line[1..]) || has(line))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    User,
    Reasoning,
    Text,
    Call,
    Result,
    Error,
}

const MARKERS: [(&str, Part); 6] = [
    (USER, Part::User),
    (REASONING, Part::Reasoning),
    (TEXT, Part::Text),
    (CALL, Part::Call),
    (RESULT, Part::Result),
    (ERROR, Part::Error),
];

fn marker_at(line: &str) -> Option<(Part, usize)> {
    MARKERS
        .iter()
        .find(|(marker, _)| line.starts_with(marker))
        .map(|(marker, part)| (*part, marker.len()))
}

pub(super) fn write(messages: &[Message]) -> String {
    let mut out = String::new();
    for message in messages {
        if !out.is_empty() {
            out.push_str(if message.continues { "\n" } else { "\n\n" });
        }
        let mut parts: Vec<String> = Vec::new();
        match message.role {
            Role::User => parts.push(format!("{USER}{}", message.text)),
            Role::Developer => parts.push(message.text.clone()),
            Role::ToolResult if message.is_error => parts.push(format!("{ERROR}{}", message.text)),
            Role::ToolResult => parts.push(format!("{RESULT}{}", message.text)),
            Role::Assistant => {
                if !message.thinking.is_empty() {
                    parts.push(format!("{REASONING}{}", message.thinking));
                }
                if !message.text.is_empty() {
                    parts.push(format!("{TEXT}{}", message.text));
                }
                for call in &message.calls {
                    parts.push(format!("{CALL}{}({})", call.name, call.arguments_json()));
                }
            }
        }
        out.push_str(&parts.join("\n"));
    }
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    // Parts start at a marker at the start of a line; the blank line before one separates
    // messages.
    let mut starts: Vec<(usize, Part, usize)> = Vec::new();
    if let Some((part, len)) = marker_at(conversation) {
        starts.push((0, part, len));
    }
    for found in memchr::memchr_iter(b'\n', conversation.as_bytes()) {
        if let Some((part, len)) = marker_at(&conversation[found + 1..]) {
            starts.push((found + 1, part, len));
        }
    }
    let mut messages: Vec<Message> = Vec::new();
    let first = starts.first().map_or(conversation.len(), |s| s.0);
    if first > 0 {
        let lead = &conversation[..first];
        let lead = lead
            .strip_suffix("\n\n")
            .or_else(|| lead.strip_suffix('\n'))
            .unwrap_or(lead);
        messages.push(Message::with_text(Role::Developer, lead));
    }
    let mut last: Option<Part> = None;
    for (i, &(start, part, len)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(conversation.len(), |next| next.0);
        let raw = &conversation[start + len..end];
        // The separator before the next part (a blank line, or a newline) is not this part's.
        let text = if i + 1 < starts.len() {
            raw.strip_suffix("\n\n")
                .or_else(|| raw.strip_suffix('\n'))
                .unwrap_or(raw)
        } else {
            raw
        };
        let continues = start > 0 && !conversation[..start].ends_with("\n\n");
        match part {
            Part::User => {
                messages.push(Message {
                    continues,
                    ..Message::with_text(Role::User, text)
                });
                last = None;
            }
            Part::Result | Part::Error => {
                messages.push(Message {
                    continues,
                    ..Message::tool_result(text, None, part == Part::Error)
                });
                last = None;
            }
            Part::Reasoning | Part::Text | Part::Call => {
                let joins = continues
                    && last.is_some_and(|l| l < part || (l == Part::Call && part == Part::Call))
                    && messages.last().is_some_and(|m| m.role == Role::Assistant);
                if !joins {
                    messages.push(Message {
                        continues,
                        ..Message::new(Role::Assistant)
                    });
                }
                last = Some(part);
                let message = messages.last_mut().expect("an assistant message");
                match part {
                    Part::Reasoning => message.thinking = text.to_owned(),
                    Part::Text => message.text = text.to_owned(),
                    _ => match read_call(text) {
                        Some(call) => message.calls.push(call),
                        // Not a call this reader knows: the line as text.
                        None => message.text.push_str(&format!("{CALL}{text}")),
                    },
                }
            }
        }
    }
    messages
}

/// `NAME({json})`.
fn read_call(text: &str) -> Option<ToolCall> {
    let open = text.find('(')?;
    let input = text[open + 1..].strip_suffix(')')?;
    let arguments = parse_json(input).map(crate::transcript::markup::object_entries)?;
    Some(ToolCall::new(&text[..open], arguments))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_line_markers_are_the_markers_after_a_newline() {
        let markers = [super::CALL, super::REASONING, super::ERROR].map(|m| format!("\n{m}"));
        assert_eq!(markers, super::LINE_MARKERS);
    }
}
