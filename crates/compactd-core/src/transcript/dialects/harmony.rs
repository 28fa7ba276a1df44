//! OpenAI's harmony format, as oh-my-pi writes it for GPT models. Every special token in the whole
//! transcript is escaped (`<|end|>` → `<\|end\|>`, contents included); plain tokens are read too.
//!
//! ```text
//! <|start|>user<|message|>fix the parser<|end|>
//! <|start|>assistant<|channel|>analysis<|message|>thinking…<|end|>
//! <|start|>assistant<|channel|>final<|message|>Looking.<|end|>
//! <|start|>assistant<|channel|>commentary to=functions.read<|message|>{"path":"a.rs"}<|call|>
//! <|start|>functions.read to=assistant<|channel|>commentary<|message|>…output…<|end|>
//! ```
//!
//! (Without the line breaks: segments follow each other directly.) An assistant message is its
//! analysis, final and call segments in that order; one with none of them is an empty final.

use crate::transcript::markup::{Turn, turns};
use crate::transcript::markup::{escape_harmony, parse_json, unescape_harmony};
use crate::transcript::{Message, Role, ToolCall};

const START: &str = "<|start|>";
const END: &str = "<|end|>";
const CALL: &str = "<|call|>";
const MESSAGE: &str = "<|message|>";
const CHANNEL: &str = "<|channel|>";

/// `functions.NAME` (a name that has the prefix keeps it).
fn recipient(name: &str) -> String {
    if name.starts_with("functions.") {
        name.to_owned()
    } else {
        format!("functions.{name}")
    }
}

/// The transcript with its tokens escaped, as oh-my-pi sends it.
pub(super) fn write(messages: &[Message]) -> String {
    escape_harmony(&write_plain(messages))
}

fn write_plain(messages: &[Message]) -> String {
    let mut out = String::new();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                let mut wrote = false;
                if !message.thinking.is_empty() {
                    out.push_str(&format!(
                        "{START}assistant{CHANNEL}analysis{MESSAGE}{}{END}",
                        message.thinking
                    ));
                    wrote = true;
                }
                if !message.text.is_empty() {
                    out.push_str(&format!(
                        "{START}assistant{CHANNEL}final{MESSAGE}{}{END}",
                        message.text
                    ));
                    wrote = true;
                }
                for call in &message.calls {
                    out.push_str(&format!(
                        "{START}assistant{CHANNEL}commentary to={}{MESSAGE}{}{CALL}",
                        recipient(&call.name),
                        call.arguments_json()
                    ));
                    wrote = true;
                }
                if !wrote {
                    out.push_str(&format!("{START}assistant{CHANNEL}final{MESSAGE}{END}"));
                }
            }
            Turn::Results(results) => {
                for result in results {
                    out.push_str(&format!(
                        "{START}{} to=assistant{CHANNEL}commentary{MESSAGE}{}{END}",
                        recipient(result.tool.as_deref().unwrap_or_default()),
                        result.text
                    ));
                }
            }
            Turn::User(message) | Turn::Developer(message) => {
                let role = if message.role == Role::User {
                    "user"
                } else {
                    "developer"
                };
                out.push_str(&format!("{START}{role}{MESSAGE}{}{END}", message.text));
            }
        }
    }
    out
}

/// Where a segment of an assistant message sits in the order it is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    Analysis,
    Final,
    Call,
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let escaped = conversation.contains("<\\|start\\|>");
    let (start, message_token, end, call) = if escaped {
        (
            "<\\|start\\|>",
            "<\\|message\\|>",
            "<\\|end\\|>",
            "<\\|call\\|>",
        )
    } else {
        (START, MESSAGE, END, CALL)
    };
    let content = |text: &str| {
        if escaped {
            unescape_harmony(text)
        } else {
            text.to_owned()
        }
    };
    let mut messages: Vec<Message> = Vec::new();
    let mut last: Option<Part> = None;
    for segment in conversation.split(start).skip(1) {
        let Some((header, body)) = segment.split_once(message_token) else {
            continue;
        };
        // The body runs to its closing token, the last one of the segment.
        let body = body
            .strip_suffix(end)
            .or_else(|| body.strip_suffix(call))
            .unwrap_or(body);
        let header = content(header);
        let header = header.replace(CHANNEL, " ");
        let mut words = header.split_whitespace();
        let role = words.next().unwrap_or_default();
        let words: Vec<&str> = words.collect();
        let to = words.iter().find_map(|w| w.strip_prefix("to="));
        let channel = words
            .iter()
            .find(|w| matches!(**w, "analysis" | "final" | "commentary"))
            .copied();
        if let Some(tool) = role.strip_prefix("functions.") {
            messages.push(Message::tool_result(
                content(body),
                Some(tool.to_owned()),
                false,
            ));
            last = None;
            continue;
        }
        match role {
            "assistant" => {
                let part = match (channel, to) {
                    (_, Some(_)) => Part::Call,
                    (Some("analysis"), _) => Part::Analysis,
                    _ => Part::Final,
                };
                // A part that does not follow the one before in writing order opens the next
                // message (calls follow calls).
                if last.is_none_or(|l| l > part || (l == part && part != Part::Call)) {
                    messages.push(Message::new(Role::Assistant));
                }
                last = Some(part);
                let message = messages.last_mut().expect("pushed above");
                match part {
                    Part::Analysis => message.thinking = content(body),
                    Part::Final => message.text = content(body),
                    Part::Call => {
                        let name = to.unwrap_or_default();
                        let name = name.strip_prefix("functions.").unwrap_or(name);
                        let arguments = parse_json(&content(body))
                            .map(crate::transcript::markup::object_entries)
                            .unwrap_or_else(|| {
                                vec![("input".to_owned(), serde_json::Value::String(content(body)))]
                            });
                        message.calls.push(ToolCall::new(name, arguments));
                    }
                }
            }
            "user" => {
                messages.push(Message::with_text(Role::User, content(body)));
                last = None;
            }
            _ => {
                messages.push(Message::with_text(Role::Developer, content(body)));
                last = None;
            }
        }
    }
    messages
}
