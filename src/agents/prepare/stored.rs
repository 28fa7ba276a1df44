//! Stored pi sessions prepared ahead (issue 67): the pi extension appends each turn as it ends,
//! so compactd sees the session grow as it sees a gateway session's turns. Past the share of its
//! model's window, its history is summarized in the background (`App::prepare_session`), again
//! once it grew by a tenth of the window; its compaction is then answered from that summary
//! (`app::compaction::ahead`). One at a time per session on this replica, marked in the store
//! for the others; charged to the tenant's budget, under the same cap as a gateway session's.

use std::sync::Arc;

use compactd_core::ids::Id;

use super::running::{Counted, InFlight};
use super::{MAX_PREPARING, Preparer, fresh};
use crate::access::Identity;
use crate::app::App;
use crate::app::compaction::ahead::{Hints, session_key};

/// After `who` appended to stored session `id`, whose context now holds `tokens`: prepares the session in the background when it is due. Only for an agent
/// that said its model's window (the pi extension does, turn by turn): a script that appends
/// entries spends nothing in the background.
pub(crate) fn after_append(
    app: &App,
    preparer: &Arc<Preparer>,
    who: &Identity,
    id: &Id,
    tokens: i64,
    hints: Hints,
) {
    let Some(window) = hints.window else {
        return;
    };
    if !preparer.serves(who) {
        return;
    }
    let tokens = u64::try_from(tokens).unwrap_or_default();
    if (tokens as f64) < preparer.share * window as f64 {
        return;
    }
    let key = (who.tenant.clone(), session_key(id));
    let prepared_at = preparer.recent.get(&key);
    if prepared_at.is_some_and(|at| fresh(at, tokens, window)) {
        return;
    }
    if app.metrics.preparing.get() >= MAX_PREPARING {
        return;
    }
    let Some(mut held) = InFlight::take(&preparer.in_flight, key.clone()) else {
        return;
    };
    let metrics = app.metrics.clone();
    metrics.preparing.inc();
    let counted = Counted(metrics.clone());
    let (app, preparer, who, id) = (app.clone(), preparer.clone(), who.clone(), id.clone());
    tokio::spawn(async move {
        let _counted = counted;
        if !held.mark(&app).await || !app.may_prepare(&who).await {
            return;
        }
        match app.prepare_session(&who, &id, &hints.settings).await {
            Ok(Some(_)) => {
                preparer.recent.insert(key, tokens);
                let outcome = match prepared_at {
                    Some(_) => "refreshed",
                    None => "prepared",
                };
                metrics.prepared.with_label_values(&[outcome]).inc();
            }
            Ok(None) => {}
            Err(error) => {
                tracing::info!(error = %error, "prepare: a stored session could not be prepared ahead");
                metrics.prepared.with_label_values(&["failed"]).inc();
            }
        }
    });
}

/// After stored session `id` was compacted: what was last prepared of it is no measure of its
/// next preparation (the context it measured is gone).
pub(crate) fn compacted(preparer: &Preparer, who: &Identity, id: &Id) {
    preparer
        .recent
        .invalidate(&(who.tenant.clone(), session_key(id)));
}
