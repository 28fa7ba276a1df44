//! A server-sent event stream rewritten event by event as it passes: what lets compactd put its
//! compaction block or item first in an upstream's streamed reply and renumber what follows,
//! without holding the reply back (each event goes on as soon as it is whole).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Bytes;
use compactd_core::js_json::preserving;
use futures_util::Stream;
use serde_json::Value;

/// One event: its `event:` name (empty when it has none) and its `data:` as JSON (`None` when the
/// data is not JSON, e.g. `[DONE]`, which passes on as it came).
pub(crate) struct Event {
    pub(crate) name: String,
    pub(crate) data: Option<Value>,
    raw: Bytes,
}

impl Event {
    /// A new event of compactd's own.
    pub(crate) fn new(name: &str, data: Value) -> Event {
        Event {
            name: name.to_owned(),
            data: Some(data),
            raw: Bytes::new(),
        }
    }

    fn parse(raw: Bytes) -> Event {
        let text = String::from_utf8_lossy(&raw);
        let mut name = String::new();
        let mut data = String::new();
        for line in text.lines() {
            if let Some(value) = line.strip_prefix("event:") {
                name = value.trim().to_owned();
            } else if let Some(value) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(value.strip_prefix(' ').unwrap_or(value));
            }
        }
        Event {
            name,
            // Lone surrogates (a model's text cut mid-pair) are kept as the upstream wrote them.
            data: preserving::parse(&data).ok(),
            raw,
        }
    }

    /// The event as it goes on: as it came when it is not JSON, else written anew.
    fn write(self, out: &mut Vec<u8>) {
        let Some(data) = self.data else {
            out.extend_from_slice(&self.raw);
            return;
        };
        if !self.name.is_empty() {
            out.extend_from_slice(b"event: ");
            out.extend_from_slice(self.name.as_bytes());
            out.push(b'\n');
        }
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(preserving::stringify(&data).as_bytes());
        out.extend_from_slice(b"\n\n");
    }
}

/// What becomes of each event: the events written in its place (none, itself, or more).
pub(crate) type Rewrite = Box<dyn FnMut(Event) -> Vec<Event> + Send>;

/// `inner`'s events, each through `rewrite`. An event is whole at its blank line (`\n\n` or
/// `\r\n\r\n`); what is left when the stream ends goes on as it came.
pub(crate) struct Rewritten<S> {
    inner: Pin<Box<S>>,
    rewrite: Rewrite,
    pending: Vec<u8>,
    done: bool,
}

impl<S> Rewritten<S> {
    pub(crate) fn new(inner: S, rewrite: Rewrite) -> Rewritten<S> {
        Rewritten {
            inner: Box::pin(inner),
            rewrite,
            pending: Vec::new(),
            done: false,
        }
    }

    /// The whole events in `pending`, rewritten.
    fn drain_events(&mut self) -> Vec<u8> {
        let mut out = Vec::new();
        while let Some((end, gap)) = blank_line(&self.pending) {
            let raw = Bytes::copy_from_slice(&self.pending[..end + gap]);
            self.pending.drain(..end + gap);
            for event in (self.rewrite)(Event::parse(raw)) {
                event.write(&mut out);
            }
        }
        out
    }
}

/// Where the first blank line of `bytes` starts, and its length.
fn blank_line(bytes: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(bytes, b"\n\n").map(|at| (at, 2));
    let crlf = memchr::memmem::find(bytes, b"\r\n\r\n").map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

impl<S, E> Stream for Rewritten<S>
where
    S: Stream<Item = Result<Bytes, E>>,
{
    type Item = Result<Bytes, E>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            match self.inner.as_mut().poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(chunk))) => {
                    self.pending.extend_from_slice(&chunk);
                    let out = self.drain_events();
                    if !out.is_empty() {
                        return Poll::Ready(Some(Ok(out.into())));
                    }
                }
                Poll::Ready(None) => {
                    self.done = true;
                    let rest = std::mem::take(&mut self.pending);
                    if rest.is_empty() {
                        return Poll::Ready(None);
                    }
                    return Poll::Ready(Some(Ok(rest.into())));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use serde_json::json;

    #[tokio::test]
    async fn events_split_across_chunks_are_rewritten_whole_and_the_rest_passes() {
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from_static(b"event: a\ndata: {\"index\":")),
            Ok(Bytes::from_static(
                b"0}\n\nevent: b\r\ndata: {\"index\":1}\r\n\r\ndata: [DONE]\n\n",
            )),
            Ok(Bytes::from_static(
                b"data: {\"index\":2,\"text\":\"cut \\ud83d\"}\n\n",
            )),
            Ok(Bytes::from_static(b"data: {\"tail\":")),
        ];
        let rewrite: Rewrite = Box::new(|mut event: Event| {
            if let Some(index) = event.data.as_mut().and_then(|d| d.get_mut("index")) {
                *index = json!(index.as_u64().unwrap() + 1);
            }
            vec![event]
        });
        let out: Vec<u8> = Rewritten::new(futures_util::stream::iter(chunks), rewrite)
            .map(|chunk| chunk.unwrap().to_vec())
            .concat()
            .await;
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "event: a\ndata: {\"index\":1}\n\nevent: b\ndata: {\"index\":2}\n\ndata: [DONE]\n\ndata: {\"index\":3,\"text\":\"cut \\ud83d\"}\n\ndata: {\"tail\":"
        );
    }
}
