//! One coding session, played by a real agent as a user plays it: the same eight steps for Claude
//! Code, Codex (a custom provider, and the built-in `openai` one) and OpenCode, each with its own
//! command line, configuration and tools. Ordinary turns, a turn of five tool calls, a manual
//! compaction right after it (Claude Code then ends the request with its own system message), an
//! automatic one inside a tool loop, one before a turn, and a second manual one that chains on the
//! others.
//!
//! The agent talks to `base_url`: compactd's gateway (`tests/it/agents/real.rs`) or the fake
//! provider itself (`examples/agent_record.rs`, which records what a new release sends). The fake
//! provider ([`crate::support::fake_provider`], its `Reply::Agent`) answers each turn with the
//! step's tool calls, and reports a spike of input tokens where the step says, so that the agent
//! compacts on its own.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::fake_provider::{Answer, Scripted};

/// The agents a session is played with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    /// Codex with a custom Responses provider: local compaction.
    CodexCustom,
    /// Codex with the built-in `openai` provider at `openai_base_url`: remote compaction v2.
    CodexOpenai,
    OpenCode,
}

impl Agent {
    /// Every agent (the recorder takes one by name).
    #[allow(dead_code)]
    pub const ALL: [Agent; 4] = [
        Agent::ClaudeCode,
        Agent::CodexCustom,
        Agent::CodexOpenai,
        Agent::OpenCode,
    ];

    /// The fixture name's agent part.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::CodexCustom => "codex-custom-provider",
            Agent::CodexOpenai => "codex-openai-provider",
            Agent::OpenCode => "opencode",
        }
    }

    /// Input tokens that fill the agent's window, as the session configures it.
    fn spike(self) -> u64 {
        match self {
            // claude-opus-5-5: a window of 1,000,000.
            Agent::ClaudeCode => 985_000,
            // `model_auto_compact_token_limit = 5000`.
            Agent::CodexCustom | Agent::CodexOpenai => 200_000,
            // A context of 20,000 with 4,000 for output.
            Agent::OpenCode => 19_000,
        }
    }
}

/// What a tool call does, whatever the agent calls its tool.
#[derive(Debug, Clone, Copy)]
pub enum Op {
    Read(&'static str),
    Edit {
        file: &'static str,
        old: &'static str,
        new: &'static str,
    },
    Write {
        file: &'static str,
        content: &'static str,
    },
    Shell(&'static str),
}

impl Op {
    /// The file the operation changes.
    pub fn modifies(self) -> Option<&'static str> {
        match self {
            Op::Edit { file, .. } | Op::Write { file, .. } => Some(file),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum Step {
    /// The user's prompt; the provider answers with these calls, then text. `spike` is the
    /// answer (0: the first call, `ops.len()`: the text that ends the turn) that fills the window.
    Turn {
        prompt: &'static str,
        ops: Vec<Op>,
        spike: Option<usize>,
    },
    /// A manual compaction: Claude Code's and the Codex TUI's `/compact`, OpenCode's summarize.
    Compact,
}

/// The session every agent plays.
pub fn session() -> Vec<Step> {
    let turn = |prompt, ops, spike| Step::Turn { prompt, ops, spike };
    vec![
        turn(
            "What does calc.py do? Answer briefly.",
            vec![Op::Read("calc.py")],
            None,
        ),
        turn(
            "Rule: never edit sub. Add a docstring to add, list the files, and start notes.md.",
            vec![
                Op::Read("calc.py"),
                Op::Edit {
                    file: "calc.py",
                    old: "    return a + b",
                    new: "    \"\"\"Add two numbers.\"\"\"\n    return a + b",
                },
                Op::Shell("ls"),
                Op::Write {
                    file: "notes.md",
                    content: "# Notes\n",
                },
                Op::Read("notes.md"),
            ],
            None,
        ),
        Step::Compact,
        turn(
            "Now add a test file for add.",
            vec![
                Op::Write {
                    file: "test_calc.py",
                    content: "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
                },
                Op::Read("test_calc.py"),
            ],
            Some(0),
        ),
        turn("And what about subtraction?", vec![], Some(0)),
        turn(
            "Please rename add to plus (just tell me, do not edit).",
            vec![],
            None,
        ),
        Step::Compact,
        turn("Last question: what is 2+2?", vec![], None),
    ]
}

/// A step's label on the requests it made: `turn N` or `compact`.
pub fn label(index: usize, step: &Step) -> String {
    match step {
        Step::Turn { .. } => format!("{index}: turn"),
        Step::Compact => format!("{index}: compact"),
    }
}

/// The agent's call for `op`, with paths in `repo`.
fn call(agent: Agent, repo: &Path, op: Op) -> Answer {
    let path = |file: &str| repo.join(file).display().to_string();
    let call = |name: &str, arguments: Value| Answer::Call {
        name: name.to_owned(),
        arguments,
    };
    match agent {
        Agent::ClaudeCode => match op {
            Op::Read(file) => call("Read", json!({"file_path": path(file)})),
            Op::Edit { file, old, new } => call(
                "Edit",
                json!({"file_path": path(file), "old_string": old, "new_string": new}),
            ),
            Op::Write { file, content } => call(
                "Write",
                json!({"file_path": path(file), "content": content}),
            ),
            Op::Shell(command) => call(
                "Bash",
                json!({"command": command, "description": "Run a command"}),
            ),
        },
        Agent::OpenCode => match op {
            Op::Read(file) => call("read", json!({"filePath": path(file)})),
            Op::Edit { file, old, new } => call(
                "edit",
                json!({"filePath": path(file), "oldString": old, "newString": new}),
            ),
            Op::Write { file, content } => {
                call("write", json!({"filePath": path(file), "content": content}))
            }
            Op::Shell(command) => call(
                "bash",
                json!({"command": command, "description": "Run a command"}),
            ),
        },
        Agent::CodexCustom | Agent::CodexOpenai => match op {
            Op::Read(file) => call("exec_command", json!({"cmd": format!("cat {file}")})),
            Op::Shell(command) => call("exec_command", json!({"cmd": command})),
            Op::Edit { file, old, new } => Answer::Custom {
                name: "apply_patch".into(),
                input: format!(
                    "*** Begin Patch\n*** Update File: {file}\n@@\n{}\n{}\n*** End Patch\n",
                    prefixed("-", old),
                    prefixed("+", new)
                ),
            },
            Op::Write { file, content } => Answer::Custom {
                name: "apply_patch".into(),
                input: format!(
                    "*** Begin Patch\n*** Add File: {file}\n{}\n*** End Patch\n",
                    prefixed("+", content.trim_end())
                ),
            },
        },
    }
}

fn prefixed(mark: &str, text: &str) -> String {
    text.lines()
        .map(|l| format!("{mark}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The answers a turn's requests get: its calls, then text; the spike where the step says.
pub fn script(agent: Agent, repo: &Path, ops: &[Op], spike: Option<usize>) -> Vec<Scripted> {
    let mut answers: Vec<Answer> = ops.iter().map(|op| call(agent, repo, *op)).collect();
    answers.push(Answer::Text);
    answers
        .into_iter()
        .enumerate()
        .map(|(at, answer)| Scripted {
            answer,
            spike: if spike == Some(at) { agent.spike() } else { 0 },
        })
        .collect()
}

/// The files the session changed before the compaction made during the step labelled `label`
/// with `request`: every change of the steps before, and those of its own step the request holds.
fn changed(steps: &[Step], label: &str, request: &str) -> Vec<&'static str> {
    let index: usize = label
        .split(':')
        .next()
        .and_then(|n| n.trim().parse().ok())
        .expect("a step label");
    let mut files = Vec::new();
    for (at, step) in steps.iter().enumerate().take(index + 1) {
        let Step::Turn { ops, .. } = step else {
            continue;
        };
        for file in ops.iter().filter_map(|op| op.modifies()) {
            if !files.contains(&file) && (at < index || request.contains(file)) {
                files.push(file);
            }
        }
    }
    files
}

/// What the summary of one compaction must keep.
#[derive(Debug)]
pub struct Expected {
    /// The latest request the compacted history held, verbatim.
    pub latest: &'static str,
    /// The files the session changed before the compaction.
    pub modified: Vec<&'static str>,
}

/// The agent's own text, which is never the user's and never a summary's.
pub const FRAMING: [&str; 7] = [
    "This session is being continued from a previous conversation",
    "The messages after this summary are the most recent messages",
    "<system-reminder>",
    "<local-command-",
    "<command-name>",
    "Another language model started to solve this problem",
    // OpenCode's own prompt after it compacted by itself.
    "Continue if you have next steps",
];

impl Expected {
    /// For the compaction made during the step labelled `step`, whose request was `request`: the
    /// latest of the session's prompts the request holds, and the files changed before it: by
    /// the steps before its own, and by the calls of its own turn the request holds (an agent
    /// compacts before a turn or inside it). `since`: the step and request of an earlier
    /// compaction whose summary was not compactd's (a replay): only what changed after it counts.
    pub fn at(steps: &[Step], step: &str, request: &str, since: Option<(&str, &str)>) -> Expected {
        let latest = steps
            .iter()
            .filter_map(|s| match s {
                Step::Turn { prompt, .. } => Some(*prompt),
                Step::Compact => None,
            })
            .rfind(|prompt| request.contains(prompt))
            .expect("the compaction holds one of the session's prompts");
        let mut modified = changed(steps, step, request);
        if let Some((step, request)) = since {
            let before = changed(steps, step, request);
            modified.retain(|file| !before.contains(file));
        }
        Expected { latest, modified }
    }

    /// What `summary` lacks of what it must keep — and the agent's framing it holds. `carried`:
    /// text of the previous summary that must be carried on.
    pub fn missing_from(&self, summary: &str, carried: Option<&str>) -> Vec<String> {
        let mut missing = Vec::new();
        if !summary.contains(self.latest) {
            missing.push(format!("the latest request is missing: {:?}", self.latest));
        }
        for file in &self.modified {
            if !summary.contains(file) {
                missing.push(format!("the changed file {file} is missing"));
            }
        }
        if let Some(carried) = carried
            && !summary.contains(carried)
        {
            missing.push(format!("the previous summary was not carried: {carried:?}"));
        }
        for framing in FRAMING {
            if summary.contains(framing) {
                missing.push(format!("the agent's framing is in it: {framing:?}"));
            }
        }
        missing
    }
}

/// The compaction item of a Responses answer (remote compaction v2), if it holds one.
pub fn compaction_item(body: &str) -> Option<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|e| e["type"] == "response.output_item.done" && e["item"]["type"] == "compaction")
        .map(|e| e["item"].clone())
}

/// The summary in the message Codex's model reads in place of a compaction item: what follows
/// the handoff's opening paragraph (which ends with a colon and a newline).
pub fn handed_over(body: &Value) -> String {
    let texts = body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|item| item["content"].as_array().into_iter().flatten())
        .filter_map(|part| part["text"].as_str());
    texts
        .filter_map(|text| {
            text.split_once(":\n")
                .map(|(_, summary)| summary.to_owned())
        })
        .collect()
}

/// The text an agent reads from an answer of compactd's, in its wire.
pub fn answer_text(body: &str) -> String {
    let mut text = String::new();
    for data in body.lines().filter_map(|l| l.strip_prefix("data: ")) {
        let Ok(event) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let piece = match event["type"].as_str() {
            Some("content_block_delta") => event.pointer("/delta/text"),
            Some("response.output_text.delta") => event.get("delta"),
            _ => event.pointer("/choices/0/delta/content"),
        };
        text.push_str(piece.and_then(Value::as_str).unwrap_or_default());
    }
    text
}
