//! Reading a streamed answer (server-sent events) under timeouts that fit slow models: a limit
//! for the first token and one for the gap between tokens, both inside the overall deadline, but
//! no fixed limit on the whole answer. A local model on a laptop that takes 90 s to write a
//! summary it started after 20 s is not cut off; a server that stops sending is.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;

use super::{AttemptError, MAX_UPSTREAM_BYTES, transport_error};

/// When an attempt gives up waiting.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// From sending the request to the first token (the model reads the prompt meanwhile).
    pub(crate) first_token: Duration,
    /// Longest gap between two tokens.
    pub(crate) idle: Duration,
    /// The whole summarization's deadline.
    pub(crate) deadline: Instant,
}

impl Timing {
    /// The instant the first token is due, for a request sent now.
    pub(crate) fn first_token_due(&self, sent: Instant) -> Instant {
        (sent + self.first_token).min(self.deadline)
    }
}

/// What an event meant to the reader.
pub(crate) enum Progress {
    /// The model wrote something (text, reasoning or a call): the idle timer restarts.
    Token,
    /// Metadata or a keep-alive: no token.
    Nothing,
    /// The answer is complete.
    Done,
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The server said it was done.
    Done,
    /// The connection closed after `events` events without saying so.
    Closed { events: usize },
}

/// Reads the events of `response`, handing each event's name and data to `on_event`, until it
/// says [`Progress::Done`], the stream ends, or a timeout passes. At most
/// [`MAX_UPSTREAM_BYTES`] are read.
pub(crate) async fn read_events(
    response: reqwest::Response,
    sent: Instant,
    timing: &Timing,
    mut on_event: impl FnMut(&str, &str) -> Result<Progress, AttemptError>,
) -> Result<Ended, AttemptError> {
    let mut read = 0usize;
    let too_large = std::sync::atomic::AtomicBool::new(false);
    let bytes = response.bytes_stream().map(|chunk| {
        let chunk = chunk.map_err(|e| transport_error(&e))?;
        read += chunk.len();
        if read > MAX_UPSTREAM_BYTES {
            too_large.store(true, std::sync::atomic::Ordering::Relaxed);
            return Err(AttemptError::Malformed(format!(
                "the streamed response is larger than {MAX_UPSTREAM_BYTES} bytes"
            )));
        }
        Ok(chunk)
    });
    let mut events = std::pin::pin!(bytes.eventsource());
    let mut due = timing.first_token_due(sent);
    let mut count = 0;
    loop {
        let next = match tokio::time::timeout_at(due.into(), events.next()).await {
            Ok(next) => next,
            Err(_) => return Err(AttemptError::Timeout),
        };
        let event = match next {
            None => return Ok(Ended::Closed { events: count }),
            Some(Ok(event)) => event,
            // A stream broken before its first event is a stream that said nothing (llama-cpp-python
            // aborts it this way when the prompt overflows): the caller asks again without
            // streaming, which makes the server say why.
            Some(Err(eventsource_stream::EventStreamError::Transport(_)))
                if count == 0 && !too_large.load(std::sync::atomic::Ordering::Relaxed) =>
            {
                return Ok(Ended::Closed { events: 0 });
            }
            Some(Err(eventsource_stream::EventStreamError::Transport(error))) => return Err(error),
            Some(Err(other)) => {
                return Err(AttemptError::Malformed(format!(
                    "the event stream cannot be read: {other}"
                )));
            }
        };
        count += 1;
        match on_event(&event.event, &event.data)? {
            Progress::Done => return Ok(Ended::Done),
            Progress::Token => due = (Instant::now() + timing.idle).min(timing.deadline),
            Progress::Nothing => {}
        }
    }
}

/// Whether a response carries server-sent events (a server may ignore `stream: true` and answer
/// with one JSON body).
pub(crate) fn is_event_stream(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"))
}
