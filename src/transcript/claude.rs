//! The `Human:` / `Assistant:` transcript oh-my-pi writes for Claude models (and as the fallback
//! for models without a dialect of their own):
//!
//! ```text
//! Human: fix the parser
//!
//! Assistant: Looking.<function_calls>
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
//! The fallback form writes bare `<invoke>` blocks, `<thinking>…</thinking>` before the text, and
//! results as `<tool_response>…</tool_response>`. Errors come as `<error>…<stderr>…</stderr>`.
//! Parameter values are JSON.

use super::{Message, Reader, Role, ToolCall, append_text, between};

const HUMAN: &str = "Human: ";
const ASSISTANT: &str = "Assistant: ";

pub(super) fn read(conversation: &str, reader: &mut Reader) {
    // Turn starts: "Human: " or "Assistant: " at the start or after a blank line.
    let mut starts: Vec<(usize, Role)> = Vec::new();
    let opening = conversation.len() - conversation.trim_start_matches('\n').len();
    for (prefix, role) in [(HUMAN, Role::User), (ASSISTANT, Role::Assistant)] {
        if conversation[opening..].starts_with(prefix) {
            starts.push((opening, role));
        }
        let needle = format!("\n\n{prefix}");
        for found in memchr::memmem::find_iter(conversation.as_bytes(), needle.as_bytes()) {
            starts.push((found + 2, role));
        }
    }
    starts.sort_unstable_by_key(|&(at, _)| at);
    starts.dedup_by_key(|&mut (at, _)| at);
    // Text before the first turn is the user's.
    let first = starts.first().map_or(conversation.len(), |s| s.0);
    if !conversation[..first].trim().is_empty() {
        reader.turn(0);
        reader.push(Message::user(&conversation[..first]));
    }
    for (i, &(start, role)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(conversation.len(), |next| next.0);
        let prefix = if role == Role::User { HUMAN } else { ASSISTANT };
        let body = &conversation[start + prefix.len()..end];
        reader.turn(start);
        match role {
            Role::User => human(body, reader),
            _ => assistant(body, reader),
        }
    }
}

/// A human turn: the user's words, or tool results.
fn human(body: &str, reader: &mut Reader) {
    let mut rest = body;
    let mut words = String::new();
    loop {
        let results = rest.find("<function_results>");
        let response = rest.find("<tool_response>");
        let next = match (results, response) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let Some(at) = next else {
            append_text(&mut words, rest);
            break;
        };
        append_text(&mut words, &rest[..at]);
        rest = &rest[at..];
        if let Some(after) = rest.strip_prefix("<function_results>") {
            let (block, used) = match after.rfind("</function_results>") {
                Some(end) => (&after[..end], end + "</function_results>".len()),
                None => (after, after.len()),
            };
            function_results(block, reader);
            rest = &after[used..];
        } else {
            let after = &rest["<tool_response>".len()..];
            let (content, used) = match after.find("</tool_response>") {
                Some(end) => (&after[..end], end + "</tool_response>".len()),
                None => (after, after.len()),
            };
            reader.push(Message::tool_result(trim_lines(content), None, false));
            rest = &after[used..];
        }
    }
    if !words.trim().is_empty() {
        reader.push(Message::user(&words));
    }
}

/// The `<result>` and `<error>` blocks of one `<function_results>`.
fn function_results(mut block: &str, reader: &mut Reader) {
    loop {
        let result = block.find("<result>");
        let error = block.find("<error>");
        let (at, is_error) = match (result, error) {
            (Some(r), Some(e)) if e < r => (e, true),
            (Some(r), _) => (r, false),
            (None, Some(e)) => (e, true),
            (None, None) => break,
        };
        let (open, close, stream) = if is_error {
            ("<error>", "</error>", "stderr")
        } else {
            ("<result>", "</result>", "stdout")
        };
        let after = &block[at + open.len()..];
        // The output may itself hold the closing tags; the block ends at the closing tag that
        // follows the output stream's own closing tag.
        let stream_close = format!("</{stream}>\n{close}");
        let end = after
            .find(&stream_close)
            .map(|i| i + stream_close.len())
            .or_else(|| after.find(close).map(|i| i + close.len()))
            .unwrap_or(after.len());
        let inner = &after[..end];
        let tool =
            between(inner, "<tool_name>", "</tool_name>").map(|(name, _)| name.trim().to_owned());
        let open_stream = format!("<{stream}>");
        let content = match (
            inner.find(&open_stream),
            inner.rfind(&format!("</{stream}>")),
        ) {
            (Some(s), Some(e)) if s + open_stream.len() <= e => &inner[s + open_stream.len()..e],
            _ => inner.trim_end_matches(close),
        };
        reader.push(Message::tool_result(content, tool, is_error));
        block = &after[end..];
    }
}

/// An assistant turn: `<thinking>`, text, and tool calls in `<function_calls>` or bare `<invoke>`.
fn assistant(body: &str, reader: &mut Reader) {
    reader.messages.push(Message::new(Role::Assistant));
    let message = reader.assistant();
    let mut rest = body;
    if let Some(after) = rest.trim_start().strip_prefix("<thinking>")
        && let Some(end) = after.find("</thinking>")
    {
        append_text(&mut message.thinking, &after[..end]);
        rest = &after[end + "</thinking>".len()..];
    }
    loop {
        let Some(at) = rest.find("<invoke name=\"") else {
            append_text(&mut message.text, strip_call_wrappers(rest));
            break;
        };
        append_text(&mut message.text, strip_call_wrappers(&rest[..at]));
        let after = &rest[at + "<invoke name=\"".len()..];
        let Some(quote) = after.find('"') else {
            append_text(&mut message.text, rest);
            break;
        };
        let name = &after[..quote];
        let (inner, used) = match after.find("</invoke>") {
            Some(end) => (&after[quote..end], end + "</invoke>".len()),
            None => (&after[quote..], after.len()),
        };
        message.calls.push(ToolCall {
            name: name.to_owned(),
            arguments: parameters(inner),
        });
        rest = &after[used..];
    }
}

/// `<parameter name="k">JSON</parameter>` pairs; a value that is not JSON is kept as text.
fn parameters(mut inner: &str) -> Vec<(String, serde_json::Value)> {
    let mut arguments = Vec::new();
    while let Some(at) = inner.find("<parameter name=\"") {
        let after = &inner[at + "<parameter name=\"".len()..];
        let Some(quote) = after.find("\">") else {
            break;
        };
        let key = after[..quote].to_owned();
        let value_start = quote + 2;
        let Some(end) = after[value_start..].find("</parameter>") else {
            break;
        };
        let raw = &after[value_start..value_start + end];
        let value = crate::js_json::from_str(raw.trim())
            .unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()));
        arguments.push((key, value));
        inner = &after[value_start + end + "</parameter>".len()..];
    }
    arguments
}

/// Text around calls without the `<function_calls>` wrapper lines.
fn strip_call_wrappers(text: &str) -> &str {
    let text = text.trim_end();
    let text = text.strip_suffix("<function_calls>").unwrap_or(text);
    let text = text.trim_start();
    text.strip_prefix("</function_calls>").unwrap_or(text)
}

/// Output without the newline that follows an opening tag and the one before a closing tag.
fn trim_lines(text: &str) -> &str {
    let text = text.strip_prefix('\n').unwrap_or(text);
    text.strip_suffix('\n').unwrap_or(text)
}
