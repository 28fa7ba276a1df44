//! The built-in extractive summarizer: deterministic, no network, no key.
//!
//! It reads the serialized conversation inside the prompt (spec §6.1: `[User]: …`,
//! `[Assistant tool calls]: read(path="…")`, `[Tool result]: …`) and writes a summary in the
//! structured format of spec §7.2 from what it can extract verbatim: the user's requests and
//! constraints, the files read and changed, the commands run, the error messages seen, the
//! assistant's stated decisions, and the code identifiers mentioned. Nothing is paraphrased, so
//! paths, identifiers, commands and errors survive exactly. A previous summary in the prompt is
//! merged section by section. The output format follows the instructions: the checkpoint (with or
//! without Critical Context, as in branch summaries), the turn-prefix format, or a short summary.

use std::collections::HashSet;

use serde_json::Value;

use super::{Summary, SummaryRequest, TokenUsage};
use crate::js_json::utf16_len;

/// Characters per token, as the reference heuristic counts.
const CHARS_PER_TOKEN: u64 = 4;

/// Summarizes `request.prompt`, within `request.max_tokens` (estimated at 4 characters a token).
pub fn summarize(request: &SummaryRequest) -> Summary {
    let input = Input::parse(&request.prompt);
    let facts = Facts::extract(&input);
    let budget = (request.max_tokens.max(64) * CHARS_PER_TOKEN) as usize;
    let text = match input.format {
        Format::Checkpoint { critical_context } => {
            checkpoint(&facts, input.previous, critical_context, budget)
        }
        Format::TurnPrefix => turn_prefix(&facts, budget),
        Format::Short => short(&facts),
    };
    let estimate = |s: &str| (utf16_len(s) as u64).div_ceil(CHARS_PER_TOKEN);
    Summary {
        usage: TokenUsage {
            input_tokens: estimate(&request.system_prompt) + estimate(&request.prompt),
            output_tokens: estimate(&text),
        },
        text,
        model: "extractive".to_owned(),
    }
}

// ---- reading the prompt ------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Checkpoint { critical_context: bool },
    TurnPrefix,
    Short,
}

struct Input<'a> {
    conversation: &'a str,
    previous: Option<&'a str>,
    format: Format,
}

impl<'a> Input<'a> {
    fn parse(prompt: &'a str) -> Input<'a> {
        const OPEN: &str = "<conversation>\n";
        const CLOSE: &str = "\n</conversation>";
        let (conversation, after) = match (prompt.find(OPEN), prompt.rfind(CLOSE)) {
            (Some(start), Some(end)) if start + OPEN.len() <= end => (
                &prompt[start + OPEN.len()..end],
                &prompt[end + CLOSE.len()..],
            ),
            // `<conversation>\n\n</conversation>`: an empty conversation.
            (Some(start), _) if prompt[start..].starts_with("<conversation>\n</conversation>") => (
                "",
                &prompt[start + "<conversation>\n</conversation>".len()..],
            ),
            _ => (prompt, ""),
        };
        let (previous, instructions) = match (
            after.find("<previous-summary>\n"),
            after.rfind("\n</previous-summary>"),
        ) {
            (Some(start), Some(end)) if start + 19 <= end => {
                (Some(&after[start + 19..end]), &after[end + 20..])
            }
            _ => (None, after),
        };
        let lower = instructions.to_ascii_lowercase();
        let format = if instructions.contains("## Original Request") {
            Format::TurnPrefix
        } else if !instructions.contains("## Goal")
            && (lower.contains("2-3 sentence")
                || lower.contains("2–3 sentence")
                || lower.contains("short summary"))
        {
            Format::Short
        } else {
            Format::Checkpoint {
                critical_context: instructions.trim().is_empty()
                    || instructions.contains("Critical Context"),
            }
        };
        Input {
            conversation,
            previous,
            format,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    User,
    Assistant,
    Thinking,
    ToolCalls,
    ToolResult,
}

/// The role markers of pi's serializer and of oh-my-pi's.
const MARKERS: [(&str, Role); 8] = [
    ("[User]: ", Role::User),
    ("[Assistant]: ", Role::Assistant),
    ("[Assistant thinking]: ", Role::Thinking),
    ("[Assistant tool calls]: ", Role::ToolCalls),
    ("[Tool result]: ", Role::ToolResult),
    ("[Think]: ", Role::Thinking),
    ("[Tool Call]: ", Role::ToolCalls),
    ("[Tool Result]: ", Role::ToolResult),
];

fn marker_at(text: &str) -> Option<(Role, usize)> {
    MARKERS
        .iter()
        .find(|(marker, _)| text.starts_with(marker))
        .map(|(marker, role)| (*role, marker.len()))
}

/// Splits a serialized conversation into its parts. Parts are joined with a blank line and start
/// with a role marker; text before the first marker (a free-form prompt) counts as the user's.
fn parts(conversation: &str) -> Vec<(Role, &str)> {
    let mut starts: Vec<(usize, Role, usize)> = Vec::new();
    if let Some((role, len)) = marker_at(conversation) {
        starts.push((0, role, len));
    } else if !conversation.trim().is_empty() {
        starts.push((0, Role::User, 0));
    }
    for found in memchr::memmem::find_iter(conversation.as_bytes(), b"\n\n[") {
        if let Some((role, len)) = marker_at(&conversation[found + 2..]) {
            starts.push((found + 2, role, len));
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(i, &(start, role, len))| {
            let end = starts
                .get(i + 1)
                .map_or(conversation.len(), |next| next.0 - 2);
            (role, &conversation[start + len..end])
        })
        .collect()
}

/// One tool call of an `[Assistant tool calls]` part: `name(k="v", n=1)`.
struct Call {
    name: String,
    args: Vec<(String, Value)>,
}

/// Parses `name(k=JSON, …); name(…)`; stops quietly at anything it cannot read.
fn parse_calls(mut rest: &str) -> Vec<Call> {
    let mut calls = Vec::new();
    while let Some(open) = rest.find('(') {
        let name = rest[..open].trim().to_owned();
        rest = &rest[open + 1..];
        let mut args = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix(')') {
                rest = after;
                break;
            }
            let Some(eq) = rest.find('=') else {
                return calls;
            };
            let key = rest[..eq].trim().to_owned();
            rest = &rest[eq + 1..];
            let Some(end) = json_value_end(rest) else {
                return calls;
            };
            let Ok(value) = serde_json::from_str::<Value>(&rest[..end]) else {
                return calls;
            };
            rest = &rest[end..];
            args.push((key, value));
            rest = rest.strip_prefix(", ").unwrap_or(rest);
        }
        calls.push(Call { name, args });
        match rest.strip_prefix("; ") {
            Some(after) => rest = after,
            None => break,
        }
    }
    calls
}

/// Length of the JSON value at the start of `text`: a string, a bracketed value, or a bare
/// number or literal running to the next `,` or `)`.
fn json_value_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_string = false;
                    if depth == 0 {
                        return Some(i + 1);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' | b')' if depth == 0 => return (i > 0).then_some(i),
            _ => {}
        }
    }
    (depth == 0 && !in_string && !text.is_empty()).then_some(text.len())
}

// ---- what the conversation says ------------------------------------------------------------

/// An ordered set: first-seen order, no duplicates.
#[derive(Default)]
struct Ordered {
    items: Vec<String>,
    seen: HashSet<String>,
}

impl Ordered {
    fn push(&mut self, item: impl Into<String>) {
        let item = item.into();
        if !item.is_empty() && self.seen.insert(item.clone()) {
            self.items.push(item);
        }
    }

    /// The last `n` items, oldest first.
    fn last(&self, n: usize) -> &[String] {
        &self.items[self.items.len().saturating_sub(n)..]
    }
}

#[derive(Default)]
struct Facts {
    /// User requests (not shell commands the user ran), in order.
    requests: Vec<String>,
    constraints: Ordered,
    read: Ordered,
    modified: Ordered,
    commands: Ordered,
    /// Error lines with the index of the part they came from.
    errors: Vec<(usize, String)>,
    decisions: Ordered,
    completed: Ordered,
    identifiers: Ordered,
    last_assistant: Option<String>,
    part_count: usize,
}

const CONSTRAINT_WORDS: [&str; 14] = [
    " must ",
    "must not",
    "don't",
    "do not",
    "never",
    "always",
    "prefer",
    "should",
    "make sure",
    "avoid",
    "without",
    "only use",
    "keep ",
    "instead of",
];
const DECISION_WORDS: [&str; 10] = [
    "decided",
    "i'll use",
    "i will use",
    "let's use",
    "we'll use",
    "chose",
    "going with",
    "switch to",
    "instead of",
    "the approach",
];
const COMPLETION_STARTS: [&str; 10] = [
    "i've ",
    "i have ",
    "fixed ",
    "added ",
    "implemented ",
    "updated ",
    "created ",
    "removed ",
    "done",
    "all tests pass",
];
/// Case-sensitive marks of an error message in command output.
const ERROR_MARKS: [&str; 9] = [
    "Error:",
    "error:",
    "error[",
    "ERROR",
    "Exception",
    " FAILED",
    "FAIL ",
    "panicked at",
    "Traceback",
];
/// Lower-case phrases of error messages.
const ERROR_PHRASES: [&str; 8] = [
    "exited with code",
    "no such file or directory",
    "command not found",
    "permission denied",
    "cannot find",
    "is not defined",
    "failed to",
    "segmentation fault",
];
/// Code that mentions errors without being one.
const CODE_MARKS: [&str; 8] = [
    "console.error",
    "catch (",
    "throw new",
    "=>",
    "error(",
    "Error(",
    "\": \"",
    "errors:",
];

/// Whether a line of command output reads as an error message rather than code or prose.
fn is_error_line(line: &str) -> bool {
    if line.len() < 8
        || line.starts_with("//")
        || line.starts_with('*')
        || line.starts_with("[... ")
    {
        return false;
    }
    if CODE_MARKS.iter().any(|m| line.contains(m))
        && !line.starts_with("Error")
        && !line.starts_with("error")
    {
        return false;
    }
    let lower = line.to_lowercase();
    lower.starts_with("error")
        || lower.starts_with("fatal")
        || lower.starts_with("npm err")
        || ERROR_MARKS.iter().any(|m| line.contains(m))
        || ERROR_PHRASES.iter().any(|p| lower.contains(p))
}

impl Facts {
    fn extract(input: &Input<'_>) -> Facts {
        let mut facts = Facts::default();
        let parts = parts(input.conversation);
        // Results follow their calls in order: the tool of each result tells whether it holds
        // command output (errors worth keeping) or file contents (`read`: code, not errors).
        let mut pending_tools: std::collections::VecDeque<String> = Default::default();
        facts.part_count = parts.len();
        for (index, (role, text)) in parts.iter().enumerate() {
            match role {
                Role::User if text.starts_with("Ran `") => {
                    // A shell command the user ran (`!cmd`): its command and errors count.
                    if let Some(command) = text[5..].split('`').next() {
                        facts.commands.push(command);
                    }
                    facts.collect_errors(index, text);
                }
                Role::User => {
                    facts.requests.push(text.trim().to_owned());
                    for sentence in sentences(text) {
                        let padded = format!(" {} ", sentence.to_lowercase());
                        if CONSTRAINT_WORDS.iter().any(|w| padded.contains(w)) {
                            facts.constraints.push(clip(sentence, 240));
                        }
                    }
                    facts.collect_identifiers(text);
                }
                Role::Assistant => {
                    for sentence in sentences(text) {
                        let lower = sentence.to_lowercase();
                        if DECISION_WORDS.iter().any(|w| lower.contains(w)) {
                            facts.decisions.push(clip(sentence, 240));
                        } else if COMPLETION_STARTS.iter().any(|w| lower.starts_with(w)) {
                            facts.completed.push(clip(sentence, 200));
                        }
                    }
                    facts.collect_identifiers(text);
                    if !text.trim().is_empty() {
                        facts.last_assistant = Some(text.trim().to_owned());
                    }
                }
                Role::ToolCalls => {
                    pending_tools.clear();
                    for call in parse_calls(text) {
                        facts.add_call(&call);
                        pending_tools.push_back(call.name);
                    }
                }
                Role::ToolResult => {
                    if pending_tools.pop_front().as_deref() != Some("read") {
                        facts.collect_errors(index, text);
                    }
                }
                Role::Thinking => {}
            }
        }
        facts
    }

    fn add_call(&mut self, call: &Call) {
        let arg = |key: &str| {
            call.args
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| v.as_str())
                .filter(|s| !s.is_empty())
        };
        match (call.name.as_str(), arg("path")) {
            ("read", Some(path)) => self.read.push(path),
            ("write" | "edit", Some(path)) => self.modified.push(path),
            _ => {}
        }
        if let Some(command) = arg("command") {
            self.commands
                .push(clip(command.lines().next().unwrap_or_default(), 200));
        }
    }

    fn collect_errors(&mut self, index: usize, text: &str) {
        for line in text.lines().map(str::trim).filter(|l| is_error_line(l)) {
            let line = clip(line, 300);
            self.errors.retain(|(_, seen)| *seen != line);
            self.errors.push((index, line));
        }
    }

    fn collect_identifiers(&mut self, text: &str) {
        // `code spans` of one line, excluding fences.
        let mut pieces = text.split('`');
        pieces.next();
        while let (Some(code), Some(_)) = (pieces.next(), pieces.next()) {
            let code = code.trim();
            if !code.is_empty() && code.len() <= 120 && !code.contains('\n') {
                self.identifiers.push(code);
            }
        }
    }

    fn latest_request(&self) -> Option<&str> {
        self.requests.last().map(String::as_str)
    }

    /// Errors in the last quarter of the conversation: what is probably still in the way.
    fn recent_errors(&self) -> Vec<&str> {
        let cutoff = self.part_count - self.part_count / 4;
        let recent: Vec<&str> = self
            .errors
            .iter()
            .filter(|(index, _)| *index + 1 >= cutoff)
            .map(|(_, e)| e.as_str())
            .collect();
        recent[recent.len().saturating_sub(5)..].to_vec()
    }
}

/// Sentences of a text: split at line breaks and at sentence ends.
fn sentences(text: &str) -> impl Iterator<Item = &str> {
    text.split(['\n', '!', '?'])
        .flat_map(|line| line.split(". "))
        .map(str::trim)
        .filter(|s| s.len() >= 12)
}

/// At most `max` characters, cut at a character boundary with an ellipsis.
fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .trim()
}

fn code_list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---- writing the summary ------------------------------------------------------------------------

/// A section: a heading and its lines. `floor` lines are never dropped to fit the budget.
struct Section {
    heading: &'static str,
    lines: Vec<String>,
    empty: &'static str,
}

impl Section {
    fn new(heading: &'static str, empty: &'static str) -> Self {
        Section {
            heading,
            lines: Vec::new(),
            empty,
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
        if in_tag || trimmed.is_empty() || trimmed == "---" {
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
            sections.push(("Goal".to_owned(), vec![trimmed.to_owned()]));
        }
    }
    sections
}

fn is_placeholder(line: &str) -> bool {
    let l = line.trim_start_matches(['-', '*', ' ']).trim();
    l.is_empty() || l == "(none)" || l.eq_ignore_ascii_case("none")
}

fn checkpoint(
    facts: &Facts,
    previous: Option<&str>,
    critical_context: bool,
    budget: usize,
) -> String {
    let mut goal = Section::new("## Goal", "(none stated)");
    let mut constraints = Section::new("## Constraints & Preferences", "- (none)");
    let mut done = Section::new("### Done", "- (none)");
    let mut in_progress = Section::new("### In Progress", "- (none)");
    let mut blocked = Section::new("### Blocked", "- (none)");
    let mut decisions = Section::new("## Key Decisions", "- (none)");
    let mut next = Section::new("## Next Steps", "1. (none)");
    let mut critical = Section::new("## Critical Context", "- (none)");

    // Earlier summary first, so that nothing it recorded is lost.
    if let Some(previous) = previous {
        for (heading, lines) in previous_sections(previous) {
            let target = match heading.as_str() {
                "Goal" => &mut goal,
                "Constraints & Preferences" => &mut constraints,
                "Done" | "Progress" => &mut done,
                "Key Decisions" => &mut decisions,
                "Critical Context" | "Additional Notes" => &mut critical,
                // In Progress, Blocked and Next Steps are rewritten from the new messages.
                _ => continue,
            };
            target
                .lines
                .extend(lines.into_iter().filter(|l| !is_placeholder(l)));
        }
    }

    let requests: Vec<&String> = facts.requests.iter().collect();
    if let Some(first) = requests.first() {
        goal.lines
            .push(clip(first.split("\n\n").next().unwrap_or(first), 400));
    }
    for request in requests.iter().skip(1).rev().take(4).rev() {
        goal.lines
            .push(format!("- {}", clip(first_line(request), 200)));
    }
    constraints
        .lines
        .extend(facts.constraints.last(8).iter().map(|c| format!("- {c}")));
    done.lines.extend(
        facts
            .modified
            .items
            .iter()
            .map(|p| format!("- [x] Changed `{p}`")),
    );
    done.lines
        .extend(facts.completed.last(8).iter().map(|c| format!("- [x] {c}")));
    if let Some(latest) = facts.latest_request() {
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
        .extend(facts.decisions.last(6).iter().map(|d| {
            let short: String = d.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
            format!("- **{}**: {d}", short.trim_end_matches([',', '.', ':']))
        }));
    let mut steps = Vec::new();
    if let Some(latest) = facts.latest_request() {
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
            critical.lines.push(format!(
                "- Latest user request (verbatim): {}",
                clip(latest, 1500)
            ));
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

fn turn_prefix(facts: &Facts, budget: usize) -> String {
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

fn short(facts: &Facts) -> String {
    let mut text = match facts.requests.first() {
        Some(first) => format!(
            "I worked on: {}.",
            clip(first_line(first), 200).trim_end_matches('.')
        ),
        None => "I continued the work of this session.".to_owned(),
    };
    match facts.modified.items.len() {
        0 => {}
        n => text.push_str(&format!(
            " I changed {} file{}: {}.",
            n,
            if n == 1 { "" } else { "s" },
            code_list(&facts.modified.items[..n.min(6)])
        )),
    }
    text
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
            .filter(|(_, s)| s.lines.len() > 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prompt: &str, max_tokens: u64) -> String {
        summarize(&SummaryRequest {
            system_prompt: String::new(),
            prompt: prompt.to_owned(),
            max_tokens,
        })
        .text
    }

    const CONVERSATION: &str = "[User]: Please fix the crash in `parse_header`. Do not change the public API.\n\n\
        [Assistant thinking]: look at it\n\n\
        [Assistant tool calls]: read(path=\"src/parse.rs\"); bash(command=\"cargo test\", timeout=30)\n\n\
        [Tool result]: fn parse_header() -> Result<(), Error> {}\n\n\
        [Tool result]: error[E0308]: mismatched types\n  --> src/parse.rs:10:5\n\n\
        [Assistant]: I decided to use `u32` instead of `usize` for the offset.\n\n\
        [Assistant tool calls]: edit(path=\"src/parse.rs\", oldText=\"a; b\", newText=\"c)\")\n\n\
        [User]: Now also update the docs in README.md\n\n\
        [Tool result]: test parse::tests::header ... FAILED";

    #[test]
    fn error_lines_are_told_from_code() {
        for error in [
            "error[E0308]: mismatched types",
            "Error: Cannot find module 'x'",
            "npm ERR! code E404",
            "thread 'main' panicked at src/main.rs:3:5",
            "Command exited with code 2",
            "bash: foo: command not found",
            "test parse::tests::header ... FAILED",
        ] {
            assert!(is_error_line(error), "{error}");
        }
        for code in [
            "console.error(`failed: ${e}`);",
            "} catch (error) {",
            "throw new Error(\"bad\");",
            "\"toolErrorBg\": \"#3c2828\"",
            "// Ignore errors while editing",
            "the error handling is fine",
        ] {
            assert!(!is_error_line(code), "{code}");
        }
    }

    #[test]
    fn file_contents_from_read_are_not_errors() {
        let conversation = "[Assistant tool calls]: read(path=\"a.rs\"); bash(command=\"make\")\n\n\
            [Tool result]: Error: this is source code text\n\n[Tool result]: error: build failed";
        let text = run(
            &format!("<conversation>\n{conversation}\n</conversation>\n\n## Critical Context"),
            2000,
        );
        assert!(text.contains("- Error: error: build failed"), "{text}");
        assert!(!text.contains("source code text"), "{text}");
    }

    #[test]
    fn parts_split_at_markers_only() {
        let text = "[User]: a\n\n[not a marker]: b\n\n[Assistant]: c";
        assert_eq!(
            parts(text),
            [
                (Role::User, "a\n\n[not a marker]: b"),
                (Role::Assistant, "c")
            ]
        );
        assert_eq!(parts("free text"), [(Role::User, "free text")]);
        assert!(parts("").is_empty());
    }

    #[test]
    fn tool_calls_parse_with_json_arguments() {
        let calls = parse_calls(
            r#"edit(path="a; b.rs", old="x)\"", n=1, o={"k":[1,"]"]}); bash(command="ls", timeout=30)"#,
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].args[1].1, "x)\"");
        assert_eq!(calls[1].args[1].1, 30);
        assert_eq!(calls[0].name, "edit");
        assert_eq!(
            calls[0].args[0],
            ("path".to_owned(), Value::from("a; b.rs"))
        );
        assert_eq!(calls[0].args.len(), 4);
        assert_eq!(calls[1].args[0].1, "ls");
    }

    #[test]
    fn the_checkpoint_keeps_paths_requests_errors_and_decisions() {
        let prompt = format!(
            "<conversation>\n{CONVERSATION}\n</conversation>\n\n## Goal … ## Critical Context"
        );
        let text = run(&prompt, 4000);
        for heading in [
            "## Goal",
            "## Constraints & Preferences",
            "## Progress",
            "### Done",
            "### In Progress",
            "### Blocked",
            "## Key Decisions",
            "## Next Steps",
            "## Critical Context",
        ] {
            assert!(
                text.contains(&format!("{heading}\n")),
                "missing {heading}:\n{text}"
            );
        }
        assert!(text.contains("- [x] Changed `src/parse.rs`"), "{text}");
        assert!(text.contains("Files read: `src/parse.rs`"), "{text}");
        assert!(text.contains("Do not change the public API"), "{text}");
        assert!(text.contains("error[E0308]: mismatched types"), "{text}");
        assert!(
            text.contains("test parse::tests::header ... FAILED"),
            "{text}"
        );
        assert!(
            text.contains("- [ ] Now also update the docs in README.md"),
            "{text}"
        );
        assert!(
            text.contains("Latest user request (verbatim): Now also update the docs in README.md"),
            "{text}"
        );
        assert!(
            text.contains("**I decided to use `u32` instead**"),
            "{text}"
        );
        assert!(text.contains("`cargo test`"), "{text}");
        assert!(text.contains("`parse_header`"), "{text}");
    }

    #[test]
    fn a_previous_summary_is_merged_and_its_file_tags_dropped() {
        let previous = "## Goal\nShip v2\n\n## Key Decisions\n- **Use tokio**: async IO\n\n## Critical Context\n- (none)\n\n<read-files>\nold.rs\n</read-files>";
        let prompt = format!(
            "<conversation>\n{CONVERSATION}\n</conversation>\n\n<previous-summary>\n{previous}\n</previous-summary>\n\nUpdate … ## Critical Context"
        );
        let text = run(&prompt, 4000);
        assert!(text.starts_with("## Goal\nShip v2\n"), "{text}");
        assert!(text.contains("- **Use tokio**: async IO"), "{text}");
        assert!(
            !text.contains("old.rs") && !text.contains("<read-files>"),
            "{text}"
        );
    }

    #[test]
    fn branch_and_turn_prefix_and_short_formats_follow_the_instructions() {
        let branch = run(
            &format!("<conversation>\n{CONVERSATION}\n</conversation>\n\n## Goal\n## Next Steps"),
            4000,
        );
        assert!(
            branch.contains("## Next Steps") && !branch.contains("## Critical Context"),
            "{branch}"
        );
        let prefix = run(
            &format!(
                "<conversation>\n{CONVERSATION}\n</conversation>\n\n## Original Request\n## Early Progress"
            ),
            4000,
        );
        assert!(
            prefix.starts_with("## Original Request\nPlease fix the crash"),
            "{prefix}"
        );
        assert!(prefix.contains("## Context for Suffix"), "{prefix}");
        let short_text = run(
            &format!(
                "<conversation>\n{CONVERSATION}\n</conversation>\n\nIn 2-3 sentences, describe"
            ),
            512,
        );
        assert!(
            short_text.starts_with("I worked on: Please fix the crash"),
            "{short_text}"
        );
        assert!(short_text.contains("`src/parse.rs`"), "{short_text}");
    }

    #[test]
    fn the_output_fits_the_token_budget_and_keeps_every_heading() {
        let many: String = (0..400)
            .map(|i| format!("[Assistant tool calls]: write(path=\"src/file{i}.rs\")\n\n"))
            .collect();
        let prompt = format!(
            "<conversation>\n[User]: go\n\n{many}[User]: done?\n</conversation>\n\n## Critical Context"
        );
        let text = run(&prompt, 300);
        assert!(
            text.chars().count() <= 1200,
            "{} chars",
            text.chars().count()
        );
        for heading in [
            "## Goal",
            "### Done",
            "## Next Steps",
            "## Critical Context",
        ] {
            assert!(text.contains(heading), "{text}");
        }
    }

    #[test]
    fn an_empty_conversation_still_yields_every_section() {
        let text = run(
            "<conversation>\n\n</conversation>\n\nWrite ## Critical Context",
            1000,
        );
        assert!(text.contains("## Goal\n(none stated)"), "{text}");
        assert!(text.contains("## Critical Context\n- (none)"), "{text}");
    }
}
