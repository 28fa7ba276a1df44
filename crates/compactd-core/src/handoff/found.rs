//! What a thread's turns hold for a goal: each turn scored by the words it shares with the goal
//! (a rarer word weighing more), the files it changed or read, the commands that checked it.

use std::collections::{HashMap, HashSet};

use super::RelevantFile;
use super::words::path_words;
use crate::fidelity::facts::{Facts, clip, first_line};
use crate::transcript::{Message, Role};

/// One turn: a user request and the messages that answered it.
pub(super) struct Turn<'m> {
    pub(super) request: Option<&'m str>,
    messages: &'m [Message],
}

pub(super) fn turns(messages: &[Message]) -> Vec<Turn<'_>> {
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

/// How much each word of the goal tells about a turn. A word of the goal the thread's requests
/// say often (the project's own name, "session" in a session manager's thread) tells little
/// about which turns are the goal's: each shared word weighs by how rare it is among the
/// requests (in tenths, to keep scores whole).
pub(super) struct Rarity<'w> {
    /// How many requests hold each word of the goal.
    df: HashMap<&'w str, usize>,
    requests: f64,
}

impl<'w> Rarity<'w> {
    pub(super) fn of(
        requests: &'w [Option<HashSet<String>>],
        wanted: &HashSet<String>,
    ) -> Rarity<'w> {
        let mut df: HashMap<&str, usize> = HashMap::new();
        for request in requests.iter().flatten() {
            for word in request.iter().filter(|w| wanted.contains(*w)) {
                *df.entry(word.as_str()).or_default() += 1;
            }
        }
        Rarity {
            df,
            requests: requests.iter().flatten().count().max(1) as f64,
        }
    }

    pub(super) fn weight(&self, word: &str) -> usize {
        let df = self.df.get(word).copied().unwrap_or(0).max(1);
        ((self.requests / df as f64).ln() * 10.0).round() as usize + 1
    }

    /// What a file the goal names by its name weighs: as the rarest word would.
    fn of_a_name(&self) -> usize {
        self.weight("").max(10)
    }
}

/// What the turns of a thread hold for a goal, gathered turn by turn.
#[derive(Default)]
pub(super) struct Found {
    /// The files the goal's turns touched, each with its best score.
    files: Vec<(RelevantFile, usize)>,
    file_at: HashMap<String, usize>,
    /// How many words of the goal each path's name holds.
    named: HashMap<String, usize>,
    /// Every file the thread touched, in order.
    touched: Vec<String>,
    seen_paths: HashSet<String>,
    pub(super) commands: Vec<String>,
    pub(super) left_out_requests: usize,
    /// The goal's turns in pi's text form.
    pub(super) turns: Vec<String>,
}

impl Found {
    /// One turn, which shares `shared` (weighted) words with the goal.
    pub(super) fn turn(
        &mut self,
        turn: &Turn<'_>,
        shared: usize,
        wanted: &HashSet<String>,
        rarity: &Rarity,
    ) {
        let facts = Facts::extract(turn.messages);
        if turn.request.is_some() && shared == 0 {
            self.left_out_requests += 1;
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
            self.file(path, changed, shared, &what, wanted, rarity);
        }
        if shared > 0 {
            self.turns.push(crate::transcript::write(
                crate::transcript::Dialect::Pi,
                turn.messages,
            ));
            let checks = facts.commands.items.iter().filter(|c| verifies(c)).cloned();
            self.commands.extend(checks);
        }
    }

    /// A file a turn (`what`) changed or read.
    fn file(
        &mut self,
        path: &String,
        changed: bool,
        shared: usize,
        what: &str,
        wanted: &HashSet<String>,
        rarity: &Rarity,
    ) {
        if self.seen_paths.insert(path.clone()) {
            self.touched.push(path.clone());
        }
        let named = *self
            .named
            .entry(path.clone())
            .or_insert_with(|| path_words(path).intersection(wanted).count());
        let score = shared + named * rarity.of_a_name();
        if score == 0 {
            return;
        }
        let why = format!("{} for {what}", if changed { "changed" } else { "read" });
        match self.file_at.get(path) {
            Some(&at) => {
                let (file, best) = &mut self.files[at];
                file.changed |= changed;
                if score > *best {
                    *best = score;
                    file.why = why;
                }
            }
            None => {
                self.file_at.insert(path.clone(), self.files.len());
                self.files.push((
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

    /// The relevant files — those the goal names, and those about as relevant as the most
    /// relevant one (a word shared by chance is not enough beside them), changed ones first,
    /// then by relevance — and the files the thread touched that the goal does not need.
    pub(super) fn relevant_files(&mut self) -> (Vec<RelevantFile>, Vec<String>) {
        let mut files = std::mem::take(&mut self.files);
        let best = files.iter().map(|(_, score)| *score).max().unwrap_or(0);
        files.retain(|(f, score)| {
            *score * 3 >= best || self.named.get(&f.path).is_some_and(|&n| n > 0)
        });
        files.sort_by_key(|(f, score)| (!f.changed, std::cmp::Reverse(*score)));
        let files: Vec<RelevantFile> = files.into_iter().map(|(f, _)| f).collect();
        let kept: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
        let left_out = self
            .touched
            .iter()
            .filter(|t| !kept.contains(t.as_str()))
            .cloned()
            .collect();
        (files, left_out)
    }
}
