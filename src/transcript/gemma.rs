//! Gemma's turns, as oh-my-pi writes them for Gemini models:
//!
//! ````text
//! <bos><start_of_turn>user
//! fix the parser<end_of_turn>
//! <start_of_turn>model
//! ```thinking
//! …
//! ```
//! Looking.```tool_code
//! [default_api.read(path="src/parse.rs"), default_api.bash(command="cargo test")]
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
//! Outputs may themselves hold ```` ``` ```` fences, so a block ends at the last fence before the
//! next block or the end of the turn.

use super::{Message, Reader, Role, append_text, calls};

const OPEN: &str = "<start_of_turn>";
const CLOSE: &str = "<end_of_turn>";
const THINKING: &str = "```thinking\n";
const TOOL_CODE: &str = "```tool_code\n";
const TOOL_OUTPUTS: &str = "```tool_outputs\n";

pub(super) fn read(conversation: &str, reader: &mut Reader) {
    let starts: Vec<usize> =
        memchr::memmem::find_iter(conversation.as_bytes(), OPEN.as_bytes()).collect();
    for (i, &start) in starts.iter().enumerate() {
        let end = starts.get(i + 1).copied().unwrap_or(conversation.len());
        let turn = &conversation[start + OPEN.len()..end];
        let turn = turn.rfind(CLOSE).map_or(turn, |c| &turn[..c]);
        let (role, body) = turn.split_once('\n').unwrap_or((turn, ""));
        reader.turn(start);
        match role.trim() {
            "model" => model(body, reader),
            "user" => user(body, reader),
            _ => {}
        }
    }
}

/// The content of a fenced block: without its closing fence.
fn fenced(block: &str) -> &str {
    let block = block.trim_end();
    let block = block.strip_suffix("```").unwrap_or(block);
    block.strip_suffix('\n').unwrap_or(block)
}

fn user(body: &str, reader: &mut Reader) {
    if !body.starts_with(TOOL_OUTPUTS) {
        reader.push(Message::user(body));
        return;
    }
    for piece in body.split(TOOL_OUTPUTS).skip(1) {
        reader.push(Message::tool_result(fenced(piece), None, false));
    }
}

fn model(body: &str, reader: &mut Reader) {
    reader.messages.push(Message::new(Role::Assistant));
    let message = reader.assistant();
    let mut rest = body;
    if let Some(after) = rest.strip_prefix(THINKING)
        && let Some(end) = after.find("\n```")
    {
        append_text(&mut message.thinking, &after[..end]);
        rest = &after[end + "\n```".len()..];
    }
    match rest.rfind(TOOL_CODE) {
        Some(at) => {
            append_text(&mut message.text, &rest[..at]);
            let code = fenced(&rest[at + TOOL_CODE.len()..]).trim();
            let list = code
                .strip_prefix('[')
                .map_or(code, |c| c.strip_suffix(']').unwrap_or(c));
            let separator = if code.starts_with('[') { ", " } else { "\n" };
            message.calls.extend(calls::parse(list, separator));
        }
        None => append_text(&mut message.text, rest),
    }
}
