//! The phrases standing rules are recognized by (see the module above), lower case.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickKind};

/// A fixed list of phrases, any of which a sentence is looked for in one pass. Every sentence of
/// a request's user turns is looked at this way, and `str::contains` once per phrase (a searcher
/// built for each) was most of telling what a sentence states: detecting the rules of the
/// labelled turns took 28 % less time with one automaton per list (BENCHMARKS.md, issue 26).
/// Sentences are short; command output's long lines are searched phrase by phrase still
/// (`words::is_error_line`), where a vectorized search per phrase outruns an automaton walked a
/// byte at a time.
pub(super) struct Phrases {
    list: &'static [&'static str],
    search: OnceLock<AhoCorasick>,
}

impl Phrases {
    pub(super) const fn new(list: &'static [&'static str]) -> Phrases {
        Phrases {
            list,
            search: OnceLock::new(),
        }
    }

    /// Whether `text` holds any of the phrases (case-sensitive, as `str::contains`).
    pub(super) fn in_text(&self, text: &str) -> bool {
        self.search
            .get_or_init(|| {
                AhoCorasick::builder()
                    .kind(Some(AhoCorasickKind::DFA))
                    .build(self.list)
                    .expect("a phrase list builds an automaton")
            })
            .is_match(text)
    }
}

pub(super) const PROHIBITIONS: &[&str] = &[
    "never ",
    "don't ",
    "do not ",
    "dont ",
    "avoid ",
    "must not ",
    "stop using ",
    "refrain from ",
    "under no circumstances",
    "not a single ",
];

pub(super) const PREFERENCES: &[&str] = &[
    "i prefer ",
    "i'd prefer ",
    "i would prefer ",
    "i'd rather ",
    "i would rather ",
    "i like ",
    "i don't like ",
    "i want you to always",
    "i don't want ",
    "i never want ",
    "i always want ",
    "my preference ",
    "prefer ",
];

/// "… before you say a task is done": a check owed on every task.
pub(super) static BEFORE_DONE: Phrases = Phrases::new(&[
    "before you say ",
    "before you call a",
    "before you mark ",
    "before you report ",
    "before you claim ",
    "before declaring ",
    "before saying ",
    "before every commit",
    "before each commit",
    "before you commit",
    "before committing",
    "before you push",
    "before pushing",
    "before merging",
    "after every change",
    "after each change",
]);

/// Scopes that outlast the task at hand.
pub(super) static STANDING: Phrases = Phrases::new(&[
    "from now on",
    "for the whole job",
    "for the whole session",
    "for the rest of",
    "throughout",
    "going forward",
    "in future",
    "in the future",
    "every time",
    "whenever",
    "each time",
    "at all times",
    "for all future",
    "as a rule",
]);

/// Scopes that name a kind of thing rather than the thing at hand.
pub(super) static GENERAL_SCOPES: Phrases = Phrases::new(&[
    " in docs",
    " in the docs",
    " in documentation",
    " in library code",
    " in tests",
    " in test code",
    " in comments",
    " in commit messages",
    " in the codebase",
    " in this repo",
    " in this project",
    " in the project",
    " in production code",
    " in public api",
    " in all ",
    " in every ",
    " in any ",
    " all ",
    " for all ",
    " for every ",
    " for any ",
    " everywhere",
    " every ",
    " all new ",
    " all code",
    " all files",
    " all commits",
    " only ",
    " even when ",
    " even if ",
]);

pub(super) const IMPERATIVES: &[&str] = &[
    "use ",
    "keep ",
    "run ",
    "write ",
    "put ",
    "stick to ",
    "follow ",
    "format ",
    "name ",
    "add ",
    "comment ",
    "document ",
    "test ",
    "commit ",
    "ask ",
    "check ",
    "prefer ",
    "only ",
    "make ",
    "target ",
    "support ",
    "leave ",
    "respond ",
    "answer ",
    "reply ",
    "sign ",
    "wrap ",
    "limit ",
    "log ",
    "pin ",
    "return ",
    "mark ",
    "treat ",
];

/// Phrases that lift a rule.
pub(super) static WITHDRAWALS: Phrases = Phrases::new(&[
    "you can now ",
    "you may now ",
    "feel free to ",
    "it's fine to ",
    "it is fine to ",
    "it's ok to ",
    "it's okay to ",
    "no longer need",
    "no longer have to",
    "no longer required",
    "don't need to ",
    "you don't have to ",
    "forget the rule",
    "forget my rule",
    "ignore my earlier",
    "ignore the earlier",
    "ignore what i said about",
    "scratch the rule",
    "is allowed now",
    "are allowed now",
    "is fine now",
    "are fine now",
    "drop the rule",
    "lift the rule",
    "that rule no longer",
]);

/// Phrases of a one-off request.
pub(super) static ONE_OFF: Phrases = Phrases::new(&[
    " here ",
    " here.",
    " for now",
    " right now",
    " this time",
    " just this",
    " for this one",
    " this once",
    " in this function",
    " in this file",
    " on this line",
    " the new helper",
    " above ",
    " below ",
]);

/// The vocabulary of instructions themselves, not of what they are about.
pub(super) const INSTRUCTION_WORDS: &[&str] = &[
    "never", "always", "must", "should", "don't", "dont", "your", "unless", "only", "from", "now",
    "feel", "free", "fine", "okay", "allowed", "longer", "need", "have", "want", "prefer", "rule",
    "rules", "forget", "ignore", "earlier", "said", "about", "again", "with", "without", "that",
    "this", "those", "these", "them", "they", "when", "before", "after", "every", "code", "make",
    "sure", "call", "calls", "using", "call", "also", "still", "will", "would", "could", "please",
    "thing", "things", "there", "their", "what", "which", "into", "then", "write", "writing",
    "used", "adding", "running", "keeping", "putting", "anymore", "okay",
];
