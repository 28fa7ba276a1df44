//! Handoff (issue 57, Amp's way): instead of compacting a long thread, start a new one focused
//! on one goal, whose first prompt carries only what the old thread holds that this goal needs.
//! This is the extractive draft, without a model: the thread is split into its turns (a user
//! request and the work that answered it), each turn is scored by the words it shares with the
//! goal, and a file is relevant when a relevant turn changed or read it, or its path names a
//! word of the goal. A file only the other work touched is left out, and said to be. The user's
//! standing rules go along whatever the goal (they hold for the whole job), with the errors still
//! open and the commands that checked the relevant work.

use std::collections::{HashMap, HashSet};

use crate::deadline::Deadline;
use crate::fidelity::facts::{Facts, clip, first_line};
use crate::transcript::{Message, Role};

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

/// Words that say nothing about what a turn is about.
const STOP: [&str; 40] = [
    "the", "and", "for", "with", "that", "this", "from", "into", "then", "than", "now", "also",
    "add", "make", "fix", "use", "let", "can", "you", "our", "its", "all", "any", "not", "but",
    "are", "was", "were", "has", "have", "had", "will", "should", "would", "could", "please",
    "file", "files", "code", "work",
];

/// The content words of `text`: lower case, three letters or more, no stop word, no number; a
/// name's parts count one by one (`parse_header`, `queueMessage`, `agent-session`).
pub fn words(text: &str) -> HashSet<String> {
    let mut parts = Vec::new();
    for token in text.split(|c: char| !c.is_alphanumeric()) {
        // camelCase: a capital after a lower-case letter starts a part.
        let mut start = 0;
        let chars: Vec<(usize, char)> = token.char_indices().collect();
        for pair in chars.windows(2) {
            if pair[0].1.is_lowercase() && pair[1].1.is_uppercase() {
                parts.push(&token[start..pair[1].0]);
                start = pair[1].0;
            }
        }
        parts.push(&token[start..]);
    }
    parts
        .into_iter()
        .filter(|w| w.chars().count() >= 3 && !w.chars().all(|c| c.is_ascii_digit()))
        .map(str::to_lowercase)
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// The words a path is known by: its file's name and the directory holding it (the rest is
/// where every file of the project lives).
fn path_words(path: &str) -> HashSet<String> {
    let mut parts = path.rsplit(['/', '\\']).filter(|p| !p.is_empty());
    let name = parts.next().unwrap_or_default();
    let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
    let dir = parts.next().unwrap_or_default();
    words(&format!("{stem} {dir}"))
}

/// Plural and verb endings off: "parsers", "parsing" and "parser" meet at "pars".
fn stem(word: &str) -> String {
    for suffix in ["ing", "ers", "er", "es", "ed", "s"] {
        if let Some(stem) = word.strip_suffix(suffix)
            && stem.chars().count() >= 3
        {
            return stem.to_owned();
        }
    }
    word.to_owned()
}

/// One turn: a user request and the messages that answered it.
struct Turn<'m> {
    request: Option<&'m str>,
    messages: &'m [Message],
}

fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
    let starts: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::User)
        .map(|(i, _)| i)
        .collect();
    let mut turns = Vec::new();
    if starts.first().is_none_or(|&s| s > 0) {
        let end = starts.first().copied().unwrap_or(messages.len());
        turns.push(Turn {
            request: None,
            messages: &messages[..end],
        });
    }
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(messages.len());
        turns.push(Turn {
            request: Some(messages[start].text.as_str()),
            messages: &messages[start..end],
        });
    }
    turns
}

/// Commands that check work rather than do it.
fn verifies(command: &str) -> bool {
    let lower = command.to_lowercase();
    [
        "test", "check", "lint", "clippy", "build", "verify", "pytest", "vet",
    ]
    .iter()
    .any(|w| lower.contains(w))
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
    // A word of the goal the thread's requests say often (the project's own name, "session" in
    // a session manager's thread) tells little about which turns are the goal's: each shared
    // word weighs by how rare it is among the requests (in tenths, to keep scores whole).
    let thread_turns = turns(messages);
    let requests: Vec<Option<HashSet<String>>> =
        thread_turns.iter().map(|t| t.request.map(words)).collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for request in requests.iter().flatten() {
        for word in request.iter().filter(|w| wanted.contains(*w)) {
            *df.entry(word.as_str()).or_default() += 1;
        }
    }
    let n = requests.iter().flatten().count().max(1) as f64;
    let weight = |word: &str| -> usize {
        let df = df.get(word).copied().unwrap_or(0).max(1);
        ((n / df as f64).ln() * 10.0).round() as usize + 1
    };
    // A file the goal names by its name weighs as the rarest word would.
    let named_weight = weight("").max(10);
    let mut named: HashMap<String, usize> = HashMap::new();
    let mut files: Vec<(RelevantFile, usize)> = Vec::new();
    let mut file_at: HashMap<String, usize> = HashMap::new();
    let mut touched: Vec<String> = Vec::new();
    let mut seen_paths: HashSet<String> = HashSet::new();
    let mut commands: Vec<String> = Vec::new();
    let mut left_out_requests = 0;
    let mut relevant_turns = Vec::new();
    for (turn, about) in thread_turns.into_iter().zip(&requests) {
        if deadline.passed() {
            return None;
        }
        let facts = Facts::extract(turn.messages);
        let shared: usize = about
            .iter()
            .flatten()
            .filter(|w| wanted.contains(*w))
            .map(|w| weight(w))
            .sum();
        if turn.request.is_some() && shared == 0 {
            left_out_requests += 1;
        }
        let what = turn.request.map_or_else(
            || "before the first request".to_owned(),
            |r| format!("“{}”", clip(first_line(r), 120)),
        );
        for (path, changed) in facts
            .modified
            .items
            .iter()
            .map(|p| (p, true))
            .chain(facts.read.items.iter().map(|p| (p, false)))
        {
            if seen_paths.insert(path.clone()) {
                touched.push(path.clone());
            }
            let named = *named
                .entry(path.clone())
                .or_insert_with(|| path_words(path).intersection(&wanted).count());
            let score = shared + named * named_weight;
            if score == 0 {
                continue;
            }
            let why = format!("{} for {what}", if changed { "changed" } else { "read" });
            match file_at.get(path) {
                Some(&at) => {
                    let (file, best) = &mut files[at];
                    file.changed |= changed;
                    if score > *best {
                        *best = score;
                        file.why = why;
                    }
                }
                None => {
                    file_at.insert(path.clone(), files.len());
                    files.push((
                        RelevantFile {
                            path: path.clone(),
                            why,
                            changed,
                        },
                        score,
                    ));
                }
            }
        }
        if shared > 0 {
            relevant_turns.push(crate::transcript::write(
                crate::transcript::Dialect::Pi,
                turn.messages,
            ));
            commands.extend(facts.commands.items.iter().filter(|c| verifies(c)).cloned());
        }
    }
    // Files the goal names, and files about as relevant as the most relevant one (a word shared
    // by chance is not enough beside them); changed ones first, then by relevance.
    let best = files.iter().map(|(_, score)| *score).max().unwrap_or(0);
    files.retain(|(f, score)| *score * 3 >= best || named.get(&f.path).is_some_and(|&n| n > 0));
    files.sort_by_key(|(f, score)| (!f.changed, std::cmp::Reverse(*score)));
    let files: Vec<RelevantFile> = files.into_iter().map(|(f, _)| f).collect();
    let kept: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    let left_out_files = touched
        .iter()
        .filter(|t| !kept.contains(t.as_str()))
        .cloned()
        .collect();
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
        left_out_requests,
        rules,
        errors,
        commands,
        turns: relevant_turns,
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
