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

/// Claude Code's own elements in a user message (its notifications, reminders, the commands it
/// ran for the user and their output), as `scripts/corpus/real_transcripts.py` takes them out
/// to find what the person typed. Not compactd's own reading (`transcript::agent_text`): the
/// replay checks compactd's summaries against it, so it must not share compactd's mistakes.
const AGENT_ELEMENTS: [&str; 11] = [
    "task-notification",
    "system-reminder",
    "local-command-caveat",
    "local-command-stdout",
    "local-command-stderr",
    "command-name",
    "command-message",
    "command-args",
    "bash-input",
    "bash-stdout",
    "bash-stderr",
];

/// What the person typed in a user message: its text (a string, or its text blocks) without
/// Claude Code's own elements, its interruption marks and the line pointing at a task's output
/// file (the corpus's rules); none for a tool's result, for a message that is only the agent's,
/// or for one that opens with a line the agent `injected` (a skill's text, as the transcript marks
/// it).
fn typed(message: &Value, injected: &[String]) -> Option<String> {
    let text = match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) if blocks.iter().any(|b| b["type"] == "tool_result") => return None,
        Value::Array(blocks) => (blocks.iter())
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let file = regex::Regex::new(r"<output-file>(.*?)</output-file>").unwrap();
    let files: Vec<&str> = (file.captures_iter(&text))
        .filter_map(|c| c.get(1).map(|m| m.as_str()))
        .filter(|f| !f.is_empty())
        .collect();
    let elements = AGENT_ELEMENTS
        .map(|tag| format!("<{tag}>.*?</{tag}>"))
        .join("|");
    let elements = regex::Regex::new(&format!("(?s){elements}")).unwrap();
    let without = elements.replace_all(&text, "");
    let lines: Vec<&str> = (without.lines())
        .filter(|l| !l.starts_with("[Request interrupted by user"))
        .filter(|l| !files.iter().any(|f| l.contains(f)))
        .collect();
    let words = lines.join("\n").trim().to_owned();
    let first = words.lines().next().unwrap_or_default().trim();
    let agents = injected.iter().any(|line| line == first);
    (!words.is_empty() && !agents).then_some(words)
}

/// What a summary kept.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Kept {
    pub(crate) latest: bool,
    pub(crate) files: usize,
    pub(crate) of_files: usize,
}

impl Expected {
    /// What a summary of `messages` must keep; `injected`: the first lines of the texts the agent
    /// wrote into user messages, where the recording marks them.
    pub(crate) fn of(messages: &[Value], injected: &[String]) -> Expected {
        let latest = messages
            .iter()
            .rev()
            .filter(|m| m["role"] == "user")
            .find_map(|m| typed(m, injected))
            .map(|text| text.chars().take(VERBATIM_CHARS).collect::<String>());
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
        let latest = (self.latest.as_ref()).is_none_or(|l| summary.contains(l.as_str()));
        if (!missing.is_empty() || !latest) && std::env::var_os("REPLAY_VERBOSE").is_some() {
            eprintln!(
                "    missing files: {missing:?}; latest request {:?}{}\n{summary}\n",
                self.latest,
                if latest { " kept" } else { " missing" }
            );
        }
        Kept {
            latest,
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
