//! Zero-wait compaction (issue 67): compactd sees every turn of a gateway session pass through,
//! so it summarizes the conversation in the background once the session passes a share of its
//! model's window (`COMPACTD_PREPARE_AT`), keeps the summary in the store where every replica
//! finds it, and answers the session's compaction from it at once: the prepared summary of the
//! conversation's first messages, with what came after them merged in by the extractive
//! summarizer (no model call), checked by the gate like every summary.
//!
//! A prepared summary is used only for the very conversation it summarized: the compaction's
//! first messages must read the same, message for message (their hashes chained, as
//! [`prefix_hashes`] writes them), and the compaction must ask for nothing of its own (a focus
//! instruction). A rewind, an edit, a fork or a focus takes the normal path; a summary that no
//! longer matches is dropped and counted as wasted.
//!
//! Paid for openly: the preparation is a call of its own in the call log (`gateway:prepared`),
//! charged to the tenant's budget, made only while the tenant has used less than half of it, one
//! at a time per session across replicas (marked in the store), again only when the session grew
//! by a tenth of its window; counted in
//! `compactd_prepared_summaries_total` by outcome.

use std::collections::{HashMap, HashSet};

mod answering;
mod idle;
mod pace;
mod reading;
mod running;
mod stored;
mod usage;

pub(crate) use answering::{answered, answered_remote};
use idle::Idle;
use pace::{Pace, Standing, fresh};
use reading::{model_in, window};
use running::{Counted, InFlight, Preparation};
use std::sync::{Arc, Mutex};
pub(crate) use stored::{after_append, before_compaction, compacted};
pub(crate) use usage::UsageTap;

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::Value;

use super::recognize::{Compaction, Form, of_history};
use super::{Gateway, Wire};
use crate::access::Identity;
use crate::app::App;
use crate::pipeline::Agent;
use crate::summarizer::chain::Chain;

/// The windows of the models agents run today, by the start of their names (a provider's prefix,
/// `anthropic/`, is skipped); a model not listed is taken to have `COMPACTD_CONTEXT_WINDOW`.
const WINDOWS: &[(&str, u64)] = &[
    ("claude-", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_000_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini-", 1_000_000),
];

/// compactd's own estimate of a body's size: four bytes a token, until the session's provider
/// reports it (see [`usage`]).
const BYTES_PER_TOKEN: f64 = 4.0;

/// How much the conversation must grow past a prepared summary, as a share of the window, before
/// it is prepared again.
const REFRESH_SHARE: f64 = 0.1;

/// At most this many preparations run at once on a replica (each holds its turn's body until
/// its summary is written); a session past it is prepared on a later turn.
const MAX_PREPARING: i64 = 32;

/// The gateway's preparer: its settings and the sessions it is preparing now.
#[derive(Debug)]
pub(crate) struct Preparer {
    enabled: bool,
    share: f64,
    /// The window of a model not listed.
    default_window: u64,
    off_tenants: HashSet<String>,
    in_flight: Running,
    /// The estimated tokens at which each session (tenant, the key of its pace) was last
    /// prepared, on this replica: what spares the turns after it a store read.
    recent: Recent,
    /// How fast each session grows, and how long a preparation takes.
    pace: Pace,
    /// The sessions to prepare when they have been idle `idle_after`, by the key of their pace.
    idle: Idle,
    /// When each session (tenant, the key its compaction found it by) last compacted here: a
    /// turn that came before it is not prepared (an idle session's held turn, above all, whose
    /// key may not be the one its compaction names).
    compacted: moka::sync::Cache<(String, String), std::time::Instant>,
    /// The stored sessions to prepare when they have been idle `idle_after`.
    stored_idle: stored::StoredIdle,
    idle_after: std::time::Duration,
}

/// A turn to prepare, and what its preparation needs of it.
pub(super) struct Turn {
    who: Identity,
    wire: Wire,
    headers: HeaderMap,
    plain: Bytes,
    /// Where the session stood at this turn.
    standing: Standing,
    /// The session's key for its pace and its record here (its header, or its opening).
    pace_key: Option<(String, String)>,
    /// When it came.
    came: std::time::Instant,
    chain: Option<Arc<Chain>>,
}

type Recent = moka::sync::Cache<(String, String), u64>;

/// The sessions (tenant, key) being prepared on this replica, each with what tells its end.
type Running = Arc<Mutex<HashMap<(String, String), tokio::sync::watch::Receiver<()>>>>;

impl Preparer {
    pub(crate) fn new(config: &crate::config::GatewayConfig, default_window: u64) -> Preparer {
        Preparer {
            enabled: config.prepare,
            share: config.prepare_at,
            default_window,
            off_tenants: super::gateway::tenants(&config.prepare_off_tenants),
            in_flight: Arc::default(),
            recent: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(std::time::Duration::from_secs(24 * 60 * 60))
                .build(),
            pace: Pace::new(),
            idle: Idle::default(),
            compacted: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(std::time::Duration::from_secs(60 * 60))
                .build(),
            stored_idle: Default::default(),
            idle_after: config.prepare_idle,
        }
    }

    /// Whether `who`'s sessions are prepared ahead.
    fn serves(&self, who: &Identity) -> bool {
        self.enabled && !self.off_tenants.contains(&who.tenant)
    }

    /// Session `key` compacts now: the turn it waited with when idle is done with, and no turn
    /// of it from before now is prepared.
    fn compacting(&self, key: &(String, String)) {
        self.idle.forget(key);
        self.compacted
            .insert(key.clone(), std::time::Instant::now());
    }

    /// Whether session `key` compacted after `turn` came.
    fn compacted_since(&self, key: &(String, String), turn: &Turn) -> bool {
        self.compacted.get(key).is_some_and(|at| at > turn.came)
    }
}

/// An ordinary turn's conversation, read as its agent's compaction of it would be (the
/// summary it carries from an earlier compaction taken out the same way), with compactd's own
/// instructions.
fn turn_history(wire: Wire, agent: Agent, body: &Value) -> Compaction {
    let (conversation, previous) = match wire {
        Wire::AnthropicMessages => {
            let mut history = body
                .get("messages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let previous = super::carried::take_claude(&mut history);
            (wire.messages(&history), previous)
        }
        _ => (wire.conversation(body), None),
    };
    of_history(
        agent,
        Form::Text,
        body,
        conversation,
        String::new(),
        previous,
    )
}

/// The agent a turn on `wire` is taken for, in the call log of its preparation.
fn agent_of(wire: Wire) -> Agent {
    match wire {
        Wire::AnthropicMessages => super::anthropic_messages::CLAUDE_CODE,
        Wire::Responses => super::responses::CODEX_LOCAL,
        Wire::ChatCompletions => super::chat_completions::OPENCODE,
    }
}

/// The sessions' ordinary turns: once `plain` passes the share of its model's window (earlier
/// for a session growing faster than a summary is written, see [`pace`]), its conversation is
/// summarized in the background (unless it is being summarized, or was lately). For a session
/// past a quarter of the share, what reads the size its provider reports in the answer.
pub(crate) fn after_turn(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    wire: Wire,
    headers: &HeaderMap,
    plain: &Bytes,
) -> Option<UsageTap> {
    let preparer = &gateway.preparer;
    if !preparer.serves(who) {
        return None;
    }
    // compactd's estimate, taken before anything is parsed: the turns under a quarter of the
    // share (most of them) cost a byte scan.
    let bytes = plain.len() as u64;
    let model = model_in(plain).unwrap_or_default();
    let window = window(model, preparer.default_window);
    if (bytes as f64 / BYTES_PER_TOKEN) < preparer.share / 4.0 * window as f64 {
        return None;
    }
    // A session has a pace, a record of its latest preparation here and a measure of its size
    // once its provider reported it, by its header (or, without one, the opening of its
    // conversation).
    let header_key = crate::app::threads::seen::agent_session(headers)
        .map(|(agent, id)| (who.tenant.clone(), format!("{agent}:{id}")));
    let pace_key = header_key.clone().or_else(|| {
        reading::opening(plain).map(|hash| (who.tenant.clone(), format!("opening:{hash:016x}")))
    });
    let (tokens, rate, seen) = match &pace_key {
        Some(key) => {
            let turn = (preparer.pace).observe(key.clone(), bytes, std::time::Instant::now());
            (turn.tokens, turn.rate, turn.seen)
        }
        None => ((bytes as f64 / BYTES_PER_TOKEN) as u64, 0.0, false),
    };
    // A session its agent names by no header is one only once seen again: a request made once
    // (a script's, an SDK's) is not prepared for when idle.
    let ongoing = header_key.is_some() || seen;
    let tap = (pace_key.clone()).map(|key| UsageTap::new(preparer.clone(), key, bytes));
    let standing = Standing {
        tokens,
        window,
        rate,
        takes: preparer.pace.takes(),
        prepared_at: pace_key.as_ref().and_then(|key| preparer.recent.get(key)),
    };
    let chain = || gateway.agent_chain(wire, model, headers, app.configured_chain());
    let turn = || Turn {
        who: who.clone(),
        wire,
        headers: headers.clone(),
        plain: plain.clone(),
        standing,
        pace_key: pace_key.clone(),
        came: std::time::Instant::now(),
        chain: chain(),
    };
    if standing.due(preparer.share) {
        if let Some(key) = &pace_key {
            preparer.idle.forget(key);
        }
        start(app, preparer, turn());
    } else if let Some(key) = pace_key.clone()
        && ongoing
        && (tokens as f64) >= preparer.share / 2.0 * window as f64
        && standing
            .prepared_at
            .is_none_or(|at| !fresh(at, tokens, window))
    {
        Idle::wait(app, preparer, key, turn());
    }
    tap
}

/// Starts preparing `turn` in the background, unless its session (when its header names it) is
/// being prepared here, or too many are (another replica's is found by the preparation).
fn start(app: &App, preparer: &Arc<Preparer>, turn: Turn) {
    if app.metrics.preparing.get() >= MAX_PREPARING {
        return;
    }
    // The session's place is taken now when its header names it, so that a compaction right
    // after this turn finds the preparation running; without a header, once the key is read.
    let key = crate::app::threads::seen::agent_session(&turn.headers)
        .map(|(agent, id)| (turn.who.tenant.clone(), format!("{agent}:{id}")));
    let held = match key {
        Some(key) => match InFlight::take(&preparer.in_flight, key) {
            Some(held) => Some(held),
            None => return,
        },
        None => None,
    };
    // Counted before the turn is answered, so that whoever sees the answer sees the work.
    let metrics = app.metrics.clone();
    metrics.preparing.inc();
    let job = Preparation {
        _counted: Counted(metrics),
        held,
        app: app.clone(),
        preparer: preparer.clone(),
        turn,
    };
    tokio::spawn(job.run());
}

#[cfg(test)]
mod tests;
