//! Reading a thread to answer a question about it (issue 57, Amp's `read_thread`), without a
//! model: the thread's entries are searched for the question's words (rarer words weigh more),
//! the best hits are quoted with their entry ids, the most recent first. A later hit that shares
//! the words of an earlier one is taken to revise it: "use PostgreSQL for the queue" and, later,
//! "revert that, use Redis for the queue" answer with the later one and name the earlier as
//! superseded. A tool call counts only when its result shows it worked; one whose result was an
//! error is said to have failed. However long the thread, the answer stays within its budget.

pub mod steps;

use std::collections::{HashMap, HashSet};

use crate::deadline::Deadline;
use crate::fidelity::facts::clip;

/// One entry of a thread, as the reader sees it.
#[derive(Debug, Clone)]
pub struct Entry {
    pub id: String,
    /// `user`, `assistant`, `toolResult`, or the entry's other role.
    pub role: String,
    pub text: String,
    /// A tool call whose result was an error, or such a result.
    pub failed: bool,
}

/// A hit the answer rests on.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub id: String,
    pub role: String,
    pub text: String,
    /// A later hit that revises this one.
    pub revised_by: Option<String>,
    pub failed: bool,
}

/// The answer to a question about a thread.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub answer: String,
    /// The entries the answer rests on, the most recent first.
    pub cited: Vec<String>,
    pub hits: Vec<Hit>,
    /// How many entries were searched.
    pub searched: usize,
}

/// Most hits an answer quotes.
const MAX_HITS: usize = 8;
/// Longest quote of one entry, in characters.
const QUOTE_CHARS: usize = 600;

/// Most words of a query that count: a question is a sentence, not a document.
const MAX_QUERY_WORDS: usize = 32;

/// A thread's entries by the words they hold, built once per read: every search of the thread
/// (the first, and each one a model asks for) looks words up here instead of reading the thread
/// again, so a search costs what its words' entries are, not the thread's length.
#[derive(Debug, Default)]
pub struct Index {
    /// For each word, the entries holding it, in thread order.
    postings: HashMap<String, Vec<u32>>,
    /// Each entry's position by its id.
    ids: HashMap<String, usize>,
    len: usize,
}

impl Index {
    /// The index of `entries`; `None` when `deadline` passes first.
    pub fn new(entries: &[Entry], deadline: Deadline) -> Option<Index> {
        let mut postings: HashMap<String, Vec<u32>> = HashMap::new();
        let mut ids = HashMap::with_capacity(entries.len());
        for (at, entry) in entries.iter().enumerate() {
            if at % 256 == 0 && deadline.passed() {
                return None;
            }
            ids.entry(entry.id.clone()).or_insert(at);
            for word in crate::handoff::words(&entry.text) {
                postings.entry(word).or_default().push(at as u32);
            }
        }
        Some(Index {
            postings,
            ids,
            len: entries.len(),
        })
    }

    /// The position of the entry with this id.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.ids.get(id).copied()
    }

    /// Whether an entry has this id.
    pub fn has_id(&self, id: &str) -> bool {
        self.ids.contains_key(id)
    }

    /// The entries that best match `query`, best first, at most `limit`: each scores the
    /// question's words it holds, a rarer word more; ties go to the later entry.
    pub fn search(&self, query: &str, limit: usize) -> Vec<usize> {
        let mut wanted: Vec<String> = crate::handoff::words(query).into_iter().collect();
        wanted.sort();
        wanted.truncate(MAX_QUERY_WORDS);
        let n = self.len.max(1) as f64;
        let mut scores: HashMap<u32, f64> = HashMap::new();
        for word in &wanted {
            if let Some(entries) = self.postings.get(word) {
                let weight = (n / entries.len() as f64).ln() + 1.0;
                for &at in entries {
                    *scores.entry(at).or_default() += weight;
                }
            }
        }
        let mut ranked: Vec<(usize, f64)> = scores
            .into_iter()
            .map(|(at, score)| (at as usize, score))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
        ranked.truncate(limit);
        ranked.into_iter().map(|(i, _)| i).collect()
    }
}

/// The answer to `question` from `entries` (in thread order, `index` theirs), within `budget`
/// characters.
pub fn read(entries: &[Entry], index: &Index, question: &str, budget: usize) -> Reading {
    let wanted = crate::handoff::words(question);
    let mut ranked = index.search(question, MAX_HITS);
    // The most recent first: what the thread last said on it is what holds.
    ranked.sort_by_key(|&i| std::cmp::Reverse(i));
    let shared: Vec<HashSet<String>> = ranked
        .iter()
        .map(|&i| {
            let words = crate::handoff::words(&entries[i].text);
            words.intersection(&wanted).cloned().collect()
        })
        .collect();
    let mut hits: Vec<Hit> = Vec::new();
    for (k, &i) in ranked.iter().enumerate() {
        // Revised by the nearest later hit that says the same words of the question again.
        let mine = &shared[k];
        let revised_by = (0..k)
            .rev()
            .find(|&later| {
                mine.iter().filter(|w| shared[later].contains(*w)).count() * 2 >= mine.len().max(1)
            })
            .map(|later| entries[ranked[later]].id.clone());
        hits.push(Hit {
            id: entries[i].id.clone(),
            role: entries[i].role.clone(),
            text: clip(entries[i].text.trim(), QUOTE_CHARS),
            revised_by,
            failed: entries[i].failed,
        });
    }
    let mut answer = String::new();
    let mut cited = Vec::new();
    for hit in &hits {
        let lead = match (&hit.revised_by, cited.is_empty()) {
            (None, true) => "The thread's latest on this".to_owned(),
            (None, false) => "Also".to_owned(),
            (Some(by), _) => format!("Earlier, superseded by {by}"),
        };
        let failed = if hit.failed {
            " (its result was an error: it did not take effect)"
        } else {
            ""
        };
        let line = format!(
            "- {lead} — entry {} ({}){failed}: {}\n",
            hit.id, hit.role, hit.text
        );
        if answer.chars().count() + line.chars().count() > budget {
            break;
        }
        answer.push_str(&line);
        cited.push(hit.id.clone());
    }
    if answer.is_empty() {
        answer = "Nothing in the thread mentions this.".to_owned();
    }
    Reading {
        answer,
        cited,
        hits,
        searched: entries.len(),
    }
}

/// An answer's texts leave compactd: the answer and the quotes it rests on.
impl crate::redact::Screen for Reading {
    fn screen(&mut self, screening: &mut crate::redact::Screening<'_>) {
        screening.text(&mut self.answer);
        for hit in &mut self.hits {
            screening.text(&mut hit.text);
        }
    }
}
