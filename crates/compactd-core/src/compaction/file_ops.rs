//! File-operation tracking (spec §5): which files the summarized part read and modified, carried
//! over from the previous compaction, and the tag blocks appended to a summary.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::js_json::cmp_utf16;
use crate::session::{Block, Entry, EntryKind, Message};
use crate::transcript::files::{FileOp, pi_file_op};

/// Paths touched by `read`, `write` and `edit` tool calls, exactly as the calls wrote them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOperations {
    pub read: BTreeSet<String>,
    pub written: BTreeSet<String>,
    pub edited: BTreeSet<String>,
}

/// The sorted lists stored in a compaction entry's `details` and appended to its summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FileLists {
    /// Files only read (a file also modified is listed only as modified).
    pub read_files: Vec<String>,
    pub modified_files: Vec<String>,
}

impl FileOperations {
    /// Carry-over from the previous compaction when it was made by pi itself (`fromHook` not
    /// set) and has `details`: `readFiles` count as read, `modifiedFiles` as edited. Items that
    /// are not strings are skipped (the reference does not check them).
    pub fn carry_over(&mut self, entry: &Entry) {
        if let EntryKind::Compaction {
            details: Some(details),
            from_hook: false,
            ..
        } = &entry.kind
        {
            self.carry_details(details);
        }
    }

    /// The same carry-over from a branch-summary entry, for branch summaries (spec §9).
    pub fn carry_over_branch(&mut self, entry: &Entry) {
        if let EntryKind::BranchSummary {
            details: Some(details),
            from_hook: false,
            ..
        } = &entry.kind
        {
            self.carry_details(details);
        }
    }

    /// Carries the `readFiles`/`modifiedFiles` of a compaction's or branch summary's `details`.
    pub fn carry_details(&mut self, details: &Value) {
        let strings = |key: &str| {
            details
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_owned)
        };
        self.read.extend(strings("readFiles"));
        self.edited.extend(strings("modifiedFiles"));
    }

    /// Adds the paths of the `read`/`write`/`edit` tool calls of an assistant message. A call
    /// counts when its arguments have a non-empty string `path`; other tools are ignored.
    pub fn add_tool_calls(&mut self, message: &Message) {
        let Message::Assistant { content, .. } = message else {
            return;
        };
        for block in content {
            let Block::ToolCall { name, arguments } = block else {
                continue;
            };
            self.add_call(name, arguments.as_ref());
        }
    }

    /// Adds one tool call's path, when it is a `read`, `write` or `edit` with a `path`.
    pub fn add_call(&mut self, name: &str, arguments: Option<&Value>) {
        let Some((op, path)) = pi_file_op(name, arguments) else {
            return;
        };
        let set = match op {
            FileOp::Read => &mut self.read,
            FileOp::Write => &mut self.written,
            FileOp::Edit => &mut self.edited,
        };
        if !set.contains(path) {
            set.insert(path.to_owned());
        }
    }

    /// `computeFileLists`: modified = edited ∪ written; read-only = read \ modified; both sorted
    /// by UTF-16 code units as JavaScript's default sort does.
    pub fn lists(&self) -> FileLists {
        let mut modified: Vec<String> = self.edited.union(&self.written).cloned().collect();
        let mut read_files: Vec<String> = self
            .read
            .iter()
            .filter(|path| !self.edited.contains(*path) && !self.written.contains(*path))
            .cloned()
            .collect();
        modified.sort_by(|a, b| cmp_utf16(a, b));
        read_files.sort_by(|a, b| cmp_utf16(a, b));
        FileLists {
            read_files,
            modified_files: modified,
        }
    }
}

impl FileLists {
    /// `formatFileOperations`: the text appended to a summary. Empty when both lists are empty,
    /// otherwise a blank line and the `<read-files>` / `<modified-files>` blocks that have items.
    pub fn format_tags(&self) -> String {
        let mut sections = Vec::with_capacity(2);
        for (tag, files) in [
            ("read-files", &self.read_files),
            ("modified-files", &self.modified_files),
        ] {
            if !files.is_empty() {
                sections.push(format!("<{tag}>\n{}\n</{tag}>", files.join("\n")));
            }
        }
        if sections.is_empty() {
            String::new()
        } else {
            format!("\n\n{}", sections.join("\n\n"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_and_modified_lists_follow_the_reference() {
        let message: Message = serde_json::from_str(
            r#"{"role":"assistant","content":[
              {"type":"toolCall","name":"read","arguments":{"path":"b.ts"}},
              {"type":"toolCall","name":"read","arguments":{"path":"a.ts"}},
              {"type":"toolCall","name":"edit","arguments":{"path":"b.ts","oldText":"x"}},
              {"type":"toolCall","name":"write","arguments":{"path":"~/c.ts"}},
              {"type":"toolCall","name":"bash","arguments":{"path":"ignored"}},
              {"type":"toolCall","name":"read","arguments":{"path":""}},
              {"type":"toolCall","name":"read","arguments":{"file":"x"}},
              {"type":"toolCall","name":"read"}
            ]}"#,
        )
        .unwrap();
        let mut ops = FileOperations::default();
        ops.add_tool_calls(&message);
        let lists = ops.lists();
        assert_eq!(lists.read_files, ["a.ts"]);
        assert_eq!(lists.modified_files, ["b.ts", "~/c.ts"]);
        assert_eq!(
            lists.format_tags(),
            "\n\n<read-files>\na.ts\n</read-files>\n\n<modified-files>\nb.ts\n~/c.ts\n</modified-files>"
        );
    }

    #[test]
    fn no_files_appends_nothing_and_one_list_appends_one_block() {
        assert_eq!(FileLists::default().format_tags(), "");
        let only_modified = FileLists {
            read_files: vec![],
            modified_files: vec!["x".into()],
        };
        assert_eq!(
            only_modified.format_tags(),
            "\n\n<modified-files>\nx\n</modified-files>"
        );
    }
}
