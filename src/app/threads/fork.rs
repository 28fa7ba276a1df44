//! Fork (issue 57): a new session holding the path from the root to one entry of a stored
//! session, as pi's `/fork` makes one. Its header is the parent's with a new id and time and a
//! `parentSession` naming the session it came from (pi writes the parent's file there; compactd
//! writes the parent's id, which is what locates it here). The new session is the caller's,
//! stored as an upload is, so everything a session has (compactions, recall, pins) works on it.

use compactd_core::ids::Id;
use serde_json::{Map, Value};

use crate::access::Identity;
use crate::app::sessions::Uploaded;
use crate::app::{App, AppError};
use compactd_core::session::{Entry, Header};

impl App {
    /// A new session of `who` holding the path of session `id` to `entry_id`.
    pub(crate) async fn fork(
        &self,
        who: &Identity,
        id: &Id,
        entry_id: &str,
    ) -> Result<Uploaded, AppError> {
        if entry_id.trim().is_empty() {
            return Err(AppError::invalid("entryId", "entryId is required"));
        }
        let loaded = self.load(who, id).await?;
        let path = loaded
            .session
            .active_path(Some(entry_id))
            .map_err(|e| AppError::invalid("entryId", e.to_string()))?;
        let file = forked_file(&loaded.session.header, id, &path);
        self.upload(who, file, false).await
    }
}

/// The header line of a session made from `header`'s (a fork, a handoff): the parent's fields
/// with a new id and time, version 3, and `parentSession` naming `parent`.
pub(crate) fn child_header(header: &Header, parent: &str) -> String {
    let mut fields: Map<String, Value> = serde_json::from_str(&header.raw).unwrap_or_default();
    fields.insert("type".into(), "session".into());
    fields.insert("version".into(), 3.into());
    fields.insert("id".into(), uuid::Uuid::new_v4().to_string().into());
    fields.insert(
        "timestamp".into(),
        compactd_core::session::time::now_iso().into(),
    );
    fields.insert("parentSession".into(), parent.into());
    Value::Object(fields).to_string()
}

/// The JSONL of the fork: the parent's header renamed, then the path's entries as stored.
pub(crate) fn forked_file(header: &Header, parent: &str, path: &[&Entry]) -> String {
    let mut file = child_header(header, parent);
    file.push('\n');
    for entry in path {
        file.push_str(&entry.raw);
        file.push('\n');
    }
    file
}
