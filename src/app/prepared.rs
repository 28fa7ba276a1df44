//! Summaries prepared ahead of an agent session's compaction (issue 67): kept in the store, where
//! every replica finds them, one a session; what the gateway's preparer reads and writes.

use compactd_store::PreparedRow;

use crate::access::Identity;
use crate::app::App;
use crate::log_throttle::Throttle;

/// The store's trouble with prepared summaries: met on every turn past the share while the store
/// is down, so logged once a minute, with how often it happened meanwhile.
static TROUBLE: Throttle = Throttle::new();

fn trouble(error: &compactd_store::StoreError, doing: &str) {
    if let Some(times) = TROUBLE.hit() {
        tracing::warn!(%error, times, "prepare: the store could not {doing}");
    }
}

/// The share of a tenant's daily budget past which nothing is prepared ahead: the rest is kept
/// for the compactions the agents ask for.
const BUDGET_SHARE: f64 = 0.5;

impl App {
    /// `who`'s prepared summary of agent session `session`, if one is kept; `None` also when the
    /// store cannot say (the compaction then takes the normal path).
    pub(crate) async fn prepared(&self, who: &Identity, session: &str) -> Option<PreparedRow> {
        match self
            .store
            .prepared(&who.tenant, session, compactd_store::now_ms())
            .await
        {
            Ok(row) => row,
            Err(error) => {
                trouble(&error, "read a prepared summary");
                None
            }
        }
    }

    /// `who`'s newest prepared summary of a conversation that opens as `opening` does (see
    /// `agents::prepare::reading::opening_key`); `None` also when the store cannot say.
    pub(crate) async fn prepared_opening(
        &self,
        who: &Identity,
        opening: &str,
    ) -> Option<PreparedRow> {
        let now = compactd_store::now_ms();
        match self.store.prepared_opening(&who.tenant, opening, now).await {
            Ok(row) => row,
            Err(error) => {
                trouble(&error, "read a prepared summary");
                None
            }
        }
    }

    /// Keeps `row` as its session's prepared summary; whether it was kept.
    pub(crate) async fn keep_prepared(&self, row: &PreparedRow) -> bool {
        match self.store.put_prepared(row).await {
            Ok(()) => true,
            Err(error) => {
                trouble(&error, "keep a prepared summary");
                false
            }
        }
    }

    /// Forgets a prepared summary once used or outdated (unless a newer one replaced it).
    pub(crate) async fn drop_prepared(&self, row: &PreparedRow) {
        if let Err(error) = self
            .store
            .drop_prepared(&row.tenant, &row.session_key, row.created_at_ms)
            .await
        {
            trouble(&error, "drop a prepared summary");
        }
    }

    /// Marks `tenant`'s session as being prepared for `for_ms`, unless another replica is
    /// preparing it; whether it was marked (not when the store cannot say: then nothing is
    /// prepared, as its summary could not be kept either).
    pub(crate) async fn begin_preparing(&self, tenant: &str, session: &str, for_ms: i64) -> bool {
        let now = compactd_store::now_ms();
        match self
            .store
            .begin_preparing(tenant, session, now, now + for_ms)
            .await
        {
            Ok(marked) => marked,
            Err(error) => {
                trouble(&error, "mark a session being prepared");
                false
            }
        }
    }

    /// Whether `who`'s session is being prepared on some replica (`false` when the store cannot
    /// say: the compaction then takes the normal path).
    pub(crate) async fn preparing(&self, who: &Identity, session: &str) -> bool {
        self.store
            .preparing(&who.tenant, session, compactd_store::now_ms())
            .await
            .unwrap_or(false)
    }

    /// Takes the session's mark away.
    pub(crate) async fn end_preparing(&self, tenant: &str, session: &str) {
        if let Err(error) = self.store.end_preparing(tenant, session).await {
            trouble(&error, "unmark a session; its mark expires");
        }
    }

    /// Whether `who` may spend on work done ahead: under half of its daily budget.
    pub(crate) async fn may_prepare(&self, who: &Identity) -> bool {
        self.pipeline
            .budget_under_share(&who.tenant, BUDGET_SHARE)
            .await
    }
}
