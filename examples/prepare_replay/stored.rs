//! The long real pi sessions replayed as stored pi sessions, as pi with compactd's extension
//! plays them.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Waited, used};

/// A long real pi session played as pi with compactd's extension plays it, against a local
/// model's window (128,000 tokens, `reserveTokens` 16,384): its entries appended one at a time
/// (`POST /v1/sessions/{id}/entries`, with the window), TURN_SECS after each assistant message;
/// once pi's estimate of the context (the session's `contextTokens`) passes the window less the
/// reserve, the compaction (`POST /v1/sessions/{id}/compactions`), after which the session goes
/// on from compactd's entry. The assistants' recorded `usage` is left out: it is that of the
/// session as it ran, without these compactions, so pi's estimate is its own count throughout.
pub(crate) async fn stored_session(
    client: &reqwest::Client,
    url: &str,
    file: &std::path::Path,
    turn: Duration,
) -> Vec<Waited> {
    const WINDOW: i64 = 128_000;
    const RESERVE: i64 = 16_384;
    let ndjson = |body: String| {
        client
            .post(format!("{url}/v1/sessions"))
            .header("content-type", "application/x-ndjson")
            .body(body)
    };
    // The file as pi writes it today (migrated: each entry with its id and parent).
    let fixture = std::fs::read(file).unwrap();
    let scratch: Value = ndjson(String::from_utf8(fixture).unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let entries_url = format!(
        "{url}/v1/sessions/{}/entries",
        scratch["id"].as_str().unwrap()
    );
    let text = client
        .get(&entries_url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut lines = text.lines();
    let head = format!("{}\n{}\n", lines.next().unwrap(), lines.next().unwrap());
    let session: Value = ndjson(head).send().await.unwrap().json().await.unwrap();
    let id = session["id"].as_str().unwrap().to_owned();
    let append = format!("{url}/v1/sessions/{id}/entries?contextWindow={WINDOW}");
    let compact = format!("/v1/sessions/{id}/compactions");
    let mut waited = Vec::new();
    // After a compaction, the next entry's parent is compactd's entry.
    let mut rewired: Option<String> = None;
    for line in lines {
        let mut entry: Value = serde_json::from_str(line).unwrap();
        if let Some(parent) = rewired.take() {
            entry["parentId"] = Value::String(parent);
        }
        if let Some(message) = entry["message"].as_object_mut() {
            message.remove("usage");
        }
        let response = client
            .post(&append)
            .header("content-type", "application/x-ndjson")
            .body(format!("{entry}\n"))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        let appended: Value = response.json().await.unwrap();
        let tokens = appended["session"]["contextTokens"]
            .as_i64()
            .unwrap_or_default();
        if entry["message"]["role"] != "assistant" {
            continue;
        }
        tokio::time::sleep(turn).await;
        if tokens > WINDOW - RESERVE {
            let before = used(client, url).await;
            let started = Instant::now();
            let response = client
                .post(format!("{url}{compact}"))
                .json(&json!({"reserveTokens": RESERVE}))
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success(), "{}", response.status());
            let compacted: Value = response.json().await.unwrap();
            // pi keeps the latest turns as they are: its summary is of what came before them.
            waited.push(Waited {
                seconds: started.elapsed().as_secs_f64(),
                prepared: used(client, url).await > before,
                kept: None,
                answer: String::new(),
            });
            let last = waited.last().unwrap();
            println!(
                "    {}: a compaction in {:.2} s, {} ({})",
                super::name(file),
                last.seconds,
                if last.prepared {
                    "from a prepared summary"
                } else {
                    "the normal path"
                },
                compacted["model"].as_str().unwrap_or_default(),
            );
            rewired = compacted["entry"]["id"].as_str().map(str::to_owned);
        }
    }
    waited
}
