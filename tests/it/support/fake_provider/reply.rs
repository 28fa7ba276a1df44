//! What the provider does with one request: a reply of its script, and what it comes to for the
//! request it answers.

use std::time::Duration;

use serde_json::{Value, json};

use super::Incoming;

/// What the provider does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Status {
        status: u16,
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        body: String,
    },
    /// Keep the connection open without answering, then close it.
    Hang(Duration),
    /// Close the connection at once with a TCP reset.
    Reset,
    /// Wait, then give the reply.
    Delayed(Duration, Box<Reply>),
    /// A 200 with `content-type: text/event-stream`: each piece written after its pause, then
    /// the connection closed (or held open for the last pause when the piece is empty).
    Stream(Vec<(Duration, String)>),
    /// An OpenAI chat completion whose content is what the request's messages said: a model
    /// that repeats its prompt, so that whatever it was sent lands where its answer does.
    Echo,
    /// The provider behind the gateway: each wire answered as the real provider writes it,
    /// streamed or whole as asked, with bytes a test can compare ([`super::wire`]).
    Wire,
    /// The provider a real agent plays its session against: the next tool call of the script
    /// for a request that offers tools, text otherwise ([`super::agent`]).
    Agent,
    /// A complete stream in the request's wire (Anthropic Messages or chat completions) whose
    /// text is this, reporting 900 input tokens: a model asked for a summary.
    Says(&'static str),
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Status {
            status,
            content_type: "application/json",
            headers: vec![],
            body: body.to_string(),
        }
    }

    /// A 200 whose body is `body` as it is, of `content_type`.
    pub fn raw(content_type: &'static str, body: &str) -> Reply {
        Reply::Status {
            status: 200,
            content_type,
            headers: vec![],
            body: body.to_owned(),
        }
    }

    pub fn with_status(mut self, code: u16) -> Reply {
        if let Reply::Status { status, .. } = &mut self {
            *status = code;
        }
        self
    }

    pub fn with_header(mut self, name: &'static str, value: &str) -> Reply {
        if let Reply::Status { headers, .. } = &mut self {
            headers.push((name, value.to_owned()));
        }
        self
    }

    /// An OpenAI chat completion whose content is `text`.
    pub fn openai(text: &str) -> Reply {
        Reply::json(
            200,
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127}
            }),
        )
    }

    /// An Anthropic Messages response whose text blocks are `texts`.
    pub fn anthropic(texts: &[&str]) -> Reply {
        let content: Vec<Value> = texts
            .iter()
            .map(|t| json!({"type": "text", "text": t}))
            .collect();
        Reply::json(
            200,
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                "content": content, "stop_reason": "end_turn",
                "usage": {"input_tokens": 200, "output_tokens": 9}
            }),
        )
    }

    pub fn after(self, delay: Duration) -> Reply {
        Reply::Delayed(delay, Box::new(self))
    }

    /// An OpenAI chat-completion stream: one chunk per piece of `text` (each after `pause`),
    /// a usage chunk, then `[DONE]`.
    pub fn openai_stream(pieces: &[&str], pause: Duration) -> Reply {
        let mut events: Vec<(Duration, String)> = pieces
            .iter()
            .map(|piece| {
                let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "gpt-test",
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
                (pause, format!("data: {chunk}\n\n"))
            })
            .collect();
        let usage = json!({"id": "c", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}});
        events.push((Duration::ZERO, format!("data: {usage}\n\ndata: [DONE]\n\n")));
        Reply::Stream(events)
    }

    pub fn echo_openai() -> Reply {
        Reply::Echo
    }

    pub fn garbage() -> Reply {
        Reply::raw("application/json", "<html>502 Bad Gateway</html>")
    }

    /// Whether only a raw socket can give this reply.
    pub(super) fn needs_a_socket(&self) -> bool {
        match self {
            Reply::Reset | Reply::Hang(_) => true,
            Reply::Stream(pieces) => pieces.iter().any(|(pause, _)| !pause.is_zero()),
            Reply::Delayed(_, reply) => reply.needs_a_socket(),
            _ => false,
        }
    }

    /// What an echo or a [`Reply::Says`] comes to for `request`; the rest as they are.
    pub(super) fn to(self, request: &Incoming) -> Reply {
        match self {
            Reply::Echo => {
                let said: Vec<&str> = request.body["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["content"].as_str())
                    .collect();
                Reply::openai(&said.join("\n"))
            }
            Reply::Says(text) => Reply::raw("text/event-stream", &says(&request.path, text)),
            Reply::Delayed(delay, reply) => Reply::Delayed(delay, Box::new(reply.to(request))),
            other => other,
        }
    }
}

/// `text` streamed in the wire of `path`.
fn says(path: &str, text: &str) -> String {
    if path.ends_with("/messages") {
        [
            json!({"type": "message_start", "message": {"id": "msg_a", "type": "message", "role": "assistant",
                "model": "claude-opus-5-5", "content": [], "usage": {"input_tokens": 900, "output_tokens": 1}}}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 20}}),
            json!({"type": "message_stop"}),
        ]
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
    } else {
        let chunk = json!({"id": "c", "object": "chat.completion.chunk", "model": "agent-model",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
        let usage = json!({"id": "c", "object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920}});
        format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n")
    }
}
