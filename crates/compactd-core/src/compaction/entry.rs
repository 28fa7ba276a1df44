//! The entries compactd appends, in pi's exact shape and key order (spec §8.1, §8.2), printed as
//! JavaScript's `JSON.stringify` prints them so that a client can append the line to its file.

use serde::Serialize;

use super::file_ops::FileLists;
use crate::js_json;
use crate::session::time::iso_to_epoch_ms;
use crate::session::{Entry, EntryKind, Message};

/// A compaction entry: child of the leaf it was made from. Serializes in pi's key order:
/// `{"type":"compaction","id","parentId","timestamp","summary","firstKeptEntryId",
/// "tokensBefore","details":{"readFiles","modifiedFiles"},"fromHook":false}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionEntry {
    /// Always `compaction`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: String,
    pub timestamp: String,
    pub summary: String,
    pub first_kept_entry_id: String,
    #[serde(serialize_with = "js_json::serialize_number")]
    pub tokens_before: f64,
    pub details: FileLists,
    /// pi 1.5: what the summary cost (pi's usage shape), written before `fromHook`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<serde_json::Value>,
    pub from_hook: bool,
    /// pi 1.5: the system prompt as it stands (every system message replayed), which the
    /// compaction carries past the messages it replaces.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_message: Option<serde_json::Value>,
}

impl CompactionEntry {
    pub fn new(
        id: String,
        parent_id: String,
        timestamp: String,
        summary: String,
        first_kept_entry_id: String,
        tokens_before: f64,
        details: FileLists,
    ) -> CompactionEntry {
        CompactionEntry {
            kind: "compaction".to_owned(),
            id,
            parent_id,
            timestamp,
            summary,
            first_kept_entry_id,
            tokens_before,
            details,
            usage: None,
            from_hook: false,
            system_message: None,
        }
    }

    /// The JSONL line (without the newline), as JavaScript's `JSON.stringify` prints it.
    pub fn to_line(&self) -> String {
        to_line(self)
    }

    /// The session entry it is, with its line: what reading the line back would give, built
    /// from the typed fields instead.
    pub fn to_entry(&self) -> Entry {
        Entry {
            line: 0,
            raw: self.to_line().into(),
            id: self.id.clone(),
            parent_id: Some(self.parent_id.clone()),
            timestamp: Some(self.timestamp.clone()),
            kind: EntryKind::Compaction {
                first_kept_entry_id: Some(self.first_kept_entry_id.clone()),
                details: Some(details_json(&self.details)),
                from_hook: self.from_hook,
                message: Message::CompactionSummary {
                    summary: self.summary.clone(),
                    tokens_before: self.tokens_before,
                    timestamp: iso_to_epoch_ms(&self.timestamp),
                },
            },
        }
    }
}

/// A branch-summary entry: `parentId` is the attach point (`null` at the root) and `fromId` the
/// same id or `"root"` (the reference's behaviour, spec §8.2).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BranchSummaryEntry {
    /// Always `branch_summary`.
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
    pub parent_id: Option<String>,
    pub timestamp: String,
    pub from_id: String,
    pub summary: String,
    pub details: FileLists,
    pub from_hook: bool,
}

impl BranchSummaryEntry {
    pub fn new(
        id: String,
        parent_id: Option<String>,
        timestamp: String,
        summary: String,
        details: FileLists,
    ) -> BranchSummaryEntry {
        BranchSummaryEntry {
            kind: "branch_summary".to_owned(),
            from_id: parent_id.clone().unwrap_or_else(|| "root".to_owned()),
            id,
            parent_id,
            timestamp,
            summary,
            details,
            from_hook: false,
        }
    }

    pub fn to_line(&self) -> String {
        to_line(self)
    }

    /// The session entry it is, with its line (see [`CompactionEntry::to_entry`]).
    pub fn to_entry(&self) -> Entry {
        Entry {
            line: 0,
            raw: self.to_line().into(),
            id: self.id.clone(),
            parent_id: self.parent_id.clone(),
            timestamp: Some(self.timestamp.clone()),
            kind: EntryKind::BranchSummary {
                from_id: Some(self.from_id.clone()),
                details: Some(details_json(&self.details)),
                from_hook: self.from_hook,
                message: Message::BranchSummary {
                    summary: self.summary.clone(),
                    timestamp: iso_to_epoch_ms(&self.timestamp),
                },
            },
        }
    }
}

fn details_json(details: &FileLists) -> serde_json::Value {
    serde_json::to_value(details).expect("file lists serialize")
}

fn to_line(entry: &impl Serialize) -> String {
    js_json::stringify(&serde_json::to_value(entry).expect("an entry serializes"))
}

/// `summary` without `<read-files>`, `<modified-files>` and `<files>` blocks: a summary carried
/// over as is gets fresh file lists instead of a second copy (spec §5).
pub fn strip_file_tags(summary: &str) -> String {
    let mut out = String::with_capacity(summary.len());
    let mut rest = summary;
    'outer: while !rest.is_empty() {
        for tag in ["read-files", "modified-files", "files"] {
            let open = format!("<{tag}>");
            let close = format!("</{tag}>");
            if let Some(start) = rest.find(&open)
                && let Some(end) = rest[start..].find(&close)
                && !rest[..start].contains('<')
            {
                out.push_str(&rest[..start]);
                rest = &rest[start + end + close.len()..];
                continue 'outer;
            }
        }
        // No (more) tag blocks before the next `<`: copy up to and including it.
        match rest.find('<') {
            Some(next) => {
                out.push_str(&rest[..=next]);
                rest = &rest[next + 1..];
            }
            None => {
                out.push_str(rest);
                break;
            }
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compaction_entries_have_pis_shape_and_key_order() {
        let files = FileLists {
            read_files: vec!["a.md".into()],
            modified_files: vec!["b.rs".into()],
        };
        let entry = CompactionEntry::new(
            "9f2c41be".into(),
            "0a1b2c3d".into(),
            "2026-03-01T12:00:00.000Z".into(),
            "## Goal\nx".into(),
            "11112222".into(),
            180_820.0,
            files,
        );
        assert_eq!(
            entry.to_line(),
            r###"{"type":"compaction","id":"9f2c41be","parentId":"0a1b2c3d","timestamp":"2026-03-01T12:00:00.000Z","summary":"## Goal\nx","firstKeptEntryId":"11112222","tokensBefore":180820,"details":{"readFiles":["a.md"],"modifiedFiles":["b.rs"]},"fromHook":false}"###
        );
        let root = BranchSummaryEntry::new(
            "b1".into(),
            None,
            "t".into(),
            "s".into(),
            FileLists::default(),
        );
        assert_eq!(
            root.to_line(),
            r#"{"type":"branch_summary","id":"b1","parentId":null,"timestamp":"t","fromId":"root","summary":"s","details":{"readFiles":[],"modifiedFiles":[]},"fromHook":false}"#
        );
    }

    /// The typed entry compactd appends is the one its line reads back as, for every shape it
    /// writes: no stage parses the line compactd wrote.
    #[test]
    fn typed_entries_are_what_their_lines_read_back_as() {
        let files = FileLists {
            read_files: vec!["a.md".into(), "é/🦀.rs".into()],
            modified_files: vec!["b.rs".into()],
        };
        let compaction = CompactionEntry::new(
            "9f2c41be".into(),
            "0a1b2c3d".into(),
            "2026-03-01T12:00:00.123Z".into(),
            "## Goal\n\"quoted\" </conversation> 🦀".into(),
            "11112222".into(),
            180_820.5,
            files.clone(),
        );
        let branch = BranchSummaryEntry::new("b1".into(), None, "t".into(), "s".into(), files);
        let attached = BranchSummaryEntry::new(
            "b2".into(),
            Some("p".into()),
            "2026-03-01T12:00:00.000Z".into(),
            String::new(),
            FileLists::default(),
        );
        for (typed, line) in [
            (compaction.to_entry(), compaction.to_line()),
            (branch.to_entry(), branch.to_line()),
            (attached.to_entry(), attached.to_line()),
        ] {
            let read = crate::session::parse_entry_line(1, line.as_bytes()).unwrap();
            assert_eq!(Entry { line: 0, ..read }, typed, "{line}");
        }
    }

    #[test]
    fn file_tags_are_stripped_and_other_markup_kept() {
        let summary = "## Goal\nUse <T> here\n\n<read-files>\na\n</read-files>\n\n<modified-files>\nb\n</modified-files>";
        assert_eq!(strip_file_tags(summary), "## Goal\nUse <T> here");
        assert_eq!(strip_file_tags("no tags"), "no tags");
        assert_eq!(strip_file_tags("x <files>\n- a (RW)\n</files> y"), "x  y");
        assert_eq!(
            strip_file_tags("open <read-files> never closed"),
            "open <read-files> never closed"
        );
    }
}
