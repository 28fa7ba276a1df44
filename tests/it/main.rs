//! Integration tests: one binary, one module per area.

// Helpers are `pub` for the modules of this test binary; nothing here is a library API.
#![allow(unreachable_pub)]

/// Runs each test body once per storage backend: on a fresh PostgreSQL database (as
/// `#[sqlx::test]` makes one, from `DATABASE_URL`; skipped without it, see
/// `compactd::test_tiers`) and on a fresh SQLite database.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            compactd_testkit::postgres_test! {
                async fn postgres(pool: sqlx::PgPool) {
                    let store = compactd_store::PgStore::from_pool(pool).await.unwrap();
                    super::$name(std::sync::Arc::new(store)).await
                }
            }
            #[sqlx::test(migrations = false)]
            async fn sqlite(pool: sqlx::SqlitePool) {
                let store = compactd_store::SqliteStore::from_pool(pool).await.unwrap();
                super::$name(std::sync::Arc::new(store)).await
            }
        }
    )*};
}

mod agents;
mod boundary;
mod console;
mod gateway;
mod recall;
mod service;
mod sessions;
mod summaries;
mod support;
mod threads;

/// Bytes of a file in `tests/fixtures/` (real pi sessions, MIT; see the README there).
pub fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
