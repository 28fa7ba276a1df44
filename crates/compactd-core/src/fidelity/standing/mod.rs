//! The user's standing instructions: rules stated once that hold for the rest of the job ("never
//! call unwrap() in library code", "no new crate dependencies unless I approve them", "use British
//! spelling in docs", "run cargo fmt and clippy before you say a task is done"), preferences
//! ("I prefer small commits"), the rules of a project file the user pasted (AGENTS.md, CLAUDE.md),
//! and withdrawals of earlier rules ("you can use unwrap in tests now").
//!
//! A one-off request is not a rule: "use the new helper here", "now make sure the migration runs
//! before you call it done". The tell is the scope: a rule is prohibitive or obligatory without a
//! pointer to the thing at hand, or names a scope that outlasts it (in docs, in tests, from now on,
//! before every commit). Precision and recall on a labelled set of user turns are measured in
//! `tests/it/summaries/standing_rules.rs` and reported in BENCHMARKS.md.

mod grammar;
mod lexicon;
pub use grammar::{looks_like_code, without_code_spans};
mod phrases;

use phrases::{
    BEFORE_DONE, GENERAL_SCOPES, IMPERATIVES, INSTRUCTION_WORDS, ONE_OFF, PREFERENCES,
    PROHIBITIONS, Phrases, STANDING, WITHDRAWALS,
};

/// What a sentence of a user turn states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statement {
    /// A rule or preference that holds until withdrawn.
    Rule,
    /// A rule that lifts or relaxes an earlier one; it replaces the rules it shares a topic with.
    Withdrawal,
}

/// Words of a rule longer than this are a paragraph, not a rule.
const MAX_WORDS: usize = 60;

/// Project rules files agents paste into a conversation.
const RULES_FILES: [&str; 4] = [
    "agents.md",
    "claude.md",
    ".cursorrules",
    "copilot-instructions",
];

/// The standing statements of one user turn, verbatim, in order.
pub fn of_turn(text: &str) -> Vec<(Statement, &str)> {
    let lower = text.to_ascii_lowercase();
    of_text(text, RULES_FILES.iter().any(|name| lower.contains(name)))
}

/// Whether `text` (the agent's, not the user's) holds a project rules file it pasted: a line that
/// heads one (see [`of_pasted_file`]). Such text is the user's project's rules, kept for the
/// summary where the rest of the agent's own text is left out.
pub fn pastes_rules_file(text: &str) -> bool {
    text.lines().any(heads_rules_file)
}

fn heads_rules_file(line: &str) -> bool {
    let lower = line.trim().to_ascii_lowercase();
    RULES_FILES.iter().any(|name| lower.contains(name))
        && ["instructions from:", "contents of ", "# "]
            .iter()
            .any(|lead| lower.starts_with(lead))
}

/// The rules of a project rules file an agent pasted into a system or developer turn (OpenCode's
/// "Instructions from: …/AGENTS.md", a "Contents of …/CLAUDE.md" reminder, Codex's "# AGENTS.md
/// instructions for …"). Only the file's own text is read: the rest of such a turn is the agent's
/// own system prompt, whose "NEVER …" lines are not the user's rules.
pub fn of_pasted_file(text: &str) -> Vec<(Statement, &str)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some((header, after)) = rest.split_once('\n') {
        rest = after;
        if !heads_rules_file(header) {
            continue;
        }
        // The file ends where the agent's wrapper closes, or at the next file's header.
        let end = [
            "</INSTRUCTIONS>",
            "</system-reminder>",
            "\nInstructions from:",
        ]
        .iter()
        .filter_map(|close| rest.find(close))
        .min()
        .unwrap_or(rest.len());
        found.extend(of_text(&rest[..end], true));
        rest = &rest[end..];
    }
    found
}

/// The standing statements of `text`; in a pasted rules file (`rules_file`), every list item
/// that reads as an instruction is one.
fn of_text(text: &str, rules_file: bool) -> Vec<(Statement, &str)> {
    let mut found = Vec::new();
    // A list under a line announcing rules ("Ground rules for the whole job:", "## Conventions"),
    // or any list of a pasted rules file. A user's announcement holds for the headings and blank
    // lines of the block they pasted under it, until a line of prose of their own.
    let (mut announced, mut in_rules_list) = (false, false);
    for line in text.lines() {
        let trimmed = line.trim();
        let item = list_item(trimmed);
        if item.is_none() && !trimmed.is_empty() {
            if trimmed.starts_with('#') {
                in_rules_list = announced || announces_rules(trimmed);
            } else {
                announced = announces_rules(trimmed);
                in_rules_list = announced;
            }
        }
        // A line that introduces a list ("Ground rules for the whole job:") is not a rule itself.
        if item.is_none() && (trimmed.ends_with(':') || trimmed.starts_with('#')) {
            continue;
        }
        for sentence in sentences(item.unwrap_or(trimmed)) {
            // An item of a list the user announced as rules is one, however it is worded; an
            // item of a pasted file's list, when it reads as an instruction (its other lists
            // describe the project).
            let listed = item.is_some()
                && ((in_rules_list && !rules_file && is_listed_rule(sentence))
                    || ((rules_file || in_rules_list) && is_instruction(sentence)));
            let statement = classify(sentence).or_else(|| listed.then_some(Statement::Rule));
            if let Some(statement) = statement {
                found.push((statement, sentence));
            }
        }
    }
    found
}

/// An item of a list announced as rules that can be one: a statement of three words or more,
/// not a question, not code.
fn is_listed_rule(sentence: &str) -> bool {
    let lower = normalized(sentence);
    lower.split_whitespace().count() >= 3
        && !lower.ends_with('?')
        && !grammar::vetoed(&normalized(&without_code_spans(sentence)))
}

/// What `sentence` states, if it is a standing statement.
pub fn classify(sentence: &str) -> Option<Statement> {
    let lower = normalized(sentence);
    let words = lower.split_whitespace().count();
    if !(3..=MAX_WORDS).contains(&words) || lower.ends_with('?') {
        return None;
    }
    if is_withdrawal(&lower) {
        return Some(Statement::Withdrawal);
    }
    // Code the sentence quotes (`if (x) y = 1`) is a noun of it, not a line of code.
    let spoken = normalized(&without_code_spans(sentence));
    if is_one_off(&lower, words) || grammar::vetoed(&spoken) {
        return None;
    }
    let rule = is_prohibition(&lower)
        || is_obligation(&lower)
        || is_preference(&lower)
        || has_standing_scope(&lower)
        || (starts_with_any(&lower, IMPERATIVES) && has_general_scope(&lower))
        || grammar::is_rule(&spoken)
        || is_scoped_rule(&lower);
    rule.then_some(Statement::Rule)
}

/// Leads that say what follows is a rule ("One rule for all billing work: never …").
static RULE_LEADS: Phrases = Phrases::new(&[
    "rule",
    "guideline",
    "convention",
    "policy",
    "constraint",
    "standing instruction",
]);
/// Leads that stress what follows, which is a rule when it is an instruction ("Important:
/// never push to main"; an agent's "IMPORTANT: these instructions OVERRIDE …" is not).
static STRESS_LEADS: Phrases =
    Phrases::new(&["important", "remember", "reminder", "heads up", "note"]);

/// Leads that name a whole kind of work, not the thing at hand ("For all billing work, …").
const KIND_LEADS: [&str; 14] = [
    "for all ",
    "for every ",
    "for any ",
    "in all ",
    "in every ",
    "in any ",
    "on all ",
    "on every ",
    "across ",
    "whenever ",
    "every time ",
    "anywhere ",
    "wherever ",
    "for anything ",
];

/// A rule behind a lead that scopes it: a label naming a rule ("One rule for all billing
/// work: never write a card number to a log line", "Rule for the billing module: card numbers
/// never reach a log") or a whole kind of work ("For all payments code, always round half to
/// even"), then the rule itself — an instruction, or after a rule's label any statement.
fn is_scoped_rule(lower: &str) -> bool {
    // The lead ends at the first colon, dash or comma, within its first few words.
    let Some(at) = lower
        .char_indices()
        .take(80)
        .find(|(_, c)| matches!(c, ':' | ',' | '—' | '–'))
        .map(|(at, _)| at)
    else {
        return false;
    };
    let (lead, rest) = (
        lower[..at].trim(),
        lower[at..].trim_start_matches([':', ',', '—', '–']),
    );
    let rest = rest.trim();
    let words = rest.split_whitespace().count();
    if !(3..=MAX_WORDS).contains(&words) || lead.split_whitespace().count() > 10 {
        return false;
    }
    let padded = format!(" {rest} ");
    if is_one_off(rest, words) || ONE_OFF.in_text(&padded) || grammar::vetoed(rest) {
        return false;
    }
    let instruction = is_prohibition(rest)
        || is_obligation(rest)
        || starts_with_any(rest, IMPERATIVES)
        || rest.starts_with("no ");
    let labelled = RULE_LEADS.in_text(lead);
    let stressed = STRESS_LEADS.in_text(lead) && lead.split_whitespace().count() <= 3;
    let kind = starts_with_any(lead, &KIND_LEADS);
    (labelled && (instruction || MODALS.in_text(&padded))) || ((kind || stressed) && instruction)
}

/// Whether `withdrawal` lifts `rule`: the rule is about the withdrawal's topic, its first word
/// that is not an instruction's own vocabulary ("unwrap" in "you can use unwrap in tests now";
/// "tests" there is a scope, and "write the tests first" stays).
pub fn withdraws(withdrawal: &str, rule: &str) -> bool {
    topic_words(withdrawal)
        .first()
        .is_some_and(|topic| topic_words(rule).contains(topic))
}

fn topic_words(text: &str) -> Vec<String> {
    normalized(text)
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.len() >= 4 && !INSTRUCTION_WORDS.contains(w))
        .map(|w| w.trim_end_matches('s').to_owned())
        .collect()
}

/// Lower case, markdown marks removed, a leading "please"/"and"/"also" dropped.
fn normalized(sentence: &str) -> String {
    let mut lower: String = sentence
        .chars()
        .filter(|c| !matches!(c, '*' | '`' | '_' | '"'))
        .map(|c| match c {
            '’' | '‘' => '\'',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    loop {
        let before = lower.len();
        for lead in [
            "please ",
            "and ",
            "also ",
            "ok, ",
            "okay, ",
            "oh, ",
            "oh and ",
            "oh ",
            "btw ",
            "btw, ",
            "also, ",
            "one more thing: ",
        ] {
            if let Some(rest) = lower.trim_start().strip_prefix(lead) {
                lower = rest.to_owned();
            }
        }
        if lower.len() == before {
            break;
        }
    }
    // Quotes around the whole sentence are the message's ('…', “…”, «…»), not the rule's.
    lower
        .trim()
        .trim_start_matches(['\'', '“', '«', '„', '‹', '\u{a0}', ' '])
        .trim_end_matches([
            '.', '!', ';', '\'', '”', '»', '‘', '’', '›', '\u{a0}', ' ', '。',
        ])
        .to_owned()
}

/// Phrases looked for in a sentence, each list in one pass (see [`Phrases`]).
static POINTERS: Phrases = Phrases::new(&[" this ", " that ", " it ", " these ", " those "]);
static MODAL_PROHIBITIONS: Phrases = Phrases::new(&[
    "you must not ",
    "you mustn't ",
    "you should never ",
    "you must never ",
]);
static NO_SCOPES: Phrases = Phrases::new(&[" unless ", " without ", " in ", " ever", " at all"]);
static MODAL_ALWAYS: Phrases =
    Phrases::new(&[" must always ", " should always ", " always have to "]);
static MUST: Phrases = Phrases::new(&[" must ", " have to be "]);
static RULE_HEADINGS: Phrases = Phrases::new(&[
    "rule",
    "guideline",
    "convention",
    "instruction",
    "preference",
    "from now on",
    "for the whole",
    "throughout",
    "constraint",
    "policy",
    "policies",
]);
static MODALS: Phrases = Phrases::new(&[" must ", " should ", " always ", " never "]);

fn starts_with_any(text: &str, starts: &[&str]) -> bool {
    starts.iter().any(|s| text.starts_with(s))
}

fn is_withdrawal(lower: &str) -> bool {
    WITHDRAWALS.in_text(lower)
        || ((lower.starts_with("you can ") || lower.starts_with("you may "))
            && (lower.ends_with(" now") || lower.contains(" now ") || lower.contains(" again")))
}

fn is_one_off(lower: &str, words: usize) -> bool {
    let padded = format!(" {lower} ");
    starts_with_any(
        lower,
        &[
            "now ",
            "next ",
            "then ",
            "first ",
            "finally ",
            "can you",
            "could you",
        ],
    ) || ONE_OFF.in_text(&padded)
        || (words <= 6 && POINTERS.in_text(&padded))
}

fn is_prohibition(lower: &str) -> bool {
    starts_with_any(lower, PROHIBITIONS)
        || MODAL_PROHIBITIONS.in_text(lower)
        || (lower.starts_with("no ") && !lower.starts_with("no,") && NO_SCOPES.in_text(lower))
}

fn is_obligation(lower: &str) -> bool {
    starts_with_any(lower, &["always ", "you must ", "you should always ", "you always "])
        || MODAL_ALWAYS.in_text(lower)
        // "X must …" is a rule when X is a kind of thing, not the thing at hand.
        || (MUST.in_text(lower)
            && starts_with_any(lower, &["every ", "all ", "each ", "any ", "you ", "we ", "new "]))
        || BEFORE_DONE.in_text(lower)
}

fn is_preference(lower: &str) -> bool {
    starts_with_any(lower, PREFERENCES)
}

fn has_standing_scope(lower: &str) -> bool {
    STANDING.in_text(lower)
}

fn has_general_scope(lower: &str) -> bool {
    let padded = format!(" {lower} ");
    GENERAL_SCOPES.in_text(&padded)
}

/// An item of a Markdown list: the text after its bullet or number.
fn list_item(line: &str) -> Option<&str> {
    if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        return Some(rest.trim());
    }
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    (digits > 0)
        .then(|| line[digits..].strip_prefix(['.', ')']))
        .flatten()
        .map(str::trim)
}

/// A line that introduces a list of rules ("Ground rules for this job:", "# Conventions").
fn announces_rules(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    (lower.ends_with(':') || lower.starts_with('#')) && RULE_HEADINGS.in_text(&lower)
}

/// A list item that reads as an instruction: it opens with an imperative or a modal.
fn is_instruction(sentence: &str) -> bool {
    let lower = normalized(sentence);
    lower.split_whitespace().count() >= 2
        && (starts_with_any(&lower, IMPERATIVES)
            || starts_with_any(&lower, PROHIBITIONS)
            || lower.starts_with("no ")
            || MODALS.in_text(&lower))
}

/// Sentences of one line, each with its end mark; a sentence ends at `.`, `!` or `?` before a
/// capital letter or the end (so `println!` and `v1.2` do not end one), and its clauses joined by
/// ", and" / ", but" are read apart.
fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        // The marks are ASCII, so the byte after one starts a character.
        let ends = matches!(b, b'.' | b'!' | b'?')
            && bytes.get(i + 1).is_none_or(|n| *n == b' ')
            && line[i + 1..]
                .trim_start()
                .chars()
                .next()
                .is_none_or(|c| c.is_uppercase() || !c.is_alphanumeric());
        if ends {
            push_clauses(&mut out, &line[start..=i]);
            start = i + 1;
        }
    }
    push_clauses(&mut out, &line[start..]);
    out
}

/// Where one clause ends and another begins: ", and", ", but", and an afterthought tacked
/// on ("fix the test oh and never push to main", "…, btw always run the linter").
const JOINTS: [&str; 7] = [
    ", and ",
    ", but ",
    " oh and ",
    " oh, and ",
    ", oh and ",
    " btw ",
    ", btw, ",
];

fn push_clauses<'a>(out: &mut Vec<&'a str>, sentence: &'a str) {
    let mut rest = sentence;
    loop {
        // ASCII lower case keeps every byte where it was.
        let lower = rest.to_ascii_lowercase();
        let Some((at, joint)) = JOINTS
            .iter()
            .filter_map(|j| lower.find(j).map(|at| (at, j.len())))
            .min()
        else {
            break;
        };
        push_sentence(out, &rest[..at]);
        rest = &rest[at + joint..];
    }
    push_sentence(out, rest);
}

fn push_sentence<'a>(out: &mut Vec<&'a str>, sentence: &'a str) {
    let mut sentence = sentence.trim();
    // A quote the sentence opens (or closes) but does not close is the message's, not its own.
    if sentence.matches('"').count() % 2 == 1 {
        sentence = sentence.trim_matches('"').trim();
    }
    if sentence.len() >= 10 {
        out.push(sentence);
    }
}

#[cfg(test)]
mod tests;
