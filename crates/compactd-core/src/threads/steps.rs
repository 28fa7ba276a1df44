//! The model's side of reading a thread (issue 57, Amp's `read_thread` subagent): what it is
//! shown at each step, and what it asks for. A model answers, or asks to search the thread again
//! or to read an entry with its neighbours; the loop around it is the application's.

use super::Entry;
use crate::fidelity::facts::clip;

/// Longest text of one entry shown to the model, in characters.
const SHOWN_CHARS: usize = 1200;

/// What the model's reply at one step is.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// More of the thread, before it answers.
    More(Vec<Ask>),
    /// Its answer.
    Answer(String),
}

/// One thing a model asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Ask {
    /// The entries matching these words.
    Search(String),
    /// This entry and its neighbours.
    Read(String),
}

/// Most asks of one step that are followed: a reply of forty searches (a model told to by a
/// question or by the thread itself) costs what four do.
pub const MAX_ASKS: usize = 4;

/// Reads a reply: asks when every line of it is one (`SEARCH: …`, `READ: …`, in any case, as
/// list items too; the first [`MAX_ASKS`] count), its answer otherwise.
pub fn parse(reply: &str) -> Step {
    let lines: Vec<&str> = reply
        .lines()
        .map(|l| l.trim().trim_start_matches(['-', '*', ' ']))
        .filter(|l| !l.is_empty())
        .collect();
    let mut asks: Vec<Ask> = lines.iter().filter_map(|l| ask(l)).collect();
    if !asks.is_empty() && asks.len() == lines.len() {
        asks.truncate(MAX_ASKS);
        Step::More(asks)
    } else {
        Step::Answer(reply.trim().to_owned())
    }
}

fn ask(line: &str) -> Option<Ask> {
    let (keyword, rest) = line.split_once(':')?;
    let rest = rest.trim().trim_matches(['`', '[', ']', '"']).trim();
    if rest.is_empty() {
        return None;
    }
    match keyword.trim().to_ascii_lowercase().as_str() {
        "search" => Some(Ask::Search(rest.to_owned())),
        "read" => Some(Ask::Read(rest.to_owned())),
        _ => None,
    }
}

/// Entries shown to the model: added in the order they matter, shown in thread order.
#[derive(Debug, Default)]
pub struct Shown {
    order: Vec<usize>,
}

impl Shown {
    /// Adds entry `at` and `around` entries on each side of it (a reply shows its request).
    pub fn add(&mut self, at: usize, around: usize, len: usize) {
        let from = at.saturating_sub(around);
        let to = (at + around + 1).min(len);
        // The entry itself first: when the budget runs out, its neighbours go before it.
        for i in std::iter::once(at).chain(from..to) {
            if i < len && !self.order.contains(&i) {
                self.order.push(i);
            }
        }
    }

    /// How many entries are shown.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The entries as the model reads them, `[id] role: text` in thread order, the ones added
    /// first while they fit in `budget` characters.
    pub fn render(&self, entries: &[Entry], budget: usize) -> String {
        let mut room = budget;
        let mut kept: Vec<(usize, String)> = Vec::new();
        for &i in &self.order {
            let entry = &entries[i];
            let failed = if entry.failed { " (failed)" } else { "" };
            let line = format!(
                "[{}] {}{failed}: {}",
                entry.id,
                entry.role,
                clip(entry.text.trim(), SHOWN_CHARS)
            );
            if line.len() + 1 > room {
                continue;
            }
            room -= line.len() + 1;
            kept.push((i, line));
        }
        kept.sort_by_key(|(i, _)| *i);
        kept.into_iter()
            .map(|(_, line)| line)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The entry ids `answer` cites in square brackets, in the order it cites them, each once; only
/// ids of the thread (`index`'s) count.
pub fn citations(answer: &str, index: &super::Index) -> Vec<String> {
    let mut cited: Vec<String> = Vec::new();
    for piece in answer.split('[').skip(1) {
        let Some((inside, _)) = piece.split_once(']') else {
            continue;
        };
        for id in inside.split([',', ' ', ';']).map(str::trim) {
            if index.has_id(id) && !cited.iter().any(|c| c == id) {
                cited.push(id.to_owned());
            }
        }
    }
    cited
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, text: &str) -> Entry {
        Entry {
            id: id.into(),
            role: "user".into(),
            text: text.into(),
            failed: false,
        }
    }

    #[test]
    fn a_reply_of_asks_is_asks_and_anything_else_an_answer() {
        assert_eq!(
            parse("SEARCH: job queue backend\n- read: [e00012]\n"),
            Step::More(vec![
                Ask::Search("job queue backend".into()),
                Ask::Read("e00012".into())
            ])
        );
        let answer = "Redis streams [e02002].\nSEARCH: more";
        assert_eq!(parse(answer), Step::Answer(answer.into()));
        assert_eq!(parse("READ:"), Step::Answer("READ:".into()));
    }

    #[test]
    fn a_reply_of_many_asks_is_cut_to_the_first_few() {
        let reply: String = (0..40).map(|i| format!("SEARCH: topic {i}\n")).collect();
        match parse(&reply) {
            Step::More(asks) => {
                assert_eq!(asks.len(), MAX_ASKS);
                assert_eq!(asks[0], Ask::Search("topic 0".into()));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn citations_are_the_threads_ids_in_brackets() {
        let entries = [entry("a1", "x"), entry("b2", "y")];
        let index = super::super::Index::new(&entries, crate::deadline::Deadline::NONE).unwrap();
        assert_eq!(
            citations("Redis [b2], earlier [a1, b2]; not [zz] nor b2", &index),
            vec!["b2", "a1"]
        );
    }

    #[test]
    fn shown_entries_come_in_thread_order_the_first_added_kept_first() {
        let entries: Vec<Entry> = (0..10).map(|i| entry(&format!("e{i}"), "text")).collect();
        let mut shown = Shown::default();
        shown.add(7, 1, entries.len());
        shown.add(2, 0, entries.len());
        let all = shown.render(&entries, 10_000);
        assert_eq!(
            all.lines().collect::<Vec<_>>(),
            [
                "[e2] user: text",
                "[e6] user: text",
                "[e7] user: text",
                "[e8] user: text"
            ]
        );
        // Room for one line: the entry first added.
        assert_eq!(shown.render(&entries, 18), "[e7] user: text");
    }
}
