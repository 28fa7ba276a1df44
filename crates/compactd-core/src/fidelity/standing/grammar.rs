//! Standing instructions told by their grammar, for the many ways people state them that no
//! phrase list foresees ("Use British spelling in user-facing docs", "Keep public APIs typed",
//! "One sentence per line in markdown files", "**Imports**: no `.js` extension on relative
//! imports", "DO prefer `tailwind`-based styling"). A sentence is a rule when it is normative —
//! a prohibition, a modal, a preference, a condition with an instruction, or an imperative about a
//! *kind* of thing — and not about the thing at hand: a one-off task ("Fix the login bug", "Add a
//! docstring to `add`"), a question, a description of the project ("Rolldown is a bundler"), or
//! what a tool printed. English grammar, not phrases learned from samples: the lexicons below are
//! the general vocabulary of instructions (verbs in their base form, modals, quantifiers,
//! deixis, in [`super::lexicon`]), and every decision says which feature made it.

use super::lexicon::{
    CHANGE_VERBS, CONTRASTS, DEIXIS, GENERAL, HABITUAL, MODALS, NORMATIVE_LABELS, OUTPUT_STARTS,
    RULE_SUBJECTS, TEMPORAL, USAGE_VERBS,
};

/// Leading marks that carry no meaning of their own: `rule 3:`, `oh and`, `btw`, a bold label
/// (`**Naming**:`), an uppercase `DO`; and whether a label or a rule's number was among them.
pub(super) fn without_leads(lower: &str) -> (&str, bool) {
    let mut text = lower.trim();
    let mut labelled = false;
    loop {
        let before = text.len();
        for lead in [
            "oh and ",
            "oh, and ",
            "oh, ",
            "oh ",
            "and ",
            "also, ",
            "also ",
            "btw, ",
            "btw ",
            "by the way, ",
            "reminder: ",
            "note: ",
            "important: ",
            "critical: ",
            "please, ",
            "please ",
            "ps: ",
            "p.s. ",
        ] {
            if let Some(rest) = text.strip_prefix(lead) {
                text = rest.trim_start();
            }
        }
        // "rule 3:", "rule #3 -", a label of a few words before a colon.
        if let Some(rest) = numbered_rule(text).or_else(|| label(text).map(|(_, rest)| rest)) {
            text = rest.trim_start();
            labelled = true;
        }
        if let Some(rest) = text.strip_prefix("do ")
            && starts_with_verb(rest)
        {
            // "DO prefer …", "DO use …": the emphasis of a style guide, not the verb "do".
            text = rest;
        }
        if text.len() == before {
            return (text, labelled);
        }
    }
}

fn numbered_rule(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("rule")?.trim_start();
    let rest = rest.strip_prefix('#').unwrap_or(rest);
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    let rest = rest[digits..].trim_start();
    rest.strip_prefix(':')
        .or_else(|| rest.strip_prefix('-'))
        .or_else(|| rest.strip_prefix('.'))
        .or_else(|| (digits > 0).then_some(rest))
}

/// A label of at most four plain words ended by a colon (`naming:`, `adding dependencies:`),
/// which a style guide puts before its rule: not a path, not a clause (`run rubocop: …` is an
/// imperative, its colon introduces the command).
fn label(text: &str) -> Option<(&str, &str)> {
    let (head, rest) = text.split_once(':')?;
    let words: Vec<&str> = head.split_whitespace().collect();
    let plain = head
        .chars()
        .all(|c| c.is_alphanumeric() || c.is_whitespace() || "-'".contains(c));
    let clause = words.first().is_some_and(|w| USAGE_VERBS.contains(w));
    (!words.is_empty() && words.len() <= 4 && plain && !clause && !rest.trim().is_empty())
        .then_some((head, rest))
}

fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '—' | '–'))
        .map(|w| {
            w.trim_matches(|c: char| {
                !c.is_alphanumeric() && c != '\'' && c != '-' && c != '_' && c != '.'
            })
        })
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| !w.is_empty())
        .collect()
}

fn starts_with_verb(text: &str) -> bool {
    words(text)
        .first()
        .is_some_and(|first| USAGE_VERBS.contains(first))
}

fn has(words: &[&str], lexicon: &[&str]) -> bool {
    words.iter().any(|w| lexicon.contains(w))
}

/// Whether `lower` (a sentence, lower case) states a standing instruction by its grammar.
pub(super) fn is_rule(lower: &str) -> bool {
    if label(lower.trim()).is_some_and(|(head, _)| NORMATIVE_LABELS.contains(&head.trim())) {
        return true;
    }
    let (text, labelled) = without_leads(lower);
    let text = &text.replace("make sure ", "ensure ");
    let words = words(text);
    if words.len() < 3 || text.ends_with('?') {
        return false;
    }
    let first = words[0];
    // What a tool printed, code, a question, a turn of the conversation about the work at hand.
    if OUTPUT_STARTS.iter().any(|s| text.starts_with(s))
        || looks_like_code(text)
        || is_question(&words)
        || conversational(text, first)
    {
        return false;
    }
    // "When …, do …": a condition with an instruction after it (which may point back at it).
    if [
        "when", "whenever", "if", "before", "after", "while", "for", "in", "on", "during",
    ]
    .contains(&first)
    {
        return text
            .split(',')
            .skip(1)
            .any(|then| starts_with_verb(then.trim_start()) || binds_modal(&self::words(then)));
    }
    let contrast = CONTRASTS.iter().any(|c| text.contains(c));
    let general = has(&words, GENERAL) || plural_scope(&words) || contrast;
    // About the thing at hand, unless it says it is for every time. (What a "because" clause
    // explains does not count.)
    let claim = words_before_reason(&words);
    if deictic(claim) && !has(&words, TEMPORAL) {
        return false;
    }
    let prohibition = ["never", "no", "don't", "dont", "avoid", "nothing"].contains(&first)
        || text.starts_with("do not ")
        || text.starts_with("not ");
    if prohibition {
        // "No fixes applied", "No errors found": a report; "No worries", "Don't forget to …": a
        // turn of the conversation, not a prohibition.
        let aside = [
            "worries", "problem", "thanks", "need", "idea", "rush", "forget",
        ]
        .contains(words.get(1).unwrap_or(&""));
        return !(aside || (first == "no" && reports(&words)));
    }
    if binds_modal(&words) {
        return true;
    }
    if USAGE_VERBS.contains(&first) {
        if CHANGE_VERBS.contains(&first) {
            return has(&words, HABITUAL) || contrast;
        }
        // An imperative about a kind of thing ("Use conventional commit messages"), not about a
        // particular one ("Use the helper in parse.rs").
        return general || !specific_object(&words);
    }
    // "Internal files use `_` prefix", "All tests use `t.TempDir()`": a kind of thing and what
    // it does, in the present, is a convention.
    if let Some(at) = words.iter().take(4).position(|w| USAGE_VERBS.contains(w))
        && at > 0
        && is_plural(words[at - 1])
        && !words[..at]
            .iter()
            .any(|w| ["the", "these", "those", "my", "our"].contains(w))
    {
        return true;
    }
    // A verbless convention ("One sentence per line in markdown files", "ESM only — no
    // CommonJS", "**Naming**: initialisms, not `Url`", "Explicit `.ts` extensions in all import
    // paths"): a rule when it says which ones or how many, or — under a style guide's label —
    // what not to do.
    words.len() <= 20
        && !first.contains('/')
        && !has_copula(&words)
        && !words
            .iter()
            .take(8)
            .any(|w| w.len() > 4 && w.ends_with("ed"))
        && (has(&words, &["only", "per"]) || (labelled && has(&words, &["not", "no", "instead"])))
}

/// What no phrase makes a rule: a tool's output, a line of code, or a description in the
/// passive ("ES modules are used throughout").
pub(super) fn vetoed(lower: &str) -> bool {
    let (text, _) = without_leads(lower);
    let words = words(text);
    OUTPUT_STARTS.iter().any(|s| text.starts_with(s))
        || suggestion(&words)
        || looks_like_code(text)
        || words.windows(2).any(|w| {
            ["is", "are", "was", "were"].contains(&w[0])
                && w[1].len() >= 4
                && w[1].ends_with("ed")
                && !has(&words, MODALS)
        })
}

/// "Try `--flag`", "try running …": a suggestion for one attempt, the way tools word their
/// hints. "Try to keep …" is a standing wish and stays.
fn suggestion(words: &[&str]) -> bool {
    words.first() == Some(&"try") && words.get(1).is_some_and(|w| *w != "to")
}

/// `line` with each backtick span replaced by a placeholder word and each markdown link by its
/// text: what a sentence quotes or links is a noun of it, not code.
pub fn without_code_spans(line: &str) -> String {
    without_links(&spans_replaced(line))
}

/// `[text](target)` written as `text`.
fn without_links(line: &str) -> String {
    let mut out = line.to_owned();
    while let Some(mid) = out.find("](") {
        let (Some(open), Some(close)) = (out[..mid].rfind('['), out[mid..].find(')')) else {
            break;
        };
        let text = out[open + 1..mid].to_owned();
        out.replace_range(open..mid + close + 1, &text);
    }
    out
}

fn spans_replaced(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    for (i, part) in line.split('`').enumerate() {
        // Odd parts are inside a span, when the span is closed.
        if i % 2 == 1 && line.matches('`').count().is_multiple_of(2) {
            out.push_str("code");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// A line of code: a statement's end, an arrow, an assignment, a call with no space in it.
pub fn looks_like_code(text: &str) -> bool {
    let text = text.trim_end();
    // A statement ends with `;`; so may a sentence of prose, which runs longer and holds none of
    // a statement's brackets or assignment.
    let bytes = text.as_bytes();
    let assigns = bytes.iter().enumerate().any(|(i, &b)| {
        b == b'='
            && i > 0
            && !b"<>!=".contains(&bytes[i - 1])
            && bytes.get(i + 1).is_none_or(|n| *n != b'=')
    });
    // Two sentences of prose (". " and a capital after it) are no statement.
    let sentences = text.contains(". ")
        && text
            .split(". ")
            .skip(1)
            .any(|s| s.starts_with(char::is_alphabetic));
    let statement = text.ends_with(';')
        && !sentences
        && (text.split_whitespace().count() <= 2
            || assigns
            || text.contains(['[', '{'])
            || text
                .as_bytes()
                .windows(2)
                .any(|w| w[1] == b'(' && (w[0].is_ascii_alphanumeric() || w[0] == b'_'))
            || (text.starts_with("import ") && text.contains(" from "))
            || text.starts_with("export "));
    statement
        || text.ends_with('{')
        || ["=>", " = ", "::", "();", "){", ") {"]
            .iter()
            .any(|c| text.contains(c))
        || text
            .split_whitespace()
            .any(|w| w.len() > 12 && w.contains('(') && w.contains('.') && !w.contains('/'))
}

/// A conversational opening: a turn about the work at hand ("ok, make it brighter", "I think
/// …", "wait, do we …"). Some openings are verbs too ("wait for …", "now …"): those only with a
/// comma after them.
fn conversational(text: &str, first: &str) -> bool {
    const ALWAYS: &[&str] = &[
        "ok", "okay", "alright", "yes", "yeah", "yep", "nope", "hmm", "thanks", "cool", "nice",
        "great", "sure", "i", "i'm", "i've", "i'd", "it's", "that's", "there's", "let's", "we're",
        "it", "that", "this", "there",
    ];
    const WITH_COMMA: &[&str] = &["no", "wait", "now", "so", "well", "right", "actually"];
    ALWAYS.contains(&first)
        || (WITH_COMMA.contains(&first)
            // The word as it stands in the text (a quote mark may open the text before it).
            && text
                .find(first)
                .is_some_and(|at| text[at + first.len()..].trim_start().starts_with(',')))
}

/// The words before a clause that gives a reason ("because it …", "since …", "so that …").
fn words_before_reason<'w>(words: &'w [&'w str]) -> &'w [&'w str] {
    let end = words
        .iter()
        .position(|w| ["because", "since", "as", "so"].contains(w))
        .unwrap_or(words.len());
    &words[..end]
}

/// Whether the words point at the thing at hand. `that` is a demonstrative only where it ends
/// a clause or follows a verb or preposition ("do that", "like that"), not where it relates a
/// clause ("things that require a connection").
fn deictic(words: &[&str]) -> bool {
    words.iter().enumerate().any(|(i, w)| {
        if *w == "that" {
            let before = if i == 0 { "" } else { words[i - 1] };
            let last = i + 1 == words.len();
            return last
                || i == 0
                || [
                    "do", "did", "fix", "use", "try", "change", "revert", "undo", "like", "in",
                    "on", "of", "with", "about", "is", "was", "see", "read", "run", "keep",
                ]
                .contains(&before);
        }
        DEIXIS.contains(w)
    })
}

/// A modal that binds the agent, a kind of thing, or opens the sentence ("Always …", "Only …",
/// "You must …", "Tests should …"); "the cache must be keyed by tenant" is the task's
/// requirement of one particular thing, and "it never worked" no instruction at all.
fn binds_modal(words: &[&str]) -> bool {
    let Some(at) = words.iter().position(|w| MODALS.contains(w)) else {
        return false;
    };
    if at == 0 {
        // "Always …", "Only …"; not "needs to be set to 1" or "should have rpc-mode.ts", the
        // requirement of something left unnamed.
        return ["always", "only", "prefer"].contains(&words[0]);
    }
    let subject = &words[..at];
    subject.len() <= 4
        && !subject.iter().any(|w| {
            [
                "the", "this", "that", "it", "its", "my", "our", "i", "he", "she", "they",
            ]
            .contains(w)
        })
        && (has(subject, RULE_SUBJECTS) || subject.iter().any(|w| is_plural(w)))
}

fn is_question(words: &[&str]) -> bool {
    let first = words.first().copied().unwrap_or_default();
    [
        "what", "why", "how", "where", "who", "which", "is", "are", "does", "do", "did", "can",
        "could", "would", "will",
    ]
    .contains(&first)
        && words.get(1).is_some_and(|w| {
            ["you", "we", "i", "it", "there", "this", "that", "the", "a"].contains(w)
        })
}

/// "No fixes applied", "no errors found": `no`, a noun and a participle report what happened
/// ("No exported dependency types", where the participle comes first, forbids).
fn reports(words: &[&str]) -> bool {
    words.iter().skip(2).take(3).any(|w| {
        (w.ends_with("ed") && w.len() > 4)
            || ["found", "left", "done", "made", "seen", "given", "run"].contains(w)
    })
}

/// A sentence whose main verb is a copula describes, it does not instruct ("Rolldown is a
/// bundler", "ES modules are used throughout").
fn has_copula(words: &[&str]) -> bool {
    words.iter().take(8).any(|w| {
        [
            "is", "are", "was", "were", "has", "have", "contains", "lives",
        ]
        .contains(w)
    })
}

/// The imperative is about one particular thing: `the`, `a`, `my` in its first words, or a path
/// or a file right after the verb (`caddy.Context` is a name, `notes.md` a file).
fn specific_object(words: &[&str]) -> bool {
    let object = words.get(1).copied().unwrap_or_default();
    let file = object
        .rsplit_once('.')
        .is_some_and(|(stem, extension)| !stem.is_empty() && (1..=4).contains(&extension.len()));
    words
        .iter()
        .skip(1)
        .take(4)
        .any(|w| ["the", "a", "an", "my", "our", "his", "her", "their", "one"].contains(w))
        || object.contains('/')
        || file
}

/// A plural noun after `in`, `for`, `to`, `on` or `with`: a scope of many things ("in tests",
/// "for internal dependencies", "to relative imports").
fn plural_scope(words: &[&str]) -> bool {
    words.windows(3).any(|w| {
        [
            "in", "for", "to", "on", "with", "across", "between", "inside", "within",
        ]
        .contains(&w[0])
            && (is_plural(w[1]) || is_plural(w[2]))
    })
}

fn is_plural(word: &str) -> bool {
    word.len() > 3
        && word.ends_with('s')
        && !word.ends_with("ss")
        && !word.ends_with("us")
        && !word.ends_with("is")
        && word.chars().all(|c| c.is_alphabetic() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_about_kinds_of_things_are_rules() {
        for rule in [
            "use british spelling in user-facing docs.",
            "keep public apis typed and compatible with python 3.10+.",
            "one sentence per line in markdown files.",
            "imports: es module style, no .js extension on relative imports",
            "do prefer `tailwind`-based styling over other types of styling",
            "rule 3: keep every function under 40 lines",
            "oh and use tabs for indentation",
            "when updating snapshots, inspect the expectation diff rather than accepting it blindly.",
            "write unit tests for new functionality",
        ] {
            assert!(is_rule(rule), "{rule}");
        }
    }

    #[test]
    fn tasks_questions_descriptions_and_output_are_not() {
        for other in [
            "fix assertion args order",
            "add a docstring to add, list the files, and start notes.md.",
            "use the new helper here.",
            "now add a test file for add.",
            "rolldown is a javascript/typescript bundler written in rust.",
            "es modules are used throughout",
            "no fixes applied.",
            "error: cannot find module './config.js'",
            "why are there 2 subscription handlers?",
            "can you run the tests",
            "rename add to plus (just tell me, do not edit).",
        ] {
            assert!(!is_rule(other), "{other}");
        }
    }
}
