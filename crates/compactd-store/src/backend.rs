//! What the queries written once for both backends need of a backend: its pool and deadline, how
//! it begins a write and takes a writer's turn, and the few statements that differ (the bulk
//! insert of entries, the update of their facts, the full-text search). The storage traits are
//! implemented once, generically, for every [`Backend`] whose database takes the values their
//! queries bind and read (the `where` clause of each implementation names them).

use std::future::Future;
use std::time::Duration;

use sqlx::{Database, Pool, Transaction};

use crate::{CachedSummaryRow, FactRecord, NewEntry};

/// A backend: a pool of one database, and its ways.
pub trait Backend: Send + Sync + 'static {
    type Db: Database<QueryResult: RowsAffected>;
    /// Its name in logs and `/health`.
    const NAME: &'static str;
    /// Its recall search statement (see `recall.rs`), the terms it takes written by
    /// [`Backend::recall_terms`].
    const RECALL_SEARCH: &'static str;
    /// How its full-text index learns of the turns a save added.
    const FULL_TEXT: FullText;

    fn pool(&self) -> &Pool<Self::Db>;
    /// Every call finishes within this (see `StoreConfig::deadline`).
    fn deadline(&self) -> Duration;
    /// A write transaction, as this backend takes its write locks.
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, sqlx::Error>> + Send;
    /// The turn of a batch writer: `None` where writers need none.
    fn batch_turn(&self) -> impl Future<Output = Option<tokio::sync::OwnedMutexGuard<()>>> + Send;
    /// Inserts `entries` (positioned by their facts) in the caller's transaction.
    fn insert_entries(
        tx: &mut Transaction<'static, Self::Db>,
        session_id: &str,
        entries: &[NewEntry],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Writes facts derived for stored rows in the caller's transaction.
    fn update_facts(
        tx: &mut Transaction<'static, Self::Db>,
        session_id: &str,
        facts: &[FactRecord],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send;
    /// Whether the summary cache table may hold `key` (a miss known without a query).
    fn may_hold_cached(&self, key: &str, now_ms: i64) -> bool;
    /// Notes cached summaries written.
    fn note_cached(&self, rows: &[&CachedSummaryRow]);
    /// The recall search's terms in this backend's full-text syntax.
    fn recall_terms(words: &[String]) -> String;
}

/// How many rows a statement changed, whichever backend ran it.
pub trait RowsAffected {
    fn rows_affected(&self) -> u64;
}

impl RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        sqlx::postgres::PgQueryResult::rows_affected(self)
    }
}

impl RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        sqlx::sqlite::SqliteQueryResult::rows_affected(self)
    }
}

/// How a store's full-text index learns of the turns a save added.
pub enum FullText {
    /// By itself, as the rows are written (PostgreSQL's generated `tsvector` column).
    Indexed,
    /// By one statement (`index`, given the last turn's rowid before the save, read by `last`)
    /// after all of them. SQLite's FTS5 writes a new index segment at the end of each statement
    /// that fed it, so the turns of a whole batch go in at once: one segment per batch rather
    /// than one per multi-row insert (which a trigger gave), each merged again later.
    After {
        last: &'static str,
        index: &'static str,
    },
}
