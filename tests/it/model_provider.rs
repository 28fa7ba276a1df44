//! The fake model provider the real agents talk to (through compactd's gateway): each wire —
//! Anthropic Messages, OpenAI Responses, chat completions — answered with a complete stream as
//! the real provider writes it. It says "OK, noted." and reports 100 input tokens, except that a
//! test can make the next answer report many tokens once (`spike`, to make the agent compact)
//! and make the next answer a tool call (`tool`, so that the history compacted holds one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

/// A tool call the next answer makes: the tool's name and its arguments.
pub type ToolCall = (String, Value);

#[derive(Default, Clone)]
pub struct ModelProvider {
    pub spike: Arc<AtomicU64>,
    pub tool: Arc<Mutex<Option<ToolCall>>>,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

fn anthropic(input: u64, tool: Option<ToolCall>) -> String {
    let message = json!({"id": "msg_p", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}});
    let (block, delta, stop) = match tool {
        None => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "OK, noted."}),
            "end_turn",
        ),
        Some((name, arguments)) => (
            json!({"type": "tool_use", "id": "toolu_p1", "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": arguments.to_string()}),
            "tool_use",
        ),
    };
    sse(&[
        json!({"type": "message_start", "message": message}),
        json!({"type": "content_block_start", "index": 0, "content_block": block}),
        json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 4}}),
        json!({"type": "message_stop"}),
    ])
}

fn responses(input: u64, tool: Option<ToolCall>) -> String {
    let item = match &tool {
        None => {
            json!({"id": "msg_p", "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": "OK, noted.", "annotations": []}]})
        }
        Some((name, arguments)) => {
            json!({"id": "fc_p1", "type": "function_call", "status": "completed",
            "call_id": "call_p1", "name": name, "arguments": arguments.to_string()})
        }
    };
    let response = |status: &str, output: Value| {
        json!({"id": "resp_p", "object": "response", "created_at": 1, "status": status, "model": "gpt-5.5",
            "output": output, "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + 4}})
    };
    let mut events = vec![
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ];
    if tool.is_none() {
        events.push(
            json!({"type": "response.output_text.delta", "item_id": "msg_p", "output_index": 0,
            "content_index": 0, "delta": "OK, noted."}),
        );
    }
    events.push(json!({"type": "response.output_item.done", "output_index": 0, "item": item}));
    events.push(
        json!({"type": "response.completed", "response": response("completed", json!([item]))}),
    );
    for (n, event) in events.iter_mut().enumerate() {
        event["sequence_number"] = json!(n);
    }
    sse(&events)
}

fn chat(input: u64, tool: Option<ToolCall>) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let (delta, finish) = match tool {
        None => (
            json!({"role": "assistant", "content": "OK, noted."}),
            "stop",
        ),
        Some((name, arguments)) => (
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "call_p1", "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            "tool_calls",
        ),
    };
    let usage = json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
        "choices": [], "usage": {"prompt_tokens": input, "completion_tokens": 4, "total_tokens": input + 4}});
    [
        chunk(delta, Value::Null),
        chunk(json!({}), json!(finish)),
        usage,
    ]
    .iter()
    .map(|c| format!("data: {c}\n\n"))
    .chain(["data: [DONE]\n\n".to_owned()])
    .collect()
}

impl Respond for ModelProvider {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        // A tool call leaves the spike for the answer that ends the turn.
        let tool = self.tool.lock().unwrap().take();
        let input = match (&tool, self.spike.load(Ordering::SeqCst)) {
            (None, spike) if spike > 0 => self.spike.swap(0, Ordering::SeqCst),
            _ => 100,
        };
        let path = request.url.path();
        let body = if path.ends_with("/messages") {
            anthropic(input, tool)
        } else if path.ends_with("/responses") {
            responses(input, tool)
        } else {
            chat(input, tool)
        };
        ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
    }
}
