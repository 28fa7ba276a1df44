//! Gemma 4's markup, as oh-my-pi writes it for Gemma models:
//!
//! ```text
//! <bos><|turn>user
//! fix the parser<turn|><|turn>model
//! <|channel>thought
//! …<channel|>Looking.<|tool_call>call:read{path:<|"|>src/parse.rs<|"|>}<tool_call|>
//! <|tool_response>response:read{output:<|"|>…output…<|"|>}<tool_response|><turn|>
//! ```
//!
//! (Without the line break before the response.) The results that follow a model turn are
//! written inside it; a result whose text is JSON is written as that value (`{output:{k:…}}`),
//! others as a string. Strings are written between `<|"|>` tokens, unescaped; developer messages
//! are `system` turns.

use serde_json::Value;

use crate::transcript::markup::{Turn, push_wrapped, turns};
use crate::transcript::markup::{
    gemma_entries, parse_gemma, parse_gemma_object, parse_json, stringify, write_gemma,
};
use crate::transcript::{Message, Role, ToolCall};

const BEGIN: &str = "<bos>";
const OPEN: &str = "<|turn>";
const CLOSE: &str = "<turn|>";
const THOUGHT: &str = "<|channel>thought\n";
const THOUGHT_END: &str = "<channel|>";
const CALL: &str = "<|tool_call>call:";
const CALL_END: &str = "<tool_call|>";
const RESPONSE: &str = "<|tool_response>response:";
const RESPONSE_END: &str = "<tool_response|>";

fn write_results(out: &mut String, results: &[Message]) {
    for result in results {
        // A result whose text is JSON is written as the value (oh-my-pi parses it first).
        let value = parse_json(&result.text).unwrap_or_else(|| Value::String(result.text.clone()));
        out.push_str(&format!(
            "{RESPONSE}{}{{output:{}}}{RESPONSE_END}",
            result.tool.as_deref().unwrap_or_default(),
            write_gemma(&value)
        ));
    }
}

pub(super) fn write(messages: &[Message]) -> String {
    if messages.is_empty() {
        return String::new();
    }
    let mut out = BEGIN.to_owned();
    let mut turns = turns(messages);
    while let Some(next) = turns.next() {
        match next {
            Turn::Assistant(message) => {
                let mut body = String::new();
                push_wrapped(&mut body, THOUGHT, &message.thinking, THOUGHT_END);
                body.push_str(&message.text);
                for call in &message.calls {
                    body.push_str(CALL);
                    body.push_str(&call.name);
                    body.push('{');
                    gemma_entries(&mut body, call.arguments.iter().map(|(k, v)| (k, v)));
                    body.push('}');
                    body.push_str(CALL_END);
                }
                // The results that answer the calls are written inside the model's turn.
                if let Some(Turn::Results(results)) =
                    turns.next_if(|t| matches!(t, Turn::Results(_)))
                {
                    write_results(&mut body, results);
                }
                out.push_str(&format!("{OPEN}model\n{body}{CLOSE}"));
            }
            Turn::Results(results) => {
                let mut body = String::new();
                write_results(&mut body, results);
                out.push_str(&format!("{OPEN}model\n{body}{CLOSE}"));
            }
            Turn::User(message) | Turn::Developer(message) => {
                let role = if message.role == Role::User {
                    "user"
                } else {
                    "system"
                };
                out.push_str(&format!("{OPEN}{role}\n{}{CLOSE}", message.text));
            }
        }
    }
    out
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let body = conversation.strip_prefix(BEGIN).unwrap_or(conversation);
    let mut messages = Vec::new();
    for segment in body.split(OPEN).skip(1) {
        let segment = segment.strip_suffix(CLOSE).unwrap_or(segment);
        let (role, text) = segment.split_once('\n').unwrap_or((segment, ""));
        match role {
            "model" => read_model(text, &mut messages),
            "user" => messages.push(Message::with_text(Role::User, text)),
            _ => messages.push(Message::with_text(Role::Developer, text)),
        }
    }
    messages
}

fn read_model(body: &str, messages: &mut Vec<Message>) {
    // A model turn of results alone (no message before them to hold them).
    if let Some(results) = read_tail(body).filter(|(at, _, _)| *at == 0)
        && results.1.is_empty()
    {
        messages.extend(results.2);
        return;
    }
    let mut message = Message::new(Role::Assistant);
    let mut rest = body;
    if let Some(after) = rest.strip_prefix(THOUGHT)
        && let Some(end) = after.find(THOUGHT_END)
    {
        message.thinking = after[..end].to_owned();
        rest = &after[end + THOUGHT_END.len()..];
    }
    let results = match read_tail(rest) {
        Some((at, calls, results)) => {
            message.text = rest[..at].to_owned();
            message.calls = calls;
            results
        }
        None => {
            message.text = rest.to_owned();
            Vec::new()
        }
    };
    messages.push(message);
    messages.extend(results);
}

/// The calls and results that end a model turn: where they start, the calls, the results.
fn read_tail(text: &str) -> Option<(usize, Vec<ToolCall>, Vec<Message>)> {
    let first = [text.find(CALL), text.find(RESPONSE)]
        .into_iter()
        .flatten()
        .min()?;
    // The first opener from which the rest reads whole.
    let mut candidates: Vec<usize> = memchr::memmem::find_iter(text.as_bytes(), CALL.as_bytes())
        .chain(memchr::memmem::find_iter(
            text.as_bytes(),
            RESPONSE.as_bytes(),
        ))
        .filter(|&at| at >= first)
        .collect();
    candidates.sort_unstable();
    for at in candidates {
        if let Some((calls, results)) = read_blocks(&text[at..]) {
            return Some((at, calls, results));
        }
    }
    None
}

/// Call blocks then response blocks, the whole of `text`.
fn read_blocks(mut text: &str) -> Option<(Vec<ToolCall>, Vec<Message>)> {
    let mut calls = Vec::new();
    while let Some(after) = text.strip_prefix(CALL) {
        let open = after.find('{')?;
        let name = after[..open].to_owned();
        let (arguments, used) = parse_gemma_object(&after[open..])?;
        text = after[open + used..].strip_prefix(CALL_END)?;
        calls.push(ToolCall::new(name, arguments));
    }
    let mut results = Vec::new();
    while let Some(after) = text.strip_prefix(RESPONSE) {
        let open = after.find("{output:")?;
        let name = after[..open].to_owned();
        let (value, used) = parse_gemma(&after[open + "{output:".len()..])?;
        text = after[open + "{output:".len() + used..]
            .strip_prefix('}')?
            .strip_prefix(RESPONSE_END)?;
        let text_of = match value {
            Value::String(s) => s,
            other => stringify(&other),
        };
        results.push(Message::tool_result(text_of, Some(name), false));
    }
    (text.is_empty() && !(calls.is_empty() && results.is_empty())).then_some((calls, results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::literals::GEMMA_QUOTE;

    #[test]
    fn a_result_that_is_json_comes_back_as_text_that_writes_the_same() {
        let messages = vec![
            Message {
                calls: vec![ToolCall::new("read", vec![("path".into(), "a.rs".into())])],
                ..Message::new(Role::Assistant)
            },
            Message::tool_result("{\"ok\": [1, true]}", Some("read".into()), false),
        ];
        let text = write(&messages);
        assert!(text.contains("{output:{ok:[1,true]}}"), "{text}");
        assert!(text.contains(&format!("{GEMMA_QUOTE}a.rs{GEMMA_QUOTE}")));
        let read_back = read(&text);
        assert_eq!(read_back[1].text, "{\"ok\":[1,true]}");
        assert_eq!(write(&read_back), text);
    }
}
