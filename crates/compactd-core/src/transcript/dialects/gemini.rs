//! Gemma 2/3's turns, as oh-my-pi writes them for Gemini models:
//!
//! ````text
//! <bos><start_of_turn>user
//! fix the parser<end_of_turn>
//! <start_of_turn>model
//! ```thinking
//! …
//! ```
//! Looking.```tool_code
//! [default_api.read(path="src/parse.rs"), default_api.bash(command="cargo test", timeout=30)]
//! ```<end_of_turn>
//! <start_of_turn>user
//! ```tool_outputs
//! …output…
//! ```
//! ```tool_outputs
//! …
//! ```<end_of_turn>
//! ````
//!
//! A model turn always ends in a `tool_code` block: one call bare, several (or none: `[]`) as a
//! list. Arguments are Python literals. Developer text is joined to the next user turn by a
//! newline (or is a user turn of its own before anything else).

use crate::transcript::markup::{
    Turn, parse_python, push_wrapped, results_joined, turns, write_python,
};
use crate::transcript::{Message, Role, ToolCall};

const BEGIN: &str = "<bos>";
const OPEN: &str = "<start_of_turn>";
const CLOSE: &str = "<end_of_turn>\n";
const THINKING: &str = "```thinking\n";
const TOOL_CODE: &str = "```tool_code\n";
const TOOL_OUTPUTS: &str = "```tool_outputs\n";
const FENCE: &str = "\n```";

fn turn(out: &mut String, role: &str, body: &str) {
    out.push_str(&format!("{OPEN}{role}\n{body}{CLOSE}"));
}

/// `default_api.NAME(k=v, …)`.
fn write_call(call: &ToolCall) -> String {
    let arguments = call
        .arguments
        .iter()
        .map(|(k, v)| format!("{k}={}", write_python(v)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("default_api.{}({arguments})", call.name)
}

pub(super) fn write(messages: &[Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = BEGIN.to_owned();
    // System text has no turn of its own: it joins the next user turn.
    let mut pending = String::new();
    let join = |a: &str, b: &str| match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_owned(),
        (_, true) => a.to_owned(),
        _ => format!("{a}\n{b}"),
    };
    // What is pending goes out as a user turn of its own before a model turn or results.
    let flush = |out: &mut String, pending: &mut String| {
        if !pending.is_empty() {
            turn(out, "user", pending);
            pending.clear();
        }
    };
    for next in turns(messages) {
        match next {
            Turn::Developer(message) => pending = join(&pending, &message.text),
            Turn::User(message) => {
                turn(&mut out, "user", &join(&pending, &message.text));
                pending.clear();
            }
            Turn::Assistant(message) => {
                flush(&mut out, &mut pending);
                let mut body = String::new();
                push_wrapped(&mut body, THINKING, &message.thinking, "\n```\n");
                body.push_str(&message.text);
                let code = match message.calls.as_slice() {
                    [one] => write_call(one),
                    calls => format!(
                        "[{}]",
                        calls.iter().map(write_call).collect::<Vec<_>>().join(", ")
                    ),
                };
                body.push_str(TOOL_CODE);
                body.push_str(&code);
                body.push_str(FENCE);
                turn(&mut out, "model", &body);
            }
            Turn::Results(results) => {
                flush(&mut out, &mut pending);
                turn(
                    &mut out,
                    "user",
                    &results_joined(results, TOOL_OUTPUTS, FENCE),
                );
            }
        }
    }
    flush(&mut out, &mut pending);
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let body = conversation.strip_prefix(BEGIN).unwrap_or(conversation);
    let mut messages = Vec::new();
    for segment in body.split(OPEN).skip(1) {
        let segment = segment
            .strip_suffix(CLOSE)
            .or_else(|| segment.strip_suffix("<end_of_turn>"))
            .unwrap_or(segment);
        let (role, text) = segment.split_once('\n').unwrap_or((segment, ""));
        match role {
            "model" => messages.push(read_model(text)),
            _ => match read_outputs(text) {
                Some(results) => messages.extend(results),
                None => messages.push(Message::with_text(Role::User, text)),
            },
        }
    }
    messages
}

/// ```` ```tool_outputs ```` blocks joined by newlines, the whole of `text`.
fn read_outputs(text: &str) -> Option<Vec<Message>> {
    let mut rest = text.strip_prefix(TOOL_OUTPUTS)?;
    let mut results = Vec::new();
    loop {
        let mut found = None;
        for at in memchr::memmem::find_iter(rest.as_bytes(), FENCE.as_bytes()) {
            let after = &rest[at + FENCE.len()..];
            if after.is_empty() || after.starts_with("\n```tool_outputs\n") {
                found = Some(at);
                break;
            }
        }
        let at = found?;
        results.push(Message::tool_result(&rest[..at], None, false));
        let after = &rest[at + FENCE.len()..];
        if after.is_empty() {
            return Some(results);
        }
        rest = &after[1 + TOOL_OUTPUTS.len()..];
    }
}

fn read_model(body: &str) -> Message {
    let mut message = Message::new(Role::Assistant);
    // The turn ends in its tool_code block.
    let (head, calls) = match crate::transcript::trailing(body, TOOL_CODE, |tail| {
        let code = tail.strip_prefix(TOOL_CODE)?.strip_suffix(FENCE)?;
        read_calls(code)
    }) {
        Some((at, calls)) => (&body[..at], calls),
        None => (body, Vec::new()),
    };
    message.calls = calls;
    match head.strip_prefix(THINKING).and_then(thinking_end) {
        Some(end) => {
            let after = &head[THINKING.len()..];
            message.thinking = after[..end].to_owned();
            message.text = after[end + "\n```\n".len()..].to_owned();
        }
        None => message.text = head.to_owned(),
    }
    message
}

/// Where the thinking block closes: the first line that is a bare fence while no fence the
/// thinking opened itself is open (thinking holds code blocks of its own). The offset is that of
/// the newline before the fence.
fn thinking_end(after: &str) -> Option<usize> {
    let mut open = false;
    let mut at = 0;
    for line in after.split_inclusive('\n') {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        if bare == "```" && !open {
            if at > 0 && line.ends_with('\n') {
                return Some(at - 1);
            }
        } else if bare == "```" {
            open = false;
        } else if bare.starts_with("```") {
            open = !open;
        }
        at += line.len();
    }
    None
}

/// The calls of a `tool_code` block: one call, or a list of them.
fn read_calls(code: &str) -> Option<Vec<ToolCall>> {
    if let Some(list) = code.strip_prefix('[').and_then(|c| c.strip_suffix(']')) {
        let mut calls = Vec::new();
        let mut rest = list;
        while !rest.is_empty() {
            let (call, used) = read_call(rest)?;
            calls.push(call);
            rest = &rest[used..];
            if !rest.is_empty() {
                rest = rest.strip_prefix(", ")?;
            }
        }
        return Some(calls);
    }
    let (call, used) = read_call(code)?;
    (used == code.len()).then(|| vec![call])
}

/// `default_api.NAME(k=v, …)` at the start of `text`, and its length.
fn read_call(text: &str) -> Option<(ToolCall, usize)> {
    let after = text.strip_prefix("default_api.")?;
    let open = after.find('(')?;
    let name = after[..open].to_owned();
    let mut rest = &after[open + 1..];
    let mut arguments = Vec::new();
    loop {
        if let Some(after) = rest.strip_prefix(')') {
            rest = after;
            break;
        }
        if !arguments.is_empty() {
            rest = rest.strip_prefix(", ")?;
        }
        let eq = rest.find('=')?;
        let key = rest[..eq].to_owned();
        let (value, used) = parse_python(&rest[eq + 1..])?;
        arguments.push((key, value));
        rest = &rest[eq + 1 + used..];
    }
    Some((ToolCall::new(name, arguments), text.len() - rest.len()))
}
