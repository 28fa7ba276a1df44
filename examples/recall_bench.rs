//! Recall's search latency over 100,000 stored turns (issue 27), on the store `DATABASE_URL`
//! names (a fresh PostgreSQL database or a SQLite file): 1,000 conversations of 100 turns are
//! stored — the user, assistant and tool turns of the shared fixtures' real sessions, cycled —
//! for ten tenants, then 1,000 searches for words, identifiers and paths that occur in them run
//! one after another, each by one tenant; prints p50/p95/p99/max and the hits.
//!
//! Run: `DATABASE_URL=sqlite:/tmp/recall.db cargo run --release --example recall_bench`
//! (`scripts/bench/recall.sh` runs it on both stores.)

use std::time::{Duration, Instant};

use compactd_core::session::{ParseOptions, Session};
use compactd_store::{NewRecall, RecallQuery, RecallTurn, Store, StoreConfig, connect};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("DATABASE_URL")?;
    let store = connect(&StoreConfig {
        database_url: Some(url.clone()),
        data_dir: std::env::temp_dir(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(30),
        statement_timeout: Duration::from_secs(60),
        lock_timeout: Duration::from_secs(10),
    })
    .await?;
    let texts = real_turns()?;
    anyhow::ensure!(texts.len() > 500, "{} turns", texts.len());
    let n = store_conversations(store.as_ref(), &texts).await?;
    search(store.as_ref(), n).await
}

/// The texts of real turns: every message of both fixture sessions, as pi serializes it.
fn real_turns() -> anyhow::Result<Vec<String>> {
    let mut texts = Vec::new();
    for file in ["before-compaction.jsonl", "large-session.jsonl"] {
        let bytes = std::fs::read(format!(
            "{}/tests/fixtures/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))?;
        let session = Session::parse(&bytes, ParseOptions::default())?;
        let path = session.active_path(None).unwrap();
        let plan = compactd_core::compaction::PlanOutcome::for_path(
            &path,
            &compactd_core::compaction::CompactionSettings::default(),
        );
        if let Some(plan) = plan.plan {
            texts.extend(
                plan.conversation
                    .split("\n\n[")
                    .map(|t| t.chars().take(8000).collect::<String>()),
            );
        }
    }
    Ok(texts)
}

/// 1,000 conversations of 100 turns, cycled from `texts`, for ten tenants; how many turns.
async fn store_conversations(store: &dyn Store, texts: &[String]) -> anyhow::Result<usize> {
    let started = Instant::now();
    let mut n = 0;
    for conversation in 0..1000 {
        let turns = (0..100)
            .map(|seq| {
                let text = &texts[(conversation * 100 + seq) % texts.len()];
                RecallTurn {
                    seq: seq as i32,
                    role: ["user", "assistant", "tool"][seq % 3].into(),
                    tool: (seq % 3 == 2).then(|| "bash".into()),
                    paths: String::new(),
                    text: text.clone(),
                }
            })
            .collect();
        store
            .save_recalls(&[NewRecall {
                // Ids as compactd makes them (a hash of the conversation), so that they land
                // where real ones do in the stores' indexes, not in order.
                id: {
                    use sha2::{Digest, Sha256};
                    let hash = Sha256::digest(format!("bench {conversation}"));
                    format!("r_{}", hex::encode(&hash[..12]))
                },
                tenant: format!("tenant{}", conversation % 10),
                source: "remote-endpoint".into(),
                session_id: None,
                created_at_ms: 1,
                expires_at_ms: i64::MAX,
                turns,
            }])
            .await?;
        n += 100;
    }
    println!(
        "stored {n} turns in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(n)
}

/// 1,000 searches one after another, each by one tenant: the latency's percentiles and the hits.
async fn search(store: &dyn Store, n: usize) -> anyhow::Result<()> {
    let words = [
        "theme",
        "chalk",
        "truecolor",
        "TuiRenderer",
        "packages/coding-agent/src/main.ts",
        "error TS2304",
        "userMessageText",
        "npm run check",
        "selector",
        "ghostty",
        "invalidate",
        "markdown code block",
        "session-manager.ts",
        "compaction",
        "tsgo --noEmit",
        "rgb",
    ];
    let mut times = Vec::new();
    let mut hits = 0;
    for i in 0..1000 {
        let query = RecallQuery {
            text: words[i % words.len()].into(),
            limit: 10,
            now_ms: 2,
            ..RecallQuery::default()
        };
        let at = Instant::now();
        hits += store
            .search_recall(&format!("tenant{}", i % 10), &query)
            .await?
            .len();
        times.push(at.elapsed());
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{}: 1000 searches over {n} turns: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {hits} hits",
        store.backend(),
        ms(times[499]),
        ms(times[949]),
        ms(times[989]),
        ms(times[999])
    );
    Ok(())
}
