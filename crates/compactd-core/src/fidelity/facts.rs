//! What a conversation says, extracted verbatim: the user's requests and constraints, the files
//! read and changed, the commands run (and the ones that failed), the error messages seen, the
//! assistant's stated decisions, finished work and open todo items, and the code identifiers
//! mentioned. The extractive summarizer writes its summary from these; the fidelity gate derives
//! its anchors from them.

use std::collections::{HashSet, VecDeque};

use serde_json::Value;

use super::standing::{self, Statement};
use super::user_turn::last_fenced_block;
use super::words::{DECISION_WORDS, reports_work};
use crate::transcript::{Message, Role, ToolCall};

/// An ordered set: first-seen order, no duplicates.
#[derive(Debug, Default)]
pub struct Ordered {
    pub items: Vec<String>,
    seen: HashSet<String>,
}

impl Ordered {
    pub fn push(&mut self, item: impl Into<String>) {
        let item = item.into();
        if !item.is_empty() && self.seen.insert(item.clone()) {
            self.items.push(item);
        }
    }

    /// Drops the items `remove` picks.
    pub fn remove_where(&mut self, mut remove: impl FnMut(&str) -> bool) {
        let seen = &mut self.seen;
        self.items.retain(|item| {
            let gone = remove(item);
            if gone {
                seen.remove(item);
            }
            !gone
        });
    }

    /// The last `n` items, oldest first.
    pub fn last(&self, n: usize) -> &[String] {
        &self.items[self.items.len().saturating_sub(n)..]
    }
}

/// The extractions, counted for the tests that watch them (the `probe` feature).
#[cfg(feature = "probe")]
static EXTRACTIONS: crate::probe::Probe = crate::probe::Probe::new();

/// Counts the extractions from conversations whose first message opens with `opening` from now
/// on (see [`extractions_of`]): the proof that the stages share one per request.
#[cfg(feature = "probe")]
pub fn watch_extractions(opening: &str) {
    EXTRACTIONS.watch(opening);
}

/// How many extractions [`watch_extractions`] counted for `opening`.
#[cfg(feature = "probe")]
pub fn extractions_of(opening: &str) -> u64 {
    EXTRACTIONS.count_of(opening)
}

/// What reading a conversation in order carries from one message to the next.
#[derive(Default)]
pub(super) struct Reading {
    /// Commands of the assistant's calls not answered yet, in order: results answer them in the
    /// order the calls were made.
    pub(super) pending: VecDeque<Option<String>>,
    /// Whether a harness sends command output as user turns (see `is_observation`).
    pub(super) harness: bool,
}

#[derive(Debug, Default)]
pub struct Facts {
    /// User requests (not shell commands the user ran, not bare slash commands), in order.
    pub requests: Vec<String>,
    /// The requests' lines in the ledger of the user's messages ([`super::ledger::item`]): their
    /// own words, without acknowledgements and messages that are all pasted text.
    pub ledger: Vec<String>,
    /// How many lines of `ledger` (its last) are the latest request's.
    pub(super) latest_in_ledger: usize,
    /// The user's standing rules and preferences, verbatim, in order, without those a later
    /// withdrawal lifted ([`standing`]).
    pub constraints: Ordered,
    /// Withdrawals of rules (also in `constraints`): they lift a previous summary's rules too.
    pub withdrawals: Vec<String>,
    pub read: Ordered,
    pub modified: Ordered,
    pub commands: Ordered,
    /// Error lines with the index of the message they came from (an agent's markup around
    /// them taken off, a traceback as its last line).
    pub errors: Vec<(usize, String)>,
    /// Where each error happened: the command or the tool whose result held it.
    pub error_sources: std::collections::HashMap<String, String>,
    pub decisions: Ordered,
    pub completed: Ordered,
    pub identifiers: Ordered,
    /// Identifiers named in the user's own requests.
    pub user_identifiers: Ordered,
    /// Commands whose result was an error or a non-zero exit.
    pub failed_commands: Ordered,
    /// The open items of the agent's latest todo list (a todo tool call or a `- [ ]` checklist).
    pub todos: Vec<String>,
    pub last_assistant: Option<String>,
    pub message_count: usize,
    /// The file a windowed editor has open (SWE-agent's): its edits name none.
    editor: crate::transcript::windowed::Windowed,
}

impl Facts {
    /// Whether a rule carried from a previous summary (or a model's wording of one) was lifted
    /// by a withdrawal in this conversation: it shares a topic with a withdrawal and is not one
    /// of this conversation's rules (which include the withdrawals and rules stated again).
    pub fn withdrawn(&self, rule: &str) -> bool {
        self.withdrawals
            .iter()
            .any(|w| standing::withdraws(w, rule))
            && !self
                .constraints
                .items
                .iter()
                .any(|current| super::matching::coverage(current, rule) >= 0.8)
    }

    /// A rule, or a withdrawal that lifts the rules before it it shares a topic with.
    pub(super) fn add_standing(&mut self, statement: Statement, sentence: String) {
        if statement == Statement::Withdrawal {
            self.constraints
                .remove_where(|rule| standing::withdraws(&sentence, rule));
            self.withdrawals.push(sentence.clone());
        }
        self.constraints.push(sentence);
    }

    pub fn extract(messages: &[Message]) -> Facts {
        #[cfg(feature = "probe")]
        EXTRACTIONS.count(messages.first().map_or("", |m| m.text.as_str()));
        let mut facts = Facts {
            message_count: messages.len(),
            ..Facts::default()
        };
        let mut reading = Reading::default();
        for index in 0..messages.len() {
            let message = &messages[index];
            match message.role {
                Role::User => facts.user_turn(messages, index, &mut reading),
                Role::Assistant => facts.assistant_turn(messages, index, &mut reading),
                // System and developer text in the history: the agent's own instructions and
                // environment notes, except a project rules file pasted there.
                Role::Developer => {
                    for (statement, sentence) in standing::of_pasted_file(&message.text) {
                        facts.add_standing(statement, clip(sentence, 240));
                    }
                }
                Role::ToolResult => facts.tool_result(message, index, &mut reading),
            }
        }
        facts
    }

    fn assistant_turn(&mut self, messages: &[Message], index: usize, reading: &mut Reading) {
        let message = &messages[index];
        for sentence in sentences(&message.text) {
            let lower = sentence.to_lowercase();
            // "The approach:" introduces what follows; it decides nothing itself. Code run into
            // a sentence is neither a decision nor work done.
            if sentence.ends_with(':') || reads_as_code(sentence) {
                continue;
            }
            if DECISION_WORDS.iter().any(|w| lower.contains(w)) {
                self.decisions.push(clip(sentence, 240));
            } else if reports_work(&lower) {
                self.completed.push(clip(sentence, 200));
            }
        }
        self.collect_identifiers(&message.text);
        if !message.text.trim().is_empty() {
            self.last_assistant = Some(message.text.trim().to_owned());
        }
        if let Some(open) = checklist(&message.text) {
            self.todos = open;
        }
        reading.pending.clear();
        // A harness that runs the command an answer ends with, in a fenced block, and sends back
        // what it printed as the next user turn (mini-swe-agent, SWE-agent): that block was a
        // call.
        let ran = (message.calls.is_empty() && !self.requests.is_empty())
            .then(|| messages.get(index + 1))
            .flatten()
            .filter(|next| {
                next.role == Role::User
                    && (reading.harness
                        || crate::transcript::agent_text::is_observation(&next.text))
            })
            .and_then(|_| last_fenced_block(&message.text))
            .map(|script| ToolCall::new("bash", vec![("command".to_owned(), script.into())]));
        for call in message.calls.iter().chain(&ran) {
            self.add_call(call);
            reading.pending.push_back(
                call.arg("command")
                    .map(|c| clip(c.lines().next().unwrap_or_default(), 200)),
            );
        }
    }

    fn tool_result(&mut self, message: &Message, index: usize, reading: &mut Reading) {
        let command = reading.pending.pop_front().flatten();
        if let Some(command) = &command
            && (message.is_error || exited_nonzero(&message.text))
        {
            self.failed_commands.push(command.clone());
        }
        let source = command.or_else(|| message.tool.clone());
        // `read` returns file contents: code, not errors.
        let read = message
            .tool
            .as_deref()
            .is_some_and(|t| t.eq_ignore_ascii_case("read"));
        if read && !message.is_error {
            return;
        }
        let before = self.errors.len();
        self.collect_errors(index, &message.text, source.as_deref());
        // A failed call whose output names no error line: its first line says what went wrong
        // ("Exit code 128" when nothing else does).
        if message.is_error
            && self.errors.len() == before
            && let Some(first) = message.text.lines().map(str::trim).find(|l| !l.is_empty())
        {
            self.push_error(index, first, source.as_deref());
        }
    }

    pub(super) fn add_call(&mut self, call: &ToolCall) {
        for (op, path) in self.editor.ops(call) {
            if op.modifies() {
                self.modified.push(&path);
            } else {
                self.read.push(&path);
            }
        }
        if call.name.to_lowercase().contains("todo")
            && let Some(open) = todo_items(call)
        {
            self.todos = open;
        }
        if let Some(command) = call.arg("command") {
            self.commands
                .push(clip(command.lines().next().unwrap_or_default(), 200));
        }
    }

    fn collect_identifiers(&mut self, text: &str) {
        for span in code_spans(text) {
            self.identifiers.push(span);
        }
    }

    /// How many of the last lines of `ledger` are the latest request's.
    pub fn latest_in_ledger(&self) -> usize {
        self.latest_in_ledger
    }

    pub fn latest_request(&self) -> Option<&str> {
        self.requests.last().map(String::as_str)
    }

    /// Errors in the last quarter of the conversation: what is probably still in the way.
    pub fn recent_errors(&self) -> Vec<&str> {
        let cutoff = self.message_count - self.message_count / 4;
        let recent: Vec<&str> = self
            .errors
            .iter()
            .filter(|(index, _)| *index + 1 >= cutoff)
            .map(|(_, e)| e.as_str())
            .collect();
        recent[recent.len().saturating_sub(5)..].to_vec()
    }
}

/// A "sentence" that is code: a fence, an escape, or more than one character in six a symbol.
fn reads_as_code(sentence: &str) -> bool {
    if sentence.contains("```") || sentence.contains("\\n") || sentence.contains("\\\"") {
        return true;
    }
    let symbols = sentence
        .chars()
        .filter(|c| {
            matches!(
                c,
                '{' | '}' | ';' | '$' | '=' | '<' | '>' | '(' | ')' | '[' | ']'
            )
        })
        .count();
    symbols * 6 > sentence.chars().count()
}

/// The `code spans` of a text that fit on one line (fences excluded).
pub(super) fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut pieces = text.split('`');
    pieces.next();
    while let (Some(code), Some(_)) = (pieces.next(), pieces.next()) {
        let code = code.trim();
        // A span holding a JSON string's escapes is a record's text, not a name.
        let escaped = code.contains("\\n") || code.contains("\\\"");
        if !code.is_empty() && code.len() <= 120 && !code.contains('\n') && !escaped {
            spans.push(code);
        }
    }
    spans
}

/// Whether command output says the command exited with a non-zero status.
fn exited_nonzero(text: &str) -> bool {
    let lower = text.to_lowercase();
    [
        "exited with code ",
        "exit code: ",
        "exit code ",
        "exit status ",
    ]
    .iter()
    .any(|mark| {
        lower.match_indices(mark).any(|(at, _)| {
            let rest = &lower[at + mark.len()..];
            rest.starts_with(|c: char| c.is_ascii_digit()) && !rest.starts_with("0")
        })
    })
}

/// The open items of a todo tool call (`todos: [{content|text|title, status}]`, as JSON or as
/// text holding JSON): the ones whose status is not done.
fn todo_items(call: &ToolCall) -> Option<Vec<String>> {
    let (_, value) = call.arguments.iter().find(|(k, _)| k == "todos")?;
    let parsed;
    let list = match value {
        Value::Array(items) => items,
        Value::String(text) => {
            parsed = serde_json::from_str::<Value>(text).ok()?;
            parsed.as_array()?
        }
        _ => return None,
    };
    Some(
        list.iter()
            .filter(|item| {
                !matches!(
                    item["status"].as_str(),
                    Some("completed" | "done" | "cancelled")
                )
            })
            .filter_map(|item| {
                ["content", "text", "title", "task"]
                    .iter()
                    .find_map(|k| item[k].as_str())
            })
            .map(|text| clip(text, 200))
            .collect(),
    )
}

/// The unchecked items of a markdown checklist in an assistant message, when it has one.
fn checklist(text: &str) -> Option<Vec<String>> {
    let mut open = Vec::new();
    let mut any = false;
    for line in text.lines().map(str::trim_start) {
        let item = line.trim_start_matches(['-', '*', '+']).trim_start();
        if item.len() == line.len() {
            continue;
        }
        if let Some(rest) = item.strip_prefix("[ ]") {
            any = true;
            open.push(clip(rest, 200));
        } else if item.starts_with("[x]") || item.starts_with("[X]") {
            any = true;
        }
    }
    any.then_some(open)
}

/// A user turn an agent writes itself, whole, to carry on after it compacted on its own:
/// OpenCode's synthetic "Continue if you have next steps, …" (its `compaction.ts`). The user
/// did not ask for anything in it.
pub(super) fn agents_prompt(text: &str) -> bool {
    const PROMPTS: [&str; 1] =
        ["continue if you have next steps, or stop and ask for clarification"];
    let lower = text.trim().to_lowercase();
    lower.len() <= 160 && PROMPTS.iter().any(|p| lower.starts_with(p))
}

/// A user turn that is an earlier summary the agent put there, not the user's words: one line
/// introducing it ("The conversation history before this point was compacted into the following
/// summary:", pi's branch summaries likewise), then the summary in `<summary>` tags, nothing else.
pub(super) fn carries_a_summary(text: &str) -> bool {
    let Some((intro, rest)) = text.split_once("\n\n") else {
        return false;
    };
    !intro.contains('\n')
        && intro.trim_end().ends_with(':')
        && intro.len() <= 200
        && rest.trim_start().starts_with("<summary>")
        && rest.trim_end().ends_with("</summary>")
}

/// `/mode`, `/compact`: an agent command, not a request about the work.
pub(super) fn is_slash_command(text: &str) -> bool {
    text.starts_with('/') && !text.contains(char::is_whitespace) && text.len() < 40
}

/// Sentences of a text: split at line breaks and at sentence ends.
pub fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '!', '?'])
        .flat_map(|line| line.split(". "))
        // List items: the sentence without its bullet.
        .map(|s| s.trim().trim_start_matches(['-', '*', '+']).trim())
        .filter(|s| s.len() >= 12)
}

/// At most `max` characters, cut at a character boundary with an ellipsis.
pub fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

pub fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
}
