//! The provider a real agent plays its session against ([`Reply::Agent`]): each wire —
//! Anthropic Messages, OpenAI Responses, chat completions — answered with a complete stream as
//! the real provider writes it.
//!
//! It says "OK, noted." and reports 100 input tokens unless its script says otherwise: a session
//! ([`crate::support::agent_scenario`]) queues the tool calls a turn is answered with, and an
//! answer that reports many input tokens (a spike) to make the agent compact. A request that
//! offers tools takes the next scripted answer; one that offers none (a compaction, OpenCode's
//! title request) is answered with text. The Responses WebSocket is refused with 426, as compactd
//! refuses it, so Codex goes to HTTP at once.
//!
//! When the agent talks to it directly (recording), the provider also marks the agent's
//! compactions — the request after an answer with a spike, or after
//! [`super::FakeProvider::compaction_next`] (a manual `/compact`), and any the agent says is one
//! (Codex's turn metadata, its remote trigger) — and answers them with a summary in `<summary>`
//! tags, as a model would.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::{Incoming, Received, Reply};

/// What one scripted answer is.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// "OK, noted."
    Text,
    /// A call of a function tool with these arguments.
    Call { name: String, arguments: Value },
    /// A call of a freeform tool (Codex's `apply_patch`) with this input.
    Custom { name: String, input: String },
}

/// An answer of the script, and the input tokens it reports (0: the usual 100).
#[derive(Debug, Clone)]
pub struct Scripted {
    pub answer: Answer,
    pub spike: u64,
}

/// Where the agent's session stands.
#[derive(Debug, Default)]
pub(super) struct Session {
    pub(super) script: VecDeque<Scripted>,
    /// What the session is doing, written on each request received.
    pub(super) step: String,
    /// The next request is the agent's compaction (recording).
    pub(super) compaction_next: bool,
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// What the provider says: an answer of the script, or a summary's text.
enum Said {
    Scripted(Answer),
    Summary(String),
}

impl Said {
    fn text(&self) -> &str {
        match self {
            Said::Summary(text) => text,
            _ => "OK, noted.",
        }
    }
}

fn anthropic(input: u64, reply: &Said) -> String {
    let message = json!({"id": "msg_p", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}});
    let (block, delta, stop) = match reply {
        Said::Scripted(Answer::Call { name, arguments }) => (
            json!({"type": "tool_use", "id": format!("toolu_{}", fastrand::u32(..)), "name": name, "input": {}}),
            json!({"type": "input_json_delta", "partial_json": arguments.to_string()}),
            "tool_use",
        ),
        _ => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": reply.text()}),
            "end_turn",
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

fn responses(input: u64, reply: &Said, trigger: bool, seq: u64) -> String {
    let call_id = format!("call_{}", fastrand::u32(..));
    let item = match reply {
        // Remote compaction v2 wants exactly one opaque item.
        Said::Summary(_) if trigger => {
            json!({"type": "compaction", "id": format!("cmp_{seq}"), "encrypted_content": format!("FAKE-ENCRYPTED-{seq}")})
        }
        Said::Scripted(Answer::Call { name, arguments }) => {
            json!({"id": format!("fc_{seq}"), "type": "function_call", "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments.to_string()})
        }
        Said::Scripted(Answer::Custom { name, input }) => {
            json!({"id": format!("ctc_{seq}"), "type": "custom_tool_call", "status": "completed",
            "call_id": call_id, "name": name, "input": input})
        }
        _ => {
            json!({"id": format!("msg_{seq}"), "type": "message", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": reply.text(), "annotations": []}]})
        }
    };
    let response = |status: &str, output: Value| {
        json!({"id": format!("resp_{seq}"), "object": "response", "created_at": 1, "status": status, "model": "gpt-5.5",
            "output": output, "usage": {"input_tokens": input, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 4, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": input + 4}})
    };
    let mut events = vec![
        json!({"type": "response.created", "response": response("in_progress", json!([]))}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
    ];
    if item["type"] == "message" {
        events.push(
            json!({"type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": reply.text()}),
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

fn chat(input: u64, reply: &Said) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let (delta, finish) = match reply {
        Said::Scripted(Answer::Call { name, arguments }) => (
            json!({"role": "assistant", "tool_calls": [{"index": 0, "id": format!("call_{}", fastrand::u32(..)), "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()}}]}),
            "tool_calls",
        ),
        _ => (
            json!({"role": "assistant", "content": reply.text()}),
            "stop",
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

/// A body in `encoding` as JSON (as text when it is not JSON; `Null` when empty).
pub fn decoded(encoding: &str, body: &[u8]) -> Value {
    use std::io::Read;
    if body.is_empty() {
        return Value::Null;
    }
    let mut out = Vec::new();
    let bytes = match encoding {
        "zstd" => {
            if let Ok(mut decoder) = ruzstd::decoding::StreamingDecoder::new(body)
                && decoder.read_to_end(&mut out).is_err()
            {
                out.clear();
            }
            out
        }
        "gzip" => {
            if flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .is_err()
            {
                out.clear();
            }
            out
        }
        _ => body.to_vec(),
    };
    serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
}

fn offers_tools(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

fn is_trigger(body: &Value) -> bool {
    body.get("input")
        .and_then(Value::as_array)
        .and_then(|items| items.last())
        .is_some_and(|item| item["type"] == "compaction_trigger")
}

/// Codex names what each request is in its turn metadata (`request_kind`).
fn codex_says_compaction(request: &Incoming) -> bool {
    request
        .header("x-codex-turn-metadata")
        .and_then(|v| serde_json::from_str::<Value>(v).ok())
        .is_some_and(|m| m["request_kind"] == "compaction")
}

/// The answer to `request`, noted in `received`.
pub(super) fn answer(
    session: &mut Session,
    recording: bool,
    request: &Incoming,
    received: &mut Received,
) -> Reply {
    if request.method != "POST" {
        // The Responses WebSocket: refused so that Codex falls back to HTTP at once.
        return Reply::raw("text/plain", "provider: no sockets here").with_status(426);
    }
    if request.path.ends_with("/count_tokens") {
        return Reply::raw("application/json", r#"{"input_tokens":100}"#);
    }
    let body = &request.body;
    let compaction = recording
        && (std::mem::take(&mut session.compaction_next)
            || is_trigger(body)
            || codex_says_compaction(request));
    let scripted = (!compaction && offers_tools(body))
        .then(|| session.script.pop_front())
        .flatten();
    let seq = received.seq;
    let (said, spike) = match (compaction, scripted) {
        (true, _) => (
            Said::Summary(format!(
                "<summary>\nFAKE SUMMARY {seq}: the user asked for small edits.\n</summary>"
            )),
            0,
        ),
        (false, Some(scripted)) => (Said::Scripted(scripted.answer), scripted.spike),
        (false, None) => (Said::Scripted(Answer::Text), 0),
    };
    // An answer that reports a spike makes the agent compact before its next request.
    if spike > 0 && recording {
        session.compaction_next = true;
    }
    let input = if spike > 0 { spike } else { 100 };
    let path = &request.path;
    let text = if path.ends_with("/messages") {
        anthropic(input, &said)
    } else if path.ends_with("/responses") {
        responses(input, &said, is_trigger(body), seq)
    } else {
        chat(input, &said)
    };
    received.compaction = compaction;
    received.reply_kind = match &said {
        Said::Summary(_) if is_trigger(body) => "compaction_item",
        Said::Summary(_) => "summary",
        Said::Scripted(Answer::Text) => "text",
        Said::Scripted(_) => "tool_call",
    };
    received.reply_text = match &said {
        Said::Scripted(Answer::Call { name, arguments }) => format!("{name}({arguments})"),
        Said::Scripted(Answer::Custom { name, input }) => format!("{name}({input})"),
        other => other.text().to_owned(),
    };
    received.usage_sent = input;
    Reply::raw("text/event-stream", &text)
}
