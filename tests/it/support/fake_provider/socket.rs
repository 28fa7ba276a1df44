//! The replies only a socket can give — a reset, a connection held open without an answer, an
//! event stream written piece by piece with pauses — on a small raw TCP server that speaks just
//! enough HTTP/1.1 (one request per connection, `Connection: close`).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Incoming, Reply, State};

/// Serves `state`'s replies on a new port; its URL.
pub(super) async fn serve(state: Arc<State>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(handle(stream, state.clone()));
        }
    });
    url
}

/// One request read off `stream`, or none when the client went away first.
async fn read(stream: &mut TcpStream) -> Option<Incoming> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 65536];
    let header_end = loop {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&buffer[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let target = request_line.next().unwrap_or_default();
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
        match stream.read(&mut chunk).await {
            Ok(n) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    Some(Incoming::new(
        method,
        target,
        headers,
        buffer[header_end..].to_vec(),
    ))
}

async fn handle(mut stream: TcpStream, state: Arc<State>) {
    let Some(request) = read(&mut stream).await else {
        return;
    };
    let reply = match state.reply(request) {
        Reply::Delayed(delay, reply) => {
            tokio::time::sleep(delay).await;
            *reply
        }
        other => other,
    };
    match reply {
        Reply::Status {
            status,
            content_type,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n",
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
        other => unreachable!("resolved before it is served: {other:?}"),
    }
}
