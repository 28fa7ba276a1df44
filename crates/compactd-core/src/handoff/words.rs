//! The words a turn, a goal or a path is known by: what relevance is measured in.

use std::collections::HashSet;

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
pub(super) fn path_words(path: &str) -> HashSet<String> {
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
