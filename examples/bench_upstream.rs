//! Load-test helper, not part of the service: an instant OpenAI-compatible upstream
//! (`POST /v1/chat/completions`), an instant Anthropic Messages stream (`POST /v1/messages`, the
//! gateway's passthrough; `DRIP_MS=50` holds the rest of the stream that long after its first
//! event) and the "ceiling" handler (`POST /ceiling`: decode a JSON body,
//! answer a small JSON) that BENCHMARKS.md compares compactd against.
//!
//! Run: `cargo run --release --example bench_upstream -- 127.0.0.1:9001`
//! `FAIL_RATE=0.1` makes that share of completions fail with a 500; `DELAY_MS=20` delays each;
//! `SUMMARY_FILE=path` answers that file's text as the summary (one that keeps every anchor of
//! the benchmark's body, so the fidelity gate passes it without a repair).

use axum::routing::post;
use axum::{Json, Router};
use futures_util::StreamExt;
use serde_json::{Value, json};

static SUMMARY: std::sync::OnceLock<String> = std::sync::OnceLock::new();

#[tokio::main]
async fn main() {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9001".into());
    // Read once, not per answer: the environment is behind a process-wide lock.
    let setting = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    let fail_rate = setting("FAIL_RATE").unwrap_or(0.0);
    let delay = setting("DELAY_MS").map_or(0, |ms| ms as u64);
    let drip = setting("DRIP_MS").map_or(0, |ms| ms as u64);
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(move |Json(_): Json<Value>| async move {
                // Not `sleep(0)`: tokio's timer fires on its next millisecond tick, which made every
                // "instant" answer (and nginx's baseline through it) wait ~1 ms.
                if delay > 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                }
                if fastrand::f64() < fail_rate {
                    return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "injected failure"}})));
                }
                let summary = SUMMARY.get_or_init(|| {
                    std::env::var("SUMMARY_FILE").ok().and_then(|path| std::fs::read_to_string(path).ok())
                        .unwrap_or_else(|| "## Goal\nBenchmark summary.".into())
                });
                (axum::http::StatusCode::OK, Json(json!({
                    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": summary},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
                })))
            }),
        )
        .route(
            "/v1/messages",
            post(move |_: axum::body::Bytes| async move {
                let first = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_b\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-opus-5-5\",\"content\":[],\"usage\":{\"input_tokens\":10,\"output_tokens\":1}}}\n\n";
                let rest = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\nevent: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"OK, noted.\"}}\n\nevent: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
                let events = futures_util::stream::iter([(0, first), (drip, rest)]).then(|(pause, piece)| async move {
                    if pause > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
                    }
                    Ok::<_, std::convert::Infallible>(axum::body::Bytes::from_static(piece.as_bytes()))
                });
                ([(axum::http::header::CONTENT_TYPE, "text/event-stream")], axum::body::Body::from_stream(events))
            }),
        )
        .route(
            "/ceiling",
            post(|Json(body): Json<Value>| async move {
                let length = body.get("prompt").and_then(Value::as_str).map_or(0, str::len);
                Json(json!({"summary": "ok", "promptLength": length}))
            }),
        );
    let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
    // Without it the two writes of a stream wait out the client's delayed ACK (40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.expect("serve");
}
