//! Two replicas, two processes, one database (issue 52): a summary one replica wrote is a hit on
//! the other as soon as the write-behind batch has landed in the shared store — the test waits
//! for exactly that row, then asks the other replica. Replicas share PostgreSQL; an SQLite file
//! is one process's store (it knows its cache's keys without asking, `store/cache_keys.rs`).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::binary::Served;
use crate::support::{FakeProvider, PROMPT, Reply, answer, compact_body};

async fn cached_rows(url: &str) -> i64 {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let n = sqlx::query_scalar("select count(*) from summary_cache")
        .fetch_one(&pool)
        .await
        .unwrap();
    pool.close().await;
    n
}

#[tokio::test]
async fn replicas_on_postgres_share_the_summary_cache_once_the_row_lands() {
    compactd_testkit::needs!(Postgres);
    let url = crate::sessions::crash::postgres_url("replicas").await;
    let url = url.as_str();
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("shared"))).await;
    let model_url = format!("{}/v1", fake.url);
    let env = [
        ("DATABASE_URL", url),
        ("COMPACTD_MODELS", "openai:gpt-test"),
        ("COMPACTD_EXTRACTIVE_FALLBACK", "false"),
        ("COMPACTD_OPENAI_BASE_URL", model_url.as_str()),
        ("OPENAI_API_KEY", "sk-test"),
    ];
    let one = Served::start(&env);
    let two = Served::start(&env);
    let client = reqwest::Client::new();
    let ask = |base: &str| {
        client
            .post(format!("{base}/v1/compact"))
            .json(&compact_body(PROMPT))
            .send()
    };
    let first: Value = ask(&one.base).await.unwrap().json().await.unwrap();
    assert_eq!(first["cached"], false, "{first}");
    // Written behind the answer: the row lands within moments.
    let started = Instant::now();
    while cached_rows(url).await < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the row never landed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let other: Value = ask(&two.base).await.unwrap().json().await.unwrap();
    assert_eq!(other["cached"], true, "{other}");
    assert_eq!(other["summary"], first["summary"]);
    assert_eq!(fake.received().len(), 1, "one model call for both replicas");
}
