//! Crash safety: `kill -9` during an upload or a compaction leaves no partial session or entry.
//! The real binary runs on a database file that survives it; after a restart every stored session
//! is whole (its stored entry count and its rows agree with the uploaded file) or absent.

use std::time::Duration;

use compactd_core::session::{ParseOptions, Session};
use compactd_testkit::synth;
use serde_json::{Value, json};

use crate::support::binary::Served;
use crate::support::{FakeProvider, Reply};

fn start(database_url: &str, extra: &[(&str, &str)]) -> Served {
    let mut env = vec![("DATABASE_URL", database_url), ("COMPACTD_LOG", "error")];
    env.extend_from_slice(extra);
    Served::start(&env)
}

/// Every stored session is whole: its rows match its record and the uploaded file.
async fn assert_whole(base: &str, expected_entries: usize) -> usize {
    let client = reqwest::Client::new();
    let list: Value = client
        .get(format!("{base}/v1/sessions?limit=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sessions = list["sessions"].as_array().unwrap();
    for session in sessions {
        let id = session["id"].as_str().unwrap();
        let text = client
            .get(format!("{base}/v1/sessions/{id}/entries"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let stored = Session::parse(text.as_bytes(), ParseOptions::default())
            .expect("a stored session reads back");
        assert_eq!(
            stored.entries.len(),
            expected_entries,
            "a partial session survived the crash"
        );
        assert_eq!(session["entryCount"], expected_entries);
    }
    sessions.len()
}

async fn uploads_survive_kill_9(database_url: &str) {
    let template = Session::parse(
        &crate::fixture("before-compaction.jsonl"),
        ParseOptions::default(),
    )
    .unwrap();
    let body = synth::repeat_session(&template, 12 << 20);
    let expected = Session::parse(body.as_bytes(), ParseOptions::default())
        .unwrap()
        .entries
        .len();
    let mut survived = 0;
    // Kill at different moments: while the body arrives, while it is parsed, while rows go in.
    for delay_ms in [50, 300, 700, 1200, 2500] {
        let server = start(database_url, &[]);
        let (base, body) = (server.base.clone(), body.clone());
        let upload = tokio::spawn(async move {
            reqwest::Client::new()
                .post(format!("{base}/v1/sessions"))
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(body)
                .send()
                .await
                .map(|r| r.status())
        });
        tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        server.kill_9();
        let finished = upload.await.unwrap();
        let restarted = start(database_url, &[]);
        let count = assert_whole(&restarted.base, expected).await;
        if let Ok(status) = finished {
            // Acknowledged uploads must have survived.
            if status == reqwest::StatusCode::CREATED {
                assert!(count > survived, "an acknowledged upload was lost");
            }
        }
        survived = count;
        restarted.kill_9();
    }
}

async fn compaction_killed_mid_summary_stores_nothing(database_url: &str) {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai("## Goal\nlate").after(Duration::from_secs(30)),
    )
    .await;
    let upstream = format!("{}/v1", fake.url);
    let env = [
        ("COMPACTD_MODELS", "openai:slow"),
        ("COMPACTD_OPENAI_BASE_URL", upstream.as_str()),
        ("COMPACTD_EXTRACTIVE_FALLBACK", "false"),
    ];
    let server = start(database_url, &env);
    let client = reqwest::Client::new();
    let session: Value = client
        .post(format!("{}/v1/sessions", server.base))
        .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
        .body(crate::fixture("large-session.jsonl"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = session["id"].as_str().unwrap().to_owned();
    let before = client
        .get(format!("{}/v1/sessions/{id}/entries", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let base = server.base.clone();
    let compaction = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{base}/v1/sessions/{id}/compactions"))
            .json(&json!({}))
            .send()
            .await
    });
    while fake.received().is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill_9();
    assert!(
        compaction.await.unwrap().is_err(),
        "the connection died with the process"
    );
    let restarted = start(database_url, &env);
    let id = session["id"].as_str().unwrap();
    let after = client
        .get(format!("{}/v1/sessions/{id}/entries", restarted.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(after, before, "no compaction entry, nothing else changed");
    let history: Value = client
        .get(format!("{}/v1/sessions/{id}/compactions", restarted.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        history["compactions"],
        json!([]),
        "no compaction was recorded"
    );
    restarted.kill_9();
}

fn sqlite_url(name: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("compactd-crash-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("state.db").display());
    (dir, url)
}

/// A fresh database on the PostgreSQL server of `DATABASE_URL`.
pub async fn postgres_url(name: &str) -> String {
    use sqlx::Connection;
    let server = std::env::var("DATABASE_URL").expect("DATABASE_URL (scripts/test.sh sets it)");
    let database = format!("compactd_crash_{name}_{}", std::process::id());
    let mut connection = sqlx::PgConnection::connect(&server).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "drop database if exists {database}"
    )))
    .execute(&mut connection)
    .await
    .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("create database {database}")))
        .execute(&mut connection)
        .await
        .unwrap();
    let (base, _) = server.rsplit_once('/').unwrap();
    format!("{base}/{database}")
}

#[tokio::test]
async fn kill_9_during_uploads_leaves_whole_sessions_or_none_sqlite() {
    let (dir, url) = sqlite_url("upload");
    uploads_survive_kill_9(&url).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn kill_9_during_uploads_leaves_whole_sessions_or_none_postgres() {
    compactd_testkit::needs!(Postgres);
    uploads_survive_kill_9(&postgres_url("upload").await).await;
}

#[tokio::test]
async fn kill_9_during_a_compaction_stores_nothing_sqlite() {
    let (dir, url) = sqlite_url("compaction");
    compaction_killed_mid_summary_stores_nothing(&url).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn kill_9_during_a_compaction_stores_nothing_postgres() {
    compactd_testkit::needs!(Postgres);
    compaction_killed_mid_summary_stores_nothing(&postgres_url("compaction").await).await;
}
