//! Linking entries into a tree through `parentId`, and walking the active path (spec §1.7).
//!
//! The reference loops forever on a `parentId` cycle and silently treats a dangling parent as a
//! root; strict reading rejects both with the line at fault, lenient reading repairs them.

use std::hash::BuildHasher;

use hashbrown::HashTable;

use super::entry::Entry;
use super::parse::{LineIssue, ParseError, ParseErrorKind};

type Linked = (IdIndex, Vec<Option<usize>>);

/// Entries' indices by id. The table holds indices only and hashes the entries' own ids, so
/// linking a session copies no id; foldhash (seeded per process) rather than SipHash, whose
/// per-id cost made linking the 21,000 entries of a 21 MB session a visible single-threaded step
/// of planning between the parallel parts (BENCHMARKS.md).
#[derive(Debug, Clone, Default)]
pub(super) struct IdIndex {
    table: HashTable<usize>,
    hasher: foldhash::fast::RandomState,
}

impl IdIndex {
    pub(super) fn with_capacity(capacity: usize) -> IdIndex {
        IdIndex {
            table: HashTable::with_capacity(capacity),
            hasher: foldhash::fast::RandomState::default(),
        }
    }

    /// The index of the entry of `entries` with this id.
    pub(super) fn get(&self, entries: &[Entry], id: &str) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(id), |&i| entries[i].id == id)
            .copied()
    }

    /// Indexes `entries[index]` under its id; the index that had that id before, which the new
    /// one replaces (the later line wins, as in pi).
    pub(super) fn insert(&mut self, entries: &[Entry], index: usize) -> Option<usize> {
        let hasher = &self.hasher;
        let id = entries[index].id.as_str();
        match self.table.entry(
            hasher.hash_one(id),
            |&i| entries[i].id == id,
            |&i| hasher.hash_one(entries[i].id.as_str()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut found) => {
                Some(std::mem::replace(found.get_mut(), index))
            }
            hashbrown::hash_table::Entry::Vacant(place) => {
                place.insert(index);
                None
            }
        }
    }
}

pub(super) fn link(
    entries: &[Entry],
    lenient: bool,
    repairs: &mut Vec<LineIssue>,
) -> Result<Linked, ParseError> {
    let mut problem = |line: usize, kind: ParseErrorKind, message: String| {
        if lenient {
            repairs.push(LineIssue {
                line,
                kind,
                message,
            });
            Ok(())
        } else {
            Err(ParseError::at(line, kind, message))
        }
    };

    let mut ids = IdIndex::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        if let Some(first) = ids.insert(entries, index) {
            problem(
                entry.line,
                ParseErrorKind::DuplicateId,
                format!(
                    "duplicate id {:?} (already used on line {})",
                    entry.id, entries[first].line
                ),
            )?;
        }
    }

    let mut parents: Vec<Option<usize>> = Vec::with_capacity(entries.len());
    for entry in entries {
        let parent = match entry.parent_id.as_deref() {
            None => None,
            Some(parent_id) => match ids.get(entries, parent_id) {
                Some(parent) => Some(parent),
                None => {
                    problem(
                        entry.line,
                        ParseErrorKind::DanglingParent,
                        format!("parentId {parent_id:?} names no entry in the session"),
                    )?;
                    None
                }
            },
        };
        parents.push(parent);
    }

    // Cycle detection: walk up from every entry, marking entries in progress. Reaching an entry in
    // progress closes a cycle. In an append-only file parents come before their children, so the
    // link at fault is the one that points at its own line or a later one; that link is reported
    // (strict) or cut (lenient). Every cycle has such a link.
    const UNSEEN: u8 = 0;
    const IN_PROGRESS: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; entries.len()];
    let mut stack: Vec<usize> = Vec::new();
    for start in 0..entries.len() {
        let mut current = Some(start);
        while let Some(index) = current {
            match state[index] {
                DONE => break,
                IN_PROGRESS => {
                    let cycle_start = stack.iter().rposition(|&i| i == index).unwrap_or(0);
                    let culprit = stack[cycle_start..]
                        .iter()
                        .copied()
                        .find(|&i| parents[i].is_some_and(|p| p >= i))
                        .unwrap_or(index);
                    let entry: &Entry = &entries[culprit];
                    problem(
                        entry.line,
                        ParseErrorKind::ParentCycle,
                        format!(
                            "parentId {:?} closes a cycle: entry {:?} would be its own ancestor",
                            entry.parent_id.as_deref().unwrap_or_default(),
                            entry.id
                        ),
                    )?;
                    parents[culprit] = None;
                    break;
                }
                _ => {
                    state[index] = IN_PROGRESS;
                    stack.push(index);
                    current = parents[index];
                }
            }
        }
        for index in stack.drain(..) {
            state[index] = DONE;
        }
    }
    Ok((ids, parents))
}

/// Indices from the root to `leaf`. `link` guarantees there is no cycle; the step bound is a
/// second guard so that a bug can never turn into an endless loop.
pub(super) fn path(parents: &[Option<usize>], leaf: usize) -> Vec<usize> {
    let mut path = Vec::new();
    let mut current = Some(leaf);
    while let Some(index) = current {
        if path.len() > parents.len() {
            break;
        }
        path.push(index);
        current = parents[index];
    }
    path.reverse();
    path
}
