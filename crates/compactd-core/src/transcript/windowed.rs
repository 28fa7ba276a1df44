//! Windowed editors: SWE-agent's interface shows one file at a time (`open path [line]`,
//! `create path`), and its edits name no file (`edit 12:14` then the lines and `end_of_edit`;
//! `insert 7`; in its function-calling form an `edit` or `insert` call with no path): they change
//! the file that is open. The file an edit changed is therefore known only from the calls before
//! it, which is what [`Windowed`] keeps.

use super::ToolCall;
use super::files::{FileOp, file_ops, shell_script_of};

/// The file a windowed editor has open, across the calls of a conversation in order.
#[derive(Debug, Default, Clone)]
pub struct Windowed {
    open: Option<String>,
}

impl Windowed {
    /// The file operations of `call`: [`file_ops`]'s, and an edit of the open file by an edit
    /// that names none.
    pub fn ops(&mut self, call: &ToolCall) -> Vec<(FileOp, String)> {
        let name = call.name.rsplit(['.', ':']).next().unwrap_or_default();
        let lower = name.to_ascii_lowercase();
        let command = shell_script_of(call).map(|s| s.trim().to_owned());
        let (verb, rest) = match &command {
            Some(script) => {
                let first = script.lines().next().unwrap_or_default().trim();
                let (verb, rest) = first.split_once(' ').unwrap_or((first, ""));
                (verb.to_owned(), rest.trim().to_owned())
            }
            None => (lower.clone(), String::new()),
        };
        // The lines after a windowed edit's first are the file's new text, not shell: a
        // `-> float:` in them is no redirection.
        let windowed_edit = command.is_some()
            && matches!(verb.as_str(), "edit" | "insert" | "append")
            && first_word(&rest).is_some_and(|w| {
                w.split(':')
                    .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            });
        if windowed_edit {
            return self
                .open
                .iter()
                .map(|open| (FileOp::Edit, open.clone()))
                .collect();
        }
        let mut ops = file_ops(call);
        match verb.as_str() {
            "open" | "create" => {
                let path = if command.is_some() {
                    first_word(&rest)
                } else {
                    ["path", "filename", "file", "file_path"]
                        .iter()
                        .find_map(|k| call.arg(k))
                        .map(str::to_owned)
                };
                if let Some(path) = path.filter(|p| !p.is_empty()) {
                    if command.is_some() {
                        let op = if verb == "create" {
                            FileOp::Write
                        } else {
                            FileOp::Read
                        };
                        ops.push((op, path.clone()));
                    } else if ops.is_empty() {
                        ops.push((FileOp::Read, path.clone()));
                    }
                    self.open = Some(path);
                }
            }
            "edit" | "insert" | "append" if ops.is_empty() => {
                // The shell form takes a line range (`edit 12:14`) or a line (`insert 7`); a
                // word after `edit` that is neither is some other program.
                let windowed =
                    command.is_none() || rest.is_empty() || rest.starts_with(['\'', '"']);
                if windowed && let Some(open) = &self.open {
                    ops.push((FileOp::Edit, open.clone()));
                }
            }
            _ => {}
        }
        ops
    }
}

fn first_word(text: &str) -> Option<String> {
    let word = text.split_whitespace().next()?;
    Some(word.trim_matches(['"', '\'']).to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
        ToolCall::from_object(name, &arguments)
    }

    #[test]
    fn an_edit_that_names_no_file_changes_the_open_one() {
        let mut editor = Windowed::default();
        let bash = |c: &str| call("bash", json!({ "command": c }));
        assert_eq!(
            editor.ops(&bash("open src/marshmallow/fields.py 1474\n")),
            vec![(FileOp::Read, "src/marshmallow/fields.py".to_owned())]
        );
        assert_eq!(
            editor.ops(&bash(
                "edit 1475:1475\n    def f(a: float) -> float:\nend_of_edit\n"
            )),
            vec![(FileOp::Edit, "src/marshmallow/fields.py".to_owned())]
        );
        assert_eq!(
            editor.ops(&bash("create reproduce.py")),
            vec![(FileOp::Write, "reproduce.py".to_owned())]
        );
        assert_eq!(
            editor.ops(&bash("insert 3\nprint(1)\nend_of_insert")),
            vec![(FileOp::Edit, "reproduce.py".to_owned())]
        );
        // Another program named edit, and an edit before any file is open, change nothing.
        assert!(editor.ops(&bash("edit --help")).is_empty());
        assert!(
            Windowed::default()
                .ops(&bash("edit 1:2\nx\nend_of_edit"))
                .is_empty()
        );
    }

    #[test]
    fn the_function_calling_form_too() {
        let mut editor = Windowed::default();
        editor.ops(&call("open", json!({"path": "tests/missing_colon.py"})));
        assert_eq!(
            editor.ops(&call("edit", json!({"search": "a", "replace": "b"}))),
            vec![(FileOp::Edit, "tests/missing_colon.py".to_owned())]
        );
        // An edit that names its file is that file's.
        assert_eq!(
            editor.ops(&call("edit", json!({"path": "b.rs"}))),
            vec![(FileOp::Edit, "b.rs".to_owned())]
        );
    }
}
