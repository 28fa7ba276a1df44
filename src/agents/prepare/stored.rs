//! Stored pi sessions prepared ahead (issue 67): the pi extension appends each turn as it ends,
//! so compactd sees the session grow as it sees a gateway session's turns. Past the share of its
//! model's window (earlier at a pace faster than a summary is written, as a gateway session), its
//! history is summarized in the background (`App::prepare_session`), again once it grew by a
//! tenth of the window (unless the refresh could not be ready before the agent compacts); a session that stops past half the share with nothing
//! prepared is prepared once it has been idle `COMPACTD_PREPARE_IDLE_SECS`. Its compaction is
//! then answered from that summary (`app::compaction::ahead`). One at a time per session on this
//! replica, marked in the store for the others; charged to the tenant's budget, under the same
//! cap as a gateway session's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use compactd_core::ids::Id;

use super::running::{Counted, InFlight};
use super::{MAX_PREPARING, Preparer, pace};
use crate::access::Identity;
use crate::app::App;
use crate::app::compaction::ahead::{Hints, session_key};

/// At most this many stored sessions wait for their idle time on a replica.
const MAX_WAITING: usize = 1024;

type Key = (String, String);

/// A stored session to prepare, as its latest append left it.
#[derive(Clone)]
struct Appended {
    who: Identity,
    id: Id,
    tokens: u64,
    hints: Hints,
}

/// The stored sessions waiting to be prepared when idle, each with its latest append's time.
#[derive(Default)]
pub(super) struct StoredIdle {
    waiting: Mutex<HashMap<Key, (Instant, Appended)>>,
}

impl std::fmt::Debug for StoredIdle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredIdle").finish_non_exhaustive()
    }
}

impl StoredIdle {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (Instant, Appended)>> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// After `who` appended to stored session `id`, whose context now holds `tokens`: prepares the
/// session in the background when it is due, or when it stays idle past half the share. Only for
/// an agent that said its model's window (the pi extension does, turn by turn): a script that
/// appends entries spends nothing in the background.
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
    let key = (who.tenant.clone(), session_key(id));
    let appended = Appended {
        who: who.clone(),
        id: id.clone(),
        tokens,
        hints,
    };
    let prepared_at = preparer.recent.get(&key);
    // At the session's pace: earlier than the share for one that grows faster than a summary is
    // written (see `pace`).
    let rate = (preparer.pace).observe_tokens(key.clone(), tokens, Instant::now());
    let now = pace::Standing {
        tokens,
        window,
        rate,
        takes: preparer.pace.takes(),
        prepared_at,
    };
    if now.due(preparer.share) {
        preparer.stored_idle.lock().remove(&key);
        start(app, preparer, key, appended);
    } else if (tokens as f64) >= preparer.share / 2.0 * window as f64 && prepared_at.is_none() {
        wait(app, preparer, key, appended);
    }
}

/// Notes the session's latest append; its timer starts with the first.
fn wait(app: &App, preparer: &Arc<Preparer>, key: Key, appended: Appended) {
    let mut waiting = preparer.stored_idle.lock();
    let known = waiting.contains_key(&key);
    if !known && waiting.len() >= MAX_WAITING {
        return;
    }
    waiting.insert(key.clone(), (Instant::now(), appended));
    drop(waiting);
    if !known {
        tokio::spawn(timer(app.clone(), preparer.clone(), key));
    }
}

/// Sleeps until the session has had no append for the idle time, then prepares it.
async fn timer(app: App, preparer: Arc<Preparer>, key: Key) {
    let after = preparer.idle_after;
    loop {
        let Some(last) = preparer.stored_idle.lock().get(&key).map(|(at, _)| *at) else {
            return;
        };
        tokio::time::sleep_until((last + after).into()).await;
        let appended = {
            let mut waiting = preparer.stored_idle.lock();
            match waiting.get(&key) {
                None => return,
                Some((at, _)) if at.elapsed() < after => continue,
                Some(_) => waiting.remove(&key).map(|(_, appended)| appended),
            }
        };
        if let Some(appended) = appended {
            start(&app, &preparer, key, appended);
        }
        return;
    }
}

/// Prepares the session in the background, unless it is being prepared here or too many are.
fn start(app: &App, preparer: &Arc<Preparer>, key: Key, appended: Appended) {
    if app.metrics.preparing.get() >= MAX_PREPARING {
        return;
    }
    let Some(mut held) = InFlight::take(&preparer.in_flight, key.clone()) else {
        return;
    };
    let prepared_at = preparer.recent.get(&key);
    let metrics = app.metrics.clone();
    metrics.preparing.inc();
    let counted = Counted(metrics.clone());
    let (app, preparer) = (app.clone(), preparer.clone());
    tokio::spawn(async move {
        let _counted = counted;
        let Appended {
            who,
            id,
            tokens,
            hints,
        } = appended;
        if !held.mark(&app).await || !app.may_prepare(&who).await {
            return;
        }
        let started = Instant::now();
        match app.prepare_session(&who, &id, &hints.settings).await {
            Ok(Some(_)) => {
                preparer.pace.took(started.elapsed());
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
/// next preparation (the context it measured is gone), and it waits for no idle time.
pub(crate) fn compacted(preparer: &Preparer, who: &Identity, id: &Id) {
    let key = (who.tenant.clone(), session_key(id));
    preparer.stored_idle.lock().remove(&key);
    preparer.recent.invalidate(&key);
}

/// Before stored session `id` compacts with nothing prepared yet: a preparation of it under way
/// (here or on another replica) is waited for — most of the way there, rather than the whole of
/// a new summarization. A kept summary answers at once even while a newer one is being
/// prepared; a compaction with a focus, which a prepared summary does not answer, waits for none.
pub(crate) async fn before_compaction(
    app: &App,
    preparer: &Preparer,
    who: &Identity,
    id: &Id,
    focused: bool,
) {
    let key = session_key(id);
    if !focused && preparer.serves(who) && app.prepared(who, &key).await.is_none() {
        super::answering::after_running(app, preparer, who, &key).await;
    }
}
