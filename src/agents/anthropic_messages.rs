//! The Anthropic Messages wire (`POST /v1/messages`): Claude Code's compactions recognized,
//! and compactd's answer written as Anthropic writes one, whole or streamed.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::Wire;
use super::answer::{Answer, id, json_response, pieces, sse};
use super::carried;
use super::recognize::{Compaction, Form, of_history};
use crate::pipeline::Agent;
use compactd_core::transcript::structured;

/// Claude Code (2.1.330, 2.1.332): `/v1/messages` with its summary instruction appended.
pub(crate) const CLAUDE_CODE: Agent = Agent {
    name: "claude-code",
    endpoint: "gateway:claude-code",
    wire: Wire::AnthropicMessages,
};

/// Claude Code's instruction opens with this (2.1.330, 2.1.332)…
pub(super) const CLAUDE_OPENING: &str = "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.";

/// … and holds this.
pub(super) const CLAUDE_TASK: &str =
    "Your task is to create a detailed summary of the conversation so far";

/// A Claude Code compaction on the Anthropic Messages wire: its instruction opens a text of the
/// last user message (alone, after the user's prompt, or after the results of a tool loop), which
/// only Claude Code's own system messages may follow (2.1.330 sends none; 2.1.332 appends a
/// reminder that the user has not heard from it after a run of tool calls).
pub(super) fn claude_code(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let messages = body.get("messages")?.as_array()?;
    let at = messages
        .iter()
        .rposition(|m| m.get("role").and_then(Value::as_str) != Some("system"))?;
    let last = &messages[at];
    if last.get("role")?.as_str()? != "user" {
        return None;
    }
    let content = last.get("content")?;
    // What comes before the instruction in its message (the prompt, a tool's results) is history.
    let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
    let opens = blocks
        .iter()
        .position(|b| {
            b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| t.trim_start().starts_with(CLAUDE_OPENING))
        })
        .unwrap_or(0);
    let instructions = match content {
        Value::Array(_) => structured::content_text(&Value::from(blocks[opens..].to_vec())),
        other => structured::content_text(other),
    };
    if !instructions.trim_start().starts_with(CLAUDE_OPENING) || !instructions.contains(CLAUDE_TASK)
    {
        return None;
    }
    // The system messages after it are Claude Code's own, not the work: they go.
    let mut history = messages[..at].to_vec();
    if opens > 0 {
        let mut kept = last.clone();
        kept["content"] = Value::from(blocks[..opens].to_vec());
        history.push(kept);
    }
    let previous_summary = carried::take_claude(&mut history);
    let conversation = Wire::AnthropicMessages.messages(&history);
    Some(of_history(
        agent,
        Form::SummaryTags,
        body,
        conversation,
        instructions,
        previous_summary,
    ))
}

/// Claude Code keeps what is inside `<summary>` tags, and asks again when there are none: the
/// summary is given them unless it has them.
pub(crate) fn with_summary_tags(text: &str) -> String {
    if text.contains("<summary>") && text.contains("</summary>") {
        text.to_owned()
    } else {
        format!("<summary>\n{}\n</summary>", text.trim())
    }
}

/// An Anthropic Messages answer holding `answer.text`.
pub(super) fn answer(answer: &Answer<'_>, stream: bool) -> Response {
    let id = id("msg");
    let usage = &answer.usage;
    let message = |content: Value, stop: Value, output_tokens: u64| {
        json!({"id": id, "type": "message", "role": "assistant", "model": answer.model,
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": usage.input_tokens, "output_tokens": output_tokens,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": usage.cached_input_tokens}})
    };
    if !stream {
        return json_response(message(
            json!([{"type": "text", "text": answer.text}]),
            json!("end_turn"),
            usage.output_tokens,
        ));
    }
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": message(json!([]), Value::Null, 1)}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        ("ping", json!({"type": "ping"})),
    ];
    for piece in pieces(answer.text) {
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": piece}}),
        ));
    }
    events.extend([
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": usage.output_tokens}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]);
    sse(events)
}
