//! ChatML, as oh-my-pi writes it for Qwen models:
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

use super::{Message, Reader, ToolCall, append_text};

pub(super) fn read(conversation: &str, reader: &mut Reader) {
    let (open, close) = if conversation.contains("<|im_start|>") {
        ("<|im_start|>", "<|im_end|>")
    } else {
        ("<\\|im_start\\|>", "<\\|im_end\\|>")
    };
    let starts: Vec<usize> =
        memchr::memmem::find_iter(conversation.as_bytes(), open.as_bytes()).collect();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(conversation.len());
        let turn = &conversation[start + open.len()..end];
        let turn = turn.rfind(close).map_or(turn, |c| &turn[..c]);
        let (role, body) = turn.split_once('\n').unwrap_or((turn, ""));
        reader.turn(start);
        match role.trim() {
            "assistant" => assistant(body, reader),
            "user" => user(body, reader),
            "tool" => reader.push(Message::tool_result(strip_response(body), None, false)),
            _ => {}
        }
    }
}

fn user(body: &str, reader: &mut Reader) {
    if !body.trim_start().starts_with("<tool_response>") {
        reader.push(Message::user(body));
        return;
    }
    for piece in body.split("<tool_response>").skip(1) {
        let content = piece
            .rfind("</tool_response>")
            .map_or(piece, |end| &piece[..end]);
        reader.push(Message::tool_result(trim_newlines(content), None, false));
    }
}

fn strip_response(body: &str) -> &str {
    let body = body.trim();
    let body = body.strip_prefix("<tool_response>").unwrap_or(body);
    trim_newlines(body.strip_suffix("</tool_response>").unwrap_or(body))
}

fn assistant(body: &str, reader: &mut Reader) {
    reader.messages.push(Message::new(super::Role::Assistant));
    let message = reader.assistant();
    let mut rest = body;
    if let Some(after) = rest.trim_start().strip_prefix("<think>")
        && let Some(end) = after.find("</think>")
    {
        append_text(&mut message.thinking, &after[..end]);
        rest = &after[end + "</think>".len()..];
    }
    while let Some(at) = rest.find("<tool_call>") {
        append_text(&mut message.text, &rest[..at]);
        let after = &rest[at + "<tool_call>".len()..];
        let (json, used) = match after.find("</tool_call>") {
            Some(end) => (&after[..end], end + "</tool_call>".len()),
            None => (after, after.len()),
        };
        if let Ok(call) = crate::js_json::from_str::<serde_json::Value>(json.trim()) {
            let name = call
                .get("name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            let arguments = call.get("arguments").cloned().unwrap_or_default();
            message.calls.push(ToolCall::from_object(name, &arguments));
        }
        rest = &after[used..];
    }
    append_text(&mut message.text, rest);
}

fn trim_newlines(text: &str) -> &str {
    let text = text.strip_prefix('\n').unwrap_or(text);
    text.strip_suffix('\n').unwrap_or(text)
}
