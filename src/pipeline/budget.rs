//! Daily upstream token budgets per tenant, a stage before the chain: once a tenant's calls of
//! the current UTC day have used its budget (input plus output tokens of model calls, as the call
//! log records them; cache hits and the extractive summarizer cost nothing), its summaries come
//! from the extractive summarizer — the agent is never left without one — and say so.

use std::sync::Arc;
use std::time::Duration;

use crate::store::{Store, now_ms};

/// How long a tenant's budget setting is remembered before it is read again (a change made with
/// `compactd keys budget` applies within this time).
const SETTING_TTL: Duration = Duration::from_secs(10);

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The start of the current UTC day, where a daily budget starts over.
pub fn day_start_ms() -> i64 {
    let now = now_ms();
    now - now.rem_euclid(DAY_MS)
}

#[derive(Clone)]
pub struct Budgets {
    store: Arc<dyn Store>,
    settings: moka::future::Cache<String, Option<i64>>,
}

impl std::fmt::Debug for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgets").finish_non_exhaustive()
    }
}

impl Budgets {
    pub fn new(store: Arc<dyn Store>) -> Budgets {
        Budgets {
            store,
            settings: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(SETTING_TTL)
                .build(),
        }
    }

    /// Whether `tenant` has spent its budget today. Store trouble does not take summaries away:
    /// the budget is then not enforced for this call.
    pub async fn exhausted(&self, tenant: &str) -> bool {
        let store = self.store.clone();
        let owned = tenant.to_owned();
        let setting = self
            .settings
            .try_get_with(tenant.to_owned(), async move { store.budget(&owned).await })
            .await;
        let daily = match setting {
            Ok(Some(daily)) => daily,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(error = %error, "budget not checked: the store did not answer");
                return false;
            }
        };
        match self
            .store
            .upstream_tokens_since(tenant, day_start_ms())
            .await
        {
            Ok(used) => used >= daily,
            Err(error) => {
                tracing::warn!(error = %error, "budget not checked: the store did not answer");
                false
            }
        }
    }
}
