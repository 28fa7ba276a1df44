//! Handoff (issue 57, Amp's way): instead of compacting a long thread, start a new one focused
//! on one goal, whose first prompt carries only what the old thread holds that this goal needs.
//! This is the extractive draft, without a model: the thread is split into its turns (a user
//! request and the work that answered it), each turn is scored by the words it shares with the
//! goal, and a file is relevant when a relevant turn changed or read it, or its path names a
//! word of the goal. A file only the other work touched is left out, and said to be. The user's
//! standing rules go along whatever the goal (they hold for the whole job), with the errors still
//! open and the commands that checked the relevant work.

mod found;
mod words;

use std::collections::HashSet;

pub use words::words;

use crate::deadline::Deadline;
use crate::fidelity::facts::{Facts, clip};
use crate::transcript::Message;
use found::{Found, Rarity, turns};

/// A file the draft names, and why it matters to the goal.
#[derive(Debug, Clone, PartialEq)]
pub struct RelevantFile {
    pub path: String,
    pub why: String,
    /// Changed (not only read) in the thread.
    pub changed: bool,
}

/// The draft of a new thread's first prompt.
#[derive(Debug, Clone, Default)]
pub struct Draft {
    pub prompt: String,
    pub files: Vec<RelevantFile>,
    /// Files the thread touched that the goal does not need.
    pub left_out_files: Vec<String>,
    /// How many of the thread's requests the goal does not need.
    pub left_out_requests: usize,
    /// The user's rules still in force, word for word.
    pub rules: Vec<String>,
    /// Errors still open at the end of the thread.
    pub errors: Vec<String>,
    /// Commands that checked the goal's work, oldest first.
    pub commands: Vec<String>,
    /// The goal's turns of the thread in pi's text form, in thread order: what a model drafting
    /// the prompt reads ([`model_prompt`]).
    pub turns: Vec<String>,
}

/// The draft for `goal` from a thread's `messages`, with the rules its earlier summaries carried
/// (`carried_rules`) and the id of the thread it hands off from (empty: none to name); `None`
/// when `deadline` passes first. Linear in the thread: each request's words are read once, and
/// each word's rarity is looked up, not recounted.
pub fn draft(
    goal: &str,
    messages: &[Message],
    carried_rules: &[String],
    from: &str,
    deadline: Deadline,
) -> Option<Draft> {
    let goal = goal.trim();
    let wanted = words(goal);
    let whole = Facts::extract(messages);
    let thread_turns = turns(messages);
    let requests: Vec<Option<HashSet<String>>> =
        thread_turns.iter().map(|t| t.request.map(words)).collect();
    let rarity = Rarity::of(&requests, &wanted);
    let mut found = Found::default();
    for (turn, about) in thread_turns.into_iter().zip(&requests) {
        if deadline.passed() {
            return None;
        }
        let shared: usize = about
            .iter()
            .flatten()
            .filter(|w| wanted.contains(*w))
            .map(|w| rarity.weight(w))
            .sum();
        found.turn(&turn, shared, &wanted, &rarity);
    }
    let (files, left_out_files) = found.relevant_files();
    let mut rules: Vec<String> = carried_rules
        .iter()
        .filter(|r| !whole.withdrawn(r))
        .cloned()
        .collect();
    for rule in &whole.constraints.items {
        if !rules.contains(rule) {
            rules.push(rule.clone());
        }
    }
    let mut seen = HashSet::new();
    let mut commands = found.commands;
    commands.retain(|c| seen.insert(c.clone()));
    let errors: Vec<String> = whole
        .recent_errors()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let prompt = prompt(goal, &files, &rules, &errors, &commands, from);
    Some(Draft {
        prompt,
        files,
        left_out_files,
        left_out_requests: found.left_out_requests,
        rules,
        errors,
        commands,
        turns: found.turns,
    })
}

/// What a model drafting the prompt for `goal` is shown (its instructions are the system
/// prompt): the goal, what the extractive `draft` found, and the goal's turns of the thread
/// within `budget` characters (the latest kept when they do not all fit: they hold the state the
/// new thread starts from).
pub fn model_prompt(goal: &str, draft: &Draft, budget: usize) -> String {
    let mut found = prompt(
        goal,
        &draft.files,
        &draft.rules,
        &draft.errors,
        &draft.commands,
        "",
    );
    // The extractive draft's closing line is for the user, not the model.
    if let Some(end) = found.rfind("\n(Handed off from session") {
        found.truncate(end + 1);
    }
    let mut room = budget.saturating_sub(goal.len() + found.len() + 80);
    let mut kept: Vec<&str> = Vec::new();
    for turn in draft.turns.iter().rev() {
        let turn = turn.as_str();
        if turn.len() + 2 > room {
            if kept.is_empty() {
                // The latest turn alone is too long: its end, which is where it got to.
                let mut start = turn.len().saturating_sub(room);
                while !turn.is_char_boundary(start) {
                    start += 1;
                }
                kept.push(&turn[start..]);
            }
            break;
        }
        room -= turn.len() + 2;
        kept.push(turn);
    }
    kept.reverse();
    format!(
        "## Goal of the new thread\n{goal}\n\n## What compactd found for it\n{found}\n<thread>\n{}\n</thread>",
        kept.join("\n\n")
    )
}

fn prompt(
    goal: &str,
    files: &[RelevantFile],
    rules: &[String],
    errors: &[String],
    commands: &[String],
    from: &str,
) -> String {
    let mut out = format!("{goal}\n");
    let mut section = |heading: &str, lines: Vec<String>| {
        if !lines.is_empty() {
            out.push_str(&format!("\n## {heading}\n"));
            for line in lines {
                out.push_str(&format!("- {line}\n"));
            }
        }
    };
    section(
        "Relevant files",
        files
            .iter()
            .map(|f| format!("`{}`: {}", f.path, f.why))
            .collect(),
    );
    section("Rules still in force", rules.to_vec());
    section("Open errors", errors.iter().map(|e| clip(e, 300)).collect());
    section(
        "Verify with",
        commands
            .iter()
            .rev()
            .take(5)
            .rev()
            .map(|c| format!("`{}`", clip(c, 200)))
            .collect(),
    );
    if !from.is_empty() {
        out.push_str(&format!(
            "\n(Handed off from session {from}: its full history stays there.)\n"
        ));
    }
    out
}

/// A model's draft `text` completed with what the extractive `draft` found and the model left
/// out: the goal first, and every relevant file, rule and open error, each under its heading.
/// The model chooses the words; what the new thread needs is not left to it.
pub fn completed(text: &str, goal: &str, draft: &Draft) -> String {
    let plain = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let mut out = text.trim().to_owned();
    if !plain(&out).contains(&plain(goal)) {
        out = format!("{goal}\n\n{out}");
    }
    let files: Vec<String> = draft
        .files
        .iter()
        .filter(|f| !out.contains(&f.path))
        .map(|f| format!("`{}`: {}", f.path, f.why))
        .collect();
    let flat = plain(&out);
    let rules: Vec<String> = draft
        .rules
        .iter()
        .filter(|r| !flat.contains(&plain(r)))
        .cloned()
        .collect();
    let errors: Vec<String> = draft
        .errors
        .iter()
        .map(|e| clip(e, 300))
        .filter(|e| !flat.contains(&plain(e)))
        .collect();
    for (heading, items) in [
        ("Relevant files", files),
        ("Rules still in force", rules),
        ("Open errors", errors),
    ] {
        if !items.is_empty() {
            out = crate::fidelity::gate::add_items(&out, heading, &items);
        }
    }
    out
}

/// Every text of a draft leaves compactd: the prompt, each file's path and reason, the rules,
/// errors and commands, and the turns a model is shown.
impl crate::redact::Screen for Draft {
    fn screen(&mut self, screening: &mut crate::redact::Screening<'_>) {
        screening.text(&mut self.prompt);
        for file in &mut self.files {
            screening.text(&mut file.path);
            screening.text(&mut file.why);
        }
        for text in self
            .left_out_files
            .iter_mut()
            .chain(&mut self.rules)
            .chain(&mut self.errors)
            .chain(&mut self.commands)
            .chain(&mut self.turns)
        {
            screening.text(text);
        }
    }
}
