//! PostgreSQL, for deployments: several compactd replicas can share one database.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

pub struct PgStore {
    pool: PgPool,
    /// Every call finishes within this (see `StoreConfig::deadline`).
    deadline: Duration,
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
        let options = options
            .options([("statement_timeout", statement_timeout.as_str())])
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

super::sql::store_impl!(PgStore, sqlx::Postgres, "postgres");

/// Bytes of COPY data sent per message.
const COPY_CHUNK_BYTES: usize = 1 << 20;

/// Inserts `entries` with positions from `first_seq` through `COPY … FROM STDIN`: PostgreSQL's
/// bulk path, several times faster than multi-row inserts for the megabytes of an upload.
async fn insert_entries(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    session_id: &str,
    first_seq: i64,
    entries: &[crate::store::EntryRecord],
) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut copy = tx
        .copy_in_raw(
            "copy entries (session_id, seq, entry_id, parent_id, entry_type, raw) from stdin",
        )
        .await?;
    let mut buffer = String::with_capacity(COPY_CHUNK_BYTES + 64 * 1024);
    for (i, entry) in entries.iter().enumerate() {
        copy_field(&mut buffer, Some(session_id));
        buffer.push('\t');
        buffer.push_str(&(first_seq + i as i64).to_string());
        buffer.push('\t');
        copy_field(&mut buffer, Some(&entry.entry_id));
        buffer.push('\t');
        copy_field(&mut buffer, entry.parent_id.as_deref());
        buffer.push('\t');
        copy_field(&mut buffer, Some(&super::column_text(&entry.entry_type)));
        buffer.push('\t');
        copy_field(&mut buffer, Some(&entry.raw));
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
