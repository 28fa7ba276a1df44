//! Test support: a fake LLM upstream and compactd on a real socket.
//!
//! The fake is a raw TCP server rather than a mock library so that it can do what real upstreams
//! do on bad days: hang, reset the connection, send garbage. It speaks just enough HTTP/1.1
//! (one request per connection, `Connection: close`) and records every request it receives.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use compactd::config::ServeConfig;
use compactd::http::{AppState, app};
use compactd::store::Store;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

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

pub struct FakeUpstream {
    pub url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl FakeUpstream {
    /// Answers with `script` in order, then with `then` forever.
    pub async fn start(script: Vec<Reply>, then: Reply) -> FakeUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let received = Arc::new(Mutex::new(Vec::new()));
        let r = received.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let reply = script
                    .lock()
                    .unwrap()
                    .pop_front()
                    .unwrap_or_else(|| then.clone());
                tokio::spawn(handle(stream, reply, r.clone()));
            }
        });
        FakeUpstream { url, received }
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn handle(mut stream: TcpStream, reply: Reply, received: Arc<Mutex<Vec<Received>>>) {
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
    received.lock().unwrap().push(Received {
        path,
        headers,
        body,
        at: Instant::now(),
    });
    let reply = match reply {
        Reply::Delayed(delay, reply) => {
            tokio::time::sleep(delay).await;
            *reply
        }
        other => other,
    };
    match reply {
        Reply::Delayed(..) => unreachable!("one level of delay"),
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
        Reply::Reset => {
            // Linger 0 makes the close a TCP reset; it returns at once, so the deprecation
            // warning (blocking on drop) does not apply.
            #[allow(deprecated)]
            let _ = stream.set_linger(Some(Duration::ZERO));
            drop(stream);
        }
    }
}

/// compactd serving on 127.0.0.1 with `config`.
pub struct TestApp {
    pub url: String,
    pub client: reqwest::Client,
}

impl TestApp {
    /// compactd with its own store as configured (an in-memory SQLite database by default).
    pub async fn spawn(config: ServeConfig) -> TestApp {
        config.validate().expect("test configuration is valid");
        let state = AppState::from_config(&config).await.unwrap();
        TestApp::serve(state).await
    }

    /// compactd on the given store.
    pub async fn with_store(config: ServeConfig, store: Arc<dyn Store>) -> TestApp {
        TestApp::serve(AppState::with_store(&config, store).unwrap()).await
    }

    async fn serve(state: AppState) -> TestApp {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app(state)).await.unwrap() });
        TestApp {
            url,
            client: reqwest::Client::new(),
        }
    }

    pub async fn post(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.url))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn post_raw(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.url))
            .body(body)
            .send()
            .await
            .unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
    }

    pub async fn delete(&self, path: &str) -> reqwest::Response {
        self.client
            .delete(format!("{}{path}", self.url))
            .send()
            .await
            .unwrap()
    }
}

/// Defaults with fast retries, for tests.
pub fn config() -> ServeConfig {
    let mut config = ServeConfig::defaults();
    config.backoff_ms = 10;
    config.attempt_timeout_secs = 5.0;
    config.deadline_secs = 20.0;
    config.database_url = Some("sqlite::memory:".into());
    config
}

/// A configuration whose chain is the given models against `fake`, without the extractive
/// fallback unless `extractive` is set.
pub fn chain_config(fake: &FakeUpstream, models: &str, extractive: bool) -> ServeConfig {
    let mut config = config();
    config.models = models.split(',').map(|m| m.parse().unwrap()).collect();
    config.extractive_fallback = extractive;
    config.openai_base_url = format!("{}/v1", fake.url);
    config.openai_api_key = Some("sk-configured".into());
    config.anthropic_base_url = fake.url.clone();
    config.anthropic_api_key = Some("ant-configured".into());
    config
}

/// The body of a `/v1/compact` request as pi-family agents send it.
pub fn compact_body(prompt: &str) -> Value {
    json!({"systemPrompt": "You summarize.", "prompt": prompt})
}

pub const PROMPT: &str = "<conversation>\n[User]: fix src/lib.rs\n\n[Tool result]: error: it broke\n</conversation>\n\n## Critical Context";
