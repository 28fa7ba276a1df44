//! Compacting stored sessions and summarizing their branches (their history: [`crate::app::views::history`]).
//!
//! One compaction per leaf: requests for the same leaf of the same session wait for the one in
//! progress (a lock in this process) and get its entry; across replicas, the append is guarded by
//! the entry count and a loser that finds the same leaf compacted returns that entry.

pub(crate) mod ahead;
pub mod compactor;
pub mod plans;
pub(crate) mod stored_path;

use compactd_core::ids::Id;
use compactd_core::session::EntryType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;

use crate::access::Identity;
use crate::app::sessions::index::{self, IndexView};
use crate::app::sessions::{appended_record, context_tokens_at};
use crate::app::{App, AppError};
use crate::pipeline::Endpoint;
use crate::summarizer::TokenUsage;
use compactd_core::compaction::NothingReason;
use compactd_core::session::Session;
use compactd_store::{Append, CompactionRecord, SessionRecord, StoreError, now_ms};
use compactor::{BranchSummaryOutcome, BranchSummaryRequest, CompactionOutcome, CompactionRequest};

/// Held while one leaf of one session is being compacted.
type LeafLock = Arc<tokio::sync::Mutex<()>>;

/// One compaction at a time per (session, leaf) in this process.
#[derive(Clone, Default)]
pub(crate) struct LeafLocks(Arc<Mutex<HashMap<(String, String), LeafLock>>>);

impl LeafLocks {
    fn get(&self, session_id: &str, leaf_id: &str) -> LeafLock {
        let mut locks = self.0.lock().unwrap_or_else(|e| e.into_inner());
        // Drop the locks nobody holds any more, so the map stays small.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks
            .entry((session_id.to_owned(), leaf_id.to_owned()))
            .or_default()
            .clone()
    }
}

/// What a compaction request produced.
#[derive(Debug)]
pub(crate) enum Compacted {
    /// compactd wrote a new entry.
    Created {
        outcome: Box<CompactionOutcome>,
        session: SessionRecord,
    },
    /// The leaf was compacted already (by a concurrent request, or in the uploaded file).
    Existing {
        /// The stored entry.
        entry: serde_json::Value,
        line: String,
        session: SessionRecord,
    },
}

/// A branch summary appended.
#[derive(Debug)]
pub(crate) struct BranchSummarized {
    pub(crate) outcome: BranchSummaryOutcome,
}

/// Token usage of the calls of a compaction.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UsageView {
    pub(crate) input_tokens: i64,
    pub(crate) output_tokens: i64,
}

/// The position of the compaction entry already made from the leaf at `leaf_seq`, if any (the
/// latest, as pi would find it).
fn compaction_child(view: &IndexView, leaf_seq: usize) -> Option<usize> {
    let snapshot = view.read();
    (leaf_seq + 1..view.count()).rev().find(|&seq| {
        let fact = snapshot.fact(seq);
        fact.entry_type == EntryType::Compaction && fact.parent_seq == Some(leaf_seq as i64)
    })
}

impl App {
    /// Plans, summarizes and appends a compaction entry in pi's shape to `who`'s session.
    pub(crate) async fn compact(
        &self,
        who: &Identity,
        id: &Id,
        request: CompactionRequest,
    ) -> Result<Compacted, AppError> {
        // The leaf to lock: the one asked for, or the session's leaf as recorded (no need to read
        // the entries for it).
        let leaf_id = match &request.leaf_id {
            Some(leaf) => leaf.clone(),
            None => self.session(who, id).await?.leaf_id.ok_or_else(|| {
                AppError::Nothing(
                    NothingReason::EmptySession,
                    "the session has no entries".into(),
                )
            })?,
        };
        // Requests for the same leaf wait for the one in progress and get its entry: they must
        // not spend the caller's summarization slots (and be refused) on work already under way.
        let lock = self.leaf_locks.get(id, &leaf_id);
        let _guard = lock.lock().await;
        // Read once, under the lock: another request may have compacted this leaf meanwhile.
        let loaded = self.load_path(who, id, Some(&leaf_id)).await?;
        if let Some(seq) = loaded
            .leaf_seq
            .and_then(|l| compaction_child(&loaded.view, l))
        {
            let line = self.store.entry_lines(id, seq as i64, seq as i64).await?;
            if let Some((_, raw)) = line.first() {
                return Ok(existing_entry(raw, loaded.record));
            }
        }
        let context = self
            .pipeline_context(who, Endpoint::SessionCompaction)
            .for_session(id);
        let pins = self.store.pins(id).await?;
        let prepared = self.ahead_of(who, id, &request).await;
        let request = CompactionRequest {
            leaf_id: Some(leaf_id.clone()),
            pins: pins.into_iter().map(|p| p.text).collect(),
            prepared,
            ..request
        };
        let outcome = compactor::compact(
            &loaded.session,
            &loaded.view,
            &request,
            &self.pipeline,
            &context,
            &self.prompts,
        )
        .await?;
        if let Some(ahead) = &request.prepared {
            self.prepared_taken(ahead, outcome.prepared == Some(true))
                .await;
        }
        let mut outcome = outcome;
        self.keep_session_recall(who, &loaded, &mut outcome).await;
        let entry = &outcome.entry;
        let record = compaction_record(id, &outcome);
        let append = new_leaf(&loaded.view, outcome.entry.to_entry(), Some(record));
        let now = now_ms();
        match self.store.append(id, &append, now).await {
            Ok(()) => self.index_cache.appended(id, &append.entries).await,
            Err(StoreError::Changed) => {
                // Another replica appended first: if it compacted the same leaf, that is the
                // answer (found by the leaf, without reading the session again).
                if let Some(existing) = self.store.compaction_from(id, &leaf_id).await? {
                    let record = self.session(who, id).await?;
                    return Ok(existing_entry(&existing.raw, record));
                }
                return Err(StoreError::Changed.into());
            }
            Err(error) => return Err(error.into()),
        }
        let (agent, wire) = Endpoint::SessionCompaction.agent_and_wire();
        self.metrics
            .compactions
            .with_label_values(&[agent, wire])
            .inc();
        self.metrics
            .tokens_saved
            .inc_by((entry.tokens_before as u64).saturating_sub(outcome.tokens_after));
        tracing::info!(session = %id, entry = %entry.id, model = %outcome.model,
            tokens_before = entry.tokens_before as u64, tokens_after = outcome.tokens_after, "compaction appended");
        Ok(Compacted::Created {
            outcome: Box::new(outcome),
            session: appended_record(loaded.record, &append, now),
        })
    }

    /// Compacts a session file outside the store (`compactd compact FILE`): the same compactor
    /// and pipeline, the call recorded under the CLI with the file's session id.
    pub(crate) async fn compact_file(
        &self,
        session: &Session,
        request: &CompactionRequest,
    ) -> Result<CompactionOutcome, AppError> {
        let context =
            crate::pipeline::Context::new(Endpoint::Cli, "", None).for_session(&session.header.id);
        Ok(compactor::compact(
            session,
            session.ids(),
            request,
            &self.pipeline,
            &context,
            &self.prompts,
        )
        .await?)
    }

    /// Summarizes the branch left when navigating from the leaf to the target and appends the
    /// branch-summary entry where pi would (spec §9).
    pub(crate) async fn summarize_branch(
        &self,
        who: &Identity,
        id: &Id,
        request: BranchSummaryRequest,
    ) -> Result<BranchSummarized, AppError> {
        let loaded = self.load(who, id).await?;
        let view = self.index(&loaded.record).await?;
        if view.count() as i64 != loaded.entry_count {
            // Appended to between reading the record and the entries: the caller retries.
            return Err(StoreError::Changed.into());
        }
        for (param, value) in [
            ("targetId", Some(&request.target_id)),
            ("fromLeafId", request.from_leaf_id.as_ref()),
        ] {
            if let Some(value) = value
                && loaded.session.get(value).is_none()
            {
                return Err(AppError::invalid(
                    param,
                    format!("no entry with id {value:?} in this session"),
                ));
            }
        }
        let request = BranchSummaryRequest {
            context_window: self.limits.context_window,
            ..request
        };
        let context = self
            .pipeline_context(who, Endpoint::BranchSummary)
            .for_session(id);
        let outcome = compactor::summarize_branch(
            &loaded.session,
            &request,
            &self.pipeline,
            &context,
            &self.prompts,
        )
        .await
        .map_err(|e| match AppError::from(e) {
            AppError::Invalid { message, .. } => AppError::invalid("targetId", message),
            other => other,
        })?;
        let append = new_leaf(&view, outcome.entry.to_entry(), None);
        let now = now_ms();
        self.store.append(id, &append, now).await?;
        self.index_cache.appended(id, &append.entries).await;
        Ok(BranchSummarized { outcome })
    }
}

/// compactd's record of the compaction entry `outcome` wrote for session `id`.
fn compaction_record(id: &Id, outcome: &CompactionOutcome) -> CompactionRecord {
    let entry = &outcome.entry;
    CompactionRecord {
        session_id: id.to_string(),
        entry_id: entry.id.clone(),
        leaf_id: entry.parent_id.clone(),
        first_kept_entry_id: entry.first_kept_entry_id.clone(),
        model: outcome.model.clone(),
        input_tokens: outcome.usage.input_tokens as i64,
        output_tokens: outcome.usage.output_tokens as i64,
        latency_ms: outcome.latency_ms as i64,
        tokens_before: entry.tokens_before as i64,
        tokens_after: outcome.tokens_after as i64,
        summary: entry.summary.clone(),
        created_at_ms: now_ms(),
        fidelity: serde_json::to_string(&outcome.fidelity).ok(),
        loop_detected: outcome.flags.loop_detected,
        cached: outcome.flags.cached,
    }
}

fn existing_entry(raw: &str, session: SessionRecord) -> Compacted {
    Compacted::Existing {
        entry: compactd_core::js_json::from_str(raw).unwrap_or(serde_json::Value::Null),
        line: raw.to_owned(),
        session,
    }
}

/// Appending one entry compactd wrote (typed, with its line), which becomes the leaf, to the
/// session as `view` shows it.
fn new_leaf(
    view: &IndexView,
    entry: compactd_core::session::Entry,
    compaction: Option<CompactionRecord>,
) -> Append {
    let entries = index::appended_rows(view, std::slice::from_ref(&entry));
    Append {
        expected_entry_count: view.count() as i64,
        leaf_id: Some(entry.id),
        context_tokens: context_tokens_at(&entries),
        entries,
        compaction,
    }
}

/// Usage of an outcome as the API shows it.
pub(crate) fn usage_view(usage: &TokenUsage) -> UsageView {
    UsageView {
        input_tokens: usage.input_tokens as i64,
        output_tokens: usage.output_tokens as i64,
    }
}
