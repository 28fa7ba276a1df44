//! Soak client, not part of the service: POSTs a JSON body to URL at a fixed rate for a fixed
//! time, then prints status counts, latency percentiles and the server's memory (VmRSS of PID)
//! at the start and the end.
//!   cargo run --release --example soak -- URL BODY_FILE RATE_PER_SEC SECONDS PID

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .map(str::to_owned)
        })
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, body_file, rate, seconds, pid] = args.as_slice() else {
        panic!("usage: soak URL BODY_FILE RATE_PER_SEC SECONDS PID");
    };
    let body = std::fs::read(body_file).unwrap();
    let rate: f64 = rate.parse().unwrap();
    let total = Duration::from_secs(seconds.parse().unwrap());
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(185))
        .build()
        .unwrap();
    let rss_start = rss_kib(pid);
    let started = Instant::now();
    let mut interval = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = Vec::new();
    let mut rss_samples = vec![(0u64, rss_start)];
    while started.elapsed() < total {
        interval.tick().await;
        let (client, url, body) = (client.clone(), url.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            let sent = Instant::now();
            let status = match client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
            {
                Ok(response) => {
                    let status = response.status().as_u16().to_string();
                    let _ = response.bytes().await;
                    status
                }
                Err(e) if e.is_timeout() => "timeout".to_owned(),
                Err(_) => "connection error".to_owned(),
            };
            (status, sent.elapsed())
        }));
        let minute = started.elapsed().as_secs() / 60;
        if rss_samples.last().is_some_and(|(m, _)| *m < minute) {
            rss_samples.push((minute, rss_kib(pid)));
        }
    }
    let mut statuses: BTreeMap<String, u64> = BTreeMap::new();
    let mut latencies = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (status, latency) = task.await.unwrap();
        *statuses.entry(status).or_default() += 1;
        latencies.push(latency);
    }
    latencies.sort();
    let pct = |p: f64| latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)];
    println!(
        "requests: {} in {:?} ({:.1}/s)",
        latencies.len(),
        started.elapsed(),
        latencies.len() as f64 / started.elapsed().as_secs_f64()
    );
    println!("statuses: {statuses:?}");
    println!(
        "latency: p50 {:?}  p90 {:?}  p99 {:?}  max {:?}",
        pct(0.5),
        pct(0.9),
        pct(0.99),
        latencies.last().unwrap()
    );
    println!(
        "server RSS: start {} KiB, end {} KiB",
        rss_start,
        rss_kib(pid)
    );
    println!("RSS by minute (KiB): {:?}", rss_samples);
}
