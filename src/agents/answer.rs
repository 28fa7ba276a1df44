//! A summary answered in the wire the agent asked on, streamed when it asked for a stream, with
//! the usage fields it reads: Anthropic Messages (events `message_start` … `message_stop`) and
//! OpenAI Responses (`response.created` … `response.completed`, with a Codex compaction item for
//! remote compaction v2). Chat completions are answered by the chat wire itself.

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

use crate::summarizer::TokenUsage;

/// Characters of text per streamed delta.
const DELTA_CHARS: usize = 512;

/// What an answer says, whatever its wire.
pub(crate) struct Answer<'a> {
    pub(crate) text: &'a str,
    /// The model the agent asked for: its accounting is per model.
    pub(crate) model: &'a str,
    pub(crate) usage: TokenUsage,
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

fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(DELTA_CHARS)
        .map(|c| c.iter().collect())
        .collect()
}

fn id(prefix: &str) -> String {
    format!("{prefix}_compactd{:016x}", fastrand::u64(..))
}

fn sse(events: Vec<(&str, Value)>) -> Response {
    let mut body = String::new();
    for (name, data) in events {
        body.push_str("event: ");
        body.push_str(name);
        body.push_str("\ndata: ");
        body.push_str(&data.to_string());
        body.push_str("\n\n");
    }
    let mut response = Response::new(Body::from(body));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

fn json_response(value: Value) -> Response {
    let mut response = Response::new(Body::from(value.to_string()));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// An Anthropic Messages answer holding `answer.text`.
pub(crate) fn anthropic(answer: &Answer<'_>, stream: bool) -> Response {
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

/// An OpenAI Responses answer whose one output item is `item` (an assistant message holding the
/// text when `None`).
pub(crate) fn responses(answer: &Answer<'_>, stream: bool, item: Option<Value>) -> Response {
    let response_id = id("resp");
    let created = crate::store::now_ms() / 1000;
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
    let final_usage = json!({"input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_input_tokens},
        "output_tokens": usage.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.input_tokens + usage.output_tokens});
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
