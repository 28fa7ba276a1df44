//! More connections than the cap: half-open connections that never send a byte (or a header)
//! cannot lock `/healthz` and other clients out. At the cap, the connection idle the longest
//! makes room; a connection with a request in flight is never closed for another.

use std::time::Duration;

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{FakeProvider, Reply, TestApp, chain_config, compact_body, config, secs};

#[tokio::test]
async fn health_answers_past_the_connection_cap_of_half_open_connections() {
    let mut config = config();
    config.http.max_connections = std::num::NonZeroUsize::new(16);
    // Long enough that no half-open connection times out during the test: room is made by
    // closing idle connections, not by waiting for them to give up.
    config.http.header_timeout = secs(300.0);
    let app = TestApp::spawn(config).await;
    let address = app.url.trim_start_matches("http://").to_owned();
    // Three times the cap, connected and silent.
    let mut silent = Vec::new();
    for _ in 0..48 {
        silent.push(TcpStream::connect(&address).await.unwrap());
    }
    for _ in 0..5 {
        let answer = tokio::time::timeout(Duration::from_secs(60), app.get("/healthz"))
            .await
            .expect("/healthz answers past the cap");
        assert_eq!(answer.status(), StatusCode::OK);
    }
    // Room was made by closing silent connections (they read end-of-file), and only as many as
    // needed: most of them are still open.
    let mut closed = 0;
    for stream in &mut silent {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(1), stream.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 1, "no silent connection was closed");
    assert!(closed < 48, "every silent connection was closed");
}

#[tokio::test]
async fn a_connection_with_a_request_in_flight_is_not_closed_for_another() {
    // One slot; a summarization is in flight on it (the upstream answers after a pause). A new
    // client waits for the slot instead of cutting the busy connection off.
    let fake = FakeProvider::start(
        vec![Reply::openai("## Goal\nfix src/lib.rs").after(Duration::from_millis(1500))],
        Reply::openai("## Goal\nfix src/lib.rs"),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.http.max_connections = std::num::NonZeroUsize::new(1);
    let app = TestApp::spawn(config).await;
    let address = app.url.trim_start_matches("http://").to_owned();
    let body = compact_body(crate::support::PROMPT).to_string();
    let mut busy = TcpStream::connect(&address).await.unwrap();
    busy.write_all(
        format!(
            "POST /v1/compact HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    // The summarization has reached the upstream: the connection is busy.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fake.received().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "the request never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let other = tokio::spawn({
        let address = address.clone();
        async move {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
                .await
                .unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).await.unwrap();
            answer
        }
    });
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(30), busy.read_to_string(&mut answer))
        .await
        .unwrap()
        .unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "the busy connection was cut: {answer:?}"
    );
    assert!(answer.contains("fix src/lib.rs"), "{answer}");
    let other = tokio::time::timeout(Duration::from_secs(30), other)
        .await
        .unwrap()
        .unwrap();
    assert!(other.starts_with("HTTP/1.1 200"), "{other}");
}

/// Started with the usual soft limit of 1024 open files, compactd raises it to the hard limit,
/// so that a thousand connections do not exhaust it.
#[cfg(target_os = "linux")]
#[test]
fn the_open_file_limit_is_raised_to_the_hard_limit_at_start() {
    let dir = std::env::temp_dir().join(format!("compactd-nofile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let data = dir.to_str().unwrap().to_owned();
    let hard = rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap().1;
    let soft = 1024.min(hard);
    let served = crate::support::binary::Served::start_with_open_files(
        &[("COMPACTD_DATA_DIR", &data)],
        Some(soft),
    );
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", served.pid())).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap()
        .to_owned();
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers, [hard, hard], "{line}");
    drop(served);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_connection_cap_follows_the_open_file_limit() {
    use compactd::http::server::connection_cap;
    assert_eq!(connection_cap(1024), 256);
    assert_eq!(connection_cap(20_000), 9744);
    assert_eq!(connection_cap(1 << 20), 65_536);
    assert_eq!(connection_cap(256), 64);
}
