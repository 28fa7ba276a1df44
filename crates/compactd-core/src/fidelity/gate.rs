//! The fidelity gate's pure parts: which answers are no summary at all, which anchors a summary
//! leaves out, the request that asks the model to put them back, and the deterministic repair
//! that appends what is still missing in the section it belongs to.

use super::anchors::{Anchor, AnchorKind};
use super::matching::Index;
use crate::transcript::Shape;

/// What the instructions of a prompt ask the answer to look like.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expectation {
    /// The `##` headings the instructions list, lower-cased.
    headings: Vec<String>,
}

impl Expectation {
    pub fn of(shape: &Shape) -> Expectation {
        Expectation {
            headings: shape.headings(),
        }
    }
}

/// Why an answer is no summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unusable {
    /// Nothing, once whitespace and zero-width characters are gone, or `(none)`.
    Nothing,
    /// The model declined.
    Refusal,
    /// None of the structure the prompt asked for.
    NoStructure,
}

impl Unusable {
    pub fn label(self) -> &'static str {
        match self {
            Unusable::Nothing => "empty",
            Unusable::Refusal => "refusal",
            Unusable::NoStructure => "no structure",
        }
    }
}

/// Characters that print as nothing.
fn is_invisible(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}' | '\u{180E}' | '\u{00AD}' | '\0'
        )
}

/// Whether an answer is empty: nothing but whitespace and zero-width characters.
pub fn is_blank(answer: &str) -> bool {
    answer.chars().all(is_invisible)
}

/// How refusals begin.
const REFUSALS: [&str; 10] = [
    "i'm sorry",
    "i am sorry",
    "sorry, i",
    "i cannot",
    "i can't",
    "i can not",
    "i'm unable",
    "i am unable",
    "as an ai",
    "i won't",
];

/// Whether `answer` is no summary, and why.
pub fn unusable(answer: &str, expectation: &Expectation) -> Option<Unusable> {
    let visible: String = answer.chars().filter(|c| !is_invisible(*c)).collect();
    let lower_visible = visible.to_lowercase();
    if visible.is_empty()
        || matches!(
            lower_visible.as_str(),
            "(none)" | "none" | "n/a" | "(empty)"
        )
    {
        return Some(Unusable::Nothing);
    }
    let lower = answer.trim().to_lowercase();
    if lower.len() < 600 && REFUSALS.iter().any(|r| lower.starts_with(r)) {
        return Some(Unusable::Refusal);
    }
    if !expectation.headings.is_empty() {
        // One of the asked sections, in any form, or at least markdown sections of its own: an
        // answer in plain prose ignored the instructions.
        let structured = answer.lines().any(|line| {
            let line = line.trim_start();
            line.starts_with('#') && line.trim_start_matches('#').starts_with(' ')
                || expectation.headings.iter().any(|h| labels(line, h))
        });
        if !structured {
            return Some(Unusable::NoStructure);
        }
    }
    None
}

/// Whether a line is a heading or label for `heading`: `## Goal`, `**Goal**`, `Goal:`.
fn labels(line: &str, heading: &str) -> bool {
    let label = line
        .trim()
        .trim_start_matches(['#', '*', ' '])
        .trim_end_matches([':', '*', ' '])
        .to_lowercase();
    label == heading || (label.starts_with(heading) && label.len() <= heading.len() + 20)
}

/// Which anchors `summary` keeps, in the order of `anchors`. A rule counts only in the summary's
/// Constraints section: that is where the next compaction reads the rules it carries on
/// ([`super::anchors`]), so one the model mentions elsewhere (Claude Code's "Primary Request and
/// Intent", say) would be lost one compaction later.
pub fn check(summary: &str, anchors: &[Anchor]) -> Vec<bool> {
    let index = Index::new(summary);
    let rules = anchors
        .iter()
        .any(|a| a.kind == AnchorKind::Constraint)
        .then(|| find_rules_section(summary).map(|(start, end)| Index::new(&summary[start..end])))
        .flatten();
    anchors
        .iter()
        .map(|a| match a.kind {
            AnchorKind::Constraint => rules.as_ref().is_some_and(|rules| rules.keeps(a)),
            _ => index.keeps(a),
        })
        .collect()
}

/// The prompt asking a model to return its summary with what it left out.
pub fn repair_prompt(answer: &str, missing: &[&Anchor]) -> String {
    let mut prompt = format!(
        "<summary>\n{answer}\n</summary>\n\n\
         The summary above leaves out facts the next session cannot do without. Return the \
         complete summary, with the same sections in the same order, including each of these \
         (quote file paths, commands, identifiers and pinned text exactly):\n"
    );
    for anchor in missing {
        prompt.push_str(&format!("- {}: {}\n", describe(anchor.kind), anchor.text));
    }
    prompt.push_str("\nOutput only the summary.");
    prompt
}

fn describe(kind: AnchorKind) -> &'static str {
    match kind {
        AnchorKind::LatestRequest => "the user's latest request (in Critical Context)",
        AnchorKind::ModifiedFile => "a file that was modified",
        AnchorKind::OpenWork => "open work (in Next Steps)",
        AnchorKind::Constraint => "a constraint of the user (in Constraints & Preferences)",
        AnchorKind::Pinned => "text the user pinned, verbatim (in a ## Pinned section)",
        AnchorKind::UserMessage => "an earlier message of the user (in Goal)",
        AnchorKind::UnresolvedError => "an unresolved error",
        AnchorKind::FailedCommand => "a command that failed",
        AnchorKind::ReadFile => "a file that was read",
        AnchorKind::Identifier => "an identifier the user named",
    }
}

/// `summary` with the `missing` anchors appended verbatim where they belong: the latest request
/// in Critical Context, constraints in Constraints & Preferences, open work in Next Steps, files in
/// the `<modified-files>`/`<read-files>` lists when the summary has them (else a line in Critical
/// Context), pinned text in a `## Pinned` section, errors, failed commands and identifiers in
/// Critical Context. Sections that do not exist are created. The gate appends only critical
/// anchors; the extractive summarizer, every one.
pub fn append_missing(summary: &str, missing: &[&Anchor]) -> String {
    let mut text = summary.trim_end().to_owned();
    let of = |kind: AnchorKind| -> Vec<&str> {
        missing
            .iter()
            .filter(|a| a.kind == kind)
            .map(|a| a.text.as_str())
            .collect()
    };
    let owned = |items: Vec<&str>| -> Vec<String> { items.iter().map(|i| i.to_string()).collect() };
    if let Some(request) = of(AnchorKind::LatestRequest).first() {
        text = add_items(
            &text,
            "Critical Context",
            &[format!(
                "{} {}",
                super::ledger::LATEST_LABEL,
                super::ledger::quoted_request(request)
            )],
        );
    }
    // Always in a Constraints section (created when missing): the next compaction carries the
    // rules it finds there.
    let constraints = owned(of(AnchorKind::Constraint));
    if !constraints.is_empty() {
        let section =
            rules_heading(&text).unwrap_or_else(|| "Constraints & Preferences".to_owned());
        text = add_items(&text, &section, &constraints);
    }
    // The user's earlier messages under Goal, where the next compaction reads its ledger.
    let messages = owned(of(AnchorKind::UserMessage));
    if !messages.is_empty() {
        text = add_items(&text, "Goal", &messages);
    }
    let open = owned(of(AnchorKind::OpenWork));
    if !open.is_empty() {
        text = add_items(&text, "Next Steps", &open);
    }
    text = add_files(
        text,
        "modified-files",
        "Files modified",
        &of(AnchorKind::ModifiedFile),
    );
    text = add_files(text, "read-files", "Files read", &of(AnchorKind::ReadFile));
    let mut context: Vec<String> = of(AnchorKind::UnresolvedError)
        .iter()
        .map(|e| format!("Unresolved error: {e}"))
        .collect();
    context.extend(
        of(AnchorKind::FailedCommand)
            .iter()
            .map(|c| format!("Failed command: `{c}`")),
    );
    let identifiers = of(AnchorKind::Identifier);
    if !identifiers.is_empty() {
        let quoted: Vec<String> = identifiers.iter().map(|i| format!("`{i}`")).collect();
        context.push(format!("Named by the user: {}", quoted.join(", ")));
    }
    if !context.is_empty() {
        text = add_items(&text, "Critical Context", &context);
    }
    let pins = owned(of(AnchorKind::Pinned));
    if !pins.is_empty() {
        text = add_items(&text, "Pinned", &pins);
    }
    text.trim_end().to_owned()
}

/// `summary` without the items of its Constraints section that `withdrawn` says the user lifted.
pub fn drop_withdrawn(summary: &str, withdrawn: impl Fn(&str) -> bool) -> String {
    let Some((start, end)) = find_rules_section(summary) else {
        return summary.to_owned();
    };
    let body: String = summary[start..end]
        .split_inclusive('\n')
        .filter(|line| {
            let item = line.trim().trim_start_matches(['-', '*', '+', ' ']);
            item.is_empty() || !withdrawn(item)
        })
        .collect();
    format!("{}{body}{}", &summary[..start], &summary[end..])
}

/// `text` with `files` in its `<tag>` list, or as a line of Critical Context when it has none.
fn add_files(text: String, tag: &str, label: &str, files: &[&str]) -> String {
    if files.is_empty() {
        return text;
    }
    match text.find(&format!("</{tag}>")) {
        Some(at) => {
            let lines: String = files.iter().map(|f| format!("{f}\n")).collect();
            let at = text[..at].rfind('\n').map_or(at, |nl| nl + 1);
            format!("{}{lines}{}", &text[..at], &text[at..])
        }
        None => add_items(
            &text,
            "Critical Context",
            &[format!("{label}: {}", files.join(", "))],
        ),
    }
}

/// Whether a section's title (lower case) is where a summary keeps the user's rules: pi's
/// "Constraints & Preferences", or a template's section of the same meaning (OpenCode's
/// "Important Details"), which the next compaction reads its rules from.
pub fn is_rules_heading(title: &str) -> bool {
    title.starts_with("constraints")
        || ["preferences", "important details", "rules"]
            .iter()
            .any(|w| title.contains(w))
}

/// The heading of the summary's rules section, as written.
fn rules_heading(text: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("## "))
        .map(str::trim)
        .find(|h| is_rules_heading(&h.to_lowercase()))
        .map(str::to_owned)
}

/// The byte range of the body of the summary's rules section.
fn find_rules_section(text: &str) -> Option<(usize, usize)> {
    find_section(text, &rules_heading(text)?)
}

/// The byte range of the body of the `##` section whose heading starts with `name`.
fn find_section(text: &str, name: &str) -> Option<(usize, usize)> {
    let name = name.to_lowercase();
    let mut offset = 0;
    let mut start = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        // A heading is at the line's start: an indented one is a quoted request's own.
        let is_heading = line.starts_with("## ");
        let ends_body = is_heading
            || trimmed.starts_with("<read-files>")
            || trimmed.starts_with("<modified-files>")
            || trimmed == "---";
        if let Some(body) = start
            && ends_body
        {
            return Some((body, offset));
        }
        if is_heading && trimmed[3..].trim().to_lowercase().starts_with(&name) {
            start = Some(offset + line.len());
        }
        offset += line.len();
    }
    start.map(|body| (body, text.len()))
}

/// `text` with `items` added as list items at the end of section `name`, which is created (before
/// any file lists at the end) when missing. A body that only says `(none)` is replaced.
pub fn add_items(text: &str, name: &str, items: &[String]) -> String {
    let list: String = items.iter().map(|i| format!("- {i}\n")).collect();
    match find_section(text, name) {
        Some((start, end)) => {
            let body = &text[start..end];
            let kept = body.trim_end();
            let only_none = matches!(
                kept.trim().trim_start_matches(['-', '*', ' ']),
                "(none)" | "none" | ""
            );
            let head = if only_none { "" } else { kept };
            let mut out = String::with_capacity(text.len() + list.len());
            out.push_str(&text[..start]);
            if !head.is_empty() {
                out.push_str(head);
                out.push('\n');
            }
            out.push_str(&list);
            let rest = &text[end..];
            if !rest.is_empty() {
                out.push('\n');
                out.push_str(rest);
            }
            out
        }
        None => {
            let tail_at = ["\n<read-files>", "\n<modified-files>"]
                .iter()
                .filter_map(|tag| text.find(tag))
                .min()
                .unwrap_or(text.len());
            let (body, tail) = text.split_at(tail_at);
            let mut out = body.trim_end().to_owned();
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(&format!("## {name}\n{list}"));
            if !tail.is_empty() {
                out.push('\n');
                out.push_str(tail.trim_start_matches('\n'));
            }
            out.trim_end().to_owned()
        }
    }
}
