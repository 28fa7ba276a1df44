//! Reading a thread to answer a question about it (issue 57, Amp's `read_thread`), without a
//! model: the thread's entries are searched for the question's words (rarer words weigh more),
//! the best hits are quoted with their entry ids, the most recent first. A later hit that shares
//! the words of an earlier one is taken to revise it: "use PostgreSQL for the queue" and, later,
//! "revert that, use Redis for the queue" answer with the later one and name the earlier as
//! superseded. A tool call counts only when its result shows it worked; one whose result was an
//! error is said to have failed. However long the thread, the answer stays within its budget.

pub mod steps;

use std::collections::{HashMap, HashSet};

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

/// The entries that best match `query`, best first, at most `limit`: each scores the question's
/// words it holds, a rarer word more; ties go to the later entry.
pub fn search(entries: &[Entry], query: &str, limit: usize) -> Vec<usize> {
    let wanted = crate::handoff::words(query);
    let words: Vec<HashSet<String>> = entries
        .iter()
        .map(|e| crate::handoff::words(&e.text))
        .collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for set in &words {
        for w in set.iter().filter(|w| wanted.contains(*w)) {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    let n = entries.len().max(1) as f64;
    let score = |set: &HashSet<String>| -> f64 {
        set.iter()
            .filter(|w| wanted.contains(*w))
            .map(|w| (n / df[w.as_str()] as f64).ln() + 1.0)
            .sum()
    };
    let mut ranked: Vec<(usize, f64)> = words
        .iter()
        .enumerate()
        .map(|(i, set)| (i, score(set)))
        .filter(|(_, s)| *s > 0.0)
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    ranked.truncate(limit);
    ranked.into_iter().map(|(i, _)| i).collect()
}

/// The answer to `question` from `entries` (in thread order), within `budget` characters.
pub fn read(entries: &[Entry], question: &str, budget: usize) -> Reading {
    let wanted = crate::handoff::words(question);
    let mut ranked = search(entries, question, MAX_HITS);
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
