//! SQLite, the embedded default: a file under the data directory, so that `cargo run` works on a
//! machine with nothing installed.

use std::future::Future;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;

use super::backend::FullText;
use super::cache_keys::{self, CacheKeys};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub struct SqliteStore {
    pub(super) pool: SqlitePool,
    /// Every call finishes within this (see `StoreConfig::deadline`).
    pub(super) deadline: Duration,
    /// Taken by the writers behind the requests (call log, recall, shared cache): SQLite has one
    /// writer at a time, and writers that meet in the database wait in its busy handler, which
    /// sleeps in growing steps; queued here instead, each batch starts as the one before ends.
    writes: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// The summary cache's keys in the table: a miss is known without a query.
    cache_keys: std::sync::Arc<CacheKeys>,
}

impl SqliteStore {
    /// Opens (creating it if needed) the database file at `path` and applies the migrations.
    pub async fn open(path: &Path, busy_timeout: Duration) -> anyhow::Result<SqliteStore> {
        if let Some(dir) = path.parent() {
            super::ensure_dir(dir)?;
        }
        let options = SqliteConnectOptions::new().filename(path);
        Self::with_options(options, busy_timeout).await
    }

    /// Opens a `sqlite:` URL (`sqlite::memory:` in tests).
    pub async fn connect_url(url: &str, busy_timeout: Duration) -> anyhow::Result<SqliteStore> {
        let options = SqliteConnectOptions::from_str(url)
            .context("DATABASE_URL is not a valid sqlite: URL")?;
        Self::with_options(options, busy_timeout).await
    }

    async fn with_options(
        options: SqliteConnectOptions,
        busy_timeout: Duration,
    ) -> anyhow::Result<SqliteStore> {
        let in_memory = options.get_filename().as_os_str().is_empty()
            || options
                .get_filename()
                .to_string_lossy()
                .contains(":memory:");
        let options = options
            .create_if_missing(true)
            // WAL lets readers work while one writer commits; NORMAL sync is durable across
            // process crashes (the kill -9 case) and fast.
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(busy_timeout);
        // An in-memory database lives in one connection.
        let pool = SqlitePoolOptions::new()
            .max_connections(if in_memory { 1 } else { 8 })
            .acquire_timeout(busy_timeout)
            // A file on this machine: a connection does not go stale, and the ping sqlx sends
            // before handing one out is a round trip through its worker thread per query.
            .test_before_acquire(false)
            .connect_with(options)
            .await
            .context("opening the SQLite database")?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .context("applying the SQLite migrations")?;
        SqliteStore::on(pool).await
    }

    /// The store on a migrated pool, with the summary cache's keys read.
    async fn on(pool: SqlitePool) -> anyhow::Result<SqliteStore> {
        let limit = cache_keys::MAX_KEYS as i64 + 1;
        let rows: Vec<(String, i64)> = sqlx::query_as(
            "select cache_key, expires_at_ms from summary_cache where expires_at_ms > $1 limit $2",
        )
        .bind(super::now_ms())
        .bind(limit)
        .fetch_all(&pool)
        .await
        .context("reading the summary cache's keys")?;
        let cache_keys = match rows.len() as i64 {
            n if n < limit => CacheKeys::tracking(rows),
            _ => CacheKeys::default(),
        };
        Ok(SqliteStore {
            pool,
            deadline: super::DEFAULT_DEADLINE,
            writes: Default::default(),
            cache_keys: std::sync::Arc::new(cache_keys),
        })
    }

    /// Closes the pool: every later query fails as storage being unavailable (tests).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A store on an existing pool (tests), migrated.
    pub async fn from_pool(pool: SqlitePool) -> anyhow::Result<SqliteStore> {
        // The database in WAL mode, as `open` makes it (the mode is the file's, kept by every
        // connection): a test pool comes in rollback-journal mode, where readers and writers
        // lock each other out and a store behaves unlike the one users run.
        sqlx::query("pragma journal_mode = wal")
            .execute(&pool)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        SqliteStore::on(pool).await
    }

    /// The same store with another deadline for each call.
    pub fn with_deadline(self, deadline: Duration) -> SqliteStore {
        SqliteStore { deadline, ..self }
    }
}

/// Rows per multi-row insert: its parameters stay below SQLite's 32 766.
const INSERT_BATCH_ROWS: usize = 32_766 / super::entry_insert::ENTRY_PARAMETERS;

/// Inserts `entries` (positioned by their facts) in multi-row statements.
async fn insert_entries(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    session_id: &str,
    entries: &[crate::NewEntry],
) -> Result<(), sqlx::Error> {
    for batch in entries.chunks(INSERT_BATCH_ROWS) {
        let mut query = super::entry_insert::entries_insert::<sqlx::Sqlite>(session_id, batch);
        query.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// Writes facts derived for stored rows, one prepared update a row, in the caller's transaction.
async fn update_facts(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    session_id: &str,
    facts: &[crate::FactRecord],
) -> Result<(), sqlx::Error> {
    for f in facts {
        sqlx::query(
            "update entries set parent_seq = $1, role = $2, tokens = $3, usage_tokens = $4, ctx_usage = $5, \
             ctx_trailing = $6, first_kept_id = $7 where session_id = $8 and seq = $9",
        )
        .bind(f.parent_seq)
        .bind(f.role.as_deref().map(|r| super::column_text(r).into_owned()))
        .bind(f.tokens)
        .bind(f.usage_tokens)
        .bind(f.ctx_usage)
        .bind(f.ctx_trailing)
        .bind(f.first_kept_id.as_deref().map(|r| super::column_text(r).into_owned()))
        .bind(session_id)
        .bind(f.seq)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

impl super::backend::Backend for SqliteStore {
    type Db = sqlx::Sqlite;
    const NAME: &'static str = "sqlite";
    const RECALL_SEARCH: &'static str = super::recall::SQLITE_SEARCH;
    const FULL_TEXT: FullText = super::recall::FTS5_AFTER;

    fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A write transaction. `BEGIN IMMEDIATE` takes SQLite's write lock at once, waiting in the
    /// busy handler: a deferred transaction that read first and then writes would instead fail
    /// at once with SQLITE_BUSY when another writer committed in between (its snapshot is stale).
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }

    /// The turn of a batch writer (see `writes`).
    async fn batch_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        Some(self.writes.clone().lock_owned().await)
    }

    fn insert_entries(
        tx: &mut sqlx::Transaction<'static, Self::Db>,
        session_id: &str,
        entries: &[crate::NewEntry],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        insert_entries(tx, session_id, entries)
    }

    fn update_facts(
        tx: &mut sqlx::Transaction<'static, Self::Db>,
        session_id: &str,
        facts: &[crate::FactRecord],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send {
        update_facts(tx, session_id, facts)
    }

    /// Whether the summary cache table may hold `key` (see [`CacheKeys`]).
    fn may_hold_cached(&self, key: &str, now_ms: i64) -> bool {
        self.cache_keys.may_hold(key, now_ms)
    }

    /// Notes cached summaries written.
    fn note_cached(&self, rows: &[&super::CachedSummaryRow]) {
        self.cache_keys
            .add(rows.iter().map(|r| (r.key.as_str(), r.expires_at_ms)));
    }

    fn recall_terms(words: &[String]) -> String {
        super::recall::sqlite_terms(words)
    }
}
