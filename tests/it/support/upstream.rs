//! The fake LLM upstream: OpenAI- and Anthropic-shaped answers and errors, scripted per request.
//!
//! HTTP-level behaviour (statuses, bodies, headers, delays, whole event streams) is served by
//! wiremock. What only a socket can do — reset a connection, hold it open without answering,
//! send an event stream piece by piece with pauses — runs on a small raw TCP server instead,
//! which speaks just enough HTTP/1.1 (one request per connection, `Connection: close`). Both
//! record every request they receive, with the time it arrived.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

/// What the fake does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    Status {
        status: u16,
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
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Reply {
        Reply::Status {
            status,
            headers: vec![],
            body: body.to_string(),
        }
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

    /// The reply to a request whose body is `body`.
    fn to(self, body: &Value) -> Reply {
        match self {
            Reply::Echo => {
                let said: Vec<&str> = body["messages"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m["content"].as_str())
                    .collect();
                Reply::openai(&said.join("\n"))
            }
            other => other,
        }
    }

    pub fn garbage() -> Reply {
        Reply::Status {
            status: 200,
            headers: vec![],
            body: "<html>502 Bad Gateway</html>".into(),
        }
    }
}

/// A request the fake received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl Reply {
    /// Whether only a raw socket can give this reply.
    fn needs_a_socket(&self) -> bool {
        match self {
            Reply::Reset | Reply::Hang(_) => true,
            Reply::Stream(pieces) => pieces.iter().any(|(pause, _)| !pause.is_zero()),
            Reply::Delayed(_, reply) => reply.needs_a_socket(),
            Reply::Status { .. } | Reply::Echo => false,
        }
    }

    /// The reply as wiremock gives it.
    fn template(&self) -> ResponseTemplate {
        match self {
            Reply::Status {
                status,
                headers,
                body,
            } => headers.iter().fold(
                ResponseTemplate::new(*status).set_body_raw(body.clone(), "application/json"),
                |template, (name, value)| template.insert_header(*name, value.as_str()),
            ),
            Reply::Delayed(delay, reply) => reply.template().set_delay(*delay),
            Reply::Stream(pieces) => {
                let body: String = pieces.iter().map(|(_, piece)| piece.as_str()).collect();
                ResponseTemplate::new(200)
                    .set_body_raw(body, "text/event-stream")
                    .insert_header("cache-control", "no-store")
            }
            Reply::Reset | Reply::Hang(_) => unreachable!("served on a raw socket"),
            Reply::Echo => unreachable!("answered as the request said"),
        }
    }
}

/// The script and the record, shared by both servers.
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    then: Reply,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Script {
    fn next(&self) -> Reply {
        self.replies
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| self.then.clone())
    }

    fn record(&self, received: Received) {
        self.received.lock().unwrap().push(received);
    }
}

impl Respond for Script {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let path = match request.url.query() {
            Some(query) => format!("{}?{query}", request.url.path()),
            None => request.url.path().to_owned(),
        };
        self.record(Received {
            path,
            headers: request
                .headers
                .iter()
                .map(|(n, v)| {
                    (
                        n.as_str().to_owned(),
                        v.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(&request.body).unwrap_or(Value::Null),
            at: Instant::now(),
        });
        let body = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        self.next().to(&body).template()
    }
}

pub struct FakeUpstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
    /// Held so that the mock server lives as long as the fake.
    _mock: Option<MockServer>,
}

impl FakeUpstream {
    /// Answers with `script` in order, then with `then` forever: on wiremock, or on a raw socket
    /// when one of the replies needs it.
    pub async fn start(script: Vec<Reply>, then: Reply) -> FakeUpstream {
        let raw = script.iter().chain([&then]).any(Reply::needs_a_socket);
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Script {
            replies: Mutex::new(VecDeque::from(script)),
            then,
            received: received.clone(),
        };
        if raw {
            let url = serve_raw(Arc::new(script)).await;
            return FakeUpstream {
                url,
                received,
                _mock: None,
            };
        }
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any())
            .respond_with(script)
            .mount(&server)
            .await;
        FakeUpstream {
            url: server.uri(),
            received,
            _mock: Some(server),
        }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

/// The raw TCP server: one connection per request.
async fn serve_raw(script: Arc<Script>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(handle(stream, script.clone()));
        }
    });
    url
}

async fn handle(mut stream: TcpStream, script: Arc<Script>) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    let header_end = loop {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .unwrap_or_default()
        .split(' ')
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buffer.len() < header_end + length {
        let Ok(n) = stream.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body = serde_json::from_slice(&buffer[header_end..]).unwrap_or(Value::Null);
    script.record(Received {
        path,
        headers,
        body: body.clone(),
        at: Instant::now(),
    });
    let reply = match script.next().to(&body) {
        Reply::Delayed(delay, reply) => {
            tokio::time::sleep(delay).await;
            *reply
        }
        other => other,
    };
    match reply {
        Reply::Delayed(..) => unreachable!("one level of delay"),
        Reply::Echo => unreachable!("answered as the request said"),
        Reply::Status {
            status,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            response.push_str(&body);
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        }
        Reply::Hang(duration) => {
            tokio::time::sleep(duration).await;
        }
        Reply::Stream(pieces) => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-store\r\nconnection: close\r\n\r\n";
            if stream.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for (pause, piece) in pieces {
                tokio::time::sleep(pause).await;
                if stream.write_all(piece.as_bytes()).await.is_err() {
                    return;
                }
            }
            let _ = stream.shutdown().await;
        }
        Reply::Reset => {
            // Linger 0 makes the close a TCP reset; it returns at once, so the deprecation
            // warning (blocking on drop) does not apply.
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
            drop(stream);
        }
    }
}
