//! Durable state: sessions, their entries (raw JSON lines, exactly as uploaded), the compaction
//! entries compactd wrote, and a log of summarization calls.
//!
//! Two backends through sqlx: PostgreSQL for deployments (`DATABASE_URL=postgres://…`) and SQLite
//! as the embedded default. They share their queries (see `sql.rs`); only connecting, migrating
//! and error details differ.

mod backend;
pub mod behind;
mod cache_keys;
mod entry_insert;
pub mod ledger;
pub mod pins;
mod postgres;
pub mod prepared;
pub mod recall;
mod records;
mod sql;
mod sqlite;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use ledger::{CachedSummaryRow, Ledger};
pub use pins::Pins;
pub use postgres::PgStore;
pub use prepared::{Prepared, PreparedRow};
pub use recall::{NewRecall, Recall, RecallHit, RecallQuery, RecallTurn};
pub use records::{
    Append, CallRecord, CompactionRecord, EntryRecord, FactRecord, KeyRecord, NewEntry, PinAdded,
    PinRecord, SessionRecord,
};
pub use sqlite::SqliteStore;

/// Why a storage operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot serve now (connection refused, pool timed out, locked, read-only
    /// after a failover, statement timeout): retry later.
    #[error("storage is unavailable")]
    Unavailable(#[source] sqlx::Error),
    /// The database did not answer within the storage deadline (a lock held elsewhere, a network
    /// partition).
    #[error("storage did not answer within {0:?}")]
    TimedOut(Duration),
    /// The session changed since it was read.
    #[error("the session changed while this request was being handled")]
    Changed,
    /// A uniqueness rule was broken (named by its constraint).
    #[error("conflict with stored data ({0})")]
    Conflict(String),
    #[error("storage error")]
    Other(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        match &error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_) => StoreError::Unavailable(error),
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(db.constraint().unwrap_or("unique").to_owned())
            }
            // Connections dropped by a stopping server surface as protocol errors or a
            // "connection" message; treat them as unavailability, not as bugs.
            sqlx::Error::Protocol(_) | sqlx::Error::WorkerCrashed => StoreError::Unavailable(error),
            sqlx::Error::Database(db) if db.code().is_some_and(|c| is_transient(&c)) => {
                StoreError::Unavailable(error)
            }
            _ => StoreError::Other(error),
        }
    }
}

/// Whether a database error code says "not now" rather than "never": the request may succeed
/// when retried, so the client gets 503 with Retry-After instead of 500.
fn is_transient(code: &str) -> bool {
    // SQLite reports its (extended) result code as a number: BUSY (5) and LOCKED (6) with their
    // extended forms ("database is locked" under concurrent writers), READONLY (8), IOERR (10),
    // FULL (13), CANTOPEN (14).
    // (SQLSTATEs are always five characters; SQLite's codes have at most four digits.)
    if code.len() < 5
        && let Ok(code) = code.parse::<u32>()
    {
        return matches!(code & 0xff, 5 | 6 | 8 | 10 | 13 | 14);
    }
    // PostgreSQL SQLSTATEs: connection exceptions (08…), serialization failures and deadlocks
    // (40001, 40P01), insufficient resources (53…), the server shutting down or starting (57P…),
    // statement timeout and cancellation (57014), lock not available and object in use
    // (55P03, 55006, 55000), a read-only transaction after a failover (25006), system errors
    // (58…).
    code.starts_with("08")
        || code.starts_with("53")
        || code.starts_with("57P")
        || code.starts_with("58")
        || matches!(
            code,
            "40001" | "40P01" | "57014" | "55000" | "55006" | "55P03" | "25006"
        )
}

/// `items` in chunks of 500, 100, 20, 5 and 1 (largest first): a multi-row statement per chunk
/// size, so a batch of any length needs at most five distinct statements.
pub(crate) fn fixed_chunks<T>(items: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = items;
    std::iter::from_fn(move || {
        let size = [500, 100, 20, 5, 1]
            .into_iter()
            .find(|&n| rest.len() >= n)?;
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        Some(chunk)
    })
}

/// Text for a column derived from client data: PostgreSQL text cannot hold NUL, and both backends
/// must store the same thing, so NUL becomes U+FFFD. (Raw JSON lines never hold a raw NUL: JSON
/// writes it as the escape `\u0000`.)
pub(crate) fn column_text(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// The LIKE pattern of a search text: lowercased, with `\`, `%` and `_` escaped by `\`.
pub(crate) fn like_pattern(search: &str) -> String {
    let mut pattern = String::with_capacity(search.len());
    for c in search.to_lowercase().chars() {
        if matches!(c, '\\' | '%' | '_') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern
}

/// The storage interface the HTTP layer uses.
#[async_trait::async_trait]
pub trait Store:
    ledger::Ledger + pins::Pins + recall::Recall + prepared::Prepared + Send + Sync + 'static
{
    /// `postgres` or `sqlite`.
    fn backend(&self) -> &'static str;
    /// Whether the database answers and its migrations are applied.
    async fn ready(&self) -> Result<(), StoreError>;
    /// Stores a new session and all its entries, in one transaction.
    async fn insert_session(
        &self,
        session: &SessionRecord,
        entries: &[NewEntry],
    ) -> Result<(), StoreError>;
    /// A tenant's sessions, oldest first, after the `(created_at_ms, session_id)` cursor; with a
    /// `search`, only those whose id starts with it or whose header (cwd) holds it, ignoring
    /// ASCII case.
    async fn list_sessions(
        &self,
        tenant: &str,
        limit: i64,
        after: Option<(i64, String)>,
        search: Option<&str>,
    ) -> Result<Vec<SessionRecord>, StoreError>;
    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Deletes a session with its entries and compactions; `false` when there was none.
    async fn delete_session(&self, session_id: &str) -> Result<bool, StoreError>;
    /// The entries of a session in file order.
    async fn entries(&self, session_id: &str) -> Result<Vec<EntryRecord>, StoreError>;
    /// The facts of a session's entries from position `from_seq` on, in file order.
    async fn entry_facts(
        &self,
        session_id: &str,
        from_seq: i64,
    ) -> Result<Vec<FactRecord>, StoreError>;
    /// The raw lines at positions `from_seq..=to_seq`, with their positions.
    async fn entry_lines(
        &self,
        session_id: &str,
        from_seq: i64,
        to_seq: i64,
    ) -> Result<Vec<(i64, String)>, StoreError>;
    /// Writes facts derived for rows stored before they existed and marks the session as
    /// holding `version`; a no-op when another writer got there first.
    async fn write_facts(
        &self,
        session_id: &str,
        facts: &[FactRecord],
        version: i64,
    ) -> Result<(), StoreError>;
    /// Up to `limit` sessions whose facts are older than `version`.
    async fn stale_sessions(&self, version: i64, limit: i64) -> Result<Vec<String>, StoreError>;
    /// Appends entries (and a compaction record) in one transaction, if the session still has
    /// `expected_entry_count` entries.
    async fn append(
        &self,
        session_id: &str,
        append: &Append,
        now_ms: i64,
    ) -> Result<(), StoreError>;
    /// The raw lines at these positions (those that exist), with their positions; ascending when
    /// the positions are.
    async fn lines_at(
        &self,
        session_id: &str,
        seqs: &[i64],
    ) -> Result<Vec<(i64, String)>, StoreError>;
    /// compactd's records of these compaction entries (those it wrote; at most a page of them).
    async fn compactions_of(
        &self,
        session_id: &str,
        entry_ids: &[String],
    ) -> Result<Vec<CompactionRecord>, StoreError>;
    /// The compactions compactd wrote for a session, oldest first.
    async fn compactions(&self, session_id: &str) -> Result<Vec<CompactionRecord>, StoreError>;
    /// The entry of the first compaction compactd made from `leaf_id`, if any: what a request
    /// that lost a race to compact the same leaf answers with, without reading the session.
    async fn compaction_from(
        &self,
        session_id: &str,
        leaf_id: &str,
    ) -> Result<Option<EntryRecord>, StoreError>;
}

/// Storage settings.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `postgres://…` for PostgreSQL; `None` for SQLite in `data_dir`.
    pub database_url: Option<String>,
    pub data_dir: std::path::PathBuf,
    pub max_connections: u32,
    /// How long a call waits for a connection (and, on SQLite, for a lock).
    pub acquire_timeout: Duration,
    /// Longest a statement may run (PostgreSQL's `statement_timeout`).
    pub statement_timeout: Duration,
    /// Longest a statement may wait for a lock (PostgreSQL's `lock_timeout`).
    pub lock_timeout: Duration,
}

impl StoreConfig {
    /// Every storage call finishes within this: a wait for a connection, a statement, and a
    /// margin. It bounds what no server-side timeout can, such as a partitioned network.
    pub fn deadline(&self) -> Duration {
        self.acquire_timeout + self.statement_timeout + Duration::from_secs(2)
    }
}

/// The deadline of stores made for tests and tools without a configuration.
const DEFAULT_DEADLINE: Duration = Duration::from_secs(30);

/// Runs one storage call within `deadline`.
pub(crate) async fn within<T>(
    deadline: Duration,
    work: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    tokio::time::timeout(deadline, work)
        .await
        .unwrap_or(Err(StoreError::TimedOut(deadline)))
}

/// Connects to the configured backend and applies its migrations.
pub async fn connect(config: &StoreConfig) -> anyhow::Result<Arc<dyn Store>> {
    match &config.database_url {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Ok(Arc::new(PgStore::connect(url, config).await?))
        }
        Some(url) if url.starts_with("sqlite:") => Ok(Arc::new(
            SqliteStore::connect_url(url, config.acquire_timeout)
                .await?
                .with_deadline(config.deadline()),
        )),
        Some(url) => anyhow::bail!(
            "DATABASE_URL must start with postgres://, postgresql:// or sqlite:, not {:?}",
            url.split("://").next().unwrap_or_default()
        ),
        None => Ok(Arc::new(
            SqliteStore::open(&config.data_dir.join("compactd.db"), config.acquire_timeout)
                .await?
                .with_deadline(config.deadline()),
        )),
    }
}

/// Creates `dir` if needed (for the SQLite file).
fn ensure_dir(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create data directory {}: {e}", dir.display()))
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fault_tests {
    use super::*;

    #[test]
    fn transient_database_errors_are_told_from_bugs() {
        for code in [
            "5", "517", "6", "262", "57014", "25006", "08006", "55P03", "40001", "53300",
        ] {
            assert!(is_transient(code), "{code}");
        }
        for code in ["1", "19", "2067", "23505", "42P01", "22021", "42703"] {
            assert!(!is_transient(code), "{code}");
        }
    }

    #[tokio::test]
    async fn a_call_that_never_answers_ends_at_the_deadline() {
        let deadline = Duration::from_millis(50);
        let result: Result<(), StoreError> = within(deadline, std::future::pending()).await;
        assert!(matches!(result, Err(StoreError::TimedOut(d)) if d == deadline));
    }
}
