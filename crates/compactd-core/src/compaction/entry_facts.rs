//! Per-entry facts: what planning and the context estimate need to know about an entry, derived
//! once when the entry arrives so that a stored session is never re-parsed to plan or to append.
//!
//! The one derived value that depends on more than the entry is its [`ContextState`]: the
//! context estimate (`estimateContextTokens(buildSessionContext(path).messages)`) if this entry
//! were the leaf. It composes along the path: an entry's state follows from its parent's state
//! and its own message, except at a compaction, whose context restarts at its summary and the
//! entries it kept (found by walking the kept range's facts, never by reading lines).

use super::tokens::{calculate_context_tokens, estimate_tokens};
use crate::session::EntryType;
use crate::session::{Entry, EntryKind, Session};

/// The context estimate at an entry, in the two parts `estimateContextTokens` adds: the last
/// valid usage in the context and the estimate of every message after it (of all messages when
/// none has usage).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ContextState {
    pub usage: Option<f64>,
    pub trailing: u64,
}

impl ContextState {
    /// The estimate, added exactly as [`estimate_context_tokens`](super::estimate_context_tokens)
    /// adds it.
    pub fn tokens(&self) -> f64 {
        match self.usage {
            Some(usage) => usage + self.trailing as f64,
            None => self.trailing as f64,
        }
    }

    /// The state after one more context message.
    fn then(self, message: &MessageFacts) -> ContextState {
        match message.usage {
            Some(usage) => ContextState {
                usage: Some(usage),
                trailing: 0,
            },
            None => ContextState {
                usage: self.usage,
                trailing: self.trailing + message.tokens,
            },
        }
    }
}

/// What an entry adds to a context it is part of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MessageFacts {
    /// `estimateTokens` of the message.
    pub tokens: u64,
    /// `calculateContextTokens` of its usage, when the usage is valid.
    pub usage: Option<f64>,
}

/// The facts of one entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EntryFacts {
    /// The message's role, for `message` entries.
    pub role: Option<String>,
    /// The message the entry contributes to a context (`toMessage`): message, custom-message and
    /// non-empty branch-summary entries, and a compaction's summary (which only ever leads a
    /// context). `None` for entries that never contribute.
    pub message: Option<MessageFacts>,
    /// A compaction's `firstKeptEntryId`.
    pub first_kept_id: Option<String>,
    /// The context estimate if this entry were the leaf.
    pub context: ContextState,
}

/// One entry of a kept range, root first, as [`derive`] needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeptFacts {
    pub message: Option<MessageFacts>,
    pub is_compaction: bool,
}

impl EntryFacts {
    /// What this entry contributes to a kept range.
    pub fn kept(&self, entry_type: &EntryType) -> KeptFacts {
        KeptFacts {
            message: self.message,
            is_compaction: *entry_type == EntryType::Compaction,
        }
    }
}

/// Whether the entry is part of a context when it is on the path (`buildSessionContext`).
fn contributes(entry: &Entry) -> bool {
    match &entry.kind {
        EntryKind::Message(_) | EntryKind::CustomMessage { .. } => true,
        EntryKind::BranchSummary { .. } => entry.summary().is_some_and(|s| !s.is_empty()),
        EntryKind::Compaction { .. } => true,
        _ => false,
    }
}

/// The facts of `entry`. `parent` is its parent's context state (the default for a root);
/// `kept` is asked, only for a compaction, for the entries from its first kept entry to its
/// parent (root first; empty when the first kept entry is not on its path).
pub fn derive(
    entry: &Entry,
    parent: ContextState,
    kept: impl FnOnce(&str) -> Vec<KeptFacts>,
) -> EntryFacts {
    let message = entry
        .as_message()
        .filter(|_| contributes(entry))
        .map(|m| MessageFacts {
            tokens: estimate_tokens(m),
            usage: m.valid_usage().map(calculate_context_tokens),
        });
    let first_kept_id = match &entry.kind {
        EntryKind::Compaction {
            first_kept_entry_id,
            ..
        } => first_kept_entry_id.clone(),
        _ => None,
    };
    let context = match (&entry.kind, message) {
        // A compaction's context: its summary, then the kept entries that contribute
        // (compactions among them do not: only the latest one leads a context).
        (EntryKind::Compaction { .. }, Some(summary)) => {
            let kept = first_kept_id.as_deref().map(kept).unwrap_or_default();
            kept.iter()
                .filter(|k| !k.is_compaction)
                .filter_map(|k| k.message.as_ref())
                .fold(ContextState::default().then(&summary), |state, m| {
                    state.then(m)
                })
        }
        (_, Some(message)) => parent.then(&message),
        (_, None) => parent,
    };
    EntryFacts {
        role: entry.stored_message().map(|m| m.role().to_owned()),
        message,
        first_kept_id,
        context,
    }
}

/// The facts of every entry of a parsed session, in file order, following its resolved links
/// (an uploaded file may name a later line as a parent; lenient reading may have cut links).
pub fn derive_all(session: &Session) -> Vec<EntryFacts> {
    let count = session.entries.len();
    let mut facts: Vec<Option<EntryFacts>> = vec![None; count];
    let mut pending: Vec<usize> = Vec::new();
    for start in 0..count {
        // Climb to the nearest entry already derived (or a root), then derive down.
        let mut current = Some(start);
        while let Some(index) = current {
            if facts[index].is_some() || pending.len() > count {
                break;
            }
            pending.push(index);
            current = session.parent_of(index);
        }
        while let Some(index) = pending.pop() {
            let parent = session
                .parent_of(index)
                .and_then(|p| facts[p].as_ref())
                .map_or_else(ContextState::default, |f| f.context);
            let derived = derive(&session.entries[index], parent, |first_kept| {
                kept_range(session, &facts, index, first_kept)
            });
            facts[index] = Some(derived);
        }
    }
    facts.into_iter().map(Option::unwrap_or_default).collect()
}

/// The kept range of the compaction at `index`: its ancestors from `first_kept` up to its parent,
/// root first; empty when `first_kept` is not among them.
fn kept_range(
    session: &Session,
    facts: &[Option<EntryFacts>],
    index: usize,
    first_kept: &str,
) -> Vec<KeptFacts> {
    let mut range = Vec::new();
    let mut current = session.parent_of(index);
    while let Some(i) = current {
        let entry = &session.entries[i];
        let fact = facts[i].as_ref().cloned().unwrap_or_default();
        range.push(fact.kept(entry.entry_type()));
        if entry.id == first_kept {
            range.reverse();
            return range;
        }
        if range.len() > session.entries.len() {
            break;
        }
        current = session.parent_of(i);
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::{build_session_context, estimate_context_tokens};
    use crate::session::ParseOptions;

    fn fixture(name: &str) -> Session {
        let path = compactd_testkit::fixtures().join(name);
        Session::parse(&std::fs::read(path).unwrap(), ParseOptions::default()).unwrap()
    }

    /// The derived state at every entry equals the estimate over the rebuilt context at that
    /// entry, on real sessions with compactions and branches.
    #[test]
    fn the_context_state_of_every_entry_is_the_estimate_of_its_context() {
        for name in ["large-session.jsonl", "before-compaction.jsonl"] {
            let session = fixture(name);
            let facts = derive_all(&session);
            assert_eq!(facts.len(), session.entries.len());
            for (index, fact) in facts.iter().enumerate() {
                let path = session.path(index);
                let expected = estimate_context_tokens(&build_session_context(&path).messages());
                assert_eq!(
                    fact.context.tokens(),
                    expected.tokens,
                    "{name} entry {index}"
                );
            }
        }
    }

    #[test]
    fn a_compaction_restarts_the_context_at_its_summary_and_kept_entries() {
        let text = concat!(
            r#"{"type":"session","version":3,"id":"s","timestamp":"t","cwd":"/"}"#,
            "\n",
            r#"{"type":"message","id":"a","parentId":null,"timestamp":"t","message":{"role":"user","content":"aaaaaaaa","timestamp":1}}"#,
            "\n",
            r#"{"type":"message","id":"b","parentId":"a","timestamp":"t","message":{"role":"assistant","content":[{"type":"text","text":"bb"}],"usage":{"input":100,"output":10,"cacheRead":0,"cacheWrite":0,"totalTokens":110},"stopReason":"stop","timestamp":2}}"#,
            "\n",
            r#"{"type":"message","id":"c","parentId":"b","timestamp":"t","message":{"role":"user","content":"cccccccccccc","timestamp":3}}"#,
            "\n",
            r#"{"type":"compaction","id":"d","parentId":"c","timestamp":"t","summary":"ssss","firstKeptEntryId":"c","tokensBefore":113}"#,
            "\n",
            r#"{"type":"message","id":"e","parentId":"d","timestamp":"t","message":{"role":"user","content":"eeee","timestamp":4}}"#,
            "\n",
        );
        let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
        let facts = derive_all(&session);
        let tokens: Vec<f64> = facts.iter().map(|f| f.context.tokens()).collect();
        // a: 2; b: usage 110; c: 110 + 3; d: summary 1 + kept c 3; e: + 1.
        assert_eq!(tokens, vec![2.0, 110.0, 113.0, 4.0, 5.0]);
        assert_eq!(facts[3].first_kept_id.as_deref(), Some("c"));
        assert_eq!(facts[1].role.as_deref(), Some("assistant"));
    }
}
