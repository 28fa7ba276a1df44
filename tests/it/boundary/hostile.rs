//! Hostile callers and bad days: slow connections, malformed HTTP, upstreams that redirect or
//! answer without end, blank summaries, NUL characters, and storage that is locked, read-only or
//! stuck. Every failure is a clear JSON answer, never a 500, a hang or a lock-out.

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body, config, secs,
};

/// Sends `request` on a new connection and reads the answer until the server closes it (or
/// `wait` passes).
async fn raw(url: &str, request: &[u8], wait: Duration) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(wait, stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// The status and the JSON body of a raw answer.
fn parse_answer(answer: &str) -> (u16, Value) {
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "not JSON: {head}"
    );
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test]
async fn hundreds_of_slow_connections_do_not_lock_other_clients_out() {
    let mut config = config();
    config.http.max_connections = std::num::NonZeroUsize::new(8);
    config.http.header_timeout = secs(1.0);
    let app = TestApp::spawn(config).await;
    let address = app.url.trim_start_matches("http://").to_owned();
    // Slowloris: 40 connections that send a byte of a request head every 200 ms, forever. Each
    // reports once it has connected and sent its first byte.
    let (attacking, mut started_attacks) = tokio::sync::mpsc::channel::<()>(40);
    let mut attackers = Vec::new();
    for _ in 0..40 {
        let address = address.clone();
        let attacking = attacking.clone();
        attackers.push(tokio::spawn(async move {
            let Ok(mut stream) = TcpStream::connect(&address).await else {
                let _ = attacking.send(()).await;
                return;
            };
            let mut reported = false;
            for byte in b"POST /v1/compact HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
                .iter()
                .cycle()
            {
                if stream.write_all(&[*byte]).await.is_err() {
                    return;
                }
                if !reported {
                    reported = true;
                    let _ = attacking.send(()).await;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }));
    }
    for _ in 0..40 {
        started_attacks.recv().await.unwrap();
    }
    // Another client still gets its answer: each slow connection loses its slot when its head is
    // not complete within the header timeout.
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(20), app.get("/healthz"))
        .await
        .expect("a client behind the slow connections is served");
    assert_eq!(answer.status(), StatusCode::OK);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    for attacker in attackers {
        attacker.abort();
    }
}

#[tokio::test]
async fn errors_the_http_layer_makes_are_json_too() {
    let mut config = config();
    config.http.max_body_bytes = 4096;
    config.http.request_timeout = secs(1.5);
    config.summarizers.deadline = secs(1.0);
    let app = TestApp::spawn(config).await;
    let wait = Duration::from_secs(5);

    // A URI over compactd's limit, and one over hyper's own 64 KiB limit.
    for length in [10_000, 70_000] {
        let request = format!(
            "GET /v1/sessions/{} HTTP/1.1\r\nHost: localhost\r\n\r\n",
            "a".repeat(length)
        );
        let (status, body) = parse_answer(&raw(&app.url, request.as_bytes(), wait).await);
        assert_eq!(status, 414, "{length}");
        assert_eq!(body["error"]["code"], "uri_too_long", "{length}");
    }
    // Headers over hyper's buffer.
    let request = format!(
        "GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: {}\r\n\r\n",
        "b".repeat(600_000)
    );
    let (status, body) = parse_answer(&raw(&app.url, request.as_bytes(), wait).await);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (431, Some("headers_too_large"))
    );
    // Not HTTP at all.
    let (status, body) = parse_answer(&raw(&app.url, b"GARBAGE\x01 / HTTP/9\r\n\r\n", wait).await);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
    // Invalid UTF-8 in a path.
    let (status, body) = parse_answer(
        &raw(
            &app.url,
            b"GET /v1/sessions/%C3%28/entries HTTP/1.1\r\nHost: localhost\r\n\r\n",
            wait,
        )
        .await,
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_path"))
    );
    // A declared body over the limit is refused before any of it is sent.
    let started = Instant::now();
    let (status, body) = parse_answer(
        &raw(
            &app.url,
            b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Length: 999999999\r\n\r\n",
            wait,
        )
        .await,
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("request_too_large"))
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // A body that never arrives ends in the request time limit, answered as JSON.
    let (status, body) = parse_answer(
        &raw(
            &app.url,
            b"POST /v1/sessions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-ndjson\r\nContent-Length: 100\r\n\r\n{\"type\"",
            wait,
        )
        .await,
    );
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (504, Some("request_timeout"))
    );
}

#[tokio::test]
async fn upstream_redirects_are_not_followed() {
    let elsewhere = FakeProvider::start(vec![], Reply::openai("stolen")).await;
    let redirect = |path: &str| {
        Reply::json(307, json!({})).with_header("location", &format!("{}{path}", elsewhere.url))
    };
    let fake = FakeProvider::start(
        vec![redirect("/v1/chat/completions"), redirect("/v1/messages")],
        Reply::json(500, json!({})),
    )
    .await;
    let app = TestApp::spawn(chain_config(&fake, "openai:m,anthropic:c", true)).await;
    let body: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["model"], "extractive");
    assert!(
        elsewhere.received().is_empty(),
        "the provider keys and the prompt went to another host"
    );
    // A redirect is a rejection: each model was asked once.
    assert_eq!(fake.received().len(), 2);
}

#[tokio::test]
async fn upstream_answers_are_read_only_up_to_a_bound() {
    let huge = "x".repeat(compactd::summarizer::MAX_UPSTREAM_BYTES + 1024);
    let fake = FakeProvider::start(vec![], Reply::openai(&huge)).await;
    let mut config = chain_config(&fake, "openai:m", true);
    config.summarizers.max_retries = 0;
    let app = TestApp::spawn(config).await;
    let body: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["model"], "extractive",
        "the oversized answer was refused"
    );
}

#[tokio::test]
async fn blank_summaries_are_failed_attempts_never_answers() {
    for blank in ["", "  \n\t", "\u{200B}\u{200D}\n\u{FEFF} ", "\u{0}\u{0}"] {
        let fake =
            FakeProvider::start(vec![Reply::openai(blank)], Reply::openai(&answer("real"))).await;
        let app = TestApp::spawn(chain_config(&fake, "openai:m", false)).await;
        let body: Value = app
            .compact(&compact_body(PROMPT))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(body["summary"], answer("real"), "{blank:?}");
        assert_eq!(fake.received().len(), 2, "{blank:?}: retried once");
    }
}

on_both_backends!(nul_characters_are_stored_or_refused_the_same_on_both_backends);

async fn nul_characters_are_stored_or_refused_the_same_on_both_backends(store: Arc<dyn Store>) {
    // The model writes NUL into its summaries; the extractive summarizer quotes tool output that
    // holds one.
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nfix\u{0} it")).await;
    let app = TestApp::with_store(chain_config(&fake, "openai:m", false), store.clone()).await;
    let extractive = TestApp::with_store(config(), store).await;
    // NUL in tool output, in an unknown entry type, and in the user's words: stored byte for
    // byte (the raw lines hold JSON escapes).
    let file = concat!(
        r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}"#,
        "\n",
        r#"{"type":"message","id":"u1","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"read the \u0000 file","timestamp":1}}"#,
        "\n",
        r#"{"type":"message","id":"a1","parentId":"u1","timestamp":"2026-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"toolCall","id":"c","name":"bash","arguments":{"command":"cat x"}}],"stopReason":"toolUse","timestamp":2}}"#,
        "\n",
        r#"{"type":"message","id":"t1","parentId":"a1","timestamp":"2026-01-01T00:00:03.000Z","message":{"role":"toolResult","toolCallId":"c","toolName":"bash","content":[{"type":"text","text":"error: bad byte \u0000 here"}],"isError":true,"timestamp":3}}"#,
        "\n",
        r#"{"type":"odd\u0000type","id":"o1","parentId":"t1","timestamp":"2026-01-01T00:00:04.000Z"}"#,
        "\n",
        r#"{"type":"message","id":"u2","parentId":"o1","timestamp":"2026-01-01T00:00:05.000Z","message":{"role":"user","content":"and now?","timestamp":5}}"#,
        "\n",
    );
    let response = app.upload(file).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = response.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(app.entries(&id).await.text().await.unwrap(), file);
    // Compacted by the extractive summarizer quoting the tool output, then by the model whose
    // summary holds NUL: both stored, and the session stays compactable.
    for (round, leaf) in [(1, "u2"), (2, "u3")] {
        if round == 2 {
            let more = r#"{"type":"message","id":"u3","parentId":"LEAF","timestamp":"2026-01-01T00:00:09.000Z","message":{"role":"user","content":"more \u0000","timestamp":9}}"#;
            let leaf_now: Value = app.session(&id).await.json().await.unwrap();
            let line = more.replace("LEAF", leaf_now["leafId"].as_str().unwrap());
            assert_eq!(app.append(&id, line).await.status(), StatusCode::OK);
        }
        let by = if round == 1 { &extractive } else { &app };
        let response = by
            .compact_session(&id, &json!({"keepRecentTokens": 0, "leafId": leaf}))
            .await;
        assert_eq!(response.status(), StatusCode::CREATED, "round {round}");
        let body: Value = response.json().await.unwrap();
        let summary = body["entry"]["summary"].as_str().unwrap();
        assert!(!summary.contains('\u{0}'), "round {round}: {summary:?}");
        let quoted = if round == 1 {
            "error: bad byte  here"
        } else {
            "fix it"
        };
        assert!(summary.contains(quoted), "round {round}: {summary:?}");
    }
    let history: Value = app.compactions(&id).await.json().await.unwrap();
    assert_eq!(history["compactions"].as_array().unwrap().len(), 2);
    assert!(
        history["compactions"][1]["summary"]
            .as_str()
            .unwrap()
            .contains("fix it")
    );
}

#[tokio::test]
async fn concurrent_compactions_of_one_leaf_wait_for_it_instead_of_spending_the_key_cap() {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai("## Goal\nonce").after(Duration::from_millis(400)),
    )
    .await;
    let mut config = chain_config(&fake, "openai:m", false);
    config.summarizers.max_concurrent_per_key = 1;
    let app = TestApp::spawn(config).await;
    let file = compactd_testkit::synth::repeat_session(
        &compactd_core::session::Session::parse(
            &crate::fixture("large-session.jsonl"),
            Default::default(),
        )
        .unwrap(),
        300_000,
    );
    let id = app.upload(file).await.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/v1/sessions/{id}/compactions");
    let body = json!({"keepRecentTokens": 2000});
    let requests = (0..4).map(|_| app.post(&path, &body));
    let answers = futures_util::future::join_all(requests).await;
    let mut created = Vec::new();
    for answer in answers {
        let status = answer.status();
        assert!(
            status == StatusCode::CREATED || status == StatusCode::OK,
            "{status}"
        );
        let body: Value = answer.json().await.unwrap();
        if body["created"] == true {
            created.push(body);
        }
    }
    assert_eq!(created.len(), 1);
    assert_eq!(
        fake.received().len() as u64,
        created[0]["summarizerCalls"].as_u64().unwrap(),
        "the calls of one compaction, no more"
    );
}
