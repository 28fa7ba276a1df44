//! One preparation in the background, and the bookkeeping around it: the gauge of those running
//! and each session's place among them (what a compaction waits on).

use std::sync::Arc;

use serde_json::Value;

use super::reading::{loose_hashes, opening_key, prefix_hashes, session_key};
use super::{Preparer, Running, Standing, Turn, agent_of, turn_history};
use crate::app::App;
use crate::app::wire::Policy;
use crate::pipeline::{Endpoint, WhenSpent};
use compactd_core::transcript::Role;
use compactd_store::PreparedRow;

/// A preparation counted in `compactd_preparing` until it ends.
pub(super) struct Counted(pub(super) Arc<crate::metrics::Metrics>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.preparing.dec();
    }
}

/// One preparation, in the background.
pub(super) struct Preparation {
    pub(super) _counted: Counted,
    /// The session's place among those being prepared, when taken before the key was read.
    pub(super) held: Option<InFlight>,
    pub(super) app: App,
    pub(super) preparer: Arc<Preparer>,
    pub(super) turn: Turn,
}

/// A session's place among those being prepared, on this replica and, once marked in the store,
/// on every replica; given up when the preparation ends, which wakes whoever waits for it here
/// and there.
pub(super) struct InFlight {
    pub(super) set: Running,
    pub(super) key: (String, String),
    pub(super) _done: tokio::sync::watch::Sender<()>,
    /// The store the mark is in, once marked.
    marked: Option<App>,
}

/// Longer than any summarization may take (`COMPACTD_DEADLINE_SECS` is under 300): a replica
/// that dies mid-way holds its sessions no longer.
const MARK_MS: i64 = 300_000;

impl InFlight {
    /// The session's place on this replica, unless it is being prepared here (no store call: the
    /// turn that starts a preparation is not held up by it).
    pub(super) fn take(set: &Running, key: (String, String)) -> Option<Self> {
        let mut held = set.lock().unwrap_or_else(|e| e.into_inner());
        if held.contains_key(&key) {
            return None;
        }
        let (done, waiting) = tokio::sync::watch::channel(());
        held.insert(key.clone(), waiting);
        Some(InFlight {
            set: set.clone(),
            key,
            _done: done,
            marked: None,
        })
    }

    /// Marks the session in the store, unless another replica is preparing it; whether it was.
    pub(super) async fn mark(&mut self, app: &App) -> bool {
        let (tenant, session) = &self.key;
        if !app.begin_preparing(tenant, session, MARK_MS).await {
            return false;
        }
        self.marked = Some(app.clone());
        true
    }

    /// What ends when the session's preparation on this replica ends, if one is running.
    pub(super) fn running(
        set: &Running,
        key: &(String, String),
    ) -> Option<tokio::sync::watch::Receiver<()>> {
        let held = set.lock().unwrap_or_else(|e| e.into_inner());
        held.get(key).cloned()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut held = self.set.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&self.key);
        // The mark goes too (a store call: in the background); until it does, or expires, a
        // compaction on another replica waits a little longer.
        if let Some(app) = self.marked.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let (tenant, session) = self.key.clone();
            runtime.spawn(async move { app.end_preparing(&tenant, &session).await });
        }
    }
}

/// The turn's conversation as its agent's compaction would read it, up to the part that stays as
/// it is: before the latest assistant message, which an agent may still extend within its turn
/// (Claude Code merges the calls of one turn into it). `None` when there is no such part.
fn stable_history(turn: &Turn) -> Option<super::Compaction> {
    let body = compactd_core::js_json::from_slice::<Value>(&turn.plain).ok()?;
    let mut compaction = turn_history(turn.wire, agent_of(turn.wire), &body);
    let conversation = compaction.request.conversation.as_mut()?;
    let stable = conversation
        .messages
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .filter(|&at| at > 0)?;
    conversation.messages.truncate(stable);
    Some(compaction)
}

/// Whether the summary kept for the session (prepared here or on another replica) still stands
/// for `turn`: then the turns after it need not ask the store again soon.
fn still_stands(
    preparer: &Preparer,
    turn: &Turn,
    row: &PreparedRow,
    recent_key: &(String, String),
) -> bool {
    let standing = Standing {
        prepared_at: Some(row.prefix_tokens as u64),
        ..turn.standing
    };
    if standing.due(preparer.share) {
        return false;
    }
    (preparer.recent).insert(recent_key.clone(), row.prefix_tokens as u64);
    true
}

impl Preparation {
    pub(super) async fn run(mut self) {
        let turn = self.turn;
        let preparer = &self.preparer;
        let agent = agent_of(turn.wire);
        let Some(compaction) = stable_history(&turn) else {
            return;
        };
        let Some(conversation) = compaction.request.conversation.as_ref() else {
            return;
        };
        let Some(key) = session_key(&turn.headers, &conversation.messages) else {
            return;
        };
        // A compaction that named no session (a remote endpoint's) is known by the opening.
        let opening = opening_key(&conversation.messages).unwrap_or_default();
        let compacted = [&key, &opening]
            .into_iter()
            .any(|k| preparer.compacted_since(&(turn.who.tenant.clone(), k.clone()), &turn));
        if compacted {
            return;
        }
        let held = match self.held.take() {
            Some(held) => Some(held),
            None => InFlight::take(&preparer.in_flight, (turn.who.tenant.clone(), key.clone())),
        };
        let Some(mut held) = held else {
            return;
        };
        if !held.mark(&self.app).await {
            return;
        }
        let recent_key = (turn.pace_key.clone()).unwrap_or((turn.who.tenant.clone(), key.clone()));
        let earlier = self.app.prepared(&turn.who, &key).await;
        if let Some(row) = &earlier
            && still_stands(preparer, &turn, row, &recent_key)
        {
            return;
        }
        if !self.app.may_prepare(&turn.who).await {
            return;
        }
        let hashes = prefix_hashes(&conversation.messages);
        let Some(last) = hashes.last() else {
            return;
        };
        let prefix_hash = hex::encode(last);
        let prefix_items = hashes.len() as i64;
        // How a compaction that names no session finds it (a pi-family agent's remote endpoint).
        let loose_hash = loose_hashes(&conversation.messages)
            .last()
            .map(hex::encode)
            .unwrap_or_default();
        let policy = Policy {
            chain: turn.chain,
            when_spent: WhenSpent::Refuse,
        };
        let metrics = self.app.metrics.clone();
        let started = std::time::Instant::now();
        let summary = self
            .app
            .summarize_prompt_with(
                &turn.who,
                Endpoint::Prepared(agent.name),
                compaction.request,
                policy,
            )
            .await;
        let summary = match summary {
            Ok(summary) => {
                preparer.pace.took(started.elapsed());
                summary.into_inner()
            }
            Err(error) => {
                tracing::info!(error = %error, "prepare: a session's summary could not be prepared ahead");
                metrics.prepared.with_label_values(&["failed"]).inc();
                return;
            }
        };
        let row = PreparedRow {
            tenant: turn.who.tenant.clone(),
            session_key: key.clone(),
            opening,
            prefix_items,
            prefix_hash,
            loose_hash,
            prefix_tokens: turn.standing.tokens as i64,
            summary: summary.text,
            model: summary.model,
            created_at_ms: compactd_store::now_ms(),
        };
        if self.app.keep_prepared(&row).await {
            preparer.recent.insert(recent_key, turn.standing.tokens);
            let outcome = if earlier.is_some() {
                "refreshed"
            } else {
                "prepared"
            };
            metrics.prepared.with_label_values(&[outcome]).inc();
        }
    }
}
