//! Summaries prepared ahead of an agent session's compaction (issue 67): kept in the store, where
//! every replica finds them, one a session; what the gateway's preparer reads and writes.

use compactd_store::PreparedRow;

use crate::access::Identity;
use crate::app::App;

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
                tracing::warn!(error = %error, "prepare: the store could not read a prepared summary");
                None
            }
        }
    }

    /// Keeps `row` as its session's prepared summary; whether it was kept.
    pub(crate) async fn keep_prepared(&self, row: &PreparedRow) -> bool {
        match self.store.put_prepared(row).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(error = %error, "prepare: the store could not keep a prepared summary");
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
            tracing::warn!(error = %error, "prepare: the store could not drop a prepared summary");
        }
    }

    /// Whether `who` may spend on work done ahead: under half of its daily budget.
    pub(crate) async fn may_prepare(&self, who: &Identity) -> bool {
        self.pipeline
            .budget_under_share(&who.tenant, BUDGET_SHARE)
            .await
    }
}
