//! The extractive summary in the caller's own template. The extractive summarizer writes pi's
//! sections (Goal, Constraints & Preferences, Progress, Key Decisions, Next Steps, Critical
//! Context); an agent that asks for other Markdown headings — OpenCode's `## Objective`,
//! `## Work State` / `### Completed`, `## Relevant Files` — gets its headings, in its order, each
//! holding the lines of the pi sections that mean the same. No line is dropped: what no heading
//! claims goes under the heading for details or files, else the last one.

/// pi's headings, lower-cased: instructions that ask for these need no retitling.
const PI_HEADINGS: [&str; 10] = [
    "goal",
    "constraints & preferences",
    "progress",
    "done",
    "in progress",
    "blocked",
    "key decisions",
    "next steps",
    "critical context",
    "additional context",
];

/// Which pi sections a requested heading holds, by the words in it (first match wins).
const MEANINGS: [(&[&str], &[&str]); 9] = [
    (
        &["objective", "goal", "intent", "request", "task"],
        &["goal"],
    ),
    (&["completed", "done", "finished"], &["done"]),
    (&["active", "in progress", "current"], &["in progress"]),
    (&["blocked", "blocker"], &["blocked"]),
    (&["next"], &["next steps"]),
    (&["decision"], &["key decisions"]),
    (
        &["important", "detail", "constraint", "preference", "rule"],
        &["constraints & preferences", "key decisions"],
    ),
    (
        &["file", "context", "critical", "reference"],
        &["critical context"],
    ),
    (
        &["progress", "state", "status"],
        &["done", "in progress", "blocked"],
    ),
];

/// The template's headings (`##` and `###`, as written) when they are not pi's: those of its
/// `<template>` block when it has one, and never those of a summary it quotes (OpenCode's
/// `<prior-summary>`, in the template it asked for last time).
pub(super) fn requested(instructions: &str) -> Option<Vec<String>> {
    let template = between(instructions, "<template>", "</template>");
    let text = match template {
        Some(template) => template.to_owned(),
        None => without(instructions, "<prior-summary>", "</prior-summary>"),
    };
    let headings: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("## ") || l.starts_with("### "))
        .filter(|l| !l.trim_start_matches('#').contains('#'))
        .map(str::to_owned)
        .collect();
    let foreign = headings
        .iter()
        .any(|h| !PI_HEADINGS.contains(&title(h).as_str()));
    (foreign && headings.len() >= 2).then_some(headings)
}

/// What lies between the first `open` and the `close` after it.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<&'a str> {
    let (_, rest) = text.split_once(open)?;
    Some(rest.split_once(close)?.0)
}

/// `text` without its `open`…`close` blocks.
fn without(text: &str, open: &str, close: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some((before, after)) = rest.split_once(open) {
        out.push_str(before);
        rest = after.split_once(close).map_or("", |(_, after)| after);
    }
    out.push_str(rest);
    out
}

/// The pi section a heading of a summary means (lower-cased): pi's own, or the first pi section
/// a template's heading holds (OpenCode's `Objective` is the goal, `Completed` what is done,
/// `Relevant Files` critical context). A previous summary in the caller's template is merged by
/// it as one in pi's.
pub(super) fn pi_section(heading: &str) -> Option<&'static str> {
    let wanted = title(heading);
    if let Some(pi) = PI_HEADINGS.iter().find(|h| **h == wanted) {
        return Some(pi);
    }
    MEANINGS
        .iter()
        .find(|(words, _)| words.iter().any(|w| wanted.contains(w)))
        .and_then(|(_, pi)| pi.first().copied())
}

fn title(heading: &str) -> String {
    heading.trim_start_matches('#').trim().to_lowercase()
}

/// `summary`'s sections (pi's headings) under the requested `headings`.
pub(super) fn retitle(summary: &str, headings: &[String]) -> String {
    // pi's sections: title → lines (a `##` group heading such as Progress has none of its own).
    let mut sections: Vec<(String, Vec<&str>)> = Vec::new();
    for line in summary.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            sections.push((title(line), Vec::new()));
        } else if let Some((_, lines)) = sections.last_mut() {
            if !line.trim().is_empty() {
                lines.push(line);
            }
        } else if !line.trim().is_empty() {
            sections.push((String::new(), vec![line]));
        }
    }
    let mut claimed = vec![false; sections.len()];
    let mut bodies: Vec<Vec<&str>> = vec![Vec::new(); headings.len()];
    for (at, heading) in headings.iter().enumerate() {
        let wanted = title(heading);
        // A `##` heading whose `###` children follow holds nothing itself (OpenCode's Work State).
        let has_children = heading.starts_with("## ")
            && headings
                .get(at + 1)
                .is_some_and(|next| next.starts_with("### "));
        if has_children {
            continue;
        }
        let Some((_, pi)) = MEANINGS
            .iter()
            .find(|(words, _)| words.iter().any(|w| wanted.contains(w)))
        else {
            continue;
        };
        for (index, (name, lines)) in sections.iter().enumerate() {
            if !claimed[index] && pi.contains(&name.as_str()) {
                claimed[index] = true;
                bodies[at].extend(lines.iter().copied().filter(|l| !is_empty_marker(l)));
            }
        }
    }
    // What no heading claimed stays, under the details or files heading, else the last.
    let catch_all = headings
        .iter()
        .rposition(|h| {
            let t = title(h);
            ["detail", "context", "file", "important"]
                .iter()
                .any(|w| t.contains(w))
        })
        .unwrap_or(headings.len() - 1);
    for (index, (_, lines)) in sections.iter().enumerate() {
        if !claimed[index] {
            bodies[catch_all].extend(lines.iter().copied().filter(|l| !is_empty_marker(l)));
        }
    }
    let mut out = String::new();
    for (at, heading) in headings.iter().enumerate() {
        out.push_str(heading);
        out.push('\n');
        let has_children = heading.starts_with("## ")
            && headings
                .get(at + 1)
                .is_some_and(|next| next.starts_with("### "));
        if bodies[at].is_empty() && !has_children {
            out.push_str("- (none)\n");
        }
        for line in &bodies[at] {
            out.push_str(line);
            out.push('\n');
        }
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// pi's placeholder of an empty section (`- (none)`, `(none stated)`, `1. (none)`).
fn is_empty_marker(line: &str) -> bool {
    let text = line.trim().trim_start_matches(['-', '1', '.', ' ']);
    text.starts_with("(none")
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENCODE: &str = "<template>\n## Objective\n- [..]\n\n## Important Details\n- [..]\n\n## Work State\n### Completed\n- [..]\n\n### Active\n- [..]\n\n### Blocked\n- [..]\n\n## Next Move\n1. [..]\n\n## Relevant Files\n- [..]\n</template>";

    #[test]
    fn pi_sections_land_under_the_headings_that_mean_the_same() {
        let headings = requested(OPENCODE).unwrap();
        let summary = "## Goal\nfix src/lib.rs\n\n## Constraints & Preferences\n- no unwrap\n\n## Progress\n### Done\n- [x] read src/lib.rs\n\n### In Progress\n- [ ] patch it\n\n### Blocked\n- (none)\n\n## Key Decisions\n- **use thiserror**\n\n## Next Steps\n1. run the tests\n\n## Critical Context\n- Modified files: `src/lib.rs`";
        let text = retitle(summary, &headings);
        assert_eq!(
            text,
            "## Objective\nfix src/lib.rs\n\n## Important Details\n- no unwrap\n- **use thiserror**\n\n## Work State\n\n### Completed\n- [x] read src/lib.rs\n\n### Active\n- [ ] patch it\n\n### Blocked\n- (none)\n\n## Next Move\n1. run the tests\n\n## Relevant Files\n- Modified files: `src/lib.rs`"
        );
    }

    #[test]
    fn a_quoted_prior_summary_asks_for_no_heading_twice() {
        let instructions = format!(
            "Here is the summary of the conversation before:\n\n<prior-summary>\n## Objective\nShip it.\n\n## Relevant Files\n- a.rs\n</prior-summary>\n\nUpdate it.\n{OPENCODE}"
        );
        assert_eq!(requested(&instructions), requested(OPENCODE));
        let untagged =
            "<prior-summary>\n## Objective\nx\n</prior-summary>\n## Objective\n## Relevant Files";
        assert_eq!(requested(untagged).unwrap().len(), 2);
        assert_eq!(pi_section("### Completed"), Some("done"));
        assert_eq!(pi_section("## Objective"), Some("goal"));
        assert_eq!(
            pi_section("## Constraints & Preferences"),
            Some("constraints & preferences")
        );
    }

    #[test]
    fn pi_headings_ask_for_nothing_new() {
        assert!(
            requested("## Goal\n## Constraints & Preferences\n## Progress\n### Done").is_none()
        );
        assert!(requested("Summarize briefly.").is_none());
    }
}
