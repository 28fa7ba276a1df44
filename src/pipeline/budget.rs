//! Daily upstream token budgets per tenant, a stage before the chain: once a tenant's calls of
//! the current UTC day have used its budget (input plus output tokens of model calls, as the call
//! log records them; cache hits and the extractive summarizer cost nothing), its summaries come
//! from the extractive summarizer — the agent is never left without one — and say so.
//!
//! Concurrent calls cannot all slip under the line: a call **reserves** its estimated cost (the
//! prompt's tokens plus its output cap) before it reaches a model and holds it until its call-log
//! row is queued, and what a tenant has used counts the store's rows, the rows the call log has
//! not written yet, and the reservations in flight. So a budget is exceeded by at most one
//! call's estimate.
//!
//! When the store cannot say what was used, `COMPACTD_BUDGET_WHEN_STORE_DOWN` decides: `open`
//! (the default: summaries keep their model, the budget is not enforced meanwhile) or `closed`
//! (the extractive summarizer answers); either way `compactd_budget_unchecked_total` counts it
//! and a warning is logged at most once a minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::WhenStoreDown;
use crate::log_throttle::Throttle;
use crate::metrics::Metrics;
use crate::pipeline::calllog::CallLog;
use compactd_store::{Store, now_ms};

/// How long a tenant's budget setting is remembered before it is read again (a change made with
/// `compactd keys budget` applies within this time).
const SETTING_TTL: Duration = Duration::from_secs(10);

const DAY_MS: i64 = 24 * 60 * 60 * 1000;

/// The start of the current UTC day, where a daily budget starts over.
pub(crate) fn day_start_ms() -> i64 {
    let now = now_ms();
    now - now.rem_euclid(DAY_MS)
}

/// What the budget says of a call.
#[derive(Debug)]
pub(crate) enum Decision {
    /// No budget, or within it: go ahead (holding the reservation, if any, until the call is
    /// logged).
    Go(Option<Reservation>),
    /// Spent: the extractive summarizer answers.
    Spent,
}

/// Tokens reserved for a call in flight; released when dropped.
#[derive(Debug)]
pub(crate) struct Reservation {
    in_flight: Arc<InFlight>,
    tenant: String,
    tokens: i64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.in_flight.add(&self.tenant, -self.tokens);
    }
}

/// Reservations in flight, per tenant.
#[derive(Debug, Default)]
struct InFlight(Mutex<HashMap<String, i64>>);

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, i64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, tenant: &str, tokens: i64) {
        let mut reserved = self.lock();
        let left = reserved.entry(tenant.to_owned()).or_default();
        *left += tokens;
        if *left <= 0 {
            reserved.remove(tenant);
        }
    }
}

#[derive(Clone)]
pub struct Budgets {
    store: Arc<dyn Store>,
    settings: moka::future::Cache<String, Option<i64>>,
    calls: CallLog,
    in_flight: Arc<InFlight>,
    when_down: WhenStoreDown,
    metrics: Arc<Metrics>,
    unchecked: Arc<Throttle>,
}

impl std::fmt::Debug for Budgets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Budgets")
            .field("when_down", &self.when_down)
            .finish_non_exhaustive()
    }
}

impl Budgets {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        calls: CallLog,
        when_down: WhenStoreDown,
        metrics: Arc<Metrics>,
    ) -> Budgets {
        Budgets {
            store,
            settings: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(SETTING_TTL)
                .build(),
            calls,
            in_flight: Arc::default(),
            when_down,
            metrics,
            unchecked: Arc::new(Throttle::new()),
        }
    }

    /// Whether `tenant` may make a call estimated at `estimate` tokens; reserves them if so.
    pub(crate) async fn reserve(&self, tenant: &str, estimate: u64) -> Decision {
        let store = self.store.clone();
        let owned = tenant.to_owned();
        let setting = self
            .settings
            .try_get_with(tenant.to_owned(), async move { store.budget(&owned).await })
            .await;
        let daily = match setting {
            Ok(Some(daily)) => daily,
            Ok(None) => return Decision::Go(None),
            Err(error) => return self.store_down(&error.to_string()),
        };
        let stored = match self
            .store
            .upstream_tokens_since(tenant, day_start_ms())
            .await
        {
            Ok(used) => used,
            Err(error) => return self.store_down(&error.to_string()),
        };
        // The check and the reservation under one lock: concurrent calls see each other.
        let mut reserved = self.in_flight.lock();
        let in_flight = reserved.get(tenant).copied().unwrap_or(0);
        let used = stored + self.calls.unwritten_tokens(tenant) + in_flight;
        if used >= daily {
            return Decision::Spent;
        }
        let tokens = estimate.min(i64::MAX as u64) as i64;
        *reserved.entry(tenant.to_owned()).or_default() += tokens;
        drop(reserved);
        Decision::Go(Some(Reservation {
            in_flight: self.in_flight.clone(),
            tenant: tenant.to_owned(),
            tokens,
        }))
    }

    /// Whether `tenant` has used less than `share` of its daily budget (always, without one):
    /// what work done ahead of a request may spend. `false` when the store cannot say.
    pub(crate) async fn under_share(&self, tenant: &str, share: f64) -> bool {
        let store = self.store.clone();
        let owned = tenant.to_owned();
        let setting = self
            .settings
            .try_get_with(tenant.to_owned(), async move { store.budget(&owned).await })
            .await;
        let daily = match setting {
            Ok(Some(daily)) => daily,
            Ok(None) => return true,
            Err(_) => return false,
        };
        match self
            .store
            .upstream_tokens_since(tenant, day_start_ms())
            .await
        {
            Ok(used) => {
                ((used + self.calls.unwritten_tokens(tenant)) as f64) < daily as f64 * share
            }
            Err(_) => false,
        }
    }

    fn store_down(&self, error: &str) -> Decision {
        self.metrics.budget_unchecked.inc();
        if let Some(n) = self.unchecked.hit() {
            tracing::warn!(
                error,
                checks = n,
                when_down = ?self.when_down,
                "budgets not checked: the store did not answer (COMPACTD_BUDGET_WHEN_STORE_DOWN)"
            );
        }
        match self.when_down {
            WhenStoreDown::Open => Decision::Go(None),
            WhenStoreDown::Closed => Decision::Spent,
        }
    }
}
