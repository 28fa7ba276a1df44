//! The entries compactd appends, in pi's exact shape and key order (spec §8.1, §8.2), printed as
//! JavaScript's `JSON.stringify` prints them so that a client can append the line to its file.

use serde_json::{Value, json};

use super::file_ops::FileLists;
use crate::js_json;

/// A compaction entry: child of the leaf it was made from.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionEntry<'a> {
    pub id: &'a str,
    pub parent_id: &'a str,
    pub timestamp: &'a str,
    pub summary: &'a str,
    pub first_kept_entry_id: &'a str,
    pub tokens_before: f64,
    pub files: &'a FileLists,
}

impl CompactionEntry<'_> {
    /// `{"type":"compaction","id","parentId","timestamp","summary","firstKeptEntryId",
    /// "tokensBefore","details":{"readFiles","modifiedFiles"},"fromHook":false}`
    pub fn to_value(&self) -> Value {
        json!({
            "type": "compaction",
            "id": self.id,
            "parentId": self.parent_id,
            "timestamp": self.timestamp,
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": js_number(self.tokens_before),
            "details": {"readFiles": self.files.read_files, "modifiedFiles": self.files.modified_files},
            "fromHook": false,
        })
    }

    /// The JSONL line (without the newline).
    pub fn to_line(&self) -> String {
        js_json::stringify(&self.to_value())
    }
}

/// A branch-summary entry: `parentId` is the attach point (`null` at the root) and `fromId` the
/// same id or `"root"` (the reference's behaviour, spec §8.2).
#[derive(Debug, Clone, PartialEq)]
pub struct BranchSummaryEntry<'a> {
    pub id: &'a str,
    pub parent_id: Option<&'a str>,
    pub timestamp: &'a str,
    pub summary: &'a str,
    pub files: &'a FileLists,
}

impl BranchSummaryEntry<'_> {
    pub fn to_value(&self) -> Value {
        json!({
            "type": "branch_summary",
            "id": self.id,
            "parentId": self.parent_id,
            "timestamp": self.timestamp,
            "fromId": self.parent_id.unwrap_or("root"),
            "summary": self.summary,
            "details": {"readFiles": self.files.read_files, "modifiedFiles": self.files.modified_files},
            "fromHook": false,
        })
    }

    pub fn to_line(&self) -> String {
        js_json::stringify(&self.to_value())
    }
}

/// Integral token counts as JSON integers (pi's are JavaScript numbers).
fn js_number(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() < 9.0e15 {
        Value::from(value as i64)
    } else {
        Value::from(value)
    }
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
        let entry = CompactionEntry {
            id: "9f2c41be",
            parent_id: "0a1b2c3d",
            timestamp: "2026-03-01T12:00:00.000Z",
            summary: "## Goal\nx",
            first_kept_entry_id: "11112222",
            tokens_before: 180_820.0,
            files: &files,
        };
        assert_eq!(
            entry.to_line(),
            r###"{"type":"compaction","id":"9f2c41be","parentId":"0a1b2c3d","timestamp":"2026-03-01T12:00:00.000Z","summary":"## Goal\nx","firstKeptEntryId":"11112222","tokensBefore":180820,"details":{"readFiles":["a.md"],"modifiedFiles":["b.rs"]},"fromHook":false}"###
        );
        let root = BranchSummaryEntry {
            id: "b1",
            parent_id: None,
            timestamp: "t",
            summary: "s",
            files: &FileLists::default(),
        };
        assert_eq!(
            root.to_line(),
            r#"{"type":"branch_summary","id":"b1","parentId":null,"timestamp":"t","fromId":"root","summary":"s","details":{"readFiles":[],"modifiedFiles":[]},"fromHook":false}"#
        );
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
