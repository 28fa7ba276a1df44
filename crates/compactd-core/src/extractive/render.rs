//! Writing the summary from the facts, in the format the instructions ask for: the structured
//! checkpoint (spec §7.2; `checkpoint.rs`), the turn-prefix format (§7.5), or
//! oh-my-pi's short summary (§7.6). Every section is present; what does not fit the budget is
//! dropped from the longest sections first.

use crate::fidelity::facts::{Facts, clip, first_line};

pub(super) fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A section: a heading and its lines. The lines of a section to `keep` are never dropped to fit
/// the budget (the goal and the ledger, the rules: bounded where they are made).
pub(super) struct Section {
    heading: &'static str,
    pub(super) lines: Vec<String>,
    empty: &'static str,
    pub(super) keep: bool,
}

impl Section {
    pub(super) fn new(heading: &'static str, empty: &'static str) -> Self {
        Section {
            heading,
            lines: Vec::new(),
            empty,
            keep: false,
        }
    }
}

/// The sections of the previous summary, by heading, without the file-list tags (the compactor
/// appends fresh ones).
pub(super) fn previous_sections(previous: &str) -> Vec<(String, Vec<String>)> {
    let mut sections: Vec<(String, Vec<String>)> = Vec::new();
    let mut in_tag = false;
    for line in previous.lines() {
        let trimmed = line.trim();
        if matches!(trimmed, "<read-files>" | "<modified-files>" | "<files>") {
            in_tag = true;
            continue;
        }
        if matches!(trimmed, "</read-files>" | "</modified-files>" | "</files>") {
            in_tag = false;
            continue;
        }
        // A summary's own wrapper (`<summary>`, `</summary>`) is framing, not a line of it.
        let wrapper = trimmed.starts_with('<')
            && trimmed.ends_with('>')
            && !trimmed.contains(' ')
            && trimmed.len() <= 40;
        if in_tag || trimmed.is_empty() || trimmed == "---" || wrapper {
            continue;
        }
        // A heading is at the line's start: an indented one is a quoted request's own.
        if line.starts_with('#') {
            sections.push((
                trimmed.trim_start_matches('#').trim().to_owned(),
                Vec::new(),
            ));
        } else if let Some((_, lines)) = sections.last_mut() {
            lines.push(trimmed.to_owned());
        } else {
            // Text before any heading (a free-form summary): its first line is the goal, the
            // rest is carried with it.
            sections.push((String::new(), vec![trimmed.to_owned()]));
        }
    }
    sections
}

pub(super) fn is_placeholder(line: &str) -> bool {
    let l = line.trim_start_matches(['-', '*', ' ']).trim();
    l.is_empty() || l == "(none)" || l.eq_ignore_ascii_case("none")
}

pub(super) fn turn_prefix(facts: &Facts, budget: usize) -> String {
    let mut request = Section::new("## Original Request", "(not stated)");
    let mut progress = Section::new("## Early Progress", "- (none)");
    let mut context = Section::new("## Context for Suffix", "- (none)");
    if let Some(first) = facts.requests.first() {
        request.lines.push(clip(first, 800));
    }
    progress.lines.extend(
        facts
            .modified
            .items
            .iter()
            .map(|p| format!("- Changed `{p}`")),
    );
    progress
        .lines
        .extend(facts.read.items.iter().map(|p| format!("- Read `{p}`")));
    progress.lines.extend(
        facts
            .commands
            .last(8)
            .iter()
            .map(|c| format!("- Ran `{c}`")),
    );
    progress
        .lines
        .extend(facts.decisions.last(4).iter().map(|d| format!("- {d}")));
    let errors: Vec<&str> = facts.errors.iter().map(|(_, e)| e.as_str()).collect();
    context.lines.extend(
        errors[errors.len().saturating_sub(6)..]
            .iter()
            .map(|e| format!("- Error: {e}")),
    );
    if !facts.identifiers.items.is_empty() {
        context.lines.push(format!(
            "- Identifiers: {}",
            code_list(facts.identifiers.last(20))
        ));
    }
    if let Some(last) = &facts.last_assistant {
        context.lines.push(format!(
            "- Last assistant message: {}",
            flattened(last, 400)
        ));
    }
    fit(
        vec![(None, request), (None, progress), (None, context)],
        budget,
    )
}

/// Two plain sentences in the first person, free of markup: what the work was about and which
/// files changed (spec §7.6).
pub(super) fn short(facts: &Facts, previous: Option<&str>) -> String {
    let topic = previous
        .and_then(previous_goal)
        .or_else(|| facts.requests.first().map(|r| first_line(r).to_owned()))
        .map(|t| plain(first_sentence(&t)))
        .filter(|t| !t.is_empty());
    let mut text = match topic {
        Some(topic) => format!(
            "I worked on: {}.",
            clip(&topic, 160).trim_end_matches(['.', '…', ':', '?', '!'])
        ),
        None => "I continued the work of this session.".to_owned(),
    };
    let files: Vec<String> = facts
        .modified
        .items
        .iter()
        .map(|p| plain(p))
        .filter(|p| !p.is_empty())
        .collect();
    match files.len() {
        0 => {}
        1 => text.push_str(&format!(" I changed {}.", files[0])),
        n if n <= 4 => text.push_str(&format!(
            " I changed {} and {}.",
            files[..n - 1].join(", "),
            files[n - 1]
        )),
        n => text.push_str(&format!(
            " I changed {} files, among them {}.",
            n,
            files[n - 3..].join(", ")
        )),
    }
    text
}

fn first_sentence(text: &str) -> &str {
    let line = first_line(text);
    line.find(". ").map_or(line, |end| &line[..end])
}

/// The first line of the previous summary's Goal section.
fn previous_goal(previous: &str) -> Option<String> {
    previous_sections(previous)
        .into_iter()
        .find(|(heading, _)| heading == "Goal")
        .and_then(|(_, lines)| lines.into_iter().find(|l| !is_placeholder(l)))
}

/// Text without markup: no tags, chat tokens, code ticks, emphasis or headings, on one line.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if in_tag => {}
            '`' | '*' | '#' | '|' | '[' | ']' => {}
            c if c.is_whitespace() => {
                if !out.ends_with(' ') {
                    out.push(' ');
                }
            }
            c => out.push(c),
        }
    }
    out.trim_start_matches(['-', ' ']).trim().to_owned()
}

/// Renders the sections within `budget` characters, dropping the last lines of the longest
/// sections first. Headings, and each section's first line, always stay.
pub(super) fn fit(mut layout: Vec<(Option<&str>, Section)>, budget: usize) -> String {
    drop_repeated_items(&mut layout);
    let render = |layout: &[(Option<&str>, Section)]| -> String {
        let mut out = String::new();
        for (group, section) in layout {
            if let Some(group) = group {
                out.push_str(group);
                out.push('\n');
            }
            out.push_str(section.heading);
            out.push('\n');
            if section.lines.is_empty() {
                out.push_str(section.empty);
                out.push('\n');
            }
            for line in &section.lines {
                out.push_str(line);
                out.push('\n');
            }
            out.push('\n');
        }
        out.trim_end().to_owned()
    };
    let mut text = render(&layout);
    while text.chars().count() > budget {
        let Some((_, longest)) = layout
            .iter_mut()
            .filter(|(_, s)| s.lines.len() > 1 && !s.keep)
            .max_by_key(|(_, s)| s.lines.iter().map(String::len).sum::<usize>())
        else {
            // Only first lines are left: cut the text itself.
            return clip(&text, budget.saturating_sub(1));
        };
        longest.lines.pop();
        text = render(&layout);
    }
    text
}

/// A message as one line of at most `max` characters: its lines joined by " / ", heading
/// marks left out, so that a message with headings and lists of its own quoted in a section
/// breaks no structure and repeats no item as a bullet.
pub(super) fn flattened(text: &str, max: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .filter(|l| !l.is_empty())
        .collect();
    clip(&lines.join(" / "), max)
}

/// Each list item once in the whole summary: an item an earlier summary carried and the new
/// messages said again, or a carried summary's own repeats, are kept where they first appear
/// (the quote of the latest request is the user's text, left as written).
fn drop_repeated_items(layout: &mut [(Option<&str>, Section)]) {
    let mut seen = std::collections::HashSet::new();
    for (_, section) in layout.iter_mut() {
        section.lines.retain(|line| {
            if line.contains(crate::fidelity::ledger::LATEST_LABEL) {
                return true;
            }
            match item_key(line) {
                Some(key) => seen.insert(key),
                None => true,
            }
        });
    }
}

/// A list item's text without its marker and checkbox, lower-cased: how repeats are told.
fn item_key(line: &str) -> Option<String> {
    let t = line.trim();
    let rest = t
        .strip_prefix("- ")
        .or_else(|| t.strip_prefix("* "))
        .or_else(|| t.strip_prefix("+ "))
        .or_else(|| {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            (digits > 0)
                .then(|| t[digits..].strip_prefix(". "))
                .flatten()
        })?;
    let rest = rest
        .trim_start_matches("[x] ")
        .trim_start_matches("[ ] ")
        .trim();
    (rest.chars().count() >= 8).then(|| rest.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_is_written_once_and_the_quoted_request_as_it_is() {
        let mut goal = Section::new("## Goal", "(none)");
        goal.lines = vec![
            "- **a.sh** (committed)".into(),
            "- Hook event: from stdin, fallback PostToolUse".into(),
            "- **b.sh** (committed)".into(),
            "- Hook event: from stdin, fallback PostToolUse".into(),
        ];
        let mut critical = Section::new("## Critical Context", "- (none)");
        critical.lines = vec![
            "- Latest user request (verbatim): do it\n- Hook event: from stdin, fallback PostToolUse"
                .into(),
            "- [x] Hook event: from stdin, fallback PostToolUse".into(),
        ];
        let text = fit(vec![(None, goal), (None, critical)], 10_000);
        assert_eq!(text.matches("- Hook event").count(), 2, "{text}");
        assert!(text.contains("verbatim): do it\n- Hook event"), "{text}");
        assert!(!text.contains("[x] Hook event"), "{text}");
    }
}
