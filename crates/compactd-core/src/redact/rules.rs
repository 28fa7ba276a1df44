//! Redaction rules in gitleaks' format (`[[rules]]` with `id`, `regex`, `secretGroup`,
//! `entropy`, `keywords`, `[[rules.allowlists]]`; a global `[allowlist]`), compiled with gitleaks'
//! meaning: Go's RE2 syntax is read with ASCII classes (`\w`, `\s`, `\b` are ASCII in RE2), over
//! bytes.

use regex::bytes::{Regex, RegexBuilder};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct File {
    #[serde(default)]
    allowlist: Option<AllowlistSpec>,
    /// gitleaks 8.25's top-level `[[allowlists]]`, each for the rules named in `targetRules`
    /// (any file's rules) or, without it, for every rule.
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
    #[serde(default)]
    rules: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RuleSpec {
    id: String,
    regex: Option<String>,
    secret_group: Option<usize>,
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowlistSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AllowlistSpec {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    regex_target: Option<String>,
    condition: Option<String>,
    /// Top-level allowlists only: the ids of the rules it applies to.
    #[serde(default)]
    target_rules: Vec<String>,
    /// Path and commit allowlists do not apply to text that is no file.
    #[serde(default)]
    paths: Vec<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Target {
    Secret,
    Match,
    Line,
}

#[derive(Debug, Clone)]
pub(super) struct Allowlist {
    regexes: Vec<Regex>,
    /// The stopwords (lower case), as one automaton: gitleaks' generic rule has about 1,500,
    /// and looking for each in turn cost more than all else on a text with many findings.
    stopwords: Option<aho_corasick::AhoCorasick>,
    target: Target,
    /// `AND`: every kind of check given must allow (gitleaks' `condition`); only regexes and
    /// stopwords are checked here, so AND means both when both are given.
    all: bool,
}

impl Allowlist {
    /// Whether this list allows the finding (`secret` within `matched` within `line`).
    pub(super) fn allows(&self, secret: &[u8], matched: &[u8], line: &[u8]) -> bool {
        let target = match self.target {
            Target::Secret => secret,
            Target::Match => matched,
            Target::Line => line,
        };
        let by_regex =
            (!self.regexes.is_empty()).then(|| self.regexes.iter().any(|r| r.is_match(target)));
        let by_stopword = self
            .stopwords
            .as_ref()
            .map(|words| words.is_match(&secret.to_ascii_lowercase()));
        let checks = [by_regex, by_stopword].into_iter().flatten();
        if self.all {
            let mut any = false;
            for allowed in checks {
                if !allowed {
                    return false;
                }
                any = true;
            }
            any
        } else {
            checks.into_iter().any(|allowed| allowed)
        }
    }
}

#[derive(Debug)]
pub(super) struct Rule {
    pub id: String,
    pub regex: Regex,
    pub secret_group: Option<usize>,
    pub entropy: Option<f64>,
    pub keywords: Vec<String>,
    pub allowlists: Vec<Allowlist>,
    /// Whether the regex looks at what surrounds the secret — quotes (`api_key": "…"`, `'…')`)
    /// or a word boundary, which the letter of an escape hides (`…token\nHRKU-…`): such a rule
    /// is also run on the unescaped view of text holding JSON inside strings.
    pub quoted: bool,
    /// Which targeted allowlists were added already (so a merge adds each once).
    targeted_applied: Vec<Vec<String>>,
}

/// The rules of one file and its global allowlist.
#[derive(Debug, Default)]
pub(super) struct RuleSet {
    pub rules: Vec<Rule>,
    pub allowlists: Vec<Allowlist>,
    /// Allowlists for the rules of these ids, wherever they are defined (see [`RuleSet::merge`]).
    pub targeted: Vec<(Vec<String>, Allowlist)>,
}

impl RuleSet {
    /// Adds `other`'s rules and allowlists to this set, and gives every rule the targeted
    /// allowlists of both that name it.
    pub(super) fn merge(&mut self, other: RuleSet) {
        self.rules.extend(other.rules);
        self.allowlists.extend(other.allowlists);
        self.targeted.extend(other.targeted);
        for (targets, list) in &self.targeted {
            for rule in &mut self.rules {
                if targets.contains(&rule.id) && !rule.targeted_applied.contains(targets) {
                    rule.allowlists.push(list.clone());
                }
            }
        }
        for rule in &mut self.rules {
            rule.targeted_applied = self.targeted.iter().map(|(t, _)| t.clone()).collect();
        }
    }
}

fn compile(pattern: &str) -> Result<Regex, regex::Error> {
    RegexBuilder::new(&go_braces(pattern))
        .unicode(false)
        .size_limit(64 << 20)
        .dfa_size_limit(64 << 20)
        .build()
}

/// RE2 reads a `{` that opens no counted repetition (`{\d+}`, `{{`) as a literal; Rust's regex
/// refuses it. Such braces are escaped; everything else is left as written.
pub(super) fn go_braces(pattern: &str) -> String {
    let bytes = pattern.as_bytes();
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'\\' => {
                // An escape and the character it escapes (a multi-byte one whole).
                let next = pattern[i + 1..].chars().next().map_or(0, char::len_utf8);
                out.push_str(&pattern[i..i + 1 + next]);
                i += 1 + next;
                continue;
            }
            b'[' if !in_class => {
                in_class = true;
                out.push('[');
                i += 1;
                // A `]` first in a class (after an optional `^`) is a literal.
                if bytes.get(i) == Some(&b'^') {
                    out.push('^');
                    i += 1;
                }
                if bytes.get(i) == Some(&b']') {
                    out.push_str("\\]");
                    i += 1;
                }
                continue;
            }
            b']' if in_class => in_class = false,
            b'{' if !in_class && !is_repetition(&bytes[i + 1..]) => {
                out.push_str("\\{");
                i += 1;
                continue;
            }
            _ => {}
        }
        let len = pattern[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&pattern[i..i + len]);
        i += len;
    }
    out
}

/// Whether what follows a `{` is `N}`, `N,}` or `N,M}`.
fn is_repetition(rest: &[u8]) -> bool {
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return false;
    }
    let rest = &rest[digits..];
    match rest.first() {
        Some(b'}') => true,
        Some(b',') => {
            let more = rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
            rest.get(1 + more) == Some(&b'}')
        }
        _ => false,
    }
}

fn allowlist(spec: AllowlistSpec, rule: &str) -> Result<Option<Allowlist>, String> {
    if spec.regexes.is_empty() && spec.stopwords.is_empty() {
        // Only paths (or commits): nothing that applies to text.
        let _ = spec.paths;
        return Ok(None);
    }
    let target = match spec.regex_target.as_deref() {
        None | Some("secret") => Target::Secret,
        Some("match") => Target::Match,
        Some("line") => Target::Line,
        Some(other) => return Err(format!("{rule}: unknown regexTarget {other:?}")),
    };
    let regexes = spec
        .regexes
        .iter()
        .map(|r| compile(r).map_err(|e| format!("{rule}: allowlist regex: {e}")))
        .collect::<Result<_, _>>()?;
    Ok(Some(Allowlist {
        regexes,
        stopwords: (!spec.stopwords.is_empty()).then(|| {
            aho_corasick::AhoCorasick::new(spec.stopwords.iter().map(|w| w.to_lowercase()))
                .expect("stopwords build an automaton")
        }),
        target,
        all: spec
            .condition
            .is_some_and(|c| c.eq_ignore_ascii_case("and")),
    }))
}

/// Reads and compiles a rule file. Rules without a regex (gitleaks' path-only rules) are skipped.
pub(super) fn parse(text: &str) -> Result<RuleSet, String> {
    let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
    let mut set = RuleSet::default();
    if let Some(global) = file.allowlist {
        set.allowlists.extend(allowlist(global, "allowlist")?);
    }
    for spec in file.allowlists {
        let targets = spec.target_rules.clone();
        match (allowlist(spec, "allowlists")?, targets.is_empty()) {
            (Some(list), true) => set.allowlists.push(list),
            (Some(list), false) => set.targeted.push((targets, list)),
            (None, _) => {}
        }
    }
    for spec in file.rules {
        let Some(pattern) = spec.regex else { continue };
        let regex = compile(&pattern).map_err(|e| format!("rule {}: {e}", spec.id))?;
        let mut allowlists = Vec::new();
        for list in spec.allowlists {
            allowlists.extend(allowlist(list, &spec.id)?);
        }
        set.rules.push(Rule {
            id: spec.id,
            regex,
            secret_group: spec.secret_group,
            entropy: spec.entropy,
            keywords: spec.keywords.iter().map(|k| k.to_lowercase()).collect(),
            allowlists,
            quoted: pattern.contains('\'') || pattern.contains('"') || pattern.contains(r"\b"),
            targeted_applied: Vec::new(),
        });
    }
    // A file's own targeted allowlists apply to its own rules too.
    set.merge(RuleSet::default());
    Ok(set)
}

/// Shannon entropy of a secret in bits per byte, as gitleaks computes it.
pub(super) fn entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts = [0u32; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let len = data.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / len;
            -p * p.log2()
        })
        .sum()
}
