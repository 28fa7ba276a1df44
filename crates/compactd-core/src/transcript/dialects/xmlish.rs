//! The `Human:` / `Assistant:` transcripts oh-my-pi writes for Anthropic models, for MiniMax, and
//! as its fallback for models without a dialect of their own (`xml`):
//!
//! ```text
//!
//!
//! Human: fix the parser
//!
//! Assistant: <thinking>
//! …
//! </thinking>Looking.<function_calls>
//! <invoke name="read"><parameter name="path">"src/parse.rs"</parameter></invoke>
//! </function_calls>
//!
//! Human: <function_results>
//! <result>
//! <tool_name>read</tool_name>
//! <stdout>…</stdout>
//! </result>
//! </function_results>
//! ```
//!
//! Every turn is preceded by a blank line (the transcript opens with one). Parameter values are
//! JSON. A developer message is appended to the text so far after a blank line, unmarked.
//! Anthropic: `<function_calls>` around the invokes, results in `<function_results>` (`<error>`
//! and `<stderr>` for errors), no thinking (oh-my-pi drops it). xml: bare invokes joined by
//! newlines, results as `<tool_response>` blocks. MiniMax: `<minimax:tool_call>` around the
//! invokes, results as Anthropic's.

use serde_json::Value;

use crate::transcript::markup::{Turn, push_wrapped, turns};
use crate::transcript::markup::{
    escape_attribute, escape_text, json_extent, parse_json, stringify, unescape,
};
use crate::transcript::{Dialect, Message, Role, ToolCall, trailing};

const HUMAN: &str = "Human: ";
const ASSISTANT: &str = "Assistant: ";
const THINKING_OPEN: &str = "<thinking>\n";
const THINKING_CLOSE: &str = "\n</thinking>";

pub(super) fn write(dialect: Dialect, messages: &[Message]) -> String {
    let mut out = String::new();
    for next in turns(messages) {
        match next {
            Turn::Assistant(message) => {
                out.push_str("\n\n");
                out.push_str(ASSISTANT);
                push_wrapped(&mut out, THINKING_OPEN, &message.thinking, THINKING_CLOSE);
                out.push_str(&message.text);
                write_calls(&mut out, dialect, &message.calls);
            }
            Turn::Results(results) => {
                out.push_str("\n\n");
                out.push_str(HUMAN);
                write_results(&mut out, dialect, results);
            }
            Turn::Developer(message) => {
                if !message.text.is_empty() {
                    if !out.is_empty() {
                        out.push_str("\n\n");
                    }
                    out.push_str(&message.text);
                }
            }
            Turn::User(message) => {
                out.push_str("\n\n");
                out.push_str(HUMAN);
                out.push_str(&message.text);
            }
        }
    }
    out
}

fn write_invoke(out: &mut String, call: &ToolCall) {
    out.push_str("<invoke name=\"");
    out.push_str(&escape_attribute(&call.name));
    out.push_str("\">");
    for (key, value) in &call.arguments {
        out.push_str("<parameter name=\"");
        out.push_str(&escape_attribute(key));
        out.push_str("\">");
        match value {
            Value::String(text) if call.raw_strings.contains(key) => out.push_str(text),
            value => out.push_str(&stringify(value)),
        }
        out.push_str("</parameter>");
    }
    out.push_str("</invoke>");
}

fn write_calls(out: &mut String, dialect: Dialect, calls: &[ToolCall]) {
    if calls.is_empty() {
        return;
    }
    let wrapper = match dialect {
        Dialect::Anthropic => Some(("<function_calls>\n", "\n</function_calls>")),
        Dialect::Minimax => Some(("<minimax:tool_call>\n", "\n</minimax:tool_call>")),
        _ => None,
    };
    if let Some((open, _)) = wrapper {
        out.push_str(open);
    }
    for (i, call) in calls.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        write_invoke(out, call);
    }
    if let Some((_, close)) = wrapper {
        out.push_str(close);
    }
}

fn write_results(out: &mut String, dialect: Dialect, results: &[Message]) {
    if dialect == Dialect::Xml {
        for (i, result) in results.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str("<tool_response>\n");
            out.push_str(&result.text);
            out.push_str("\n</tool_response>");
        }
        return;
    }
    out.push_str("<function_results>\n");
    for (i, result) in results.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (element, stream) = if result.is_error {
            ("error", "stderr")
        } else {
            ("result", "stdout")
        };
        out.push_str(&format!(
            "<{element}>\n<tool_name>{}</tool_name>\n<{stream}>{}</{stream}>\n</{element}>",
            escape_text(result.tool.as_deref().unwrap_or_default()),
            result.text
        ));
    }
    out.push_str("\n</function_results>");
}

pub(super) fn read(dialect: Dialect, conversation: &str) -> Vec<Message> {
    // Turns open with "Human: " or "Assistant: " at the start or after a blank line.
    let mut starts: Vec<(usize, bool)> = Vec::new();
    for (prefix, human) in [(HUMAN, true), (ASSISTANT, false)] {
        if conversation.starts_with(prefix) {
            starts.push((0, human));
        }
        let needle = format!("\n\n{prefix}");
        for found in memchr::memmem::find_iter(conversation.as_bytes(), needle.as_bytes()) {
            starts.push((found + 2, human));
        }
    }
    starts.sort_unstable();
    starts.dedup_by_key(|&mut (at, _)| at);
    let mut messages = Vec::new();
    // Text before the first turn (after its blank line) is a developer message.
    let first = starts.first().map_or(conversation.len(), |s| s.0);
    let lead = conversation[..first]
        .strip_suffix("\n\n")
        .unwrap_or(&conversation[..first]);
    if !lead.is_empty() {
        messages.push(Message::with_text(Role::Developer, lead));
    }
    for (i, &(start, human)) in starts.iter().enumerate() {
        // A turn ends at the blank line before the next one.
        let end = starts
            .get(i + 1)
            .map_or(conversation.len(), |next| next.0 - 2);
        if human {
            let body = &conversation[start + HUMAN.len()..end];
            match read_results(dialect, body) {
                Some(results) => messages.extend(results),
                None => messages.push(Message::with_text(Role::User, body)),
            }
        } else {
            messages.push(read_assistant(
                dialect,
                &conversation[start + ASSISTANT.len()..end],
            ));
        }
    }
    messages
}

fn read_assistant(dialect: Dialect, body: &str) -> Message {
    let mut message = Message::new(Role::Assistant);
    let mut rest = body;
    if let Some(after) = rest.strip_prefix(THINKING_OPEN)
        && let Some(end) = after.find(THINKING_CLOSE)
    {
        message.thinking = after[..end].to_owned();
        rest = &after[end + THINKING_CLOSE.len()..];
    }
    let calls = match dialect {
        Dialect::Anthropic => wrapped_calls(rest, "<function_calls>\n", "\n</function_calls>"),
        Dialect::Minimax => wrapped_calls(rest, "<minimax:tool_call>\n", "\n</minimax:tool_call>"),
        _ => trailing(rest, "<invoke name=\"", read_invokes),
    };
    match calls {
        Some((at, calls)) => {
            message.text = rest[..at].to_owned();
            message.calls = calls;
        }
        None => message.text = rest.to_owned(),
    }
    message
}

/// The wrapped call block that ends `text`: where it starts and its calls.
fn wrapped_calls(text: &str, open: &str, close: &str) -> Option<(usize, Vec<ToolCall>)> {
    if !text.ends_with(close) {
        return None;
    }
    trailing(text, open, |block| {
        read_invokes(block.strip_prefix(open)?.strip_suffix(close)?)
    })
}

/// Invokes joined by newlines, the whole of `text`.
fn read_invokes(mut text: &str) -> Option<Vec<ToolCall>> {
    let mut calls = Vec::new();
    loop {
        let (call, used) = read_invoke(text)?;
        calls.push(call);
        text = &text[used..];
        if text.is_empty() {
            return Some(calls);
        }
        text = text.strip_prefix('\n')?;
    }
}

/// `<invoke name="…"><parameter name="…">VALUE</parameter>…</invoke>` at the start of `text`.
/// A value is JSON, or — a string argument of a tool whose schema oh-my-pi knew — the text itself,
/// which ends at the closing tag that a next parameter or the invoke's end follows (the only
/// text such a value cannot hold).
fn read_invoke(text: &str) -> Option<(ToolCall, usize)> {
    const CLOSE: &str = "</parameter>";
    let after = text.strip_prefix("<invoke name=\"")?;
    let name_end = after.find("\">")?;
    let name = unescape(&after[..name_end]);
    let mut rest = &after[name_end + 2..];
    let mut arguments = Vec::new();
    let mut raw_strings = Vec::new();
    while let Some(param) = rest.strip_prefix("<parameter name=\"") {
        let key_end = param.find("\">")?;
        let key = unescape(&param[..key_end]);
        let value_text = &param[key_end + 2..];
        let json = json_extent(value_text)
            .filter(|&extent| value_text[extent..].starts_with(CLOSE))
            .and_then(|extent| Some((parse_json(&value_text[..extent])?, extent)));
        let (value, extent) = match json {
            Some(json) => json,
            None => {
                let end = raw_value_end(value_text)?;
                raw_strings.push(key.clone());
                (Value::String(value_text[..end].to_owned()), end)
            }
        };
        rest = value_text[extent..].strip_prefix(CLOSE)?;
        arguments.push((key, value));
    }
    let rest = rest.strip_prefix("</invoke>")?;
    let mut call = ToolCall::new(name, arguments);
    call.raw_strings = raw_strings;
    Some((call, text.len() - rest.len()))
}

/// Where a parameter's text written as it is ends: the first closing tag followed by another
/// parameter or the end of the invoke.
fn raw_value_end(text: &str) -> Option<usize> {
    memchr::memmem::find_iter(text.as_bytes(), b"</parameter>").find(|&at| {
        let after = &text[at + "</parameter>".len()..];
        after.starts_with("<parameter name=\"") || after.starts_with("</invoke>")
    })
}

/// A human turn that is tool results, read whole; `None` when it is the user's words.
fn read_results(dialect: Dialect, body: &str) -> Option<Vec<Message>> {
    if dialect == Dialect::Xml {
        return crate::transcript::tool_responses(body);
    }
    let inner = body
        .strip_prefix("<function_results>\n")?
        .strip_suffix("\n</function_results>")?;
    let mut results = Vec::new();
    let mut rest = inner;
    loop {
        let (element, stream, is_error) = if rest.starts_with("<result>\n") {
            ("result", "stdout", false)
        } else if rest.starts_with("<error>\n") {
            ("error", "stderr", true)
        } else {
            return None;
        };
        let head = format!("<{element}>\n<tool_name>");
        let after = rest.strip_prefix(head.as_str())?;
        let name_end = after.find("</tool_name>\n")?;
        let name = unescape(&after[..name_end]);
        let open = format!("<{stream}>");
        let output = after[name_end + "</tool_name>\n".len()..].strip_prefix(open.as_str())?;
        // The output ends at the first closing sequence after which the block list goes on, or
        // the block list ends (outputs may hold the closing tags themselves).
        let close = format!("</{stream}>\n</{element}>");
        let mut found = None;
        for at in memchr::memmem::find_iter(output.as_bytes(), close.as_bytes()) {
            let after = &output[at + close.len()..];
            if after.is_empty()
                || after.starts_with("\n<result>\n<tool_name>")
                || after.starts_with("\n<error>\n<tool_name>")
            {
                found = Some(at);
                break;
            }
        }
        let at = found?;
        let mut result = Message::tool_result(&output[..at], Some(name), is_error);
        result.is_error = is_error;
        results.push(result);
        rest = &output[at + close.len()..];
        if rest.is_empty() {
            return Some(results);
        }
        rest = rest.strip_prefix('\n')?;
    }
}
