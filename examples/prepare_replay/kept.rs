//! What a served summary kept of the conversation it replaced, as issue 67 asks of every one:
//! the latest request verbatim and the files changed since the last compaction (a conversation
//! in Anthropic's form, as the replay sends it).

use serde_json::Value;

/// How much of a long request must be found word for word: compactd keeps a request whole up to
/// 1,500 characters, longer ones anchored by their start.
const VERBATIM_CHARS: usize = 500;

/// What a summary of a conversation must keep.
pub(crate) struct Expected {
    /// The latest user request: the last user message of text (not a tool's result).
    latest: Option<String>,
    /// The files an edit or a write named.
    files: Vec<String>,
}

/// What a summary kept.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Kept {
    pub(crate) latest: bool,
    pub(crate) files: usize,
    pub(crate) of_files: usize,
}

impl Expected {
    pub(crate) fn of(messages: &[Value]) -> Expected {
        let latest = messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .find_map(|m| m["content"].as_str())
            .map(|text| text.trim().chars().take(VERBATIM_CHARS).collect::<String>())
            .filter(|text| !text.is_empty());
        let mut files = Vec::new();
        let calls = (messages.iter())
            .filter(|m| m["role"] == "assistant")
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "tool_use");
        for call in calls {
            let name = call["name"]
                .as_str()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if !["edit", "write", "multiedit"].contains(&name.as_str()) {
                continue;
            }
            let input = &call["input"];
            let path = input["path"].as_str().or(input["file_path"].as_str());
            if let Some(path) = path
                && !files.iter().any(|f| f == path)
            {
                files.push(path.to_owned());
            }
        }
        Expected { latest, files }
    }

    pub(crate) fn kept_by(&self, summary: &str) -> Kept {
        let missing: Vec<&String> = (self.files.iter())
            .filter(|f| !summary.contains(f.as_str()))
            .collect();
        if !missing.is_empty() && std::env::var_os("REPLAY_VERBOSE").is_some() {
            eprintln!("    missing files: {missing:?}\n{summary}\n");
        }
        Kept {
            latest: self
                .latest
                .as_ref()
                .is_none_or(|l| summary.contains(l.as_str())),
            files: self
                .files
                .iter()
                .filter(|f| summary.contains(f.as_str()))
                .count(),
            of_files: self.files.len(),
        }
    }
}

/// The text of an Anthropic Messages answer (its text blocks).
pub(crate) fn answer_text(body: &str) -> String {
    let Ok(answer) = serde_json::from_str::<Value>(body) else {
        return String::new();
    };
    (answer["content"].as_array().into_iter().flatten())
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}
