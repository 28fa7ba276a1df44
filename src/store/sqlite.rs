//! SQLite, the embedded default: a file under the data directory, so that `cargo run` works on a
//! machine with nothing installed.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::Context;
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

pub struct SqliteStore {
    pool: SqlitePool,
    /// Every call finishes within this (see `StoreConfig::deadline`).
    deadline: Duration,
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
            .connect_with(options)
            .await
            .context("opening the SQLite database")?;
        let store = SqliteStore {
            pool,
            deadline: super::DEFAULT_DEADLINE,
        };
        sqlx::migrate!("./migrations/sqlite")
            .run(&store.pool)
            .await
            .context("applying the SQLite migrations")?;
        Ok(store)
    }

    /// Closes the pool: every later query fails as storage being unavailable (tests).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A store on an existing pool (tests), migrated.
    pub async fn from_pool(pool: SqlitePool) -> anyhow::Result<SqliteStore> {
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(SqliteStore {
            pool,
            deadline: super::DEFAULT_DEADLINE,
        })
    }

    /// The same store with another deadline for each call.
    pub fn with_deadline(self, deadline: Duration) -> SqliteStore {
        SqliteStore { deadline, ..self }
    }
}

super::sql::store_impl!(SqliteStore, sqlx::Sqlite, "sqlite");

/// Rows per multi-row insert: six parameters a row stays below SQLite's 32 766.
const INSERT_BATCH_ROWS: usize = 2000;

/// Inserts `entries` with positions from `first_seq`, in multi-row statements.
async fn insert_entries(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    session_id: &str,
    first_seq: i64,
    entries: &[crate::store::EntryRecord],
) -> Result<(), sqlx::Error> {
    for (batch_index, batch) in entries.chunks(INSERT_BATCH_ROWS).enumerate() {
        let offset = first_seq + (batch_index * INSERT_BATCH_ROWS) as i64;
        let mut query = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "insert into entries (session_id, seq, entry_id, parent_id, entry_type, raw) ",
        );
        query.push_values(batch.iter().enumerate(), |mut row, (i, entry)| {
            row.push_bind(session_id)
                .push_bind(offset + i as i64)
                .push_bind(&entry.entry_id)
                .push_bind(&entry.parent_id)
                .push_bind(super::column_text(&entry.entry_type).into_owned())
                .push_bind(&entry.raw);
        });
        query.build().execute(&mut **tx).await?;
    }
    Ok(())
}
