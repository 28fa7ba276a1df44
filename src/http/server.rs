//! The connection loop: compactd's own instead of `axum::serve`, for what that does not bound.
//!
//! * **A cap on open connections** (`COMPACTD_MAX_CONNECTIONS`, by default derived from the
//!   open-file limit): at the cap, the connection that has been idle longest — no request in
//!   flight: a keep-alive connection between requests, or one that never sent a byte — is
//!   closed to make room for the new one, so that a crowd of half-open connections cannot lock
//!   `/healthz` and everyone else out. Only when every connection is busy do new ones wait in
//!   the kernel's backlog.
//! * **A deadline for the request head** (10 s): a client that opens
//!   connections and sends a header byte every few seconds (slowloris) loses them when the
//!   deadline passes, so it cannot hold the cap against everyone else.
//! * **JSON for the errors hyper answers by itself**: a request line or head hyper cannot parse
//!   (400), a URI over its 64 KiB limit (414) or a head over its buffer (431) are answered by hyper
//!   with an empty body, before any handler runs; [`JsonErrors`] rewrites exactly those answers.
//! * Graceful shutdown: on the signal, stop accepting, let requests in flight finish for up to the
//!   grace period, then return.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// Raises the soft limit of open files to the hard limit (a default of 1024 lets a thousand
/// half-open connections lock everyone out); returns the soft limit in force afterwards.
pub fn raise_open_file_limit() -> u64 {
    match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(limit) => limit,
        Err(error) => {
            tracing::warn!(%error, "the open-file limit could not be raised");
            open_file_limit()
        }
    }
}

/// The soft limit of open files of this process.
pub fn open_file_limit() -> u64 {
    rlimit::getrlimit(rlimit::Resource::NOFILE).map_or(1024, |(soft, _)| soft)
}

/// Connections allowed for `open_files` descriptors: each may need a second one (an upstream
/// call); 512 are kept for the database pool, files and the listener; at most 65536.
pub fn connection_cap(open_files: u64) -> usize {
    (open_files.saturating_sub(512) / 2).clamp(64, 65_536) as usize
}

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
    let open = Arc::new(OpenConnections::default());
    tokio::pin!(shutdown);
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: free an idle one, wait a moment.
                    tracing::warn!(%error, "accepting a connection failed");
                    open.close_longest_idle();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // A slot for it: at the cap, the longest-idle connection makes room; when every one is
        // busy, this one waits (and the next ones in the kernel's backlog, not in memory).
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                open.close_longest_idle();
                tokio::select! {
                    permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                    () = &mut shutdown => break,
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(JsonErrors::new(stream));
        let (key, conn) = open.add();
        let service = TowerToHyperService::new(tracked(router.clone(), conn.clone()));
        let connection = builder
            .serve_connection_with_upgrades(io, service)
            .into_owned();
        let connection = graceful.watch(connection);
        let open = open.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            loop {
                tokio::select! {
                    // A connection ends in an error whenever a client goes away early; nothing
                    // to report.
                    _ = &mut connection => break,
                    () = conn.close.notified() => {
                        // Asked to make room: only if no request started meanwhile.
                        if conn.busy.load(Ordering::Acquire) == 0 {
                            break;
                        }
                    }
                }
            }
            open.remove(key);
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

/// The open connections, for finding the one that has been idle longest.
#[derive(Default)]
struct OpenConnections {
    next: AtomicU64,
    conns: std::sync::Mutex<HashMap<u64, Arc<Conn>>>,
}

/// One open connection: requests in flight, when it last finished one, and how to close it.
struct Conn {
    busy: AtomicUsize,
    /// Microseconds since the process's clock start when it last became idle.
    idle_since: AtomicU64,
    close: tokio::sync::Notify,
}

fn clock_us() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_micros() as u64
}

impl OpenConnections {
    fn add(&self) -> (u64, Arc<Conn>) {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn {
            busy: AtomicUsize::new(0),
            idle_since: AtomicU64::new(clock_us()),
            close: tokio::sync::Notify::new(),
        });
        self.lock().insert(key, conn.clone());
        (key, conn)
    }

    fn remove(&self, key: u64) {
        self.lock().remove(&key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Asks the connection idle the longest (no request in flight) to close. A scan of the open
    /// connections, made only at the cap.
    fn close_longest_idle(&self) {
        let conns = self.lock();
        // Ties (connections accepted in the same microsecond) go to the one accepted first.
        let idle = conns
            .iter()
            .filter(|(_, c)| c.busy.load(Ordering::Acquire) == 0)
            .min_by_key(|(key, c)| (c.idle_since.load(Ordering::Relaxed), **key));
        if let Some((_, conn)) = idle {
            conn.close.notify_one();
        }
    }
}

/// Marks its connection busy while a request is handled and its response body is sent.
struct Busy(Arc<Conn>);

impl Busy {
    fn new(conn: Arc<Conn>) -> Busy {
        conn.busy.fetch_add(1, Ordering::AcqRel);
        Busy(conn)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.idle_since.store(clock_us(), Ordering::Relaxed);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `router` for one connection: each request marks it busy until its response body is done (a
/// streamed answer keeps it busy to its end).
#[derive(Clone)]
struct Tracked {
    router: Router,
    conn: Arc<Conn>,
}

fn tracked(router: Router, conn: Arc<Conn>) -> Tracked {
    Tracked { router, conn }
}

impl<B> tower::Service<axum::http::Request<B>> for Tracked
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = axum::response::Response;
    type Error = std::convert::Infallible;
    type Future =
        Pin<Box<dyn Future<Output = Result<axum::response::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        let busy = Busy::new(self.conn.clone());
        let answer = tower::ServiceExt::oneshot(self.router.clone(), request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                axum::body::Body::new(http_body_util::BodyExt::map_frame(body, move |frame| {
                    let _ = &busy;
                    frame
                }))
            }))
        })
    }
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
