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

mod access;
mod agent_player;
mod agent_scenario;
mod anytime_fold;
mod bad_input;
mod bad_input_requests;
mod binary;
mod boundary_cpu;
mod boundary_credentials;
mod boundary_ids;
mod boundary_recall;
mod boundary_recognition;
mod boundary_redaction;
mod boundary_replicas;
mod boundary_threads;
mod boundary_work;
mod browser;
mod browser_attacks;
mod calllog;
mod calls;
mod cli;
mod cli_handoff;
mod conformance;
mod connections;
mod console;
mod console_errors;
mod console_guard;
mod console_handoff;
mod console_page;
mod crash;
mod dialects;
mod docs;
mod extractive;
mod fidelity;
mod fixtures;
mod fork;
mod gateway;
mod gateway_agent;
mod gateway_hostile;
mod gateway_support;
mod handoff;
mod handoff_rules;
mod hostile;
mod hostile_storage;
mod javascript;
mod layers;
mod local_model;
mod long_history;
mod mcp_agents;
mod model_provider;
mod oh_my_pi;
mod ops;
mod ops_documented;
mod owned_pg;
mod pi15;
mod pi15_sessions;
mod pi_extension;
mod prepare;
mod prepare_spend;
mod provider_compaction;
mod races;
mod real_agents;
mod real_rules;
mod real_transcripts;
mod recall;
mod recall_clients;
mod recall_sessions;
mod recall_upgrade;
mod redaction;
mod redaction_paths;
mod rubric;
mod savings;
mod scale;
mod sdk_clients;
mod service;
mod service_resilience;
mod session_compactions;
mod session_rebuilds;
mod sessions;
mod shutdown;
mod standing_chain;
mod standing_gateway;
mod standing_rules;
mod streaming;
mod support;
mod threads;
mod typed;
mod upstream;

/// Bytes of a file in `tests/fixtures/` (real pi sessions, MIT; see the README there).
pub fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}
