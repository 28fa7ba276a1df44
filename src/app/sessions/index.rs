//! The facts of a stored session's entries in memory: its tree without its lines, for appending
//! and planning in O(new entries) and O(path) instead of re-reading and re-parsing the session.
//!
//! An index is cached per session, bounded by bytes, and always checked against the session
//! record just read from the store before use: another replica may have appended since. Sessions
//! only grow, so an index behind the record is extended with the facts of the new rows; one whose
//! last entry is not the record's leaf is dropped and read again.

use compactd_core::session::EntryType;
use std::collections::HashMap;
use std::sync::{Arc, RwLock, RwLockReadGuard};

use crate::app::sessions::parse_stored;
use crate::app::{App, AppError};
use compactd_core::compaction::entry_facts::{
    self, ContextState, EntryFacts, KeptFacts, MessageFacts,
};
use compactd_core::session::{Entry, IdSet, Session};
use compactd_store::{FactRecord, NewEntry, SessionRecord, Store, StoreError};

/// The derivation of the facts that rows written now hold. Raise it when `compaction::entry_facts`
/// changes what it derives: sessions stored with an older one are derived again on first use.
pub(crate) const FACTS_VERSION: i64 = 1;

impl App {
    /// The index of `record`'s session as of `record`, deriving the facts first for a session
    /// stored before they existed (or with an older derivation).
    pub(crate) async fn index(&self, record: &SessionRecord) -> Result<IndexView, AppError> {
        if record.facts_version < FACTS_VERSION {
            self.derive_facts(&record.session_id).await?;
        }
        Ok(self.index_cache.view(self.store.as_ref(), record).await?)
    }

    /// Derives and stores the facts of a session's rows from its lines (once per session: rows
    /// stored before this version of compactd, and the start-up sweep).
    pub(crate) async fn derive_facts(&self, id: &str) -> Result<(), AppError> {
        let Some(record) = self.store.get_session(id).await? else {
            return Ok(());
        };
        if record.facts_version >= FACTS_VERSION {
            return Ok(());
        }
        let entries = self.store.entries(id).await?;
        let session = parse_stored(&record, &entries).await?;
        // Lenient reading never drops a stored line (each was accepted once), so the rows and the
        // entries line up; if one no longer reads, positions would shift: refuse to guess.
        if session.entries.len() != entries.len() {
            return Err(AppError::Internal(anyhow::anyhow!(
                "session {id}: {} stored lines read as {} entries; facts not derived",
                entries.len(),
                session.entries.len()
            )));
        }
        let rows = session_rows(&session);
        self.store.write_facts(id, &rows, FACTS_VERSION).await?;
        self.index_cache.forget(id).await;
        tracing::info!(session = %id, entries = rows.len(), "entry facts derived");
        Ok(())
    }

    /// Derives the facts of every session stored before them, a few at a time (start-up).
    pub async fn derive_stale_facts(&self) -> Result<usize, AppError> {
        let mut derived = 0;
        loop {
            let stale = self.store.stale_sessions(FACTS_VERSION, 16).await?;
            if stale.is_empty() {
                return Ok(derived);
            }
            for id in &stale {
                self.derive_facts(id).await?;
                derived += 1;
            }
        }
    }
}

/// The facts of the first entries of a session, with its ids.
#[derive(Debug, Default)]
pub(crate) struct SessionIndex {
    facts: Vec<FactRecord>,
    ids: HashMap<String, u32>,
    /// Approximate heap bytes, for the cache's bound.
    bytes: usize,
}

impl SessionIndex {
    /// Adds the facts of the next rows; `false` when they do not continue this index.
    fn extend(&mut self, rows: Vec<FactRecord>) -> bool {
        for row in rows {
            if row.seq != self.facts.len() as i64 {
                return false;
            }
            self.bytes += row_bytes(&row);
            self.ids.insert(row.entry_id.clone(), row.seq as u32);
            self.facts.push(row);
        }
        true
    }
}

fn row_bytes(row: &FactRecord) -> usize {
    std::mem::size_of::<FactRecord>()
        + 2 * row.entry_id.len()
        + row.entry_type.as_str().len()
        + row.role.as_ref().map_or(0, String::len)
        + row.first_kept_id.as_ref().map_or(0, String::len)
        // The id map's slot: key, value and the table's overhead.
        + std::mem::size_of::<(String, u32)>()
        + 16
}

/// Session indexes, bounded by bytes.
#[derive(Clone)]
pub(crate) struct IndexCache {
    cache: moka::future::Cache<String, Arc<RwLock<SessionIndex>>>,
}

impl IndexCache {
    pub(crate) fn new(max_bytes: u64) -> IndexCache {
        IndexCache {
            cache: moka::future::Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_, index: &Arc<RwLock<SessionIndex>>| {
                    let bytes = index.read().map_or(0, |i| i.bytes);
                    u32::try_from(bytes).unwrap_or(u32::MAX)
                })
                .build(),
        }
    }

    /// Bytes held (approximately), for the metrics and the benchmark.
    pub(crate) async fn weighted_bytes(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.weighted_size()
    }

    pub(crate) async fn forget(&self, session_id: &str) {
        self.cache.invalidate(session_id).await;
    }

    /// The index of `record`'s session as of `record`: cached and checked, extended with the
    /// rows appended since, or read whole.
    pub(crate) async fn view(
        &self,
        store: &dyn Store,
        record: &SessionRecord,
    ) -> Result<IndexView, StoreError> {
        let count = record.entry_count.max(0) as usize;
        if let Some(index) = self.cache.get(&record.session_id).await {
            let (have, last_ok) = {
                let i = index.read().expect("index lock");
                let last_ok = count == 0
                    || i.facts.get(count - 1).map(|f| Some(&f.entry_id))
                        == Some(record.leaf_id.as_ref());
                (i.facts.len(), last_ok)
            };
            if have >= count && last_ok {
                return Ok(IndexView { index, count });
            }
            // Sessions only grow and ids are never reused: rows once read stay true.
            if have < count {
                let rows = store.entry_facts(&record.session_id, have as i64).await?;
                let extended = index.write().expect("index lock").extend(rows);
                let consistent = extended && {
                    let i = index.read().expect("index lock");
                    i.facts.len() >= count
                        && i.facts.get(count - 1).map(|f| Some(&f.entry_id))
                            == Some(record.leaf_id.as_ref())
                };
                if consistent {
                    // Inserted again so that the cache weighs what it holds now.
                    self.cache
                        .insert(record.session_id.clone(), index.clone())
                        .await;
                    return Ok(IndexView { index, count });
                }
            }
            self.cache.invalidate(&record.session_id).await;
        }
        let mut fresh = SessionIndex::default();
        fresh.extend(store.entry_facts(&record.session_id, 0).await?);
        let index = Arc::new(RwLock::new(fresh));
        self.cache
            .insert(record.session_id.clone(), index.clone())
            .await;
        Ok(IndexView { index, count })
    }

    /// Records rows this replica just appended, when the cached index ends where they start.
    pub(crate) async fn appended(&self, session_id: &str, rows: &[NewEntry]) {
        if let Some(index) = self.cache.get(session_id).await {
            let ok = {
                let mut i = index.write().expect("index lock");
                let continues = rows
                    .first()
                    .is_some_and(|r| r.facts.seq == i.facts.len() as i64);
                continues && i.extend(rows.iter().map(|r| r.facts.clone()).collect())
            };
            if ok {
                self.cache.insert(session_id.to_owned(), index).await;
            } else {
                self.cache.invalidate(session_id).await;
            }
        }
    }
}

/// A session's index as of one record: its first `count` entries.
#[derive(Clone)]
pub(crate) struct IndexView {
    index: Arc<RwLock<SessionIndex>>,
    count: usize,
}

impl IndexView {
    /// Reads the view (synchronously: never held across an await).
    pub(crate) fn read(&self) -> Snapshot<'_> {
        Snapshot {
            index: self.index.read().expect("index lock"),
            count: self.count,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

impl IdSet for IndexView {
    fn contains_id(&self, id: &str) -> bool {
        self.read().seq_of(id).is_some()
    }
}

/// A read-locked view.
pub(crate) struct Snapshot<'a> {
    index: RwLockReadGuard<'a, SessionIndex>,
    count: usize,
}

impl Snapshot<'_> {
    pub(crate) fn seq_of(&self, id: &str) -> Option<usize> {
        self.index
            .ids
            .get(id)
            .map(|&s| s as usize)
            .filter(|&s| s < self.count)
    }

    pub(crate) fn fact(&self, seq: usize) -> &FactRecord {
        &self.index.facts[seq]
    }

    /// Positions from the root to `leaf`.
    pub(crate) fn path(&self, leaf: usize) -> Vec<usize> {
        let mut path = Vec::new();
        let mut current = Some(leaf);
        while let Some(seq) = current {
            // Links were checked when the rows were written; the bound only guards a bug.
            if path.len() > self.count {
                break;
            }
            path.push(seq);
            current = self.index.facts[seq]
                .parent_seq
                .map(|p| p as usize)
                .filter(|&p| p < self.count);
        }
        path.reverse();
        path
    }

    /// The context state at `seq`.
    pub(crate) fn context(&self, seq: usize) -> ContextState {
        context_of(&self.index.facts[seq])
    }

    /// The kept range of a compaction whose parent is `parent`: the ancestors from `first_kept`
    /// up to `parent`, root first; empty when `first_kept` is not among them.
    pub(crate) fn kept_range(&self, parent: Option<usize>, first_kept: &str) -> Vec<KeptFacts> {
        let mut range = Vec::new();
        for seq in parent
            .map(|p| self.path(p))
            .unwrap_or_default()
            .into_iter()
            .rev()
        {
            let fact = &self.index.facts[seq];
            range.push(kept_of(fact));
            if fact.entry_id == first_kept {
                range.reverse();
                return range;
            }
        }
        Vec::new()
    }
}

/// A stored row's context state.
pub(crate) fn context_of(fact: &FactRecord) -> ContextState {
    ContextState {
        usage: fact.ctx_usage,
        trailing: fact.ctx_trailing.max(0) as u64,
    }
}

/// What a stored row adds to a kept range.
fn kept_of(fact: &FactRecord) -> KeptFacts {
    KeptFacts {
        message: message_of(fact),
        is_compaction: fact.entry_type == EntryType::Compaction,
    }
}

fn message_of(fact: &FactRecord) -> Option<MessageFacts> {
    fact.tokens.map(|tokens| MessageFacts {
        tokens: tokens.max(0) as u64,
        usage: fact.usage_tokens,
    })
}

/// The stored row of an entry at `seq`, linked to `parent_seq`, with its derived facts.
pub(crate) fn new_entry(
    entry: &Entry,
    seq: i64,
    parent_seq: Option<i64>,
    derived: EntryFacts,
) -> NewEntry {
    NewEntry {
        facts: FactRecord {
            seq,
            entry_id: entry.id.clone(),
            parent_seq,
            entry_type: entry.entry_type().clone(),
            role: derived.role,
            tokens: derived.message.map(|m| m.tokens as i64),
            usage_tokens: derived.message.and_then(|m| m.usage),
            ctx_usage: derived.context.usage,
            ctx_trailing: derived.context.trailing as i64,
            first_kept_id: derived.first_kept_id,
        },
        parent_id: entry.parent_id.clone(),
        raw: entry.raw.to_string(),
    }
}

/// The rows of a whole parsed session, positioned from 0, facts derived along its resolved links.
pub(crate) fn session_rows(session: &Session) -> Vec<FactRecord> {
    entry_facts::derive_all(session)
        .into_iter()
        .enumerate()
        .map(|(index, derived)| {
            let entry = &session.entries[index];
            new_entry(
                entry,
                index as i64,
                session.parent_of(index).map(|p| p as i64),
                derived,
            )
            .facts
        })
        .collect()
}

/// Facts for entries appended after the view's rows, in order: each entry's parent is a stored
/// entry or one before it in `new`.
pub(crate) fn appended_rows(view: &IndexView, new: &[Entry]) -> Vec<NewEntry> {
    let snapshot = view.read();
    let first_seq = view.count() as i64;
    let mut rows: Vec<NewEntry> = Vec::with_capacity(new.len());
    for (i, entry) in new.iter().enumerate() {
        // Where the parent is: stored (seq) or earlier in this request (index into rows).
        let parent_new = entry
            .parent_id
            .as_deref()
            .and_then(|p| rows.iter().rposition(|r| r.facts.entry_id == p));
        let parent_stored = match parent_new {
            Some(_) => None,
            None => entry.parent_id.as_deref().and_then(|p| snapshot.seq_of(p)),
        };
        let parent_state = match (parent_new, parent_stored) {
            (Some(r), _) => context_of(&rows[r].facts),
            (None, Some(s)) => snapshot.context(s),
            (None, None) => ContextState::default(),
        };
        let derived = entry_facts::derive(entry, parent_state, |first_kept| {
            // The kept range may run through the new rows and on into the stored ones.
            let mut range: Vec<KeptFacts> = Vec::new();
            let mut current = parent_new;
            while let Some(r) = current {
                let row = &rows[r].facts;
                range.push(kept_of(row));
                if row.entry_id == first_kept {
                    range.reverse();
                    return range;
                }
                let parent = rows[r].parent_id.as_deref();
                current =
                    parent.and_then(|p| rows[..r].iter().rposition(|x| x.facts.entry_id == p));
                if current.is_none() {
                    let stored = parent.and_then(|p| snapshot.seq_of(p));
                    let mut rest = snapshot.kept_range(stored, first_kept);
                    if rest.is_empty() {
                        return Vec::new();
                    }
                    range.reverse();
                    rest.extend(range);
                    return rest;
                }
            }
            snapshot.kept_range(parent_stored, first_kept)
        });
        let parent_seq = match (parent_new, parent_stored) {
            (Some(r), _) => Some(rows[r].facts.seq),
            (None, Some(s)) => Some(s as i64),
            (None, None) => None,
        };
        rows.push(new_entry(entry, first_seq + i as i64, parent_seq, derived));
    }
    rows
}
