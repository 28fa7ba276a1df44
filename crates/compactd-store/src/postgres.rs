//! PostgreSQL, for deployments: several compactd replicas can share one database.

use std::future::Future;
use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

use super::backend::FullText;

pub struct PgStore {
    pub(super) pool: PgPool,
    /// Every call finishes within this (see `StoreConfig::deadline`).
    pub(super) deadline: Duration,
}

impl PgStore {
    /// Connects (lazily: a database that is down at start-up is retried on use, and readiness
    /// says so) and applies the migrations in `migrations/postgres`. Every connection runs with
    /// the configured `statement_timeout`, so that a lock held elsewhere costs a request a bounded
    /// wait and a 503, not the whole request timeout.
    pub async fn connect(url: &str, config: &super::StoreConfig) -> anyhow::Result<PgStore> {
        let options = url
            .parse::<PgConnectOptions>()
            .context("DATABASE_URL is not a valid PostgreSQL URL")?;
        PgStore::connect_with(options, config).await
    }

    /// [`PgStore::connect`] with parsed options.
    pub async fn connect_with(
        options: PgConnectOptions,
        config: &super::StoreConfig,
    ) -> anyhow::Result<PgStore> {
        let statement_timeout = format!("{}ms", config.statement_timeout.as_millis().max(1));
        // A lock held elsewhere (a table locked by a migration, by hand, by a long transaction)
        // costs a read or a write this long, then a 503 with Retry-After.
        let lock_timeout = format!("{}ms", config.lock_timeout.as_millis().max(1));
        let options = options
            .options([
                ("statement_timeout", statement_timeout.as_str()),
                ("lock_timeout", lock_timeout.as_str()),
            ])
            .log_statements(tracing::log::LevelFilter::Trace);
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections)
            .acquire_timeout(config.acquire_timeout)
            .connect_with(options)
            .await
            .context("connecting to PostgreSQL")?;
        let store = PgStore {
            pool,
            deadline: config.deadline(),
        };
        store.migrate().await?;
        Ok(store)
    }

    /// A store on an existing pool (tests), migrated.
    pub async fn from_pool(pool: PgPool) -> anyhow::Result<PgStore> {
        let store = PgStore {
            pool,
            deadline: super::DEFAULT_DEADLINE,
        };
        store.migrate().await?;
        Ok(store)
    }

    /// The same store with another deadline for each call.
    pub fn with_deadline(self, deadline: Duration) -> PgStore {
        PgStore { deadline, ..self }
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await
            .context("applying the PostgreSQL migrations")
    }
}

/// Bytes of COPY data sent per message.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Below this many rows entries go in one `INSERT`. COPY costs a small append ~40 ms: sqlx
/// leaves Nagle's algorithm on, and COPY's last data message and `CopyDone` are two writes
/// before a read, so the second waits for the server's delayed ACK. One statement is one write.
const COPY_MIN_ROWS: usize = 64;

/// Inserts `entries` (positioned by their facts): through `COPY … FROM STDIN` for an upload,
/// PostgreSQL's bulk path, several times faster than inserts for megabytes; in one multi-row
/// `INSERT` for an append of a few.
async fn insert_entries(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    session_id: &str,
    entries: &[crate::NewEntry],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    if entries.len() < COPY_MIN_ROWS {
        let mut query = super::entry_insert::entries_insert::<sqlx::Postgres>(session_id, entries);
        query.build().execute(&mut **tx).await?;
        return Ok(());
    }
    let mut copy = tx
        .copy_in_raw(&format!(
            "copy entries ({}) from stdin",
            super::entry_insert::ENTRY_COLUMNS
        ))
        .await?;
    let mut buffer = String::with_capacity(COPY_CHUNK_BYTES + 64 * 1024);
    for entry in entries {
        let f = &entry.facts;
        copy_field(&mut buffer, Some(session_id));
        copy_number(&mut buffer, Some(f.seq));
        buffer.push('\t');
        copy_field(&mut buffer, Some(&f.entry_id));
        buffer.push('\t');
        copy_field(&mut buffer, entry.parent_id.as_deref());
        buffer.push('\t');
        copy_field(
            &mut buffer,
            Some(&super::column_text(f.entry_type.as_str())),
        );
        buffer.push('\t');
        copy_field(&mut buffer, Some(&entry.raw));
        copy_number(&mut buffer, f.parent_seq);
        buffer.push('\t');
        copy_field(
            &mut buffer,
            f.role.as_deref().map(super::column_text).as_deref(),
        );
        copy_number(&mut buffer, f.tokens);
        copy_float(&mut buffer, f.usage_tokens);
        copy_float(&mut buffer, f.ctx_usage);
        copy_number(&mut buffer, Some(f.ctx_trailing));
        buffer.push('\t');
        copy_field(
            &mut buffer,
            f.first_kept_id
                .as_deref()
                .map(super::column_text)
                .as_deref(),
        );
        buffer.push('\n');
        if buffer.len() >= COPY_CHUNK_BYTES {
            copy.send(buffer.as_bytes()).await?;
            buffer.clear();
        }
    }
    if !buffer.is_empty() {
        copy.send(buffer.as_bytes()).await?;
    }
    copy.finish().await?;
    Ok(())
}

/// Writes facts derived for stored rows, in one statement over arrays.
async fn update_facts(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    session_id: &str,
    facts: &[crate::FactRecord],
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "update entries as e set parent_seq = v.parent_seq, role = v.role, tokens = v.tokens, \
         usage_tokens = v.usage_tokens, ctx_usage = v.ctx_usage, ctx_trailing = v.ctx_trailing, \
         first_kept_id = v.first_kept_id \
         from unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::float8[], $7::float8[], \
                     $8::bigint[], $9::text[]) \
              as v(seq, parent_seq, role, tokens, usage_tokens, ctx_usage, ctx_trailing, first_kept_id) \
         where e.session_id = $1 and e.seq = v.seq",
    )
    .bind(session_id)
    .bind(facts.iter().map(|f| f.seq).collect::<Vec<_>>())
    .bind(facts.iter().map(|f| f.parent_seq).collect::<Vec<_>>())
    .bind(
        facts
            .iter()
            .map(|f| f.role.as_deref().map(|r| super::column_text(r).into_owned()))
            .collect::<Vec<_>>(),
    )
    .bind(facts.iter().map(|f| f.tokens).collect::<Vec<_>>())
    .bind(facts.iter().map(|f| f.usage_tokens).collect::<Vec<_>>())
    .bind(facts.iter().map(|f| f.ctx_usage).collect::<Vec<_>>())
    .bind(facts.iter().map(|f| f.ctx_trailing).collect::<Vec<_>>())
    .bind(
        facts
            .iter()
            .map(|f| f.first_kept_id.as_deref().map(|r| super::column_text(r).into_owned()))
            .collect::<Vec<_>>(),
    )
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// A tab, then a number field of COPY's text format (`\N` for NULL).
fn copy_number(out: &mut String, value: Option<i64>) {
    use std::fmt::Write;
    out.push('\t');
    match value {
        Some(v) => {
            let _ = write!(out, "{v}");
        }
        None => out.push_str("\\N"),
    }
}

/// A tab, then a float field; Rust prints the shortest text that reads back as the same double.
fn copy_float(out: &mut String, value: Option<f64>) {
    use std::fmt::Write;
    out.push('\t');
    match value {
        Some(v) if v.is_finite() => {
            let _ = write!(out, "{v:?}");
        }
        Some(v) if v.is_nan() => out.push_str("NaN"),
        Some(v) if v > 0.0 => out.push_str("Infinity"),
        Some(_) => out.push_str("-Infinity"),
        None => out.push_str("\\N"),
    }
}

/// A field of COPY's text format: `\N` for NULL; backslash, tab, newline and carriage return
/// escaped.
fn copy_field(out: &mut String, value: Option<&str>) {
    let Some(value) = value else {
        out.push_str("\\N");
        return;
    };
    let mut start = 0;
    for (i, byte) in value.bytes().enumerate() {
        let escape = match byte {
            b'\\' => "\\\\",
            b'\t' => "\\t",
            b'\n' => "\\n",
            b'\r' => "\\r",
            _ => continue,
        };
        out.push_str(&value[start..i]);
        out.push_str(escape);
        start = i + 1;
    }
    out.push_str(&value[start..]);
}

impl super::backend::Backend for PgStore {
    type Db = sqlx::Postgres;
    const NAME: &'static str = "postgres";
    const RECALL_SEARCH: &'static str = super::recall::PG_SEARCH;
    const FULL_TEXT: FullText = FullText::Indexed;

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    fn deadline(&self) -> Duration {
        self.deadline
    }

    /// A write transaction (PostgreSQL locks rows as statements reach them).
    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Postgres>, sqlx::Error> {
        self.pool.begin().await
    }

    /// PostgreSQL takes concurrent writers: a batch writer needs no turn.
    async fn batch_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        None
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

    /// Replicas share the database and write to it unseen: any key may be there.
    fn may_hold_cached(&self, _key: &str, _now_ms: i64) -> bool {
        true
    }

    fn note_cached(&self, _rows: &[&super::CachedSummaryRow]) {}

    fn recall_terms(words: &[String]) -> String {
        super::recall::pg_terms(words)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn copy_fields_escape_what_the_text_format_needs() {
        let mut out = String::new();
        super::copy_field(&mut out, Some("a\\b\tc\nd\re\"f"));
        assert_eq!(out, "a\\\\b\\tc\\nd\\re\"f");
        out.clear();
        super::copy_field(&mut out, None);
        assert_eq!(out, "\\N");
    }
}
