//! Load tool for the session API, not part of the service (`scripts/bench/sessions.sh` runs it
//! against a release compactd on each store). Measures, in one run against one server:
//!
//! * `upload`: POST of the big session file, UPLOADS times: MB/s.
//! * `append`: one new entry appended to a small session and to the big one, alternately, APPENDS
//!   times each (after one warm-up append each): median and p90 latency, and their ratio.
//! * `plan`: GET …/plan of the stored big session against POST /v1/plan of the same file.
//! * `compact`: POST …/compactions of the stored big session (extractive summarizer).
//! * `sync`: SESSIONS more big sessions uploaded, appended to and planned; then the server's
//!   resident memory (from /proc, PID given) and its index cache gauge.
//!
//!   cargo run --release --example sessions_bench -- URL BIG.jsonl SMALL.jsonl APPENDS UPLOADS SESSIONS PID

use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Bench {
    client: reqwest::Client,
    url: String,
}

impl Bench {
    async fn send(&self, request: reqwest::RequestBuilder) -> (Duration, Value) {
        let started = Instant::now();
        let response = request.send().await.expect("compactd answers");
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let took = started.elapsed();
        assert!(status.is_success(), "{status}: {body}");
        (took, body)
    }

    async fn upload(&self, bytes: &[u8]) -> (Duration, String) {
        let (took, body) = self
            .send(
                self.client
                    .post(format!("{}/v1/sessions", self.url))
                    .header("content-type", "application/x-ndjson")
                    .body(bytes.to_vec()),
            )
            .await;
        (took, body["id"].as_str().unwrap().to_owned())
    }

    /// Appends one user message under the session's leaf; returns the time and the new leaf.
    async fn append(&self, id: &str, parent: &str, n: usize) -> (Duration, String) {
        let entry_id = format!("bench{n:06}");
        let line = json!({"type":"message","id":entry_id,"parentId":parent,
            "timestamp":"2026-11-22T12:00:00.000Z",
            "message":{"role":"user","content":format!("next request {n}: run the tests again"),
            "timestamp":1_763_812_800_000i64}});
        let (took, _) = self
            .send(
                self.client
                    .post(format!("{}/v1/sessions/{id}/entries", self.url))
                    .header("content-type", "application/x-ndjson")
                    .body(format!("{line}\n")),
            )
            .await;
        (took, entry_id)
    }

    /// Median times of 5 plans of the stored session and 5 plans of `file` posted to /v1/plan.
    async fn plans(&self, id: &str, file: &[u8]) -> (Duration, Duration) {
        let (mut stored, mut posted) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            stored.push(self.get(&format!("/v1/sessions/{id}/plan")).await.0);
            let post = self
                .client
                .post(format!("{}/v1/plan", self.url))
                .header("content-type", "application/x-ndjson")
                .body(file.to_vec());
            posted.push(self.send(post).await.0);
        }
        stored.sort();
        posted.sort();
        (percentile(&stored, 0.5), percentile(&posted, 0.5))
    }

    async fn get(&self, path: &str) -> (Duration, Value) {
        self.send(self.client.get(format!("{}{path}", self.url)))
            .await
    }
}

fn leaf_of(file: &[u8]) -> String {
    let last = file
        .split(|&b| b == b'\n')
        .rfind(|l| !l.is_empty())
        .unwrap();
    let entry: Value = serde_json::from_slice(last).unwrap();
    entry["id"].as_str().unwrap().to_owned()
}

fn rss_mib(pid: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap()
        .parse()
        .unwrap();
    kib / 1024.0
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, big, small, appends, uploads, sessions, pid] = args.as_slice() else {
        panic!("usage: sessions_bench URL BIG.jsonl SMALL.jsonl APPENDS UPLOADS SESSIONS PID");
    };
    let big = std::fs::read(big).unwrap();
    let small = std::fs::read(small).unwrap();
    let appends: usize = appends.parse().unwrap();
    let uploads: usize = uploads.parse().unwrap();
    let sessions: usize = sessions.parse().unwrap();
    let bench = Bench {
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(300))
            .build()
            .unwrap(),
        url: url.clone(),
    };
    let mb = big.len() as f64 / 1e6;
    let big_id = upload_throughput(&bench, &big, uploads, mb).await;
    appends_small_and_big(&bench, &big, &small, &big_id, appends, mb).await;
    plans_and_compacts(&bench, &big, &big_id, mb).await;
    syncs_many(&bench, &big, sessions, pid, mb).await;
}

/// Upload throughput: the big session `uploads` times; the last one's id.
async fn upload_throughput(bench: &Bench, big: &[u8], uploads: usize, mb: f64) -> String {
    // Upload throughput.
    let mut times = Vec::new();
    let mut big_id = String::new();
    for _ in 0..uploads {
        let (took, id) = bench.upload(big).await;
        times.push(took);
        big_id = id;
    }
    times.sort();
    let median = percentile(&times, 0.5);
    println!(
        "upload {mb:.1} MB x{uploads}: median {:.0} ms = {:.1} MB/s (best {:.1} MB/s)",
        ms(median),
        mb / median.as_secs_f64(),
        mb / times[0].as_secs_f64()
    );

    big_id
}

/// Appends of one entry, alternating between a small session and the big one.
async fn appends_small_and_big(
    bench: &Bench,
    big: &[u8],
    small: &[u8],
    big_id: &str,
    appends: usize,
    mb: f64,
) {
    // Appends, alternating between a small and the big session.
    let (_, small_id) = bench.upload(small).await;
    let mut leaves = [leaf_of(small), leaf_of(big)];
    let ids = [small_id.clone(), big_id.to_owned()];
    let mut first = [Duration::ZERO; 2];
    let mut samples: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    for n in 0..=appends {
        for which in 0..2 {
            let (took, leaf) = bench
                .append(&ids[which], &leaves[which], n * 2 + which)
                .await;
            leaves[which] = leaf;
            if n == 0 {
                first[which] = took;
            } else {
                samples[which].push(took);
            }
        }
    }
    for s in &mut samples {
        s.sort();
    }
    let (small_p50, big_p50) = (percentile(&samples[0], 0.5), percentile(&samples[1], 0.5));
    println!(
        "append 1 entry x{appends}: small session p50 {:.2} ms p90 {:.2} ms (first {:.1} ms); \
         {mb:.1} MB session p50 {:.2} ms p90 {:.2} ms (first {:.1} ms); ratio {:.2}",
        ms(small_p50),
        ms(percentile(&samples[0], 0.9)),
        ms(first[0]),
        ms(big_p50),
        ms(percentile(&samples[1], 0.9)),
        ms(first[1]),
        big_p50.as_secs_f64() / small_p50.as_secs_f64()
    );
}

/// Planning the stored session against planning the file, before and after compacting it.
async fn plans_and_compacts(bench: &Bench, big: &[u8], big_id: &str, mb: f64) {
    let url = &bench.url;
    // Planning the stored session against planning the file.
    let (stored, posted) = bench.plans(big_id, big).await;
    println!(
        "plan {mb:.1} MB: stored p50 {:.0} ms, file (POST /v1/plan) p50 {:.0} ms; ratio {:.2}",
        ms(stored),
        ms(posted),
        stored.as_secs_f64() / posted.as_secs_f64()
    );

    // Compacting the stored session (the caller compares with `compactd compact FILE`).
    let (took, body) = bench
        .send(
            bench
                .client
                .post(format!("{url}/v1/sessions/{big_id}/compactions"))
                .json(&json!({})),
        )
        .await;
    println!(
        "compact stored {mb:.1} MB: {:.0} ms (model {})",
        ms(took),
        body["model"]
    );

    // After that compaction the stored plan reads only the path's tail; the file is the stored
    // one (with the compaction), planned whole.
    let file = bench
        .client
        .get(format!("{url}/v1/sessions/{big_id}/entries"))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let (stored, posted) = bench.plans(big_id, &file).await;
    println!(
        "plan {mb:.1} MB after its compaction: stored p50 {:.1} ms, file p50 {:.0} ms; ratio {:.3}",
        ms(stored),
        ms(posted),
        stored.as_secs_f64() / posted.as_secs_f64()
    );
}

/// Syncing many big sessions: memory stays bounded by the index cache.
async fn syncs_many(bench: &Bench, big: &[u8], sessions: usize, pid: &str, mb: f64) {
    let url = &bench.url;
    let before = rss_mib(pid);
    for n in 0..sessions {
        let (_, id) = bench.upload(big).await;
        let mut leaf = leaf_of(big);
        for k in 0..3 {
            leaf = bench.append(&id, &leaf, 1_000_000 + n * 10 + k).await.1;
        }
        bench.get(&format!("/v1/sessions/{id}/plan")).await;
    }
    let metrics = bench
        .client
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let cache = metrics
        .lines()
        .find(|l| l.starts_with("compactd_session_index_bytes "))
        .unwrap_or("compactd_session_index_bytes ?");
    println!(
        "sync {sessions} sessions of {mb:.1} MB: server RSS {before:.0} MiB before, {:.0} MiB after; {cache}",
        rss_mib(pid)
    );
}
