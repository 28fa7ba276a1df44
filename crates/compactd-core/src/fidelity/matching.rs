//! Whether a summary keeps an anchor. The rules, by kind:
//!
//! * **files** (modified, read): the path itself, or its last directory and basename
//!   (`src/lib.rs` for `crates/core/src/lib.rs`), or the basename alone for a path without a
//!   directory — each at a path boundary, so `lib.rs` does not match `mylib.rs`;
//! * **identifiers**: the identifier at a word boundary;
//! * **pinned text** and **the latest request**: verbatim, only runs of whitespace may differ
//!   (the latest request at a word boundary, so that a short one is not found inside a word);
//! * **other text** (earlier requests, open work, constraints, errors, commands): the text itself, or
//!   at least 80 % of its distinct content words (three letters or more, not stopwords) when it
//!   has three or more — a model may reword a request and still keep it.
//!
//! Comparisons ignore case and markdown marks (`` ` ``, `*`, quotes).

use std::collections::HashSet;
use std::sync::OnceLock;

use super::anchors::{Anchor, AnchorKind};

/// Share of an anchor's content words a summary must hold to keep a reworded text.
const WORD_COVERAGE: f64 = 0.8;

/// A summary prepared for matching.
#[derive(Debug)]
pub struct Index {
    /// Lower-cased, markdown marks removed, whitespace collapsed.
    normalized: String,
    /// Whitespace collapsed only, for verbatim text.
    verbatim: OnceLock<String>,
    /// The summary's content words: built on first use, since most anchors match as text.
    words: OnceLock<HashSet<String>>,
    summary: String,
}

impl Index {
    pub fn new(summary: &str) -> Index {
        Index {
            normalized: normalize(summary),
            verbatim: OnceLock::new(),
            words: OnceLock::new(),
            summary: summary.to_owned(),
        }
    }

    fn words(&self) -> &HashSet<String> {
        self.words
            .get_or_init(|| content_words(&self.normalized).map(str::to_owned).collect())
    }

    pub fn keeps(&self, anchor: &Anchor) -> bool {
        match anchor.kind {
            AnchorKind::ModifiedFile | AnchorKind::ReadFile => self.keeps_path(&anchor.text),
            AnchorKind::Identifier => {
                let identifier = normalize(&anchor.text);
                !identifier.is_empty() && contains_bounded(&self.normalized, &identifier)
            }
            AnchorKind::Pinned => self
                .verbatim
                .get_or_init(|| collapse_whitespace(&self.summary))
                .contains(&collapse_whitespace(&anchor.text)),
            // The latest request is quoted as written, whole: a rewording, or a short request's
            // words inside other text ("continue" in "Continue with the next module"), is not it.
            AnchorKind::LatestRequest => contains_bounded(
                self.verbatim
                    .get_or_init(|| collapse_whitespace(&self.summary)),
                &collapse_whitespace(&anchor.text),
            ),
            _ => {
                let text = normalize(&anchor.text);
                if text.is_empty() || self.normalized.contains(&text) {
                    return true;
                }
                let words: HashSet<&str> = content_words(&text).collect();
                words.len() >= 3
                    && words.iter().filter(|w| self.words().contains(**w)).count() as f64
                        >= WORD_COVERAGE * words.len() as f64
            }
        }
    }

    fn keeps_path(&self, path: &str) -> bool {
        let path = normalize(path);
        let path = path.trim_start_matches("./");
        if path.is_empty() || contains_bounded(&self.normalized, path) {
            return true;
        }
        let mut components = path.rsplit('/').filter(|c| !c.is_empty());
        match (components.next(), components.next()) {
            (Some(base), Some(dir)) => contains_bounded(&self.normalized, &format!("{dir}/{base}")),
            (Some(base), None) => contains_bounded(&self.normalized, base),
            _ => false,
        }
    }
}

/// The share of `text`'s distinct content words found in `other` (1 when it has none).
pub fn coverage(text: &str, other: &str) -> f64 {
    let text = normalize(text);
    let other = normalize(other);
    let words: HashSet<&str> = content_words(&text).collect();
    if words.is_empty() {
        return 1.0;
    }
    let theirs: HashSet<&str> = content_words(&other).collect();
    words.iter().filter(|w| theirs.contains(*w)).count() as f64 / words.len() as f64
}

/// Lower case, markdown marks and quotes removed, whitespace collapsed.
fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.chars() {
        let blank = match c {
            '`' | '*' | '"' | '“' | '”' | '‘' | '’' => true,
            c => c.is_whitespace(),
        };
        if blank {
            if !space {
                out.push(' ');
            }
            space = true;
        } else {
            // ASCII first: `char::to_lowercase` builds a case-mapping iterator per character.
            if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
            space = false;
        }
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Words of three letters or more that carry meaning, stemmed (`added`, `adds` → `add`).
fn content_words(normalized: &str) -> impl Iterator<Item = &str> {
    normalized
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().count() >= 3 && !is_stopword(w))
        .map(stem)
}

/// A word without its commonest English inflection, when enough of it is left.
fn stem(word: &str) -> &str {
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(stem) = word.strip_suffix(suffix)
            && stem.len() >= 3
            && !stem.ends_with('s')
        {
            return stem;
        }
    }
    word
}

/// Words too common to say whether a text was kept (a `match`: one comparison per length class,
/// not a scan of the list per word).
fn is_stopword(word: &str) -> bool {
    matches!(
        word,
        "please"
            | "the"
            | "and"
            | "for"
            | "that"
            | "this"
            | "with"
            | "from"
            | "are"
            | "was"
            | "but"
            | "not"
            | "you"
            | "your"
            | "can"
            | "all"
            | "any"
            | "its"
            | "into"
            | "then"
            | "than"
            | "have"
            | "has"
            | "had"
            | "will"
            | "would"
            | "should"
            | "could"
            | "there"
            | "their"
            | "what"
            | "when"
            | "which"
    )
}

/// Whether `needle` occurs in `haystack` with no word or path character glued to either side.
fn contains_bounded(haystack: &str, needle: &str) -> bool {
    let glued_before = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.');
    let glued_after = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-');
    haystack.match_indices(needle).any(|(at, _)| {
        let before = haystack[..at].chars().next_back();
        let after = haystack[at + needle.len()..].chars().next();
        !before.is_some_and(glued_before) && !after.is_some_and(glued_after)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keeps(summary: &str, kind: AnchorKind, text: &str) -> bool {
        Index::new(summary).keeps(&Anchor::new(kind, text))
    }

    #[test]
    fn paths_match_whole_or_by_directory_and_basename_at_a_boundary() {
        use AnchorKind::ModifiedFile as F;
        let summary = "Edited `crates/core/src/lib.rs` and src/parse.rs; see README.md.";
        assert!(keeps(summary, F, "crates/core/src/lib.rs"));
        assert!(
            keeps(summary, F, "/home/u/proj/src/parse.rs"),
            "directory and basename"
        );
        assert!(keeps(summary, F, "./src/parse.rs"));
        assert!(keeps(summary, F, "README.md"));
        assert!(!keeps(summary, F, "other/parse.rs"), "another directory");
        assert!(
            keeps(summary, F, "lib.rs"),
            "a bare basename, after any directory"
        );
        assert!(!keeps("see mylib.rs", F, "lib.rs"));
        assert!(!keeps("see src/parse.rsx", F, "src/parse.rs"));
        assert!(
            keeps("**Src/Parse.rs** changed", F, "src/parse.rs"),
            "case and markdown"
        );
    }

    #[test]
    fn identifiers_need_a_word_boundary() {
        use AnchorKind::Identifier as I;
        assert!(keeps("calls `parse_header` twice", I, "parse_header"));
        assert!(!keeps("calls parse_header_v2 twice", I, "parse_header"));
        assert!(keeps("uses Vec<u8>.", I, "Vec<u8>"));
    }

    #[test]
    fn pinned_text_is_kept_only_verbatim() {
        use AnchorKind::Pinned as P;
        let pin = "Deploy only from the `release` branch.";
        assert!(keeps(
            "## Pinned\n- Deploy only from the `release`   branch.",
            P,
            pin
        ));
        assert!(
            !keeps("Deploy only from the release branch.", P, pin),
            "markdown dropped"
        );
        assert!(
            !keeps("deploy only from the `release` branch.", P, pin),
            "case changed"
        );
    }

    #[test]
    fn the_latest_request_is_kept_only_as_written() {
        use AnchorKind::LatestRequest as L;
        let request = "Please add a --dry-run flag to the deploy script";
        assert!(keeps(
            "- Latest user request (verbatim): Please add a --dry-run flag to the  deploy script",
            L,
            request
        ));
        assert!(!keeps(
            "The user wants a dry-run flag added to the deploy script.",
            L,
            request
        ));
        assert!(!keeps("1. Continue with the next module.", L, "continue"));
        assert!(keeps(
            "- Latest user request (verbatim): continue",
            L,
            "continue"
        ));
    }

    #[test]
    fn other_text_is_kept_verbatim_or_reworded_with_its_words() {
        use AnchorKind::OpenWork as R;
        let request = "Please add a --dry-run flag to the deploy script";
        assert!(keeps(
            "User asked: please add a --dry-run flag to the deploy script.",
            R,
            request
        ));
        assert!(keeps(
            "The user wants a dry-run flag added to the deploy script.",
            R,
            request
        ));
        assert!(!keeps("The user wants a flag.", R, request));
        // Few words: only the text itself.
        assert!(!keeps("fix it", R, "fix tests"));
        assert!(keeps("then: fix tests", R, "fix tests"));
    }

    #[test]
    fn coverage_counts_distinct_content_words() {
        assert_eq!(
            coverage("fix the parser", "the parser is fixed"),
            1.0,
            "stemmed"
        );
        assert_eq!(coverage("fix the parser", "the lexer is fixed"), 0.5);
        assert_eq!(coverage("a b", "x"), 1.0);
    }
}
