//! PostgreSQL, for deployments: several compactd replicas can share one database.

use std::time::Duration;

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects (lazily: a database that is down at start-up is retried on use, and readiness
    /// says so) and applies the migrations in `migrations/postgres`.
    pub async fn connect(
        url: &str,
        max_connections: u32,
        acquire_timeout: Duration,
    ) -> anyhow::Result<PgStore> {
        let options: PgConnectOptions = url
            .parse::<PgConnectOptions>()
            .context("DATABASE_URL is not a valid PostgreSQL URL")?
            .log_statements(tracing::log::LevelFilter::Trace);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(acquire_timeout)
            .connect_with(options)
            .await
            .context("connecting to PostgreSQL")?;
        let store = PgStore { pool };
        store.migrate().await?;
        Ok(store)
    }

    /// A store on an existing pool (tests), migrated.
    pub async fn from_pool(pool: PgPool) -> anyhow::Result<PgStore> {
        let store = PgStore { pool };
        store.migrate().await?;
        Ok(store)
    }

    pub async fn migrate(&self) -> anyhow::Result<()> {
        sqlx::migrate!("./migrations/postgres")
            .run(&self.pool)
            .await
            .context("applying the PostgreSQL migrations")
    }
}

super::sql::store_impl!(PgStore, sqlx::Postgres, "postgres");
