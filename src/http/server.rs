//! The connection loop: compactd's own instead of `axum::serve`, for what that does not bound.
//!
//! * **A cap on open connections** (`COMPACTD_MAX_CONNECTIONS`): past it, new connections wait
//!   in the kernel's backlog until one closes, instead of costing a task and buffers each.
//! * **A deadline for the request head** (`COMPACTD_HEADER_TIMEOUT_SECS`): a client that opens
//!   connections and sends a header byte every few seconds (slowloris) loses them when the
//!   deadline passes, so it cannot hold the cap against everyone else.
//! * **JSON for the errors hyper answers by itself**: a request line or head hyper cannot parse
//!   (400), a URI over its 64 KiB limit (414) or a head over its buffer (431) are answered by hyper
//!   with an empty body, before any handler runs; [`JsonErrors`] rewrites exactly those answers.
//! * Graceful shutdown: on the signal, stop accepting, let requests in flight finish for up to the
//!   grace period, then return.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Limits of the connection loop.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

/// Serves `router` on `listener` until `shutdown` completes; then stops accepting, lets the
/// requests in flight finish for up to `grace`, and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> io::Result<()> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        // One buffer per write, so that `JsonErrors` sees hyper's automatic answers whole.
        .writev(false);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let builder = Arc::new(builder);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let service = TowerToHyperService::new(router);
    tokio::pin!(shutdown);
    loop {
        // A free slot first: at the cap, connections wait in the backlog, not in memory.
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = &mut shutdown => break,
        };
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: wait a moment rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(JsonErrors::new(stream));
        let connection = builder
            .serve_connection_with_upgrades(io, service.clone())
            .into_owned();
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            // A connection ends in an error whenever a client goes away early; nothing to report.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(grace) => {
            tracing::warn!(grace_secs = grace.as_secs_f64(), "grace period over: exiting with requests still in flight");
        }
    }
    Ok(())
}

/// A connection whose writes are watched for the few answers hyper makes by itself (a request it
/// cannot parse), which have an empty body: those are rewritten as compactd's JSON error. Every
/// other byte passes through untouched.
pub struct JsonErrors<T> {
    inner: T,
    /// A rewritten answer still to be written, and how much of it is.
    pending: Option<(Vec<u8>, usize)>,
}

impl<T> JsonErrors<T> {
    pub fn new(inner: T) -> Self {
        JsonErrors {
            inner,
            pending: None,
        }
    }
}

/// The JSON answer for one of hyper's automatic error heads, if `buf` is one.
fn rewrite(buf: &[u8]) -> Option<Vec<u8>> {
    let (status, reason, code, message) = if buf.starts_with(b"HTTP/1.1 414 ") {
        (
            414,
            "URI Too Long",
            "uri_too_long",
            "the request URI is too long",
        )
    } else if buf.starts_with(b"HTTP/1.1 431 ") {
        (
            431,
            "Request Header Fields Too Large",
            "headers_too_large",
            "the request headers are too large",
        )
    } else if buf.starts_with(b"HTTP/1.1 400 ") {
        (
            400,
            "Bad Request",
            "bad_request",
            "the request is not valid HTTP/1.1",
        )
    } else {
        return None;
    };
    // Hyper's own answers are a bare head with no body; compactd's always carry a JSON body.
    let head_only = buf.ends_with(b"\r\n\r\n")
        && memchr::memmem::find(buf, b"\r\ncontent-length: 0\r\n").is_some();
    if !head_only {
        return None;
    }
    let body = serde_json::json!({"error": {"message": message, "type": "invalid_request_error", "code": code, "param": null}})
        .to_string();
    Some(
        format!(
            "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<T: AsyncWrite + Unpin> JsonErrors<T> {
    /// Writes what is left of a rewritten answer.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some((bytes, written)) = &mut self.pending {
            if *written == bytes.len() {
                self.pending = None;
                break;
            }
            match Pin::new(&mut self.inner).poll_write(cx, &bytes[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for JsonErrors<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for JsonErrors<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.pending.is_some() {
            std::task::ready!(self.poll_pending(cx))?;
        }
        if let Some(answer) = rewrite(buf) {
            self.pending = Some((answer, 0));
            // The head is taken whole; the answer goes out now or on the next flush.
            let _ = self.poll_pending(cx)?;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.poll_pending(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::rewrite;

    #[test]
    fn only_hypers_bodiless_error_heads_are_rewritten() {
        let hyper_414 = b"HTTP/1.1 414 URI Too Long\r\ncontent-length: 0\r\ndate: Sat, 21 Nov 2026 10:00:00 GMT\r\n\r\n";
        let answer = String::from_utf8(rewrite(hyper_414).unwrap()).unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 414 URI Too Long\r\ncontent-type: application/json\r\n")
        );
        assert!(
            answer.ends_with(r#""code":"uri_too_long","param":null}}"#),
            "{answer}"
        );
        // compactd's own 400 carries a body: left alone, as is anything else.
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 98\r\n\r\n";
        assert!(rewrite(ours).is_none());
        assert!(rewrite(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n").is_none());
        assert!(rewrite(b"{\"error\":1}").is_none());
    }
}
