//! Kimi's markup, as oh-my-pi writes it for Moonshot's models:
//!
//! ```text
//! <|im_user|>user<|im_middle|>fix the parser<|im_end|><|im_assistant|>assistant<|im_middle|>
//! <think>
//! …
//! </think>Looking.<|tool_calls_section_begin|><|tool_call_begin|>functions.read:0
//! <|tool_call_argument_begin|>{"path":"src/parse.rs"}<|tool_call_end|><|tool_calls_section_end|>
//! <|im_end|><|im_system|>read<|im_middle|>## Return of functions.read:0
//! …output…<|im_end|>
//! ```
//!
//! (Without the line breaks inside the call section.) A call's id is `functions.NAME:INDEX`, its
//! place in the message, unless it already has an id of that form; a result names its call the
//! same way, by its place among the results that follow the call.

use super::reasoning;
use crate::transcript::markup::parse_json;
use crate::transcript::markup::{THINK_CLOSE, THINK_OPEN, Turn, push_wrapped, turns};
use crate::transcript::{Message, Role, ToolCall};

const MIDDLE: &str = "<|im_middle|>";
const END: &str = "<|im_end|>";
const SECTION_BEGIN: &str = "<|tool_calls_section_begin|>";
const SECTION_END: &str = "<|tool_calls_section_end|>";
const CALL_BEGIN: &str = "<|tool_call_begin|>";
const CALL_END: &str = "<|tool_call_end|>";
const ARGUMENT_BEGIN: &str = "<|tool_call_argument_begin|>";
const RETURN: &str = "## Return of ";

/// The id a call or a result is written with.
fn call_id(name: &str, id: Option<&str>, index: usize) -> String {
    match id.map(str::trim) {
        Some(id) if id.starts_with("functions.") => id.to_owned(),
        _ => format!("functions.{name}:{index}"),
    }
}

fn segment(out: &mut String, kind: &str, name: &str, body: &str) {
    out.push_str(&format!("<|im_{kind}|>{name}{MIDDLE}{body}{END}"));
}

pub(super) fn write(messages: &[Message]) -> String {
    let mut out = String::new();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                let mut body = String::new();
                push_wrapped(&mut body, THINK_OPEN, &message.thinking, THINK_CLOSE);
                body.push_str(&message.text);
                if !message.calls.is_empty() {
                    body.push_str(SECTION_BEGIN);
                    for (n, call) in message.calls.iter().enumerate() {
                        body.push_str(CALL_BEGIN);
                        body.push_str(&call_id(&call.name, call.id.as_deref(), n));
                        body.push_str(ARGUMENT_BEGIN);
                        body.push_str(&call.arguments_json());
                        body.push_str(CALL_END);
                    }
                    body.push_str(SECTION_END);
                }
                segment(&mut out, "assistant", "assistant", &body);
            }
            Turn::Results(results) => {
                for (n, result) in results.iter().enumerate() {
                    let name = result.tool.as_deref().unwrap_or_default();
                    let id = call_id(name, result.call_id.as_deref(), n);
                    segment(
                        &mut out,
                        "system",
                        name,
                        &format!("{RETURN}{id}\n{}", result.text),
                    );
                }
            }
            Turn::User(message) => {
                segment(&mut out, "user", "user", &message.text);
            }
            Turn::Developer(message) => {
                segment(&mut out, "system", "system", &message.text);
            }
        }
    }
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let mut starts: Vec<(usize, &str)> = Vec::new();
    for kind in ["user", "assistant", "system"] {
        let token = format!("<|im_{kind}|>");
        for at in memchr::memmem::find_iter(conversation.as_bytes(), token.as_bytes()) {
            starts.push((at, kind));
        }
    }
    starts.sort_unstable();
    let mut messages = Vec::new();
    let mut result_index = 0;
    for (i, &(start, kind)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(conversation.len(), |next| next.0);
        let segment = &conversation[start + kind.len() + 7..end];
        let segment = segment.strip_suffix(END).unwrap_or(segment);
        let Some((name, body)) = segment.split_once(MIDDLE) else {
            continue;
        };
        match kind {
            "assistant" => {
                messages.push(read_assistant(body));
                result_index = 0;
            }
            "user" => messages.push(Message::with_text(Role::User, body)),
            _ => match body.strip_prefix(RETURN).and_then(|r| r.split_once('\n')) {
                Some((id, text)) => {
                    let mut result = Message::tool_result(text, Some(name.to_owned()), false);
                    if id != call_id(name, None, result_index) {
                        result.call_id = Some(id.to_owned());
                    }
                    result_index += 1;
                    messages.push(result);
                }
                None => messages.push(Message::with_text(Role::Developer, body)),
            },
        }
    }
    messages
}

fn read_assistant(body: &str) -> Message {
    reasoning::read_assistant(body, "<think>\n", |rest| {
        reasoning::delimited(rest, SECTION_BEGIN, SECTION_END, read_calls)
    })
}

fn read_calls(mut text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    while !text.is_empty() {
        let after = text.strip_prefix(CALL_BEGIN)?;
        let (id, rest) = after.split_once(ARGUMENT_BEGIN)?;
        let (arguments, rest) = rest.split_once(CALL_END)?;
        let index = calls.len();
        // `functions.NAME:INDEX`, the form written for calls without one.
        let named = id
            .strip_prefix("functions.")
            .and_then(|r| r.rsplit_once(':'))
            .filter(|(_, n)| n.parse::<usize>().is_ok());
        let name = named.map_or(id, |(name, _)| name).to_owned();
        let mut call = ToolCall::new(
            name.clone(),
            parse_json(arguments).map(crate::transcript::markup::object_entries)?,
        );
        if id != call_id(&name, None, index) {
            call.id = Some(id.to_owned());
        }
        calls.push(call);
        text = rest;
    }
    Some(calls)
}
