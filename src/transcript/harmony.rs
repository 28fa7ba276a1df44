//! OpenAI's harmony format, as oh-my-pi writes it for GPT models (the `|` of its special tokens
//! arrive escaped, `<\|start\|>`; plain `<|start|>` is read too):
//!
//! ```text
//! <|start|>user<|message|>fix the parser<|end|>
//! <|start|>assistant<|channel|>analysis<|message|>thinking…<|end|>
//! <|start|>assistant<|channel|>final<|message|>Looking.<|end|>
//! <|start|>assistant<|channel|>commentary to=functions.read<|message|>{"path":"a.rs"}<|call|>
//! <|start|>functions.read to=assistant<|channel|>commentary<|message|>…output…<|end|>
//! ```

use super::{Message, Reader, ToolCall, append_text};

/// A special token found in the text: where it starts and ends, and its name.
struct Token<'a> {
    start: usize,
    end: usize,
    name: &'a str,
}

/// The next special token at or after `from`.
fn next_token(text: &str, mut from: usize) -> Option<Token<'_>> {
    let bytes = text.as_bytes();
    while let Some(offset) = memchr::memmem::find(&bytes[from..], b"<") {
        let start = from + offset;
        let rest = &text[start + 1..];
        let (rest, opened) = match rest.strip_prefix("\\|").or_else(|| rest.strip_prefix('|')) {
            Some(after) => (after, rest.len() - after.len()),
            None => {
                from = start + 1;
                continue;
            }
        };
        let name_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_lowercase() || *b == b'_')
            .count();
        let after_name = &rest[name_len..];
        let closed = if after_name.starts_with("\\|>") {
            3
        } else if after_name.starts_with("|>") {
            2
        } else {
            0
        };
        if name_len > 0 && closed > 0 {
            return Some(Token {
                start,
                end: start + 1 + opened + name_len + closed,
                name: &rest[..name_len],
            });
        }
        from = start + 1;
    }
    None
}

pub(super) fn read(conversation: &str, reader: &mut Reader) {
    let mut at = 0;
    let mut tokens = Vec::new();
    while let Some(token) = next_token(conversation, at) {
        at = token.end;
        tokens.push(token);
    }
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i].name != "start" {
            i += 1;
            continue;
        }
        let turn_start = tokens[i].start;
        // The header runs to `<|message|>`; the content from there to the token that ends it.
        let Some(message_at) = (i + 1..tokens.len())
            .take_while(|&j| tokens[j].name != "start")
            .find(|&j| tokens[j].name == "message")
        else {
            i += 1;
            continue;
        };
        let header = header_text(conversation, &tokens[i..=message_at]);
        let content_end = tokens
            .get(message_at + 1)
            .map_or(conversation.len(), |t| t.start);
        let content = &conversation[tokens[message_at].end..content_end];
        reader.turn(turn_start);
        segment(&header, content, reader);
        i = message_at + 1;
    }
}

/// The header words from `<|start|>` to `<|message|>` (the last of `tokens`), with the tokens in
/// between replaced by spaces.
fn header_text(text: &str, tokens: &[Token<'_>]) -> String {
    let mut header = String::new();
    for pair in tokens.windows(2) {
        header.push(' ');
        header.push_str(&text[pair[0].end..pair[1].start]);
    }
    header
}

fn segment(header: &str, content: &str, reader: &mut Reader) {
    let role = header.split_whitespace().next().unwrap_or_default();
    let recipient = header
        .split_whitespace()
        .find_map(|w| w.strip_prefix("to="))
        .unwrap_or_default();
    let channel = header
        .split_whitespace()
        .find(|w| matches!(*w, "analysis" | "commentary" | "final"))
        .unwrap_or_default();
    if let Some(tool) = role.strip_prefix("functions.") {
        reader.push(Message::tool_result(content, Some(tool.to_owned()), false));
        return;
    }
    match role {
        "assistant" => {
            let message = reader.assistant();
            if let Some(tool) = recipient.strip_prefix("functions.") {
                let arguments: serde_json::Value = crate::js_json::from_str(content.trim())
                    .unwrap_or_else(|_| serde_json::json!({ "input": content }));
                message.calls.push(ToolCall::from_object(tool, &arguments));
            } else if channel == "analysis" {
                append_text(&mut message.thinking, content);
            } else {
                append_text(&mut message.text, content);
            }
        }
        "user" => reader.push(Message::user(content)),
        // system and developer messages are not the conversation's.
        _ => {}
    }
}
