//! Secret redaction: before any text leaves for a model, and before a summary is returned or
//! stored, secrets in it are replaced with placeholders such as `[REDACTED:github-pat:1]` — the
//! same secret, the same placeholder, within one summarization.
//!
//! The rules are gitleaks' default set (`gitleaks.toml`, MIT, see `GITLEAKS-LICENSE`), compiled
//! once per process, plus compactd's own for what gitleaks has no rule for (`compactd.toml`:
//! Anthropic keys, passwords in URLs, `.env` assignments) and any the operator adds in the same
//! format (`COMPACTD_REDACT_RULES`). They run as gitleaks runs them: one Aho-Corasick pass over
//! the text finds the rules whose keywords occur, only those rules' regexes run, then the secret
//! is picked out of the match and checked against the rule's entropy and allowlists.
//!
//! Text that holds JSON written inside a string (tool arguments, a command that printed JSON:
//! `{\"api_key\": \"sk-…\"}`) is searched a second time through an *unescaped view* of the same
//! length, where each escape's backslash is a space: rules that expect a quote right after a key
//! name, or a line break before an assignment, then see one, and every finding's position is the
//! same in the original text.
mod rules;
mod screen;

pub use screen::{Redacted, Screen, Screening};
#[cfg(test)]
mod key_tests;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use aho_corasick::AhoCorasick;

use rules::{Allowlist, Rule, RuleSet};

static GITLEAKS: &str = include_str!("gitleaks.toml");
static OWN: &str = include_str!("compactd.toml");

/// The built-in rules, compiled on first use (once per process).
static BUILTIN: LazyLock<Arc<Compiled>> =
    LazyLock::new(|| Arc::new(Compiled::new(builtin_rules())));

fn builtin_rules() -> RuleSet {
    let mut set = rules::parse(GITLEAKS).expect("the vendored gitleaks rules compile");
    set.merge(rules::parse(OWN).expect("compactd's rules compile"));
    set
}

/// Rules with their keyword automaton.
#[derive(Debug)]
struct Compiled {
    set: RuleSet,
    keywords: AhoCorasick,
    /// For each keyword pattern, the rules it triggers.
    triggers: Vec<Vec<usize>>,
    /// Rules without keywords (and not screened): they always run.
    always: Vec<usize>,
    /// The rules that would run on nearly every text (a keyword of [`CHANCE_KEYWORD`] letters or
    /// fewer, or none), screened by their regexes as one set; `None` when there are none, or the
    /// set is over the size limit (each rule then runs alone, as the rest do).
    screen: Option<ScreenedRules>,
}

/// Screened rules: each runs where its regex matches the text (or its view) and one of its
/// keywords occurs in the text, as every rule does, but the two are looked at in the other order.
/// Their keywords are not in [`Compiled::keywords`]: a keyword of two or three letters (`ey`,
/// `sk`, `key`) occurs every few bytes of ordinary text, and the automaton reported each
/// occurrence; a rule's own keywords are looked for only where its regex matched, which in
/// most texts is nowhere. Redacting the 3 KB prompt of the request-path benchmark: 16.8 → 15.7 µs.
#[derive(Debug)]
struct ScreenedRules {
    rules: Vec<usize>,
    regexes: regex::bytes::RegexSet,
    /// For each screened rule, its keywords (`None`: it has none, and runs wherever its regex
    /// matches).
    keywords: Vec<Option<AhoCorasick>>,
}

/// A keyword this short occurs by chance in ordinary text: its rule is screened.
const CHANCE_KEYWORD: usize = 3;

fn screen(set: &RuleSet) -> Option<ScreenedRules> {
    let screened: Vec<usize> = (0..set.rules.len())
        .filter(|&i| {
            let keywords = &set.rules[i].keywords;
            keywords.is_empty() || keywords.iter().any(|k| k.len() <= CHANCE_KEYWORD)
        })
        .collect();
    if screened.is_empty() {
        return None;
    }
    // The patterns as each rule compiled them, with the same flags (see `rules::compile`).
    let regexes =
        regex::bytes::RegexSetBuilder::new(screened.iter().map(|&i| set.rules[i].regex.as_str()))
            .unicode(false)
            .size_limit(256 << 20)
            .dfa_size_limit(64 << 20)
            .build()
            .ok()?;
    let keywords = screened
        .iter()
        .map(|&i| {
            let keywords = &set.rules[i].keywords;
            (!keywords.is_empty()).then(|| keyword_automaton(keywords))
        })
        .collect();
    Some(ScreenedRules {
        rules: screened,
        regexes,
        keywords,
    })
}

/// Keywords found as gitleaks finds them: in any case (gitleaks lower-cases the text).
fn keyword_automaton<P: AsRef<[u8]>>(keywords: &[P]) -> AhoCorasick {
    // A DFA: the overlapping search over every prompt is the hottest part of redaction, and
    // the keywords (a few hundred) make a DFA of a few MB, built once per process.
    AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .ascii_case_insensitive(true)
        .build(keywords)
        .expect("keywords build an automaton")
}

impl Compiled {
    fn new(set: RuleSet) -> Compiled {
        Compiled::with_screen(set, true)
    }

    /// The rules compiled with the screen, or (`false`) each run as the rest are: the two find
    /// the same secrets (a test compares them).
    fn with_screen(set: RuleSet, screened: bool) -> Compiled {
        let screen = if screened { screen(&set) } else { None };
        let mut patterns: Vec<String> = Vec::new();
        let mut triggers: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (index, rule) in set.rules.iter().enumerate() {
            if screen.as_ref().is_some_and(|s| s.rules.contains(&index)) {
                continue;
            }
            if rule.keywords.is_empty() {
                always.push(index);
            }
            for keyword in &rule.keywords {
                match patterns.iter().position(|p| p == keyword) {
                    Some(at) => triggers[at].push(index),
                    None => {
                        patterns.push(keyword.clone());
                        triggers.push(vec![index]);
                    }
                }
            }
        }
        let keywords = keyword_automaton(&patterns);
        Compiled {
            screen,
            set,
            keywords,
            triggers,
            always,
        }
    }

    /// The findings of these rules in `text`, and in `view` (its unescaped view, see
    /// [`unescaped_view`]) for the rules that look at quotes around a secret.
    fn find(&self, text: &str, view: Option<&str>, global: &[&Allowlist], out: &mut Vec<Finding>) {
        let bytes = text.as_bytes();
        let mut run = vec![false; self.set.rules.len()];
        for &index in &self.always {
            run[index] = true;
        }
        for found in self.keywords.find_overlapping_iter(bytes) {
            for &index in &self.triggers[found.pattern().as_usize()] {
                run[index] = true;
            }
        }
        // A screened rule that matches nowhere in the text (nor in its view) would find nothing:
        // it is not run; one that matches runs when the text holds one of its keywords.
        if let Some(screen) = &self.screen {
            let in_text = screen.regexes.matches(bytes);
            let in_view = view.map(|view| screen.regexes.matches(view.as_bytes()));
            for (at, &index) in screen.rules.iter().enumerate() {
                let quoted = self.set.rules[index].quoted;
                let matched = in_text.matched(at)
                    || (quoted && in_view.as_ref().is_some_and(|m| m.matched(at)));
                run[index] = matched
                    && screen.keywords[at]
                        .as_ref()
                        .is_none_or(|keywords| keywords.is_match(bytes));
            }
        }
        // The view has the text's keywords (no keyword holds the spaces it differs by).
        for (index, rule) in self.set.rules.iter().enumerate() {
            if run[index] {
                find_rule(rule, text, global, out);
                if let Some(view) = view.filter(|_| rule.quoted) {
                    find_rule(rule, view, global, out);
                }
            }
        }
    }
}

/// How generic a rule is: gitleaks' `generic-*` rules and compactd's `.env` rule find secrets by
/// their surroundings, not their shape.
fn generality(rule: &str) -> u8 {
    if rule.starts_with("generic") {
        2
    } else if rule == "env-assignment" {
        1
    } else {
        0
    }
}

/// One secret found: where it is and which rule found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub start: usize,
    pub end: usize,
    pub rule: String,
}

/// How much of a finding's line, either side of it, line-targeted allowlists see: far more than
/// any declaration they recognize, and a bound on the work per finding.
const LINE_CONTEXT: usize = 1024;

// When this thread's redaction gives up (see `within`), and whether it did.
thread_local! {
    static GIVE_UP: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
    static GAVE_UP: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `work` (redaction on this thread) until `deadline`: past it, every search stops where it
/// is and the result is incomplete, `None` — never to be used, since it may hold secrets. A text
/// built to be slow to screen then costs the thread no more than the request's deadline.
pub fn within<R>(deadline: std::time::Instant, work: impl FnOnce() -> R) -> Option<R> {
    GIVE_UP.set(Some(deadline));
    GAVE_UP.set(false);
    let result = work();
    GIVE_UP.set(None);
    (!GAVE_UP.replace(false)).then_some(result)
}

/// Whether this thread's redaction is past its deadline (checked every few findings).
fn given_up() -> bool {
    if GAVE_UP.get() {
        return true;
    }
    let late = GIVE_UP
        .get()
        .is_some_and(|at| std::time::Instant::now() >= at);
    if late {
        GAVE_UP.set(true);
    }
    late
}

fn find_rule(rule: &Rule, text: &str, global: &[&Allowlist], out: &mut Vec<Finding>) {
    let bytes = text.as_bytes();
    if given_up() {
        return;
    }
    for (n, captures) in rule.regex.captures_iter(bytes).enumerate() {
        if n % 64 == 63 && given_up() {
            return;
        }
        let whole = captures.get(0).expect("group 0 always matches");
        // The secret: the rule's group, else the first group that matched, else the match.
        let secret = match rule.secret_group {
            Some(group) => captures.get(group),
            None => captures.iter().skip(1).flatten().next(),
        }
        .unwrap_or(whole);
        let value = secret.as_bytes();
        if value.is_empty() {
            continue;
        }
        if let Some(min) = rule.entropy {
            if rules::entropy(value) <= min {
                continue;
            }
            // gitleaks: a generic rule's secret must hold a digit.
            if rule.id.starts_with("generic") && !value.iter().any(u8::is_ascii_digit) {
                continue;
            }
        }
        // The line around the match, as far as [`LINE_CONTEXT`] either side: a line-targeted
        // allowlist runs its regexes on it for each finding, and on a megabyte written as one
        // line with a finding every few bytes the whole line each time took minutes.
        let before = &bytes[whole.start().saturating_sub(LINE_CONTEXT)..whole.start()];
        let line_start = memchr::memrchr(b'\n', before).map_or(whole.start() - before.len(), |i| {
            whole.start() - before.len() + i + 1
        });
        let after = &bytes[whole.end()..(whole.end() + LINE_CONTEXT).min(bytes.len())];
        let line_end =
            memchr::memchr(b'\n', after).map_or(whole.end() + after.len(), |i| whole.end() + i);
        let line = &bytes[line_start..line_end];
        if rule
            .allowlists
            .iter()
            .chain(global.iter().copied())
            .any(|list| list.allows(value, whole.as_bytes(), line))
        {
            continue;
        }
        if !text.is_char_boundary(secret.start()) || !text.is_char_boundary(secret.end()) {
            continue;
        }
        out.push(Finding {
            start: secret.start(),
            end: secret.end(),
            rule: rule.id.clone(),
        });
    }
}

/// `text` with the backslash of each escape (`\"`, `\'`, `\/`, `\\`, `\n`, `\r`, `\t`) and the
/// letter of `\n`, `\r`, `\t` turned into spaces, byte for byte in place, so positions carry over;
/// `None` when the text has no such escape.
fn unescaped_view(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let first = memchr::memchr(b'\\', bytes)?;
    let mut view = bytes.to_vec();
    let mut changed = false;
    let mut i = first;
    while i + 1 < view.len() {
        if view[i] != b'\\' {
            i += 1;
            continue;
        }
        match bytes[i + 1] {
            b'"' | b'\'' | b'/' => {
                view[i] = b' ';
                changed = true;
            }
            b'\\' | b'n' | b'r' | b't' => {
                view[i] = b' ';
                view[i + 1] = b' ';
                changed = true;
            }
            _ => {}
        }
        i += 2;
    }
    // Only ASCII bytes were replaced by ASCII: still UTF-8.
    changed.then(|| String::from_utf8(view).expect("ASCII replaced by ASCII"))
}

/// The placeholders of one summarization: the same secret gets the same placeholder in every
/// text of it (system prompt, prompt, pins, the answer). Never printed: it holds the originals.
#[derive(Default)]
pub struct Placeholders {
    by_secret: HashMap<String, String>,
    per_rule: HashMap<String, u32>,
    /// Secrets replaced, by rule (each occurrence counts).
    pub counts: BTreeMap<String, u64>,
}

impl std::fmt::Debug for Placeholders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placeholders")
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

impl Placeholders {
    fn name(&mut self, secret: &str, rule: &str) -> &str {
        if !self.by_secret.contains_key(secret) {
            let n = self.per_rule.entry(rule.to_owned()).or_default();
            *n += 1;
            self.by_secret
                .insert(secret.to_owned(), format!("[REDACTED:{rule}:{n}]"));
        }
        *self.counts.entry(rule.to_owned()).or_default() += 1;
        &self.by_secret[secret]
    }

    /// Secrets replaced in all.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }
}

/// The redaction stage's rules: the built-in set and the operator's; none when the operator
/// turned redaction off.
#[derive(Debug, Clone)]
pub struct Redactor {
    builtin: Option<Arc<Compiled>>,
    extra: Option<Arc<Compiled>>,
}

impl Default for Redactor {
    fn default() -> Redactor {
        Redactor::disabled()
    }
}

impl Redactor {
    /// The built-in rules, plus the operator's (gitleaks' format) when given.
    pub fn new(extra_rules: Option<&str>) -> Result<Redactor, String> {
        let extra = extra_rules
            .map(|text| rules::parse(text).map(|set| Arc::new(Compiled::new(set))))
            .transpose()?;
        Ok(Redactor {
            builtin: Some(BUILTIN.clone()),
            extra,
        })
    }

    /// No rules: redaction off (`COMPACTD_REDACT=false`), by the operator's choice (also the
    /// default of a pipeline built without the setting).
    pub fn disabled() -> Redactor {
        Redactor {
            builtin: None,
            extra: None,
        }
    }

    /// Whether any rule runs.
    pub fn is_enabled(&self) -> bool {
        self.builtin.is_some() || self.extra.is_some()
    }

    /// `value` under the JSON key `key` redacted whole when the rules, reading the pair as a
    /// JSON object writes it, find a secret in the value: a key named like a secret tells what
    /// a value of any shape is. `None` when they find none there.
    pub fn redact_keyed(
        &self,
        key: &str,
        value: &str,
        placeholders: &mut Placeholders,
    ) -> Option<String> {
        if value.is_empty() || value.starts_with("[REDACTED:") {
            return None;
        }
        let key = serde_json::to_string(key).ok()?;
        let quoted = serde_json::to_string(value).ok()?;
        let text = format!("{{{key}: {quoted}}}");
        let start = key.len() + 3;
        let end = start + quoted.len();
        let found = self
            .find(&text)
            .into_iter()
            .find(|f| f.start < end && f.end > start)?;
        Some(placeholders.name(value, &found.rule).to_owned())
    }

    /// Every secret in `text`, in order, without overlaps (where two findings overlap, the one
    /// that starts first, or the longer of two that start together, wins).
    pub fn find(&self, text: &str) -> Vec<Finding> {
        if !self.is_enabled() {
            return Vec::new();
        }
        let global: Vec<&Allowlist> = self
            .builtin
            .iter()
            .chain(self.extra.iter())
            .flat_map(|c| c.set.allowlists.iter())
            .collect();
        let mut found = Vec::new();
        let view = unescaped_view(text);
        if let Some(builtin) = &self.builtin {
            builtin.find(text, view.as_deref(), &global, &mut found);
        }
        if let Some(extra) = &self.extra {
            extra.find(text, view.as_deref(), &global, &mut found);
        }
        // Where two rules find the same secret, the specific rule names it, not a generic one.
        found.sort_by(|a, b| {
            (a.start, std::cmp::Reverse(a.end), generality(&a.rule)).cmp(&(
                b.start,
                std::cmp::Reverse(b.end),
                generality(&b.rule),
            ))
        });
        let mut kept: Vec<Finding> = Vec::with_capacity(found.len());
        for finding in found {
            if kept.last().is_none_or(|last| finding.start >= last.end) {
                kept.push(finding);
            }
        }
        kept
    }

    /// `text` with every secret replaced by its placeholder.
    pub fn redact(&self, text: &str, placeholders: &mut Placeholders) -> String {
        let found = self.find(text);
        if found.is_empty() {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for finding in found {
            out.push_str(&text[at..finding.start]);
            out.push_str(placeholders.name(&text[finding.start..finding.end], &finding.rule));
            at = finding.end;
        }
        out.push_str(&text[at..]);
        out
    }
}
