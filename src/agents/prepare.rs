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
//! at a time per session, again only when the session grew by a tenth of its window; counted in
//! `compactd_prepared_summaries_total` by outcome.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::http::HeaderMap;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::recognize::{Compaction, Form, of_history};
use super::{Gateway, Wire};
use crate::access::Identity;
use crate::app::App;
use crate::app::wire::Policy;
use crate::pipeline::{Agent, Endpoint, WhenSpent};
use crate::summarizer::Summary;
use crate::summarizer::chain::{Chain, Link};
use compactd_core::redact::Redacted;
use compactd_core::transcript::{Conversation, Message, Role};
use compactd_store::PreparedRow;

/// The windows of the models agents run today, by the start of their names (a provider's prefix,
/// `anthropic/`, is skipped); a model not listed is taken to have [`DEFAULT_WINDOW`].
const WINDOWS: &[(&str, u64)] = &[
    ("claude-", 200_000),
    ("gpt-5", 400_000),
    ("gpt-4.1", 1_000_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("gemini-", 1_000_000),
];
const DEFAULT_WINDOW: u64 = 128_000;

/// How much the conversation must grow past a prepared summary, as a share of the window, before
/// it is prepared again.
const REFRESH_SHARE: f64 = 0.1;

/// At most this many preparations run at once on a replica (each holds its turn's body until
/// its summary is written); a session past it is prepared on a later turn.
const MAX_PREPARING: i64 = 32;

/// What Claude Code appends to its compaction instruction when `/compact` is given a focus.
const CLAUDE_FOCUS: &str = "\n\nAdditional Instructions:\n";

/// The gateway's preparer: its settings and the sessions it is preparing now.
#[derive(Debug)]
pub(crate) struct Preparer {
    enabled: bool,
    share: f64,
    off_tenants: HashSet<String>,
    in_flight: Running,
    /// The estimated tokens at which each session (tenant, key) was last prepared, on this
    /// replica: what spares the turns after it a store read.
    recent: Recent,
}

type Recent = moka::sync::Cache<(String, String), u64>;

/// The sessions (tenant, key) being prepared on this replica, each with what tells its end.
type Running = Arc<Mutex<HashMap<(String, String), tokio::sync::watch::Receiver<()>>>>;

impl Preparer {
    pub(crate) fn new(config: &crate::config::GatewayConfig) -> Preparer {
        Preparer {
            enabled: config.prepare,
            share: config.prepare_at,
            off_tenants: super::gateway::tenants(&config.prepare_off_tenants),
            in_flight: Arc::default(),
            recent: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(std::time::Duration::from_secs(24 * 60 * 60))
                .build(),
        }
    }

    /// Whether `who`'s sessions are prepared ahead.
    fn serves(&self, who: &Identity) -> bool {
        self.enabled && !self.off_tenants.contains(&who.tenant)
    }
}

/// The window of `model`, in tokens.
pub(crate) fn window(model: &str) -> u64 {
    let name = model.rsplit('/').next().unwrap_or(model);
    WINDOWS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map_or(DEFAULT_WINDOW, |(_, window)| *window)
}

/// The top-level `model` of a JSON body, found without parsing it: inside a JSON string a quote
/// is escaped, so the first `"model"` followed by a colon is a key (agents write it first).
fn model_in(plain: &[u8]) -> Option<&str> {
    let finder = memchr::memmem::Finder::new(b"\"model\"");
    for at in finder.find_iter(plain) {
        let rest = &plain[at + 7..];
        let rest = rest.trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else {
            continue;
        };
        let rest = rest.trim_ascii_start().strip_prefix(b"\"")?;
        let end = memchr::memchr(b'"', rest)?;
        return std::str::from_utf8(&rest[..end]).ok();
    }
    None
}

/// The chained hashes of a conversation's messages: the `k`th (from 1) stands for the first `k`
/// messages, so two conversations share a prefix of `k` messages exactly when their `k`th hashes
/// agree. A message is read as compactd reads it (role, text, reasoning, calls, results), so the
/// markup an agent moves between turns (Claude Code's cache markers, a block list written as a
/// string) does not count.
pub(crate) fn prefix_hashes(messages: &[Message]) -> Vec<[u8; 32]> {
    let mut chained = [0u8; 32];
    messages
        .iter()
        .map(|message| {
            let mut hash = Sha256::new();
            hash.update(chained);
            hash.update(format!("{:?}", message.role).as_bytes());
            for part in [&message.text, &message.thinking] {
                hash.update((part.len() as u64).to_le_bytes());
                hash.update(part.as_bytes());
            }
            for call in &message.calls {
                hash.update(call.name.as_bytes());
                hash.update([0]);
                for (name, value) in &call.arguments {
                    hash.update(name.as_bytes());
                    hash.update([0]);
                    hash.update(value.to_string().as_bytes());
                    hash.update([0]);
                }
            }
            let tool = message.tool.as_deref().unwrap_or_default();
            hash.update(tool.as_bytes());
            hash.update([u8::from(message.is_error)]);
            chained = hash.finalize().into();
            chained
        })
        .collect()
}

/// The session a conversation belongs to: the agent's own session header, or else the hash of its
/// first message (two conversations that open alike share a key, and only a prefix that reads
/// the same is ever used).
fn session_key(headers: &HeaderMap, messages: &[Message]) -> Option<String> {
    if let Some((agent, id)) = crate::app::threads::seen::agent_session(headers) {
        return Some(format!("{agent}:{id}"));
    }
    let first = prefix_hashes(messages.get(..1)?);
    Some(format!("first:{}", hex::encode(first[0])))
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

/// Whether a compaction asks for something of its own, which a summary prepared without it
/// cannot answer: Claude Code's `/compact <focus>`, or instructions given to a provider's
/// compaction.
fn has_focus(compaction: &Compaction) -> bool {
    let instructions = &compaction.request.prompt;
    if compaction.agent == super::anthropic_messages::CLAUDE_CODE {
        return instructions.contains(CLAUDE_FOCUS);
    }
    // The providers' APIs take `instructions` only to change what the summary holds.
    super::recognize::is_provider_api(compaction.agent) && !instructions.trim().is_empty()
}

/// Whether a summary prepared at `at` tokens still serves a session now at `tokens`: it has not
/// grown by a tenth of its window since, nor shrunk (a compaction since then starts it afresh).
fn fresh(at: u64, tokens: u64, window: u64) -> bool {
    at <= tokens && (tokens as f64) < at as f64 + window as f64 * REFRESH_SHARE
}

/// The sessions' ordinary turns: once `plain` passes the share of its model's window, its
/// conversation is summarized in the background (unless it is being summarized, or was lately).
pub(crate) fn after_turn(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    wire: Wire,
    headers: &HeaderMap,
    plain: &Bytes,
) {
    let preparer = &gateway.preparer;
    if !preparer.serves(who) {
        return;
    }
    // compactd's estimate, four bytes a token, taken before anything is parsed: the turns under
    // the share (most of them) cost a byte scan.
    let tokens = plain.len() as u64 / 4;
    let model = model_in(plain).unwrap_or_default();
    let window = window(model);
    if (tokens as f64) < preparer.share * window as f64 {
        return;
    }
    // A session prepared lately, or being prepared now, is left alone without a store read.
    let header_key = crate::app::threads::seen::agent_session(headers)
        .map(|(agent, id)| (who.tenant.clone(), format!("{agent}:{id}")));
    if let Some(key) = &header_key
        && let Some(at) = preparer.recent.get(key)
        && fresh(at, tokens, window)
    {
        return;
    }
    if app.metrics.preparing.get() >= MAX_PREPARING {
        return;
    }
    // The session's place is taken now when its header names it, so that a compaction right
    // after this turn finds the preparation running; without a header, once the key is read.
    let held = match header_key {
        Some(key) => match InFlight::take(&preparer.in_flight, key) {
            Some(held) => Some(held),
            None => return,
        },
        None => None,
    };
    let chain = gateway.agent_chain(wire, model, headers, app.configured_chain());
    // Counted before the turn is answered, so that whoever sees the answer sees the work.
    let metrics = app.metrics.clone();
    metrics.preparing.inc();
    let job = Preparation {
        _counted: Counted(metrics),
        held,
        recent: preparer.recent.clone(),
        app: app.clone(),
        who: who.clone(),
        wire,
        headers: headers.clone(),
        plain: plain.clone(),
        tokens,
        window,
        chain,
        in_flight: preparer.in_flight.clone(),
    };
    tokio::spawn(job.run());
}

/// A preparation counted in `compactd_preparing` until it ends.
struct Counted(Arc<crate::metrics::Metrics>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.preparing.dec();
    }
}

/// One preparation, in the background.
struct Preparation {
    _counted: Counted,
    /// The session's place among those being prepared, when taken before the key was read.
    held: Option<InFlight>,
    recent: Recent,
    app: App,
    who: Identity,
    wire: Wire,
    headers: HeaderMap,
    plain: Bytes,
    tokens: u64,
    window: u64,
    chain: Option<Arc<Chain>>,
    in_flight: Running,
}

/// A session's place among those being prepared, given up when the preparation ends (which
/// wakes whoever waits for it).
struct InFlight {
    set: Running,
    key: (String, String),
    _done: tokio::sync::watch::Sender<()>,
}

impl InFlight {
    fn take(set: &Running, key: (String, String)) -> Option<Self> {
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
        })
    }

    /// What ends when the session's preparation on this replica ends, if one is running.
    fn running(set: &Running, key: &(String, String)) -> Option<tokio::sync::watch::Receiver<()>> {
        let held = set.lock().unwrap_or_else(|e| e.into_inner());
        held.get(key).cloned()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut held = self.set.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&self.key);
    }
}

impl Preparation {
    async fn run(mut self) {
        let Ok(body) = serde_json::from_slice::<Value>(&self.plain) else {
            return;
        };
        let agent = agent_of(self.wire);
        let mut compaction = turn_history(self.wire, agent, &body);
        let Some(conversation) = compaction.request.conversation.as_mut() else {
            return;
        };
        // The part that stays as it is: before the latest assistant message, which an agent
        // may still extend within its turn (Claude Code merges the calls of one turn into it).
        let stable = conversation
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .unwrap_or(0);
        if stable == 0 {
            return;
        }
        conversation.messages.truncate(stable);
        let conversation = &*conversation;
        let Some(key) = session_key(&self.headers, &conversation.messages) else {
            return;
        };
        let _held = match self.held.take() {
            Some(held) => held,
            None => match InFlight::take(&self.in_flight, (self.who.tenant.clone(), key.clone())) {
                Some(held) => held,
                None => return,
            },
        };
        let earlier = self.app.prepared(&self.who, &key).await;
        if let Some(row) = &earlier
            && fresh(row.prefix_tokens as u64, self.tokens, self.window)
        {
            // Another replica prepared it: this one need not ask the store again soon.
            self.recent
                .insert((self.who.tenant.clone(), key), row.prefix_tokens as u64);
            return;
        }
        if !self.app.may_prepare(&self.who).await {
            return;
        }
        let hashes = prefix_hashes(&conversation.messages);
        let Some(last) = hashes.last() else {
            return;
        };
        let prefix_hash = hex::encode(last);
        let prefix_items = hashes.len() as i64;
        let policy = Policy {
            chain: self.chain,
            when_spent: WhenSpent::Refuse,
        };
        let metrics = self.app.metrics.clone();
        let summary = self
            .app
            .summarize_prompt_with(
                &self.who,
                Endpoint::Prepared(agent),
                compaction.request,
                policy,
            )
            .await;
        let summary = match summary {
            Ok(summary) => summary.into_inner(),
            Err(error) => {
                tracing::info!(error = %error, "prepare: a session's summary could not be prepared ahead");
                metrics.prepared.with_label_values(&["failed"]).inc();
                return;
            }
        };
        let row = PreparedRow {
            tenant: self.who.tenant.clone(),
            session_key: key.clone(),
            prefix_items,
            prefix_hash,
            prefix_tokens: self.tokens as i64,
            summary: summary.text,
            model: summary.model,
            created_at_ms: compactd_store::now_ms(),
        };
        if self.app.keep_prepared(&row).await {
            self.recent
                .insert((row.tenant.clone(), row.session_key.clone()), self.tokens);
            let outcome = if earlier.is_some() {
                "refreshed"
            } else {
                "prepared"
            };
            metrics.prepared.with_label_values(&[outcome]).inc();
        }
    }
}

/// The compaction answered from its session's prepared summary, when one covers the first
/// messages of its conversation as they read now: the summary of those, with the messages after
/// them merged in by the extractive summarizer, through the pipeline (redaction, the gate,
/// standing rules, the call log). `None`: the normal path.
pub(crate) async fn answered(
    app: &App,
    gateway: &Gateway,
    who: &Identity,
    headers: &HeaderMap,
    compaction: &Compaction,
) -> Option<Redacted<Summary>> {
    if !gateway.preparer.serves(who) {
        return None;
    }
    let conversation = compaction.request.conversation.as_ref()?;
    let key = session_key(headers, &conversation.messages)?;
    let hashes = prefix_hashes(&conversation.messages);
    let covers = |row: &PreparedRow| {
        usize::try_from(row.prefix_items).is_ok_and(|covered| {
            covered > 0
                && hashes
                    .get(covered - 1)
                    .is_some_and(|hash| hex::encode(hash) == row.prefix_hash)
        })
    };
    let focus = has_focus(compaction);
    // A kept summary that covers this conversation answers at once, even while a newer one is
    // being prepared.
    let mut row = app.prepared(who, &key).await;
    if !focus && !row.as_ref().is_some_and(covers) {
        // Else a preparation under way is most of the way there: its end is waited for rather
        // than the whole of a new summarization (on this replica; another's is not seen until
        // it is kept). Its sender goes when it ends: `changed` then fails, which is the signal.
        let session = (who.tenant.clone(), key.clone());
        if let Some(mut running) = InFlight::running(&gateway.preparer.in_flight, &session) {
            let _ = running.changed().await;
            row = app.prepared(who, &key).await;
        }
    }
    let row = row?;
    // Used or outdated, the summary is done with: the session's next preparation starts afresh.
    gateway
        .preparer
        .recent
        .invalidate(&(who.tenant.clone(), key.clone()));
    if focus || !covers(&row) {
        app.metrics.prepared.with_label_values(&["wasted"]).inc();
        app.drop_prepared(&row).await;
        return None;
    }
    let covered = row.prefix_items as usize;
    // What came after the prepared part (at least the latest message, which the merge keeps
    // verbatim when it is the user's).
    let from = covered.min(conversation.messages.len().saturating_sub(1));
    let mut request = compaction.request.clone();
    request.conversation = Some(Conversation {
        messages: conversation.messages[from..].to_vec(),
        ..conversation.clone()
    });
    request.previous_summary = Some(row.summary.clone());
    let extractive = Chain::new(vec![Link::Extractive], app.configured_chain().policy);
    let policy = Policy {
        chain: Some(Arc::new(extractive)),
        when_spent: WhenSpent::Refuse,
    };
    let endpoint = Endpoint::Gateway(compaction.agent);
    match app
        .summarize_prompt_with(who, endpoint, request, policy)
        .await
    {
        Ok(summary) => {
            app.metrics.prepared.with_label_values(&["used"]).inc();
            app.drop_prepared(&row).await;
            Some(summary)
        }
        Err(error) => {
            tracing::warn!(error = %error, "prepare: a prepared summary could not be merged; the normal path answers");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(role: Role, text: &str) -> Message {
        let mut conversation = Wire::ChatCompletions.messages(&[serde_json::json!({
            "role": match role { Role::User => "user", _ => "assistant" }, "content": text})]);
        conversation.messages.remove(0)
    }

    #[test]
    fn a_prefix_matches_only_as_it_reads() {
        let a = [
            message(Role::User, "fix the lexer"),
            message(Role::Assistant, "done"),
            message(Role::User, "now the parser"),
        ];
        let mut b = a.to_vec();
        b.push(message(Role::Assistant, "on it"));
        let (ha, hb) = (prefix_hashes(&a), prefix_hashes(&b));
        assert_eq!(ha[..], hb[..3]);
        let mut edited = b.clone();
        edited[1] = message(Role::Assistant, "done!");
        let he = prefix_hashes(&edited);
        assert_eq!(he[0], ha[0]);
        assert!(
            he[1..].iter().zip(&hb[1..]).all(|(x, y)| x != y),
            "an edit changes every later hash"
        );
    }

    #[test]
    fn a_session_is_prepared_again_once_it_grew_or_after_it_shrank() {
        let window = 200_000;
        assert!(fresh(120_000, 130_000, window));
        assert!(
            !fresh(120_000, 140_000, window),
            "grew by a tenth of the window"
        );
        assert!(
            !fresh(160_000, 125_000, window),
            "compacted since, and grown back"
        );
    }

    #[test]
    fn the_window_and_model_are_read_without_parsing() {
        assert_eq!(window("claude-sonnet-4-6"), 200_000);
        assert_eq!(window("anthropic/claude-opus-4-6"), 200_000);
        assert_eq!(window("gpt-5.2-codex"), 400_000);
        assert_eq!(window("qwen3-coder"), DEFAULT_WINDOW);
        let body =
            br#"{"model" : "claude-sonnet-4-6","messages":[{"content":"the \"model\": x"}]}"#;
        assert_eq!(model_in(body), Some("claude-sonnet-4-6"));
        let nested = br#"{"messages":[{"content":"say \"model\":\"x\""}],"model":"gpt-5.2"}"#;
        assert_eq!(model_in(nested), Some("gpt-5.2"));
        assert_eq!(model_in(b"{}"), None);
    }
}
