//! The suite's one fake model provider: whatever stands where a model provider would — the model
//! compactd summarizes with, the provider behind its gateway, the provider a real agent talks
//! to — speaks the providers' wires and error shapes from a script, and keeps every request it
//! received, with the time it arrived.
//!
//! It answers with its script's replies in order, then with its last reply forever ([`Reply`]):
//! a fixed answer or error, a fault only a socket can give (a reset, a hang, a stream with
//! pauses: then it runs on a raw TCP server, [`socket`]), a model that echoes its prompt, the
//! provider behind the gateway answering each wire with bytes a test compares ([`Reply::Wire`]),
//! or the provider a real agent plays its session against ([`Reply::Agent`], its tool calls
//! queued by [`FakeProvider::script`]). Everything else is served by wiremock.
//! Shared with `examples/agent_record.rs`.

mod agent;
mod reply;
mod socket;
mod wire;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use wiremock::{Mock, MockServer, Respond, ResponseTemplate};

pub use agent::{Answer, Scripted, decoded};
pub use reply::Reply;
pub use wire::{PROVIDER_COMPACTION, provider_answer};

/// A request as it came, before it is answered.
pub struct Incoming {
    method: String,
    path: String,
    query: String,
    headers: Vec<(String, String)>,
    bytes: Vec<u8>,
    /// The body decoded from its `Content-Encoding`.
    body: Value,
}

impl Incoming {
    fn new(method: String, target: &str, headers: Vec<(String, String)>, bytes: Vec<u8>) -> Self {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut incoming = Incoming {
            method,
            path: path.to_owned(),
            query: query.to_owned(),
            headers,
            body: Value::Null,
            bytes,
        };
        incoming.body = decoded(
            incoming.header("content-encoding").unwrap_or(""),
            &incoming.bytes,
        );
        incoming
    }

    fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// One request the provider received, and what it answered.
#[derive(Debug, Clone)]
pub struct Received {
    /// 1, 2, … in the order of arrival.
    pub seq: u64,
    pub at: Instant,
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    /// The body as it came.
    pub bytes: Vec<u8>,
    /// The body decoded from its `Content-Encoding`, as JSON (as a string when it is not JSON;
    /// `Null` for none).
    pub body: Value,
    /// What the agent's session was doing ([`FakeProvider::set_step`]).
    pub step: String,
    /// Marked as the agent's compaction (recording only).
    pub compaction: bool,
    /// For an agent's request: `text`, `tool_call`, `compaction_item`, `summary` or `refused`.
    pub reply_kind: &'static str,
    pub reply_text: String,
    pub usage_sent: u64,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    pub fn path_and_query(&self) -> String {
        match self.query.as_str() {
            "" => self.path.clone(),
            query => format!("{}?{query}", self.path),
        }
    }

    /// The body as text (empty for none).
    pub fn text(&self) -> String {
        match &self.body {
            Value::Null => String::new(),
            body => body.to_string(),
        }
    }
}

/// The script and the record.
struct Inner {
    replies: VecDeque<Reply>,
    then: Reply,
    received: Vec<Received>,
    session: agent::Session,
}

struct State {
    inner: Mutex<Inner>,
    /// The agent talks to this provider directly: mark its compactions and answer them with a
    /// summary.
    recording: bool,
}

impl State {
    /// Records `request` and gives the next reply of the script, as it comes to for it.
    fn reply(&self, request: Incoming) -> Reply {
        let mut inner = self.inner.lock().unwrap();
        let mut received = Received {
            seq: inner.received.len() as u64 + 1,
            at: Instant::now(),
            step: inner.session.step.clone(),
            compaction: false,
            reply_kind: "refused",
            reply_text: String::new(),
            usage_sent: 0,
            method: request.method.clone(),
            path: request.path.clone(),
            query: request.query.clone(),
            headers: request.headers.clone(),
            bytes: request.bytes.clone(),
            body: request.body.clone(),
        };
        let next = inner.replies.pop_front();
        let reply = match next.unwrap_or_else(|| inner.then.clone()) {
            Reply::Wire => wire::answer(&request),
            Reply::Agent => {
                agent::answer(&mut inner.session, self.recording, &request, &mut received)
            }
            other => other.to(&request),
        };
        inner.received.push(received);
        reply
    }
}

/// A fake model provider on its own port.
#[derive(Clone)]
pub struct FakeProvider {
    pub url: String,
    state: Arc<State>,
    /// Held so that the mock server lives as long as the fake.
    _mock: Option<Arc<MockServer>>,
}

impl FakeProvider {
    /// Answers with `script` in order, then with `then` forever: on wiremock, or on a raw socket
    /// when one of the replies needs it.
    pub async fn start(script: Vec<Reply>, then: Reply) -> FakeProvider {
        FakeProvider::serve(script, then, false).await
    }

    /// The provider behind the gateway ([`Reply::Wire`]).
    pub async fn wires() -> FakeProvider {
        FakeProvider::start(vec![], Reply::Wire).await
    }

    /// The provider a real agent plays its session against, through compactd ([`Reply::Agent`]).
    pub async fn agents() -> FakeProvider {
        FakeProvider::start(vec![], Reply::Agent).await
    }

    /// The provider a real agent talks to directly, recording its compactions (the recorder's).
    #[allow(dead_code)]
    pub async fn recording() -> FakeProvider {
        FakeProvider::serve(vec![], Reply::Agent, true).await
    }

    async fn serve(script: Vec<Reply>, then: Reply, recording: bool) -> FakeProvider {
        let raw = script.iter().chain([&then]).any(Reply::needs_a_socket);
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                replies: VecDeque::from(script),
                then,
                received: Vec::new(),
                session: agent::Session::default(),
            }),
            recording,
        });
        if raw {
            let url = socket::serve(state.clone()).await;
            return FakeProvider {
                url,
                state,
                _mock: None,
            };
        }
        let server = MockServer::start().await;
        Mock::given(wiremock::matchers::any())
            .respond_with(Responder(state.clone()))
            .mount(&server)
            .await;
        FakeProvider {
            url: server.uri(),
            state,
            _mock: Some(Arc::new(server)),
        }
    }

    /// Every request so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.state.inner.lock().unwrap().received.clone()
    }

    /// The POSTs so far (the model calls), in order.
    pub fn posts(&self) -> Vec<Received> {
        let mut posts = self.received();
        posts.retain(|r| r.method == "POST");
        posts
    }

    /// Queues answers for the agent's requests that offer tools.
    pub fn script(&self, answers: impl IntoIterator<Item = Scripted>) {
        let mut inner = self.state.inner.lock().unwrap();
        inner.session.script.extend(answers);
    }

    /// Names what the agent's session is doing, for the requests from now on.
    pub fn set_step(&self, step: &str) {
        self.state.inner.lock().unwrap().session.step = step.to_owned();
    }

    /// What the agent's session is doing.
    pub fn step(&self) -> String {
        self.state.inner.lock().unwrap().session.step.clone()
    }

    /// The next request is the agent's compaction (a manual one is about to be asked for).
    pub fn compaction_next(&self) {
        self.state.inner.lock().unwrap().session.compaction_next = true;
    }
}

/// The script served by wiremock.
struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &wiremock::Request) -> ResponseTemplate {
        let headers = request
            .headers
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or_default().to_owned()))
            .collect();
        let target = match request.url.query() {
            Some(query) => format!("{}?{query}", request.url.path()),
            None => request.url.path().to_owned(),
        };
        let incoming = Incoming::new(
            request.method.to_string(),
            &target,
            headers,
            request.body.clone(),
        );
        template(self.0.reply(incoming))
    }
}

/// A reply as wiremock gives it.
fn template(reply: Reply) -> ResponseTemplate {
    match reply {
        Reply::Status {
            status,
            content_type,
            headers,
            body,
        } => headers.iter().fold(
            ResponseTemplate::new(status).set_body_raw(body, content_type),
            |template, (name, value)| template.insert_header(*name, value.as_str()),
        ),
        Reply::Delayed(delay, reply) => template(*reply).set_delay(delay),
        Reply::Stream(pieces) => {
            let body: String = pieces.iter().map(|(_, piece)| piece.as_str()).collect();
            ResponseTemplate::new(200)
                .set_body_raw(body, "text/event-stream")
                .insert_header("cache-control", "no-store")
        }
        other => unreachable!("served on a raw socket or resolved before: {other:?}"),
    }
}
