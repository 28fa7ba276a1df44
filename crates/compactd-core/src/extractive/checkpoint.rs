//! The structured checkpoint (spec §7.2, with or without Critical Context), written from the
//! facts: the earlier summary carried first, then each group of sections from the new messages.

use super::render::{Section, code_list, fit, is_placeholder, previous_sections};
use crate::fidelity::facts::{Facts, clip, first_line};
use crate::fidelity::ledger::{self, LATEST_LABEL};
use crate::fidelity::matching::coverage;
use crate::fidelity::user_words;

pub(super) fn checkpoint(
    facts: &Facts,
    previous: Option<&str>,
    critical_context: bool,
    budget: usize,
    ledger_room: usize,
    latest_chars: usize,
) -> String {
    let mut checkpoint = Checkpoint::new();
    let carried = previous.map(|previous| checkpoint.carry(previous, facts));
    let (goal_line, goal_extra) = carried.unwrap_or_default();
    let in_hand = checkpoint.goal(facts, previous, goal_line, goal_extra, ledger_room);
    checkpoint.constraints(facts);
    checkpoint.progress(facts, in_hand.as_deref());
    if critical_context {
        let latest = facts
            .latest_request()
            .map(str::to_owned)
            .or_else(|| previous.and_then(ledger::latest_of_summary));
        checkpoint.critical_context(facts, latest.as_deref(), latest_chars);
    }
    // What the earlier summary kept as its critical context (the files it changed, its errors)
    // is carried even when these instructions ask for no such section (Claude Code's): a
    // summary prepared ahead and merged would lose its part's changed files.
    let carried_critical = !checkpoint.critical.lines.is_empty();
    checkpoint.fit(critical_context || carried_critical, budget)
}

/// The sections of a checkpoint summary, filled one group at a time.
struct Checkpoint {
    goal: Section,
    constraints: Section,
    done: Section,
    in_progress: Section,
    blocked: Section,
    decisions: Section,
    next: Section,
    critical: Section,
}

impl Checkpoint {
    fn new() -> Checkpoint {
        Checkpoint {
            goal: Section::new("## Goal", "(none stated)"),
            constraints: Section::new("## Constraints & Preferences", "- (none)"),
            done: Section::new("### Done", "- (none)"),
            in_progress: Section::new("### In Progress", "- (none)"),
            blocked: Section::new("### Blocked", "- (none)"),
            decisions: Section::new("## Key Decisions", "- (none)"),
            next: Section::new("## Next Steps", "1. (none)"),
            critical: Section::new("## Critical Context", "- (none)"),
        }
    }

    /// The earlier summary, first, so that nothing it recorded is lost; its headings are pi's or
    /// the caller's template's (OpenCode's, as compactd wrote it last time). Its Goal's first
    /// line is the goal, answered with the lines carried with it; the rest of the Goal is the
    /// ledger of the user's messages, carried by [`ledger::carried`].
    fn carry(&mut self, previous: &str, facts: &Facts) -> (Option<String>, Vec<String>) {
        let mut goal_line = None;
        let mut goal_extra = Vec::new();
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
                Some("constraints & preferences") => &mut self.constraints,
                Some("done" | "progress") => &mut self.done,
                Some("key decisions") => &mut self.decisions,
                Some("critical context") => &mut self.critical,
                // In Progress, Blocked and Next Steps are rewritten from the new messages.
                _ => continue,
            };
            let carried = carried_lines(lines);
            if section == Some("constraints & preferences") {
                // A rule the user withdrew since is replaced by the withdrawal below.
                target.lines.extend(
                    carried.filter(|l| !facts.withdrawn(l.trim_start_matches(['-', '*', ' ']))),
                );
            } else {
                target.lines.extend(carried);
            }
        }
        (goal_line, goal_extra)
    }

    /// The goal, then the ledger of the user's messages in their own words (bounded, rules
    /// first); answers the work in hand: the latest request that asks for something (after "ok"
    /// or "thanks", the one before it; the latest request is still quoted as written in
    /// Critical Context).
    fn goal(
        &mut self,
        facts: &Facts,
        previous: Option<&str>,
        goal_line: Option<String>,
        goal_extra: Vec<String>,
        ledger_room: usize,
    ) -> Option<String> {
        let goal_line = goal_line.or_else(|| {
            let first = facts.requests.first()?;
            let words = user_words::of(first);
            let paragraph = user_words::one_line(words.split("\n\n").next().unwrap_or_default());
            (!paragraph.is_empty()).then(|| clip(&paragraph, 400))
        });
        let in_hand = facts
            .requests
            .iter()
            .rev()
            .find_map(|r| ledger::item(r).map(|_| user_words::of(r)))
            .or(facts.latest_request().map(str::to_owned));
        // (A request before an acknowledgement is In Progress's item, not repeated in the
        // ledger.)
        let in_progress_item = in_hand
            .as_deref()
            .filter(|r| Some(*r) != facts.latest_request())
            .map(|r| clip(first_line(r), 300));
        self.goal.lines.extend(goal_line.clone());
        self.goal.lines.extend(goal_extra);
        self.goal.lines.extend(
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
        self.goal.keep = true;
        in_hand
    }

    /// Every standing rule, verbatim: one dropped here is lost for every later compaction.
    fn constraints(&mut self, facts: &Facts) {
        for rule in &facts.constraints.items {
            let line = format!("- {rule}");
            if !self.constraints.lines.contains(&line) {
                self.constraints.lines.push(line);
            }
        }
        self.constraints.keep = true;
    }

    /// Done, In Progress, Blocked, Key Decisions and Next Steps.
    fn progress(&mut self, facts: &Facts, in_hand: Option<&str>) {
        self.done.lines.extend(
            facts
                .modified
                .items
                .iter()
                .map(|p| format!("- [x] Changed `{p}`")),
        );
        self.done
            .lines
            .extend(facts.completed.last(8).iter().map(|c| format!("- [x] {c}")));
        if let Some(latest) = in_hand {
            self.in_progress
                .lines
                .push(format!("- [ ] {}", clip(first_line(latest), 300)));
        }
        let recent_errors = facts.recent_errors();
        self.blocked.lines.extend(
            recent_errors
                .iter()
                .map(|e| format!("- {}", facts.error_sentence(e))),
        );
        self.decisions
            .lines
            .extend(facts.decisions.last(6).iter().map(|d| format!("- {d}")));
        let mut steps = Vec::new();
        if let Some(in_hand) = in_hand {
            // The request in hand is the latest one unless a short reply came after it.
            let latest = facts.latest_request();
            let which = if latest.is_some_and(|l| l == in_hand || user_words::of(l) == in_hand) {
                "the latest request"
            } else {
                "the request before the latest reply"
            };
            steps.push(format!(
                "Continue with {which}: {}",
                clip(first_line(in_hand), 300)
            ));
        }
        if let Some(error) = recent_errors.last() {
            steps.push(format!("Resolve: {}", facts.error_sentence(error)));
        }
        if let Some(question) = facts
            .last_assistant
            .as_deref()
            .and_then(|t| t.lines().rev().find(|l| l.trim_end().ends_with('?')))
        {
            steps.push(format!("Get the user's answer to: {}", clip(question, 300)));
        }
        self.next.lines.extend(
            steps
                .iter()
                .enumerate()
                .map(|(i, s)| format!("{}. {s}", i + 1)),
        );
    }

    /// The latest request as written, the files, commands, errors and identifiers, the last
    /// thing the assistant said.
    fn critical_context(&mut self, facts: &Facts, latest: Option<&str>, latest_chars: usize) {
        let critical = &mut self.critical.lines;
        if let Some(latest) = latest {
            critical.push(format!(
                "- {LATEST_LABEL} {}",
                ledger::quoted_request(&clip(latest, latest_chars))
            ));
        }
        if !facts.read.items.is_empty() {
            critical.push(format!("- Files read: {}", code_list(&facts.read.items)));
        }
        if !facts.modified.items.is_empty() {
            critical.push(format!(
                "- Files modified: {}",
                code_list(&facts.modified.items)
            ));
        }
        if !facts.commands.items.is_empty() {
            critical.push(format!(
                "- Commands run: {}",
                code_list(facts.commands.last(12))
            ));
        }
        let errors: Vec<&str> = facts.errors.iter().map(|(_, e)| e.as_str()).collect();
        critical.extend(
            errors[errors.len().saturating_sub(12)..]
                .iter()
                .map(|e| format!("- Error: {e}")),
        );
        if !facts.identifiers.items.is_empty() {
            critical.push(format!(
                "- Identifiers: {}",
                code_list(facts.identifiers.last(30))
            ));
        }
        if let Some(last) = &facts.last_assistant {
            critical.push(format!(
                "- Last assistant message: {}",
                super::render::flattened(last, 400)
            ));
        }
    }

    /// The sections in their order, fitted to `budget`.
    fn fit(self, critical_context: bool, budget: usize) -> String {
        let mut layout: Vec<(Option<&str>, Section)> = vec![
            (None, self.goal),
            (None, self.constraints),
            (Some("## Progress"), self.done),
            (None, self.in_progress),
            (None, self.blocked),
            (None, self.decisions),
            (None, self.next),
        ];
        if critical_context {
            layout.push((None, self.critical));
        }
        fit(layout, budget)
    }
}

/// The lines of an earlier summary's section that are carried: not what compactd rewrites from
/// the new messages (the latest request with the lines it spans, the last assistant message, the
/// identifiers), nor placeholders.
fn carried_lines(lines: Vec<String>) -> impl Iterator<Item = String> {
    let mut in_request = false;
    lines.into_iter().filter(move |l| {
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
    })
}
