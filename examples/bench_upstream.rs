//! Load-test helper, not part of the service: an instant OpenAI-compatible upstream
//! (`POST /v1/chat/completions`) and the "ceiling" handler (`POST /ceiling`: decode a JSON body,
//! answer a small JSON) that BENCHMARKS.md compares compactd against.
//!
//! Run: `cargo run --release --example bench_upstream -- 127.0.0.1:9001`
//! `FAIL_RATE=0.1` makes that share of completions fail with a 500; `DELAY_MS=20` delays each.

use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

#[tokio::main]
async fn main() {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9001".into());
    let app = Router::new()
        .route(
            "/v1/chat/completions",
            post(|Json(_): Json<Value>| async {
                let fail_rate: f64 = std::env::var("FAIL_RATE").ok().and_then(|v| v.parse().ok()).unwrap_or(0.0);
                let delay: u64 = std::env::var("DELAY_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
                tokio::time::sleep(std::time::Duration::from_millis(delay)).await;
                if fastrand::f64() < fail_rate {
                    return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, Json(json!({"error": {"message": "injected failure"}})));
                }
                (axum::http::StatusCode::OK, Json(json!({
                    "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "## Goal\nBenchmark summary."},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 1000, "completion_tokens": 10, "total_tokens": 1010}
                })))
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
    axum::serve(listener, app).await.expect("serve");
}
