//! GLM's markup, as oh-my-pi writes it for Zhipu's models:
//!
//! ```text
//! [gMASK]<sop><|user|>
//! fix the parser<|assistant|>
//!
//! <think>
//! …
//! </think>Looking.<tool_call>read
//! <arg_key>path</arg_key>
//! <arg_value>"src/parse.rs"</arg_value>
//! </tool_call><|observation|>
//! <tool_response>
//! …output…
//! </tool_response>
//! ```
//!
//! Turns follow each other without separators; argument values are JSON; calls of one message
//! are joined by a newline, results by a newline; developer messages are `system` turns.

use super::reasoning;
use crate::transcript::markup::{
    RESPONSE_CLOSE, RESPONSE_OPEN, THINK_CLOSE, Turn, push_wrapped, results_joined, turns,
};
use crate::transcript::markup::{json_extent, parse_json, stringify};
use crate::transcript::{Message, Role, ToolCall, split_tokens, trailing};

const BEGIN: &str = "[gMASK]<sop>";
const TURNS: [&str; 5] = [
    "<|user|>\n",
    "<|assistant|>\n",
    "<|observation|>\n",
    "<|system|>\n",
    "<|developer|>\n",
];

pub(super) fn write(messages: &[Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = BEGIN.to_owned();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                out.push_str("<|assistant|>\n");
                // GLM's reasoning opens on a line of its own.
                push_wrapped(&mut out, "\n<think>\n", &message.thinking, THINK_CLOSE);
                out.push_str(&message.text);
                for (n, call) in message.calls.iter().enumerate() {
                    if n > 0 {
                        out.push('\n');
                    }
                    out.push_str("<tool_call>");
                    out.push_str(&call.name);
                    for (key, value) in &call.arguments {
                        out.push_str("\n<arg_key>");
                        out.push_str(key);
                        out.push_str("</arg_key>\n<arg_value>");
                        out.push_str(&stringify(value));
                        out.push_str("</arg_value>");
                    }
                    out.push_str("\n</tool_call>");
                }
            }
            Turn::Results(results) => {
                out.push_str("<|observation|>\n");
                out.push_str(&results_joined(results, RESPONSE_OPEN, RESPONSE_CLOSE));
            }
            Turn::User(message) => {
                out.push_str("<|user|>\n");
                out.push_str(&message.text);
            }
            Turn::Developer(message) => {
                out.push_str("<|system|>\n");
                out.push_str(&message.text);
            }
        }
    }
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let body = conversation.strip_prefix(BEGIN).unwrap_or(conversation);
    let mut messages = Vec::new();
    for (token, text) in split_tokens(body, &TURNS) {
        match token {
            Some(0) => messages.push(Message::with_text(Role::User, text)),
            Some(1) => messages.push(read_assistant(text)),
            Some(2) => messages.extend(
                crate::transcript::tool_responses(text)
                    .unwrap_or_else(|| vec![Message::tool_result(text, None, false)]),
            ),
            _ => messages.push(Message::with_text(Role::Developer, text)),
        }
    }
    messages
}

fn read_assistant(body: &str) -> Message {
    reasoning::read_assistant(body, "\n<think>\n", |rest| {
        trailing(rest, "<tool_call>", read_calls)
    })
}

/// `<tool_call>NAME(\n<arg_key>K</arg_key>\n<arg_value>JSON</arg_value>)*\n</tool_call>` blocks
/// joined by newlines, the whole of `text`.
fn read_calls(mut text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    loop {
        let after = text.strip_prefix("<tool_call>")?;
        let name_end = after.find('\n')?;
        let name = after[..name_end].to_owned();
        let mut rest = &after[name_end..];
        let mut arguments = Vec::new();
        while let Some(arg) = rest.strip_prefix("\n<arg_key>") {
            let key_end = arg.find("</arg_key>\n<arg_value>")?;
            let key = arg[..key_end].to_owned();
            let value_text = &arg[key_end + "</arg_key>\n<arg_value>".len()..];
            let extent = json_extent(value_text)?;
            let value = parse_json(&value_text[..extent])?;
            rest = value_text[extent..].strip_prefix("</arg_value>")?;
            arguments.push((key, value));
        }
        rest = rest.strip_prefix("\n</tool_call>")?;
        calls.push(ToolCall::new(name, arguments));
        if rest.is_empty() {
            return Some(calls);
        }
        text = rest.strip_prefix('\n')?;
    }
}
