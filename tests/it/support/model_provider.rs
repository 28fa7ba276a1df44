//! The fake model provider the real agents talk to (directly, or through compactd's gateway): each
//! wire — Anthropic Messages, OpenAI Responses, chat completions — answered with a complete stream
//! as the real provider writes it, and every request kept as it came.
//!
//! It says "OK, noted." and reports 100 input tokens unless its script says otherwise: a session
//! ([`crate::support::agent_scenario`]) queues the tool calls a turn is answered with, and an answer that
//! reports many input tokens (a spike) to make the agent compact. A request that offers tools takes
//! the next scripted answer; one that offers none (a compaction, OpenCode's title request) is
//! answered with text. The Responses WebSocket is refused with 426, as compactd refuses it, so
//! Codex goes to HTTP at once.
//!
//! When the agent talks to it directly (recording), the provider also marks the agent's
//! compactions — the request after an answer with a spike, or after [`ModelProvider::compaction_next`]
//! (a manual `/compact`), and any the agent says is one (Codex's turn metadata, its remote
//! trigger) — and answers them with a summary in `<summary>` tags, as a model would.
//! Shared with `examples/agent_record.rs`.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

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

/// One request the provider received, and what it answered.
#[derive(Debug, Clone)]
pub struct Received {
    /// 1, 2, … in the order of arrival.
    pub seq: u64,
    /// What the session was doing ([`ModelProvider::set_step`]).
    pub step: String,
    /// Marked as the agent's compaction (recording only).
    pub compaction: bool,
    pub method: String,
    // Where and how the request went: written to a fixture by the recorder.
    #[allow(dead_code)]
    pub path: String,
    #[allow(dead_code)]
    pub query: String,
    pub headers: Vec<(String, String)>,
    /// The body, decoded from its `Content-Encoding`; `Null` for none.
    pub body: Value,
    /// `text`, `tool_call`, `compaction_item`, `summary` or `refused`.
    pub reply_kind: &'static str,
    pub reply_text: String,
    pub usage_sent: u64,
}

impl Received {
    /// The body as text (empty for none).
    pub fn text(&self) -> String {
        match &self.body {
            Value::Null => String::new(),
            body => body.to_string(),
        }
    }
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Scripted>,
    step: String,
    /// The next request is the agent's compaction (recording).
    compaction_next: bool,
    received: Vec<Received>,
}

#[derive(Default, Clone)]
pub struct ModelProvider {
    state: Arc<Mutex<State>>,
    /// The agent talks to this provider directly: mark its compactions and answer them with a
    /// summary.
    recording: bool,
}

impl ModelProvider {
    /// A provider the agent reaches directly, recording its compactions (the recorder's).
    #[allow(dead_code)]
    pub fn recording() -> ModelProvider {
        ModelProvider {
            recording: true,
            ..ModelProvider::default()
        }
    }

    /// Queues answers for the requests that offer tools.
    pub fn script(&self, answers: impl IntoIterator<Item = Scripted>) {
        self.state.lock().unwrap().script.extend(answers);
    }

    /// Names what the session is doing, for the requests from now on.
    pub fn set_step(&self, step: &str) {
        self.state.lock().unwrap().step = step.to_owned();
    }

    /// What the session is doing.
    pub fn step(&self) -> String {
        self.state.lock().unwrap().step.clone()
    }

    /// The next request is the agent's compaction (a manual one is about to be asked for).
    pub fn compaction_next(&self) {
        self.state.lock().unwrap().compaction_next = true;
    }

    /// Every request so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// The POSTs so far (the model calls), in order.
    pub fn posts(&self) -> Vec<Received> {
        let mut posts = self.received();
        posts.retain(|r| r.method == "POST");
        posts
    }
}

fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

/// What the provider answers with: an answer of the script, or a summary's text.
enum Reply {
    Scripted(Answer),
    Summary(String),
}

impl Reply {
    fn text(&self) -> &str {
        match self {
            Reply::Summary(text) => text,
            _ => "OK, noted.",
        }
    }
}

fn anthropic(input: u64, reply: &Reply) -> String {
    let message = json!({"id": "msg_p", "type": "message", "role": "assistant", "model": "claude-opus-5-5",
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": input, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}});
    let (block, delta, stop) = match reply {
        Reply::Scripted(Answer::Call { name, arguments }) => (
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

fn responses(input: u64, reply: &Reply, trigger: bool, seq: u64) -> String {
    let call_id = format!("call_{}", fastrand::u32(..));
    let item = match reply {
        // Remote compaction v2 wants exactly one opaque item.
        Reply::Summary(_) if trigger => {
            json!({"type": "compaction", "id": format!("cmp_{seq}"), "encrypted_content": format!("FAKE-ENCRYPTED-{seq}")})
        }
        Reply::Scripted(Answer::Call { name, arguments }) => {
            json!({"id": format!("fc_{seq}"), "type": "function_call", "status": "completed",
            "call_id": call_id, "name": name, "arguments": arguments.to_string()})
        }
        Reply::Scripted(Answer::Custom { name, input }) => {
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

fn chat(input: u64, reply: &Reply) -> String {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-p", "object": "chat.completion.chunk", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let (delta, finish) = match reply {
        Reply::Scripted(Answer::Call { name, arguments }) => (
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

/// The body as JSON, decoded from the encodings agents send (Codex: zstd).
fn decoded_body(request: &Request) -> Value {
    let encoding = request
        .headers
        .get("content-encoding")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    decoded(encoding, &request.body)
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
fn codex_says_compaction(request: &Request) -> bool {
    request
        .headers
        .get("x-codex-turn-metadata")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| serde_json::from_str::<Value>(v).ok())
        .is_some_and(|m| m["request_kind"] == "compaction")
}

impl Respond for ModelProvider {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body = decoded_body(request);
        let mut state = self.state.lock().unwrap();
        let seq = state.received.len() as u64 + 1;
        let path = request.url.path().to_owned();
        let mut received = Received {
            seq,
            step: state.step.clone(),
            compaction: false,
            method: request.method.to_string(),
            path: path.clone(),
            query: request.url.query().unwrap_or_default().to_owned(),
            headers: request
                .headers
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
                .collect(),
            body: body.clone(),
            reply_kind: "refused",
            reply_text: String::new(),
            usage_sent: 0,
        };
        if request.method.as_str() != "POST" {
            // The Responses WebSocket: refused so that Codex falls back to HTTP at once.
            state.received.push(received);
            return ResponseTemplate::new(426).set_body_string("provider: no sockets here");
        }
        if path.ends_with("/count_tokens") {
            state.received.push(received);
            return ResponseTemplate::new(200)
                .set_body_raw(r#"{"input_tokens":100}"#, "application/json");
        }
        let compaction = self.recording
            && (std::mem::take(&mut state.compaction_next)
                || is_trigger(&body)
                || codex_says_compaction(request));
        let scripted = (!compaction && offers_tools(&body))
            .then(|| state.script.pop_front())
            .flatten();
        let (reply, spike) = match (compaction, scripted) {
            (true, _) => (
                Reply::Summary(format!(
                    "<summary>\nFAKE SUMMARY {seq}: the user asked for small edits.\n</summary>"
                )),
                0,
            ),
            (false, Some(scripted)) => (Reply::Scripted(scripted.answer), scripted.spike),
            (false, None) => (Reply::Scripted(Answer::Text), 0),
        };
        // An answer that reports a spike makes the agent compact before its next request.
        if spike > 0 && self.recording {
            state.compaction_next = true;
        }
        let input = if spike > 0 { spike } else { 100 };
        let text = if path.ends_with("/messages") {
            anthropic(input, &reply)
        } else if path.ends_with("/responses") {
            responses(input, &reply, is_trigger(&body), seq)
        } else {
            chat(input, &reply)
        };
        received.compaction = compaction;
        received.reply_kind = match &reply {
            Reply::Summary(_) if is_trigger(&body) => "compaction_item",
            Reply::Summary(_) => "summary",
            Reply::Scripted(Answer::Text) => "text",
            Reply::Scripted(_) => "tool_call",
        };
        received.reply_text = match &reply {
            Reply::Scripted(Answer::Call { name, arguments }) => format!("{name}({arguments})"),
            Reply::Scripted(Answer::Custom { name, input }) => format!("{name}({input})"),
            other => other.text().to_owned(),
        };
        received.usage_sent = input;
        state.received.push(received);
        ResponseTemplate::new(200).set_body_raw(text, "text/event-stream")
    }
}
