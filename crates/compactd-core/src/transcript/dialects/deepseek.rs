//! DeepSeek's markup, as oh-my-pi writes it (full-width bars `｜` and `▁` in the tokens):
//!
//! ```text
//! <｜begin▁of▁sentence｜><｜User｜>fix the parser<｜Assistant｜><think>
//! …
//! </think>Looking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read<｜tool▁sep｜>{"path":"a.rs"}
//! <｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁output▁begin｜>…output…
//! <｜tool▁output▁end｜>
//! ```
//!
//! (Without the line breaks inside the call section.) Results of one run are joined by a newline;
//! developer text is written bare, without a token.

use super::reasoning;
use crate::transcript::markup::parse_json;
use crate::transcript::markup::{
    THINK_CLOSE, THINK_OPEN, Turn, push_wrapped, results_joined, turns,
};
use crate::transcript::{Message, Role, ToolCall, split_tokens};

const BEGIN: &str = "<｜begin▁of▁sentence｜>";
const USER: &str = "<｜User｜>";
const ASSISTANT: &str = "<｜Assistant｜>";
const END: &str = "<｜end▁of▁sentence｜>";
const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const CALL_BEGIN: &str = "<｜tool▁call▁begin｜>";
const CALL_END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";
const OUTPUT_BEGIN: &str = "<｜tool▁output▁begin｜>";
const OUTPUT_END: &str = "<｜tool▁output▁end｜>";

pub(super) fn write(messages: &[Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = BEGIN.to_owned();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                out.push_str(ASSISTANT);
                push_wrapped(&mut out, THINK_OPEN, &message.thinking, THINK_CLOSE);
                out.push_str(&message.text);
                if !message.calls.is_empty() {
                    out.push_str(CALLS_BEGIN);
                    for call in &message.calls {
                        out.push_str(&format!(
                            "{CALL_BEGIN}{}{SEP}{}{CALL_END}",
                            call.name,
                            call.arguments_json()
                        ));
                    }
                    out.push_str(CALLS_END);
                }
                out.push_str(END);
            }
            Turn::Results(results) => {
                out.push_str(&results_joined(results, OUTPUT_BEGIN, OUTPUT_END));
            }
            Turn::Developer(message) => {
                out.push_str(&message.text);
            }
            Turn::User(message) => {
                out.push_str(USER);
                out.push_str(&message.text);
            }
        }
    }
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let body = conversation.strip_prefix(BEGIN).unwrap_or(conversation);
    let mut messages = Vec::new();
    for (token, text) in split_tokens(body, &[USER, ASSISTANT, OUTPUT_BEGIN]) {
        match token {
            Some(0) => messages.push(Message::with_text(Role::User, text)),
            Some(1) => {
                // The assistant's turn ends at its end token; what follows it (before the next
                // token) is developer text.
                let (turn, after) = match text.find(END) {
                    Some(at) => (&text[..at], &text[at + END.len()..]),
                    None => (text, ""),
                };
                messages.push(read_assistant(turn));
                if !after.is_empty() {
                    messages.push(Message::with_text(Role::Developer, after));
                }
            }
            Some(_) => {
                // One output, then the newline that joins it to the next one of its run.
                let (output, after) = match text.rfind(OUTPUT_END) {
                    Some(at) => (&text[..at], &text[at + OUTPUT_END.len()..]),
                    None => (text, ""),
                };
                messages.push(Message::tool_result(output, None, false));
                let after = after.strip_prefix('\n').unwrap_or(after);
                if !after.is_empty() {
                    messages.push(Message::with_text(Role::Developer, after));
                }
            }
            None => messages.push(Message::with_text(Role::Developer, text)),
        }
    }
    messages
}

fn read_assistant(body: &str) -> Message {
    reasoning::read_assistant(body, "<think>\n", |rest| {
        reasoning::delimited(rest, CALLS_BEGIN, CALLS_END, read_calls)
    })
}

fn read_calls(mut text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    while !text.is_empty() {
        let after = text.strip_prefix(CALL_BEGIN)?;
        let (name, rest) = after.split_once(SEP)?;
        let (arguments, rest) = rest.split_once(CALL_END)?;
        calls.push(ToolCall::new(
            name,
            parse_json(arguments).map(crate::transcript::markup::object_entries)?,
        ));
        text = rest;
    }
    Some(calls)
}
