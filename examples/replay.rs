//! Replay client, not part of the service: the soak test's traffic with agents' retries. POSTs
//! `/v1/compact` bodies at a fixed rate for a fixed time; each request is a new prompt (the body's
//! prompt with a unique first line) or, with probability RETRY_SHARE, the same body as an earlier
//! request (an agent retrying after a timeout or a 5xx). Prints requests, cache hits, the share of
//! upstream tokens the cache saved (the `usage` of hits over the `usage` of every answer), and
//! latency percentiles of hits and misses.
//!   cargo run --release --example replay -- URL BODY_FILE RATE_PER_SEC SECONDS RETRY_SHARE

use std::time::{Duration, Instant};

use serde_json::Value;

struct Answer {
    cached: bool,
    tokens: u64,
    latency: Duration,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, body_file, rate, seconds, retry_share] = args.as_slice() else {
        panic!("usage: replay URL BODY_FILE RATE_PER_SEC SECONDS RETRY_SHARE");
    };
    let template: Value = serde_json::from_slice(&std::fs::read(body_file).unwrap()).unwrap();
    let rate: f64 = rate.parse().unwrap();
    let retry_share: f64 = retry_share.parse().unwrap();
    let total = Duration::from_secs(seconds.parse().unwrap());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(185))
        .build()
        .unwrap();
    let mut sent_bodies: Vec<Vec<u8>> = Vec::new();
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let started = Instant::now();
    let mut tasks = Vec::new();
    let mut retries = 0;
    while started.elapsed() < total {
        interval.tick().await;
        let body = if !sent_bodies.is_empty() && fastrand::f64() < retry_share {
            retries += 1;
            sent_bodies[fastrand::usize(..sent_bodies.len())].clone()
        } else {
            let mut body = template.clone();
            let prompt = body["prompt"].as_str().unwrap().replacen(
                "<conversation>\n",
                &format!("<conversation>\n[User]: task {}\n\n", sent_bodies.len()),
                1,
            );
            body["prompt"] = Value::String(prompt);
            let bytes = serde_json::to_vec(&body).unwrap();
            sent_bodies.push(bytes.clone());
            bytes
        };
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .ok()?;
            let answer: Value = response.json().await.ok()?;
            let usage = &answer["usage"];
            Some(Answer {
                cached: answer["cached"] == true,
                tokens: usage["inputTokens"].as_u64().unwrap_or(0)
                    + usage["outputTokens"].as_u64().unwrap_or(0),
                latency: sent.elapsed(),
            })
        }));
    }
    let mut answers = Vec::new();
    for task in tasks {
        if let Ok(Some(answer)) = task.await {
            answers.push(answer);
        }
    }
    let all: u64 = answers.iter().map(|a| a.tokens).sum();
    let saved: u64 = answers.iter().filter(|a| a.cached).map(|a| a.tokens).sum();
    let mut hits: Vec<Duration> = answers
        .iter()
        .filter(|a| a.cached)
        .map(|a| a.latency)
        .collect();
    let mut misses: Vec<Duration> = answers
        .iter()
        .filter(|a| !a.cached)
        .map(|a| a.latency)
        .collect();
    hits.sort();
    misses.sort();
    println!(
        "requests {} (retries {retries}), answered {}, cache hits {}",
        sent_bodies.len() + retries,
        answers.len(),
        hits.len()
    );
    println!(
        "upstream tokens: {all} asked, {saved} answered from the cache ({:.1} %)",
        100.0 * saved as f64 / all.max(1) as f64
    );
    for (name, list) in [("hit", &hits), ("miss", &misses)] {
        println!(
            "{name}: p50 {:.2} ms, p99 {:.2} ms",
            percentile(list, 0.5).as_secs_f64() * 1000.0,
            percentile(list, 0.99).as_secs_f64() * 1000.0
        );
    }
}
