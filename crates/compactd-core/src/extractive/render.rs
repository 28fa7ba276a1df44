//! Writing the summary from the facts, in the format the instructions ask for: the structured
//! checkpoint (spec §7.2, with or without Critical Context), the turn-prefix format (§7.5), or
//! oh-my-pi's short summary (§7.6). Every section is present; what does not fit the budget is
//! dropped from the longest sections first.

use crate::fidelity::facts::{Facts, clip, first_line};
use crate::fidelity::ledger::{self, LATEST_LABEL};
use crate::fidelity::matching::coverage;
use crate::fidelity::user_words;

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A section: a heading and its lines. The lines of a section to `keep` are never dropped to fit
/// the budget (the goal and the ledger, the rules: bounded where they are made).
struct Section {
    heading: &'static str,
    lines: Vec<String>,
    empty: &'static str,
    keep: bool,
}

impl Section {
    fn new(heading: &'static str, empty: &'static str) -> Self {
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
fn previous_sections(previous: &str) -> Vec<(String, Vec<String>)> {
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
        if trimmed.starts_with("#") {
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

fn is_placeholder(line: &str) -> bool {
    let l = line.trim_start_matches(['-', '*', ' ']).trim();
    l.is_empty() || l == "(none)" || l.eq_ignore_ascii_case("none")
}

pub(super) fn checkpoint(
    facts: &Facts,
    previous: Option<&str>,
    critical_context: bool,
    budget: usize,
    ledger_room: usize,
) -> String {
    let mut goal = Section::new("## Goal", "(none stated)");
    let mut constraints = Section::new("## Constraints & Preferences", "- (none)");
    let mut done = Section::new("### Done", "- (none)");
    let mut in_progress = Section::new("### In Progress", "- (none)");
    let mut blocked = Section::new("### Blocked", "- (none)");
    let mut decisions = Section::new("## Key Decisions", "- (none)");
    let mut next = Section::new("## Next Steps", "1. (none)");
    let mut critical = Section::new("## Critical Context", "- (none)");

    // Earlier summary first, so that nothing it recorded is lost; its headings are pi's or the
    // caller's template's (OpenCode's, as compactd wrote it last time). Its Goal's first line is
    // the goal; the rest of it is the ledger of the user's messages, carried below.
    let mut goal_line = None;
    let mut goal_extra = Vec::new();
    if let Some(previous) = previous {
        for (heading, lines) in previous_sections(previous) {
            let section = if heading.eq_ignore_ascii_case("additional notes") {
                Some("critical context")
            } else if heading.is_empty() {
                Some("goal")
            } else {
                super::template::pi_section(&heading)
            };
            let target = match section {
                Some("goal") => {
                    let mut lines = lines.into_iter().filter(|l| !is_placeholder(l)).peekable();
                    if goal_line.is_none() {
                        goal_line = lines.next_if(|l| !l.starts_with(['-', '*', '+']));
                    }
                    // The Goal's other lines are its ledger ([`ledger::of_summary`]); a section
                    // of the same meaning under another heading ("Current Task") is carried.
                    if !heading.eq_ignore_ascii_case("goal") {
                        goal_extra.extend(lines);
                    }
                    continue;
                }
                Some("constraints & preferences") => &mut constraints,
                Some("done" | "progress") => &mut done,
                Some("key decisions") => &mut decisions,
                Some("critical context") => &mut critical,
                // In Progress, Blocked and Next Steps are rewritten from the new messages.
                _ => continue,
            };
            // What compactd rewrites from the new messages is not carried: the latest request
            // (with the lines it spans), the last assistant message, the identifiers.
            let mut in_request = false;
            let carried = lines.into_iter().filter(|l| {
                let text = l.trim_start_matches(['-', ' ']);
                if text.starts_with(LATEST_LABEL) {
                    in_request = true;
                } else if ledger::CONTEXT_LABELS.iter().any(|c| l.starts_with(c)) {
                    in_request = false;
                }
                !in_request
                    && !is_placeholder(l)
                    && !["Last assistant message:", "Identifiers:"]
                        .iter()
                        .any(|label| text.starts_with(label))
            });
            if section == Some("constraints & preferences") {
                // A rule the user withdrew since is replaced by the withdrawal below.
                target.lines.extend(
                    carried.filter(|l| !facts.withdrawn(l.trim_start_matches(['-', '*', ' ']))),
                );
            } else {
                target.lines.extend(carried);
            }
        }
    }

    // The goal, then the ledger of the user's messages in their own words (bounded, rules first).
    let goal_line = goal_line.or_else(|| {
        let first = facts.requests.first()?;
        let words = user_words::of(first);
        let paragraph = user_words::one_line(words.split("\n\n").next().unwrap_or_default());
        (!paragraph.is_empty()).then(|| clip(&paragraph, 400))
    });
    // The work in hand is the latest request that asks for something: after "ok" or "thanks",
    // the one before it (the latest request is still quoted as written in Critical Context).
    let in_hand = facts
        .requests
        .iter()
        .rev()
        .find_map(|r| ledger::item(r).map(|_| user_words::of(r)))
        .or(facts.latest_request().map(str::to_owned));
    let in_hand = in_hand.as_deref();
    // (A request before an acknowledgement is In Progress's item, not repeated in the ledger.)
    let in_progress_item = in_hand
        .filter(|r| Some(*r) != facts.latest_request())
        .map(|r| clip(first_line(r), 300));
    goal.lines.extend(goal_line.clone());
    goal.lines.extend(goal_extra);
    goal.lines.extend(
        ledger::carried(facts, previous, ledger_room)
            .into_iter()
            .filter(|item| goal_line.as_deref().is_none_or(|g| coverage(item, g) < 0.9))
            .filter(|item| {
                in_progress_item
                    .as_deref()
                    .is_none_or(|r| !r.starts_with(item.trim_end_matches('…')))
            })
            .map(|item| format!("- {item}")),
    );
    goal.keep = true;
    // Every standing rule, verbatim: one dropped here is lost for every later compaction.
    for rule in &facts.constraints.items {
        let line = format!("- {rule}");
        if !constraints.lines.contains(&line) {
            constraints.lines.push(line);
        }
    }
    constraints.keep = true;
    done.lines.extend(
        facts
            .modified
            .items
            .iter()
            .map(|p| format!("- [x] Changed `{p}`")),
    );
    done.lines
        .extend(facts.completed.last(8).iter().map(|c| format!("- [x] {c}")));
    if let Some(latest) = in_hand {
        in_progress
            .lines
            .push(format!("- [ ] {}", clip(first_line(latest), 300)));
    }
    let recent_errors = facts.recent_errors();
    blocked
        .lines
        .extend(recent_errors.iter().map(|e| format!("- {e}")));
    decisions
        .lines
        .extend(facts.decisions.last(6).iter().map(|d| format!("- {d}")));
    let mut steps = Vec::new();
    if let Some(latest) = in_hand {
        steps.push(format!(
            "Continue with the latest request: {}",
            clip(first_line(latest), 300)
        ));
    }
    if let Some(error) = recent_errors.last() {
        steps.push(format!("Resolve: {error}"));
    }
    if let Some(question) = facts
        .last_assistant
        .as_deref()
        .and_then(|t| t.lines().rev().find(|l| l.trim_end().ends_with('?')))
    {
        steps.push(format!("Get the user's answer to: {}", clip(question, 300)));
    }
    next.lines.extend(
        steps
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}. {s}", i + 1)),
    );

    if critical_context {
        if let Some(latest) = facts.latest_request() {
            critical
                .lines
                .push(format!("- {LATEST_LABEL} {}", clip(latest, 1500)));
        }
        if !facts.read.items.is_empty() {
            critical
                .lines
                .push(format!("- Files read: {}", code_list(&facts.read.items)));
        }
        if !facts.modified.items.is_empty() {
            critical.lines.push(format!(
                "- Files modified: {}",
                code_list(&facts.modified.items)
            ));
        }
        if !facts.commands.items.is_empty() {
            critical.lines.push(format!(
                "- Commands run: {}",
                code_list(facts.commands.last(12))
            ));
        }
        let errors: Vec<&str> = facts.errors.iter().map(|(_, e)| e.as_str()).collect();
        critical.lines.extend(
            errors[errors.len().saturating_sub(12)..]
                .iter()
                .map(|e| format!("- Error: {e}")),
        );
        if !facts.identifiers.items.is_empty() {
            critical.lines.push(format!(
                "- Identifiers: {}",
                code_list(facts.identifiers.last(30))
            ));
        }
        if let Some(last) = &facts.last_assistant {
            critical
                .lines
                .push(format!("- Last assistant message: {}", clip(last, 400)));
        }
    }

    let mut layout: Vec<(Option<&str>, Section)> = vec![
        (None, goal),
        (None, constraints),
        (Some("## Progress"), done),
        (None, in_progress),
        (None, blocked),
        (None, decisions),
        (None, next),
    ];
    if critical_context {
        layout.push((None, critical));
    }
    fit(layout, budget)
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
        context
            .lines
            .push(format!("- Last assistant message: {}", clip(last, 400)));
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
fn fit(mut layout: Vec<(Option<&str>, Section)>, budget: usize) -> String {
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
