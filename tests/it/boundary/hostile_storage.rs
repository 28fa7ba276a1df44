//! Storage on bad days: a locked SQLite database, a read-only PostgreSQL after a failover, a lock
//! held elsewhere and a read stuck behind one. Each is a 503 with Retry-After within a bounded
//! wait, never a 500, a hang or a half-written session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::{TestApp, config, secs};

/// A small valid session file.
const SMALL_SESSION: &str = concat!(
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#,
    "\n",
    r#"{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}"#,
    "\n"
);

#[track_caller]
fn expect_storage_unavailable(status: StatusCode, retry_after: Option<&str>, body: &Value) {
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], "storage_unavailable");
    assert!(
        retry_after.is_some_and(|s| s.parse::<u64>().is_ok()),
        "Retry-After"
    );
}

async fn upload(app: &TestApp) -> (StatusCode, Option<String>, Value) {
    let response = app.upload(SMALL_SESSION).await;
    let status = response.status();
    let retry = response
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, retry, response.json().await.unwrap())
}

#[tokio::test]
async fn a_locked_sqlite_database_answers_503_with_retry_after() {
    let dir = std::env::temp_dir().join(format!("compactd-locked-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("db.sqlite").display());
    let mut config = config();
    config.storage.database_url = Some(compactd::config::Secret::new(url.clone()));
    config.storage.db_acquire_timeout = secs(0.3);
    let app = TestApp::spawn(config).await;
    // Another writer holds the database's write lock ("database is locked" for everyone else).
    use sqlx::Connection;
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("begin immediate")
        .execute(&mut other)
        .await
        .unwrap();
    let (status, retry, body) = upload(&app).await;
    expect_storage_unavailable(status, retry.as_deref(), &body);
    sqlx::query("rollback").execute(&mut other).await.unwrap();
    assert_eq!(upload(&app).await.0, StatusCode::CREATED);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A store on the test's database with short storage timeouts.
async fn pg_store(pool: &sqlx::PgPool, statement_timeout: Duration) -> Arc<dyn Store> {
    compactd_store::PgStore::from_pool(pool.clone())
        .await
        .unwrap();
    let options = pool.connect_options().as_ref().clone();
    let config = compactd_store::StoreConfig {
        database_url: None,
        data_dir: std::env::temp_dir(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(1),
        statement_timeout,
        lock_timeout: Duration::from_secs(1),
    };
    Arc::new(
        compactd_store::PgStore::connect_with(options, &config)
            .await
            .unwrap(),
    )
}

compactd_testkit::postgres_test! {
    async fn a_read_only_postgres_after_a_failover_answers_503(pool: sqlx::PgPool) {
        let store = pg_store(&pool, Duration::from_secs(5)).await;
        let app = TestApp::with_store(config(), store).await;
        assert_eq!(upload(&app).await.0, StatusCode::CREATED);
        // The failover: the database turns read-only and every connection to it is dropped.
        let database = pool.connect_options().get_database().unwrap().to_owned();
        // The name is the one sqlx made for this test.
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "alter database \"{database}\" set default_transaction_read_only = on"
        )))
        .execute(&pool)
        .await
        .unwrap();
        sqlx::query(
            "select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = current_database() and pid <> pg_backend_pid()",
        )
        .execute(&pool)
        .await
        .unwrap();
        // Whether a request meets a dropped connection or a read-only one, it is a 503.
        for _ in 0..3 {
            let (status, retry, body) = upload(&app).await;
            expect_storage_unavailable(status, retry.as_deref(), &body);
        }
        // Reading still works.
        let listed = app.sessions().await;
        assert_eq!(listed.status(), StatusCode::OK);
    }
}

compactd_testkit::postgres_test! {
    async fn a_lock_held_elsewhere_costs_a_bounded_wait_and_a_503(pool: sqlx::PgPool) {
        let store = pg_store(&pool, Duration::from_millis(500)).await;
        let app = TestApp::with_store(config(), store).await;
        let mut holder = pool.begin().await.unwrap();
        sqlx::query("lock table sessions in access exclusive mode")
            .execute(&mut *holder)
            .await
            .unwrap();
        let started = Instant::now();
        let (status, retry, body) = upload(&app).await;
        expect_storage_unavailable(status, retry.as_deref(), &body);
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "answered after {:?}, not at the request timeout",
            started.elapsed()
        );
        holder.rollback().await.unwrap();
        assert_eq!(upload(&app).await.0, StatusCode::CREATED);
    }
}

compactd_testkit::postgres_test! {
    /// A read of a session whose rows are locked elsewhere (a migration, an operator's `lock
    /// table`) answers 503 with Retry-After after the lock timeout (a second), not after the
    /// statement timeout; NUL in a query parameter is a 400, not a database error.
    async fn a_locked_read_answers_503_within_the_lock_timeout(pool: sqlx::PgPool) {
        // A statement timeout far above the bound below: only the lock timeout can answer in time.
        let store = pg_store(&pool, Duration::from_secs(60)).await;
        let app = TestApp::with_store(config(), store).await;
        let (status, _, body) = upload(&app).await;
        assert_eq!(status, StatusCode::CREATED);
        let id = body["id"].as_str().unwrap().to_owned();
        let mut holder = pool.begin().await.unwrap();
        sqlx::query("lock table entries in access exclusive mode")
            .execute(&mut *holder)
            .await
            .unwrap();
        let asked = std::time::Instant::now();
        let read = tokio::time::timeout(
            Duration::from_secs(20),
            app.entries(&id),
        )
        .await
        .expect("the read waited for the statement timeout");
        eprintln!("answered in {:?}", asked.elapsed());
        let status = read.status();
        let retry = read
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_owned());
        let body: Value = read.json().await.unwrap();
        expect_storage_unavailable(status, retry.as_deref(), &body);
        holder.rollback().await.unwrap();
        assert_eq!(
            app.entries(&id)
                .await
                .status(),
            StatusCode::OK
        );
        for query in ["cursor=%00", "cursor=1.%00", "q=%00", "limit=1%00"] {
            let answer = app.get(&format!("/v1/sessions?{query}")).await;
            assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{query}");
            let body: Value = answer.json().await.unwrap();
            assert_eq!(body["error"]["code"], "invalid_query", "{query}");
        }
    }
}
