//! The ledger of the user's messages: what the user asked and told the agent, in their own words
//! ([`super::user_words`]), one line each, carried from one compaction to the next in the
//! summary's Goal. Claude Code's own compaction prompt asks for "all user messages": they are
//! short next to tool output and carry the intent and the rules however they are phrased, so a
//! rule the detector does not recognize still outlives every compaction here.
//!
//! The ledger is bounded: when the messages outgrow it, the ones that read most like standing
//! instructions stay first (a recognized rule, then a sentence with a normative word), then the
//! most recent. Messages the Constraints section already holds, rules the user withdrew,
//! acknowledgements ("ok", "wow, it works") and the latest request (quoted verbatim elsewhere)
//! are not repeated in it.

use std::collections::HashSet;

use super::facts::{Facts, clip};
use super::matching::coverage;
use super::standing;

/// Most messages the ledger keeps.
pub const MAX_ITEMS: usize = 40;
/// Most characters the ledger's items hold together.
pub const MAX_CHARS: usize = 4800;
/// The ledger's share of a summary of at most `max_tokens` (4 characters a token): a fifth, at
/// most [`MAX_CHARS`], at least one item's worth.
pub fn room(max_tokens: u64) -> usize {
    ((max_tokens.saturating_mul(4) / 5) as usize).clamp(ITEM_CHARS, MAX_CHARS)
}

/// Longest item, in characters.
pub const ITEM_CHARS: usize = 240;
/// The label of the latest request in Critical Context: the previous span's latest request is
/// an earlier message of this one.
pub const LATEST_LABEL: &str = "Latest user request (verbatim):";

/// One message's ledger lines: each item of a list it holds on its own (a rule of a list
/// outlives a clipped message), the rest of its words as one line; a lone line introducing the
/// list ("Some rules for the whole job:") is no item.
pub fn items(text: &str) -> Vec<String> {
    items_of_words(&super::user_words::of(text))
}

/// [`items`] of a message's words already told apart from what was pasted
/// ([`super::user_words::of`]).
pub fn items_of_words(words: &str) -> Vec<String> {
    let lines: Vec<&str> = words.lines().map(str::trim).collect();
    let listed = lines
        .iter()
        .any(|l| super::user_words::list_item(l).is_some());
    let (mut items, mut run) = (Vec::new(), Vec::new());
    let flush = |run: &mut Vec<&str>, items: &mut Vec<String>| {
        // A lone line introducing the list after it is no item of its own.
        let intro = listed && run.len() == 1 && run[0].ends_with(':');
        if !intro {
            items.extend(item(&run.join("\n")));
        }
        run.clear();
    };
    for line in lines {
        match super::user_words::list_item(line) {
            Some(listed) => {
                flush(&mut run, &mut items);
                if !listed.is_empty() {
                    items.push(clip(listed, ITEM_CHARS));
                }
            }
            None => run.push(line),
        }
    }
    flush(&mut run, &mut items);
    items
}

/// One message's ledger line: the user's words on one line, clipped; `None` for a message with
/// no words of the user's (all pasted) or an acknowledgement.
pub fn item(text: &str) -> Option<String> {
    let words = super::user_words::one_line(text);
    let words = words.trim();
    if words.is_empty() || acknowledgement(words) {
        return None;
    }
    Some(clip(words, ITEM_CHARS))
}

/// A short reply with no question and no rule in it: "ok", "yo", "wow, it works", "can leave it".
fn acknowledgement(text: &str) -> bool {
    text.split_whitespace().count() < 4 && !text.contains('?') && standing::of_turn(text).is_empty()
}

/// How much an item reads like a standing instruction, which outlasts the task at hand: 3 a
/// recognized rule, 2 a sentence with a normative word, 1 any other statement, 0 a question or
/// a request to change something (a task: once done, its trace is in Progress).
pub fn rank(item: &str) -> u8 {
    if !standing::of_turn(item).is_empty() {
        return 3;
    }
    const NORMATIVE: [&str; 16] = [
        "always",
        "never",
        "must",
        "should",
        "don't",
        "do not",
        "avoid",
        "prefer",
        "only ",
        "make sure",
        "every ",
        "rule",
        "from now on",
        "unless",
        "instead of",
        "at all times",
    ];
    let lower = item.to_lowercase();
    if NORMATIVE.iter().any(|w| lower.contains(w)) {
        return 2;
    }
    // The verbs that open a change request (and the commit subjects that record one).
    const CHANGES: [&str; 24] = [
        "fix",
        "add",
        "rename",
        "implement",
        "update",
        "remove",
        "drop",
        "replace",
        "refactor",
        "bump",
        "move",
        "make",
        "create",
        "write",
        "delete",
        "revert",
        "merge",
        "change",
        "look",
        "read",
        "check",
        "run",
        "try",
        "continue",
    ];
    let first = lower
        .split(|c: char| !c.is_alphanumeric())
        .find(|w| !w.is_empty())
        .unwrap_or_default();
    u8::from(!(lower.trim_end().ends_with('?') || CHANGES.contains(&first)))
}

/// The ledger a summary of this span carries: the previous summary's ledger (its Goal items and
/// its latest request), then this span's messages but the latest, without repeats, rules the
/// summary's constraints state, withdrawn rules; bounded as the module says, in order.
pub fn carried(facts: &Facts, previous: Option<&str>, room: usize) -> Vec<String> {
    let mut candidates: Vec<String> = previous.map(of_summary).unwrap_or_default();
    let own = facts.ledger.len().saturating_sub(facts.latest_in_ledger());
    candidates.extend(facts.ledger[..own].iter().cloned());
    let mut seen = HashSet::new();
    let candidates: Vec<String> = candidates
        .into_iter()
        .filter(|item| seen.insert(key(item)))
        .filter(|item| !facts.withdrawn(item))
        .filter(|item| {
            !facts
                .constraints
                .items
                .iter()
                // Every word of it: a message that says more than its rule keeps its place.
                .any(|rule| coverage(item, rule) >= 0.999)
        })
        .collect();
    select(candidates, room)
}

/// The lines compactd's own summaries put after the latest request in Critical Context: where a
/// multi-line request quoted there ends.
pub const CONTEXT_LABELS: [&str; 6] = [
    "- Files read:",
    "- Files modified:",
    "- Commands run:",
    "- Error:",
    "- Identifiers:",
    "- Last assistant message:",
];

/// The latest request as a summary quotes it after [`LATEST_LABEL`]: its lines without the blank
/// ones; when one of them would read as the summary's own structure (a heading, a fence, a rule,
/// a closing tag: a pasted spec, a harness's template), every line after the first indented, so
/// that the request stays one item of its section.
pub fn quoted_request(request: &str) -> String {
    let lines: Vec<&str> = request
        .trim()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let structural = |l: &&str| {
        let l = l.trim_start();
        l.starts_with('#') || l.starts_with("```") || l.starts_with("---") || l.starts_with("</")
    };
    let indent = if lines.iter().skip(1).any(structural) {
        "  "
    } else {
        ""
    };
    let mut out = lines.first().map(|l| l.to_string()).unwrap_or_default();
    for line in lines.iter().skip(1) {
        out.push('\n');
        out.push_str(indent);
        out.push_str(line);
    }
    out
}

/// The latest request a summary quotes, to the end of its lines: what a later summary keeps when
/// the messages since hold no request of the user's (a stretch of tool calls, a fold's window).
pub fn latest_of_summary(summary: &str) -> Option<String> {
    let mut lines = summary.lines();
    let first = lines.find_map(|l| l.split_once(LATEST_LABEL).map(|(_, r)| r.trim()))?;
    let mut latest = vec![first];
    for raw in lines {
        let line = raw.trim();
        // A heading is at the line's start: an indented one is the quote's own.
        if line.is_empty() || raw.starts_with('#') || line.starts_with("</") {
            break;
        }
        if CONTEXT_LABELS.iter().any(|l| line.starts_with(l)) {
            break;
        }
        latest.push(line);
    }
    let text = latest.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The ledger of a summary: the items of its Goal section (its first line is the goal itself,
/// unless it is an item) and the latest request it quotes, to the end of its lines.
pub fn of_summary(summary: &str) -> Vec<String> {
    let mut items = Vec::new();
    let mut in_goal = false;
    let mut first = true;
    let mut latest: Option<Vec<&str>> = None;
    for raw in summary.lines() {
        let line = raw.trim();
        // A heading is at the line's start: an indented one is a quoted request's own.
        let heading = raw.starts_with('#');
        if let Some(lines) = latest.as_mut() {
            if !heading && !CONTEXT_LABELS.iter().any(|l| line.starts_with(l)) {
                lines.push(raw);
                continue;
            }
            items.extend(self::items(&lines.join("\n")));
            latest = None;
        }
        if let Some(heading) = raw.strip_prefix('#') {
            in_goal = heading
                .trim_start_matches('#')
                .trim()
                .eq_ignore_ascii_case("goal");
            first = true;
            continue;
        }
        if let Some((_, request)) = line.split_once(LATEST_LABEL) {
            latest = Some(vec![request]);
            continue;
        }
        if !in_goal || line.is_empty() || line.starts_with('<') || line == "---" {
            continue;
        }
        let bullet = line.strip_prefix(['-', '*', '+']).map(str::trim);
        if first && bullet.is_none() {
            first = false;
            continue;
        }
        first = false;
        let text = bullet.unwrap_or(line);
        if !text.is_empty() && !text.eq_ignore_ascii_case("(none)") {
            items.push(clip(text, ITEM_CHARS));
        }
    }
    if let Some(lines) = latest {
        items.extend(self::items(&lines.join("\n")));
    }
    items
}

/// The items to keep, in their order: all when they fit; else the first and the latest, then by
/// rank and recency, while within [`MAX_ITEMS`] and `room` characters.
pub fn select(items: Vec<String>, room: usize) -> Vec<String> {
    let size = |i: &String| i.chars().count();
    if items.len() <= MAX_ITEMS && items.iter().map(size).sum::<usize>() <= room {
        return items;
    }
    let last = items.len() - 1;
    let mut order: Vec<usize> = (0..items.len()).collect();
    // The rank classifies the item: once each, not at every comparison.
    order.sort_by_cached_key(|&i| {
        let pinned = i == 0 || i == last;
        (
            std::cmp::Reverse((pinned, rank(&items[i]))),
            std::cmp::Reverse(i),
        )
    });
    let (mut keep, mut chars) = (Vec::new(), 0);
    for i in order {
        if keep.len() == MAX_ITEMS {
            break;
        }
        if chars + size(&items[i]) > room {
            continue;
        }
        chars += size(&items[i]);
        keep.push(i);
    }
    keep.sort_unstable();
    keep.into_iter().map(|i| items[i].clone()).collect()
}

/// Items compare without case, marks and spacing.
fn key(item: &str) -> String {
    item.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quoted_request_keeps_its_lines_and_breaks_no_structure() {
        assert_eq!(quoted_request("fix it\n\n1. a\n2. b"), "fix it\n1. a\n2. b");
        let spec = "Please solve this:\n## Workflow\n1. read\n```sh\nls\n```";
        let quoted = quoted_request(spec);
        assert_eq!(
            quoted,
            "Please solve this:\n  ## Workflow\n  1. read\n  ```sh\n  ls\n  ```"
        );
        let summary = format!("## Critical Context\n- {LATEST_LABEL} {quoted}\n- Files read: a.rs");
        assert_eq!(
            latest_of_summary(&summary).as_deref(),
            Some("Please solve this:\n## Workflow\n1. read\n```sh\nls\n```")
        );
    }

    #[test]
    fn acknowledgements_and_pastes_are_no_items() {
        assert_eq!(item("ok"), None);
        assert_eq!(item("wow, it works"), None);
        assert_eq!(item("{\"a\":1,\"b\":2}"), None);
        assert_eq!(
            item("no unwrap anywhere").as_deref(),
            Some("no unwrap anywhere")
        );
        assert_eq!(
            item("are we all committed?").as_deref(),
            Some("are we all committed?")
        );
    }

    #[test]
    fn a_tight_ledger_keeps_the_first_the_latest_and_the_rules() {
        let mut items: Vec<String> = (0..60)
            .map(|i| format!("refactor module m{i} and report what changed in it"))
            .collect();
        items[5] = "never push to the main branch without asking me".to_owned();
        items[9] = "keep every function under fifty lines".to_owned();
        let kept = select(items.clone(), MAX_CHARS);
        assert_eq!(kept.len(), MAX_ITEMS);
        assert_eq!(kept.first(), items.first());
        assert_eq!(kept.last(), items.last());
        assert!(
            kept.contains(&items[5]) && kept.contains(&items[9]),
            "{kept:#?}"
        );
        // The rest are the most recent, in order.
        assert!(kept.contains(&items[58]) && !kept.contains(&items[10]));
    }

    #[test]
    fn a_message_gives_its_list_items_one_each_in_order() {
        assert_eq!(
            items(
                "Ground rules for the job:\n- never push to main\n- use tabs\nthen tell me what changed"
            ),
            [
                "never push to main",
                "use tabs",
                "then tell me what changed"
            ]
        );
        assert_eq!(
            items("look at this first\n- the parser\nand this after it"),
            ["look at this first", "the parser", "and this after it"]
        );
    }

    #[test]
    fn statements_outrank_tasks_and_questions() {
        assert!(rank("All tests use a temp directory of their own") > rank("Fix the restart test"));
        assert!(rank("Prefer stdlib over external dependencies") > rank("why does it hang?"));
        assert_eq!(rank("Never push to main."), 3);
    }

    #[test]
    fn a_summary_gives_back_its_ledger() {
        let summary = "## Goal\nShip v2\n- never push to main\n- fix the parser\n\n## Constraints & Preferences\n- x\n\n## Critical Context\n- Latest user request (verbatim): now update the docs\n- Files read: a.rs";
        assert_eq!(
            of_summary(summary),
            [
                "never push to main",
                "fix the parser",
                "now update the docs"
            ]
        );
        // A multi-line request quoted last: each of its list items is an item.
        let summary = "## Goal\nShip v2\n\n## Critical Context\n- Files read: a.rs\n- Latest user request (verbatim): two more rules for the job:\n- Use tabs.\n- Never commit secrets.\n\n## Next Steps\n1. go";
        assert_eq!(of_summary(summary), ["Use tabs.", "Never commit secrets."]);
    }
}
