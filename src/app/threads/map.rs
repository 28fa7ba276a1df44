//! The map of a session's threads (issue 57, Amp's thread map): the session it was handed off
//! or forked from, and the sessions handed off or forked from it. Both kinds name their parent
//! in their header's `parentSession`, as pi's own forks do; a handoff's session starts with one
//! user message (its prompt), a fork's with the path it copied.

use compactd_core::ids::Id;
use serde_json::Value;

use crate::access::Identity;
use crate::app::{App, AppError};
use compactd_store::SessionRecord;

/// Children looked at, the newest first: a session's map is for reading, not an export.
const MAX_CHILDREN: i64 = 200;

/// A session connected to another.
#[derive(Debug, Clone)]
pub(crate) struct Linked {
    pub(crate) id: String,
    /// `handoff` or `fork`.
    pub(crate) kind: &'static str,
    pub(crate) title: Option<String>,
    pub(crate) created_at_ms: i64,
}

/// Where a session came from and what came from it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ThreadMap {
    /// A stored session of the caller's.
    pub(crate) parent: Option<Linked>,
    /// A parent outside compactd (a pi session file's path).
    pub(crate) parent_file: Option<String>,
    pub(crate) children: Vec<Linked>,
}

/// The `parentSession` of a stored header line.
fn parent_of(record: &SessionRecord) -> Option<String> {
    let header: Value = serde_json::from_str(&record.header).ok()?;
    header["parentSession"]
        .as_str()
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

fn linked(record: &SessionRecord) -> Linked {
    Linked {
        id: record.session_id.clone(),
        kind: if record.entry_count == 1 {
            "handoff"
        } else {
            "fork"
        },
        title: record.title_line.clone(),
        created_at_ms: record.created_at_ms,
    }
}

impl App {
    /// The threads connected to `who`'s session `id`.
    pub(crate) async fn thread_map(&self, who: &Identity, id: &Id) -> Result<ThreadMap, AppError> {
        let record = self.session(who, id).await?;
        let mut map = ThreadMap::default();
        if let Some(parent) = parent_of(&record) {
            // A parent that is no id of compactd's is the pi file it came from.
            let stored = match Id::parse(parent.as_str()) {
                Ok(parent_id) => self.session(who, &parent_id).await.map(Some),
                Err(_) => Ok(None),
            };
            match stored {
                Ok(Some(parent)) => map.parent = Some(linked(&parent)),
                Ok(None) | Err(AppError::NotFound(_)) => map.parent_file = Some(parent),
                Err(other) => return Err(other),
            }
        }
        // The listing's search matches a header's text: every child's names this id.
        let candidates = self
            .store
            .list_sessions(&who.tenant, MAX_CHILDREN, None, Some(id))
            .await?;
        map.children = candidates
            .iter()
            .filter(|c| c.session_id != id.as_str() && parent_of(c).as_deref() == Some(id.as_str()))
            .map(linked)
            .collect();
        map.children
            .sort_by_key(|c| std::cmp::Reverse(c.created_at_ms));
        Ok(map)
    }
}
