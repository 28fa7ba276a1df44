//! ChatML, as oh-my-pi writes it for Qwen models (`qwen3`) and for Hermes-style templates
//! (`hermes`, whose tool results are `tool` turns instead of user turns):
//!
//! ```text
//! <|im_start|>user
//! fix the parser<|im_end|>
//! <|im_start|>assistant
//! <think>
//! …
//! </think>Looking.<tool_call>
//! {"name":"read","arguments":{"path":"src/parse.rs"}}
//! </tool_call><|im_end|>
//! <|im_start|>user
//! <tool_response>
//! …output…
//! </tool_response><|im_end|>
//! ```
//!
//! Calls of one message are joined by a newline, results by a newline; developer messages are
//! `system` turns.

use super::reasoning;
use crate::transcript::markup::{
    RESPONSE_CLOSE, RESPONSE_OPEN, THINK_CLOSE, THINK_OPEN, Turn, push_wrapped, results_joined,
    turns,
};
use crate::transcript::markup::{parse_json, stringify};
use crate::transcript::{Dialect, Message, Role, ToolCall, trailing};

const OPEN: &str = "<|im_start|>";
const CLOSE: &str = "<|im_end|>\n";

fn turn(out: &mut String, role: &str, body: &str) {
    out.push_str(OPEN);
    out.push_str(role);
    out.push('\n');
    out.push_str(body);
    out.push_str(CLOSE);
}

pub(super) fn write(dialect: Dialect, messages: &[Message]) -> String {
    let mut out = String::new();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                let mut body = String::new();
                push_wrapped(&mut body, THINK_OPEN, &message.thinking, THINK_CLOSE);
                body.push_str(&message.text);
                for (n, call) in message.calls.iter().enumerate() {
                    if n > 0 {
                        body.push('\n');
                    }
                    body.push_str("<tool_call>\n");
                    body.push_str(&call_json(call));
                    body.push_str("\n</tool_call>");
                }
                turn(&mut out, "assistant", &body);
            }
            Turn::Results(results) => {
                let body = results_joined(results, RESPONSE_OPEN, RESPONSE_CLOSE);
                let role = if dialect == Dialect::Hermes {
                    "tool"
                } else {
                    "user"
                };
                turn(&mut out, role, &body);
            }
            Turn::User(message) => {
                turn(&mut out, "user", &message.text);
            }
            Turn::Developer(message) => {
                turn(&mut out, "system", &message.text);
            }
        }
    }
    out
}

/// `{"name":…,"arguments":{…}}` as `JSON.stringify` prints it.
fn call_json(call: &ToolCall) -> String {
    let mut object = serde_json::Map::new();
    object.insert("name".into(), call.name.clone().into());
    object.insert(
        "arguments".into(),
        crate::transcript::markup::arguments_object(&call.arguments),
    );
    stringify(&serde_json::Value::Object(object))
}

pub(super) fn read(dialect: Dialect, conversation: &str) -> Vec<Message> {
    // oh-my-pi 18.0 escaped the bars of ChatML's tokens; 18.3 does not.
    let unescaped;
    let conversation = if conversation.contains("<\\|im_start\\|>") {
        unescaped = conversation
            .replace("<\\|im_start\\|>", OPEN)
            .replace("<\\|im_end\\|>", "<|im_end|>");
        unescaped.as_str()
    } else {
        conversation
    };
    let mut messages = Vec::new();
    for segment in conversation.split(OPEN).skip(1) {
        let segment = segment
            .strip_suffix(CLOSE)
            .or_else(|| segment.strip_suffix("<|im_end|>"))
            .unwrap_or(segment);
        let (role, body) = segment.split_once('\n').unwrap_or((segment, ""));
        match role {
            "assistant" => messages.push(read_assistant(body)),
            "tool" => messages.extend(
                crate::transcript::tool_responses(body)
                    .unwrap_or_else(|| vec![Message::tool_result(body, None, false)]),
            ),
            "user" => match crate::transcript::tool_responses(body)
                .filter(|_| dialect != Dialect::Hermes)
            {
                Some(results) => messages.extend(results),
                None => messages.push(Message::with_text(Role::User, body)),
            },
            _ => messages.push(Message::with_text(Role::Developer, body)),
        }
    }
    messages
}

fn read_assistant(body: &str) -> Message {
    reasoning::read_assistant(body, "<think>\n", |rest| {
        trailing(rest, "<tool_call>\n", read_calls)
    })
}

/// `<tool_call>\n{json}\n</tool_call>` blocks joined by newlines, the whole of `text`.
fn read_calls(mut text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    loop {
        let after = text.strip_prefix("<tool_call>\n")?;
        let end = after.find("\n</tool_call>")?;
        let call = parse_json(&after[..end])?;
        let name = call.get("name")?.as_str()?.to_owned();
        let arguments = call.get("arguments").cloned().unwrap_or_default();
        calls.push(ToolCall::new(
            name,
            crate::transcript::markup::object_entries(arguments),
        ));
        text = &after[end + "\n</tool_call>".len()..];
        if text.is_empty() {
            return Some(calls);
        }
        text = text.strip_prefix('\n')?;
    }
}
