//! What a file operation is — the one place that says it. The plan of a pi session follows pi's
//! rule exactly (spec §5: `read`, `write` and `edit` calls with a non-empty string `path`), so
//! that a compaction entry's file lists are pi's; the anchors a summary is checked against follow
//! every agent's tools, which name files by other keys (`file_path`, `filePath`) and other
//! tools (`Edit`, `MultiEdit`, `str_replace_based_edit_tool`, Codex's `apply_patch`).

use serde_json::Value;

use super::ToolCall;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileOp {
    Read,
    Write,
    Edit,
}

impl FileOp {
    /// Whether the file was changed.
    pub fn modifies(self) -> bool {
        self != FileOp::Read
    }
}

/// pi's rule: the operation of a `read`/`write`/`edit` call and its path (non-empty string).
pub fn pi_file_op<'a>(name: &str, arguments: Option<&'a Value>) -> Option<(FileOp, &'a str)> {
    let op = match name {
        "read" => FileOp::Read,
        "write" => FileOp::Write,
        "edit" => FileOp::Edit,
        _ => return None,
    };
    let path = arguments?.get("path")?.as_str().filter(|p| !p.is_empty())?;
    Some((op, path))
}

/// Keys agents name a call's file by.
const PATH_KEYS: [&str; 6] = [
    "path",
    "file_path",
    "filePath",
    "notebook_path",
    "filename",
    "file",
];

/// The agents' tools that run a shell command.
const SHELL_TOOLS: [&str; 11] = [
    "bash",
    "shell",
    "sh",
    "exec_command",
    "execute_bash",
    "run_shell_command",
    "run_terminal_cmd",
    "run_command",
    "local_shell",
    "terminal",
    "exec",
];

/// The script a shell call runs: its `command` (or `cmd`, `script`) as a string, or the last word
/// of an argument list that runs a shell (`["bash", "-lc", "…"]`, Codex's form), or the list
/// joined.
fn shell_script(call: &ToolCall) -> Option<String> {
    let value = call
        .arguments
        .iter()
        .find(|(k, _)| matches!(k.as_str(), "command" | "cmd" | "script"))
        .map(|(_, v)| v)?;
    match value {
        Value::String(script) => Some(script.clone()),
        Value::Array(words) => {
            let words: Vec<&str> = words.iter().filter_map(Value::as_str).collect();
            let runs_shell = words.len() >= 3
                && words[0]
                    .rsplit('/')
                    .next()
                    .is_some_and(|s| ["bash", "sh", "zsh"].contains(&s))
                && words[1].starts_with('-')
                && words[1].contains('c');
            Some(if runs_shell {
                words[words.len() - 1].to_owned()
            } else {
                words.join(" ")
            })
        }
        _ => None,
    }
}

/// The script a call runs when it is a shell tool's call.
pub(crate) fn shell_script_of(call: &ToolCall) -> Option<String> {
    let name = call.name.rsplit(['.', ':']).next().unwrap_or_default();
    SHELL_TOOLS
        .contains(&name.to_ascii_lowercase().as_str())
        .then(|| shell_script(call))
        .flatten()
}

/// Every file operation of a call, by any agent's tools: pi's rule first, then other agents'
/// tool names and path keys, and the files an `apply_patch` body names.
pub fn file_ops(call: &ToolCall) -> Vec<(FileOp, String)> {
    let name = call.name.rsplit(['.', ':']).next().unwrap_or_default();
    let lower = name.to_ascii_lowercase();
    if lower == "apply_patch" || lower == "patch" {
        let body = ["input", "patch", "diff"]
            .iter()
            .find_map(|key| call.arg(key))
            .unwrap_or_default();
        return patch_files(body);
    }
    if SHELL_TOOLS.contains(&lower.as_str()) {
        return shell_script(call)
            .map(|script| super::shell_files::shell_file_ops(&script))
            .unwrap_or_default();
    }
    let op = match lower.as_str() {
        "read" | "read_file" | "view" | "view_file" => FileOp::Read,
        "write" | "write_file" | "create" | "create_file" => FileOp::Write,
        "edit" | "edit_file" | "multiedit" | "multi_edit" | "str_replace" | "notebookedit" => {
            FileOp::Edit
        }
        "str_replace_based_edit_tool" | "str_replace_editor" => match call.arg("command") {
            Some("view") => FileOp::Read,
            Some("create") => FileOp::Write,
            _ => FileOp::Edit,
        },
        _ => return Vec::new(),
    };
    PATH_KEYS
        .iter()
        .find_map(|key| call.arg(key))
        .map(|path| vec![(op, path.to_owned())])
        .unwrap_or_default()
}

/// The files a patch in Codex's `apply_patch` format names: added and moved-to files are
/// written, updated and deleted ones edited.
pub(crate) fn patch_files(body: &str) -> Vec<(FileOp, String)> {
    body.lines()
        .filter_map(|line| {
            let line = line.trim_end();
            [
                ("*** Add File: ", FileOp::Write),
                ("*** Update File: ", FileOp::Edit),
                ("*** Delete File: ", FileOp::Edit),
                ("*** Move to: ", FileOp::Write),
            ]
            .into_iter()
            .find_map(|(marker, op)| Some((op, line.strip_prefix(marker)?.trim().to_owned())))
        })
        .filter(|(_, path)| !path.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ops(name: &str, arguments: Value) -> Vec<(FileOp, String)> {
        file_ops(&ToolCall::from_object(name, &arguments))
    }

    #[test]
    fn every_agents_file_tools_are_file_operations() {
        let edit = |p: &str| vec![(FileOp::Edit, p.to_owned())];
        assert_eq!(ops("edit", json!({"path": "a.rs"})), edit("a.rs"));
        assert_eq!(
            ops("Edit", json!({"file_path": "/r/a.rs"})),
            edit("/r/a.rs")
        );
        assert_eq!(ops("MultiEdit", json!({"file_path": "b.rs"})), edit("b.rs"));
        assert_eq!(ops("edit", json!({"filePath": "c.ts"})), edit("c.ts"));
        assert_eq!(
            ops("Write", json!({"file_path": "d.md"})),
            vec![(FileOp::Write, "d.md".to_owned())]
        );
        assert_eq!(
            ops("functions.read", json!({"path": "e"})),
            vec![(FileOp::Read, "e".to_owned())]
        );
        assert_eq!(
            ops(
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": "f"})
            ),
            vec![(FileOp::Read, "f".to_owned())]
        );
        assert!(ops("bash", json!({"command": "cat a.rs"})).is_empty());
        // Edits through the shell, in each agent's form of the call.
        let patched = "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/x.rs\n@@\n-a\n+b\n*** End Patch\nEOF";
        assert_eq!(
            ops("shell", json!({"command": ["bash", "-lc", patched]})),
            edit("src/x.rs")
        );
        assert_eq!(
            ops("exec_command", json!({"cmd": "sed -i 's/a/b/' y.rs"})),
            edit("y.rs")
        );
        assert_eq!(
            ops("functions.bash", json!({"command": "echo x > z.txt"})),
            vec![(FileOp::Write, "z.txt".to_owned())]
        );
        assert!(ops("edit", json!({"path": ""})).is_empty());
        let patch = "*** Begin Patch\n*** Update File: src/lib.rs\n@@\n-a\n+b\n*** Add File: NEW.md\n+x\n*** Delete File: old.rs\n*** End Patch";
        assert_eq!(
            ops("apply_patch", json!({"input": patch})),
            vec![
                (FileOp::Edit, "src/lib.rs".to_owned()),
                (FileOp::Write, "NEW.md".to_owned()),
                (FileOp::Edit, "old.rs".to_owned())
            ]
        );
    }

    #[test]
    fn pis_rule_is_exact() {
        let args = json!({"file_path": "a", "path": "b"});
        assert_eq!(pi_file_op("edit", Some(&args)), Some((FileOp::Edit, "b")));
        assert_eq!(pi_file_op("Edit", Some(&args)), None);
        assert_eq!(pi_file_op("edit", Some(&json!({"file_path": "a"}))), None);
        assert_eq!(pi_file_op("read", None), None);
    }
}
