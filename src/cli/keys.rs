//! `compactd keys`: create, list and revoke API keys, and set tenants' daily budgets, on the
//! store the service uses.

use std::io::Write;

use clap::{Args, Subcommand};

use super::{CliError, invalid, runtime, write_json};
use crate::config::StorageConfig;

#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    pub action: KeysAction,
    /// Database settings (the same as `compactd serve`'s).
    #[command(flatten)]
    pub storage: StorageConfig,
}

#[derive(Debug, Subcommand)]
pub enum KeysAction {
    /// Create a key for a tenant; the key is printed once and only its hash is stored.
    Create {
        /// The tenant the key's sessions belong to.
        #[arg(long)]
        tenant: String,
        /// A label for the key (who or what uses it).
        #[arg(long)]
        name: Option<String>,
    },
    /// List keys (ids, tenants, names, dates; never the keys).
    List,
    /// Revoke a key by its id.
    Revoke { key_id: String },
    /// Show or set a tenant's daily upstream token budget (input plus output tokens of model
    /// calls per UTC day); past it, its summaries come from the extractive summarizer.
    Budget {
        /// The tenant.
        tenant: String,
        /// Tokens per day.
        #[arg(long, conflicts_with = "clear")]
        daily_tokens: Option<std::num::NonZeroU64>,
        /// Remove the budget.
        #[arg(long)]
        clear: bool,
    },
}

/// `compactd keys create|list|revoke|budget`.
pub(super) fn run(args: KeysArgs, out: &mut impl Write) -> Result<(), CliError> {
    use compactd_store::now_ms;
    args.storage.validate().map_err(invalid)?;
    let failed = |e: compactd_store::StoreError| CliError(format!("storage error: {e}"));
    let runtime = runtime()?;
    let store = runtime
        .block_on(compactd_store::connect(&crate::app::store_config(
            &args.storage,
        )))
        .map_err(|e| CliError(format!("{e:#}")))?;
    let value = match args.action {
        KeysAction::Create { tenant, name } => {
            if tenant.trim().is_empty() {
                return Err(CliError("--tenant must not be empty".into()));
            }
            let (text, record) = crate::access::new_key(&tenant, name.as_deref(), now_ms());
            runtime
                .block_on(store.create_key(&record))
                .map_err(failed)?;
            eprintln!("Store the key now: only its hash is kept, it cannot be shown again.");
            serde_json::json!({"key": text, "keyId": record.key_id, "tenant": record.tenant, "name": record.name})
        }
        KeysAction::List => {
            let keys = runtime.block_on(store.list_keys()).map_err(failed)?;
            serde_json::Value::Array(
                keys.iter()
                    .map(|k| {
                        serde_json::json!({
                            "keyId": k.key_id, "tenant": k.tenant, "name": k.name,
                            "createdAt": compactd_core::session::time::epoch_ms_to_iso(k.created_at_ms),
                            "revokedAt": k.revoked_at_ms.map(compactd_core::session::time::epoch_ms_to_iso),
                        })
                    })
                    .collect(),
            )
        }
        KeysAction::Revoke { key_id } => {
            if !runtime
                .block_on(store.revoke_key(&key_id, now_ms()))
                .map_err(failed)?
            {
                return Err(CliError(format!("no active key with id {key_id:?}")));
            }
            serde_json::json!({"revoked": key_id})
        }
        KeysAction::Budget {
            tenant,
            daily_tokens,
            clear,
        } => {
            if clear || daily_tokens.is_some() {
                let tokens = daily_tokens.map(|n| i64::try_from(n.get()).unwrap_or(i64::MAX));
                runtime
                    .block_on(store.set_budget(&tenant, tokens, now_ms()))
                    .map_err(failed)?;
            }
            let day_start = crate::pipeline::budget::day_start_ms();
            let budget = runtime.block_on(store.budget(&tenant)).map_err(failed)?;
            let used = runtime
                .block_on(store.upstream_tokens_since(&tenant, day_start))
                .map_err(failed)?;
            serde_json::json!({"tenant": tenant, "dailyTokens": budget, "usedToday": used})
        }
    };
    write_json(out, &value)
}
