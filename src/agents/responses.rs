//! The OpenAI Responses wire (`POST /v1/responses`): Codex's compactions recognized (local
//! "memento" compaction and remote compaction v2), and compactd's answer written as the Responses
//! API writes one, whole or streamed.

use axum::http::HeaderMap;
use axum::response::Response;
use serde_json::{Value, json};

use super::Wire;
use super::answer::{Answer, id, json_response, pieces, sse};
use super::recognize::{Compaction, Form, of_history};
use crate::pipeline::Agent;
use crate::summarizer::TokenUsage;
use compactd_core::transcript::structured;

/// Codex (0.169.0, 0.171.0) with a custom provider: local "memento" compaction over `/v1/responses`.
pub(crate) const CODEX_LOCAL: Agent = Agent {
    name: "codex",
    endpoint: "gateway:codex",
    wire: Wire::Responses,
};

/// Codex (0.169.0, 0.171.0) with the `openai` provider: remote compaction v2, a `compaction_trigger`.
pub(crate) const CODEX_REMOTE: Agent = Agent {
    name: "codex-remote",
    endpoint: "gateway:codex-remote",
    wire: Wire::Responses,
};

/// Codex 0.169.0's local compaction prompt opens with this.
/// The item remote compaction v2 ends its input with.
pub(super) const REMOTE_TRIGGER: &str = "compaction_trigger";
pub(super) const CODEX_PROMPT: &str = "You are performing a CONTEXT CHECKPOINT COMPACTION.";

/// A Codex remote compaction (v2) on the Responses wire: a `compaction_trigger` last.
pub(super) fn codex_remote(agent: Agent, _headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let (last, history) = body.get("input")?.as_array()?.split_last()?;
    if last.get("type").and_then(Value::as_str) != Some(REMOTE_TRIGGER) {
        return None;
    }
    let conversation = Wire::Responses.messages(history);
    Some(of_history(
        agent,
        Form::SealedItem,
        body,
        conversation,
        String::new(),
        None,
    ))
}

/// A Codex local compaction on the Responses wire: its prompt last, and no tools or the turn
/// metadata's `request_kind: compaction` (the header, or the same JSON in `client_metadata`).
pub(super) fn codex_local(agent: Agent, headers: &HeaderMap, body: &Value) -> Option<Compaction> {
    let (last, history) = body.get("input")?.as_array()?.split_last()?;
    let text = last
        .get("content")
        .map(structured::content_text)
        .unwrap_or_default();
    let tools_off = body
        .get("tools")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    let prompt = last.get("role").and_then(Value::as_str) == Some("user")
        && text.trim_start().starts_with(CODEX_PROMPT);
    let asked = || codex_request_kind(headers, body).as_deref() == Some("compaction");
    if !(prompt && (tools_off || asked())) {
        return None;
    }
    let conversation = Wire::Responses.messages(history);
    Some(of_history(
        agent,
        Form::Text,
        body,
        conversation,
        text,
        None,
    ))
}

/// `request_kind` of Codex's turn metadata (the header, or the same JSON in `client_metadata`).
fn codex_request_kind(headers: &HeaderMap, body: &Value) -> Option<String> {
    let text = headers
        .get("x-codex-turn-metadata")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .or_else(|| {
            body.pointer("/client_metadata/x-codex-turn-metadata")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })?;
    let metadata: Value = serde_json::from_str(&text).ok()?;
    metadata
        .get("request_kind")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// A summary's tokens as the Responses API reports usage (every field its SDKs require).
pub(super) fn usage_of(usage: &TokenUsage) -> Value {
    json!({"input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens})
}

/// An OpenAI Responses answer whose one output item is `item` (an assistant message holding the
/// text when `None`).
pub(super) fn answer(answer: &Answer<'_>, stream: bool, item: Option<Value>) -> Response {
    let response_id = id("resp");
    let created = compactd_store::now_ms() / 1000;
    let usage = &answer.usage;
    let message_id = id("msg");
    let is_message = item.is_none();
    let item = item.unwrap_or_else(|| {
        json!({"id": message_id, "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": answer.text, "annotations": []}]})
    });
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": response_id, "object": "response", "created_at": created, "status": status,
            "model": answer.model, "output": output, "usage": usage})
    };
    let final_usage = usage_of(usage);
    if !stream {
        return json_response(response("completed", json!([item]), final_usage));
    }
    let mut events = vec![
        (
            "response.created",
            json!({"type": "response.created", "response": response("in_progress", json!([]), Value::Null)}),
        ),
        (
            "response.in_progress",
            json!({"type": "response.in_progress", "response": response("in_progress", json!([]), Value::Null)}),
        ),
    ];
    if is_message {
        let open = json!({"id": message_id, "type": "message", "status": "in_progress",
            "role": "assistant", "content": []});
        let at = json!({"item_id": message_id, "output_index": 0, "content_index": 0});
        let with = |mut value: Value| {
            for (k, v) in at.as_object().expect("an object") {
                value[k] = v.clone();
            }
            value
        };
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": open}),
        ));
        events.push((
            "response.content_part.added",
            with(
                json!({"type": "response.content_part.added", "part": {"type": "output_text", "text": "", "annotations": []}}),
            ),
        ));
        for piece in pieces(answer.text) {
            events.push((
                "response.output_text.delta",
                with(json!({"type": "response.output_text.delta", "delta": piece})),
            ));
        }
        events.push((
            "response.output_text.done",
            with(json!({"type": "response.output_text.done", "text": answer.text})),
        ));
        events.push((
            "response.content_part.done",
            with(
                json!({"type": "response.content_part.done", "part": {"type": "output_text", "text": answer.text, "annotations": []}}),
            ),
        ));
    } else {
        events.push((
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": response("completed", json!([item]), final_usage)}),
    ));
    for (n, (_, data)) in events.iter_mut().enumerate() {
        data["sequence_number"] = json!(n);
    }
    sse(events)
}
