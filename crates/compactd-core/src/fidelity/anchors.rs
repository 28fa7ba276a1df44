//! Anchors: the facts of the replaced text a continuation cannot do without, each with a kind.
//!
//! Read from the conversation inside `<conversation>` (any dialect [`crate::transcript`] reads)
//! and from the `<previous-summary>`; the session API adds pinned text. Each kind is bounded (the
//! most recent ones win), so that a long session does not turn its summary into a list.

use serde::{Deserialize, Serialize};

use super::facts::{Facts, clip, first_line};
use super::matching;
use crate::transcript::Shape;

/// How much a continuation depends on an anchor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Weight {
    /// Never lost: appended when the model leaves it out.
    Critical,
    /// Reported when the summary does not keep it.
    Important,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnchorKind {
    /// The user's latest request, verbatim (clipped).
    LatestRequest,
    /// A file written or edited.
    ModifiedFile,
    /// In-progress and next-step items of the previous summary not since done; open todo items.
    OpenWork,
    /// A standing rule or preference the user stated ([`super::standing`]), or one a previous
    /// summary carried.
    Constraint,
    /// Text the user pinned to the session.
    Pinned,
    /// An earlier message of the user's, in their own words: the ledger a summary carries in its
    /// Goal ([`super::ledger`]).
    UserMessage,
    /// An error still unresolved at the end of the span.
    UnresolvedError,
    /// A command that failed.
    FailedCommand,
    /// A file read.
    ReadFile,
    /// An identifier named in the user's requests.
    Identifier,
}

impl AnchorKind {
    pub const ALL: [AnchorKind; 10] = [
        AnchorKind::LatestRequest,
        AnchorKind::ModifiedFile,
        AnchorKind::OpenWork,
        AnchorKind::Constraint,
        AnchorKind::Pinned,
        AnchorKind::UserMessage,
        AnchorKind::UnresolvedError,
        AnchorKind::FailedCommand,
        AnchorKind::ReadFile,
        AnchorKind::Identifier,
    ];

    pub fn weight(self) -> Weight {
        match self {
            AnchorKind::LatestRequest
            | AnchorKind::ModifiedFile
            | AnchorKind::OpenWork
            | AnchorKind::Constraint
            | AnchorKind::Pinned
            | AnchorKind::UserMessage => Weight::Critical,
            AnchorKind::UnresolvedError
            | AnchorKind::FailedCommand
            | AnchorKind::ReadFile
            | AnchorKind::Identifier => Weight::Important,
        }
    }

    /// The name in reports and metrics.
    pub fn label(self) -> &'static str {
        match self {
            AnchorKind::LatestRequest => "latest_request",
            AnchorKind::ModifiedFile => "modified_file",
            AnchorKind::OpenWork => "open_work",
            AnchorKind::Constraint => "constraint",
            AnchorKind::Pinned => "pinned",
            AnchorKind::UserMessage => "user_message",
            AnchorKind::UnresolvedError => "unresolved_error",
            AnchorKind::FailedCommand => "failed_command",
            AnchorKind::ReadFile => "read_file",
            AnchorKind::Identifier => "identifier",
        }
    }

    /// Most anchors of this kind taken from one text (the most recent).
    fn limit(self) -> usize {
        match self {
            AnchorKind::LatestRequest => 1,
            // Edits through the shell (`sed -i`, `mv`, redirections) count too, so a long session
            // changes many: the summary keeps their paths, which are short.
            AnchorKind::ModifiedFile => MODIFIED_FILES_KEPT,
            AnchorKind::ReadFile => 40,
            AnchorKind::OpenWork => 15,
            // Standing rules are stated once and must outlive every compaction: a generous bound.
            AnchorKind::Constraint => 40,
            // The ledger bounds itself (`ledger::select`).
            AnchorKind::Pinned | AnchorKind::UserMessage => usize::MAX,
            AnchorKind::UnresolvedError | AnchorKind::FailedCommand => 5,
            AnchorKind::Identifier => 30,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    pub kind: AnchorKind,
    pub text: String,
}

impl Anchor {
    pub fn new(kind: AnchorKind, text: impl Into<String>) -> Anchor {
        Anchor {
            kind,
            text: text.into(),
        }
    }

    pub fn weight(&self) -> Weight {
        self.kind.weight()
    }

    /// Text the user pinned: kept verbatim.
    pub fn pinned(text: &str) -> Anchor {
        Anchor::new(AnchorKind::Pinned, text.replace('\0', "").trim())
    }
}

/// Longest latest request kept as an anchor, in characters.
const REQUEST_CHARS: usize = 300;

/// The most recent modified files a summary of 2,000 tokens or more keeps.
pub const MODIFIED_FILES_KEPT: usize = 80;

/// The anchors of a summarization prompt, its conversation and previous summary, for a summary
/// of at most `max_tokens`.
pub fn of_shape(shape: &Shape, max_tokens: u64) -> Vec<Anchor> {
    let facts = Facts::extract(&shape.conversation.messages);
    of_facts(&facts, shape.earlier_summary(), max_tokens)
}

/// The anchors of extracted facts and a previous summary, for a summary of at most `max_tokens`
/// (the ledger of the user's messages takes its share of it: [`super::ledger::room`]).
pub fn of_facts(facts: &Facts, previous_summary: Option<&str>, max_tokens: u64) -> Vec<Anchor> {
    let mut anchors = Anchors::default();
    // The messages since an earlier summary may hold no request (tool calls only): the one it
    // quoted is still the latest.
    let carried = previous_summary.and_then(super::ledger::latest_of_summary);
    if let Some(request) = facts.latest_request().or(carried.as_deref()) {
        let request = latest_request(request, max_tokens);
        if request.chars().count() >= 4 {
            anchors.push(AnchorKind::LatestRequest, request);
        }
    }
    // A small summary keeps the most recent 40, as it keeps 40 files read.
    let files = if max_tokens >= 2_000 {
        MODIFIED_FILES_KEPT
    } else {
        40
    };
    anchors.extend_at_most(AnchorKind::ModifiedFile, &facts.modified.items, files);
    let previous = previous_summary.map(Sections::parse).unwrap_or_default();
    let mut open: Vec<String> = previous
        .items("in progress")
        .chain(previous.items("next steps"))
        .filter(|item| !is_done(item, facts))
        .collect();
    open.extend(facts.todos.iter().cloned());
    anchors.extend(AnchorKind::OpenWork, &open);
    // The rules a previous summary carried stay anchors (so a rule stated once survives every
    // later compaction), unless the user has withdrawn them since.
    let mut constraints: Vec<String> = previous
        .items_where(super::gate::is_rules_heading)
        .filter(|rule| !facts.withdrawn(rule))
        .collect();
    constraints.extend(facts.constraints.items.iter().cloned());
    anchors.extend(AnchorKind::Constraint, &constraints);
    anchors.extend(
        AnchorKind::UserMessage,
        &super::ledger::carried(facts, previous_summary, super::ledger::room(max_tokens)),
    );
    anchors.extend(
        AnchorKind::UnresolvedError,
        &facts
            .recent_errors()
            .into_iter()
            .map(str::to_owned)
            .collect::<Vec<_>>(),
    );
    anchors.extend(AnchorKind::FailedCommand, &facts.failed_commands.items);
    anchors.extend(AnchorKind::ReadFile, &facts.read.items);
    anchors.extend(AnchorKind::Identifier, &facts.user_identifiers.items);
    anchors.0
}

/// Anchors without repeats: a text already anchored (by a more critical kind) is not again.
#[derive(Default)]
struct Anchors(Vec<Anchor>);

impl Anchors {
    fn push(&mut self, kind: AnchorKind, text: String) {
        // NUL is never stored nor returned (`summarizer::clean`): an anchor holding it could
        // never be kept.
        let text = text.replace('\0', "").trim().to_owned();
        if text.is_empty() || text == "(none)" || self.0.iter().any(|a| a.text == text) {
            return;
        }
        self.0.push(Anchor { kind, text });
    }

    /// The most recent `kind.limit()` of `items`, in their order.
    fn extend(&mut self, kind: AnchorKind, items: &[String]) {
        self.extend_at_most(kind, items, kind.limit());
    }

    /// The most recent `limit` of `items`, in their order.
    fn extend_at_most(&mut self, kind: AnchorKind, items: &[String], limit: usize) {
        let start = items.len().saturating_sub(limit);
        for item in &items[start..] {
            self.push(kind, item.clone());
        }
    }
}

/// Longest latest request a summary keeps whole, in characters (the extractive summary writes it
/// so too), for a summary of at most `max_tokens`: all of the summary's room (four characters a
/// token), and never less than 1,500 characters. A request is what the next turn acts on: a
/// numbered list, a task a harness wrapped in its instructions, a pasted log it asks about, stays
/// whole; the rest of the summary gives way to it.
pub fn latest_whole_chars(max_tokens: u64) -> usize {
    (max_tokens as usize).saturating_mul(4).max(1_500)
}

/// The latest request as the summary keeps it: whole (a numbered list of what to do next is the
/// request), its blank lines left out as a summary's list item writes it, when it is at most
/// [`latest_whole_chars`]; else its first paragraph (its ask, without what was pasted after it),
/// clipped.
fn latest_request(request: &str, max_tokens: u64) -> String {
    let whole = request.trim();
    if whole.chars().count() <= latest_whole_chars(max_tokens) {
        return whole
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect::<Vec<_>>()
            .join("\n");
    }
    clip(first_paragraph(whole), REQUEST_CHARS)
}

/// A request's first paragraph (its ask, without the pasted logs after it).
fn first_paragraph(text: &str) -> &str {
    let text = text.trim();
    text.split("\n\n").next().unwrap_or(text).trim()
}

/// An open item of the previous summary reported finished in the conversation since.
fn is_done(item: &str, facts: &Facts) -> bool {
    facts
        .completed
        .items
        .iter()
        .any(|done| matching::coverage(item, done) >= 0.6)
}

/// The `##`/`###` sections of a summary, by lower-cased heading.
#[derive(Debug, Default)]
struct Sections<'a>(Vec<(String, Vec<&'a str>)>);

impl<'a> Sections<'a> {
    fn parse(summary: &'a str) -> Sections<'a> {
        let mut sections: Vec<(String, Vec<&'a str>)> = Vec::new();
        for line in summary.lines() {
            let trimmed = line.trim();
            // A rule (`---`) or a bold line (pi's "**Turn Context (split turn):**") ends a
            // section: what follows belongs to no heading.
            if trimmed == "---"
                || (trimmed.len() > 4 && trimmed.starts_with("**") && trimmed.ends_with("**"))
            {
                sections.push((String::new(), Vec::new()));
            } else if let Some(heading) = line.strip_prefix('#') {
                let heading = heading.trim_start_matches('#').trim().to_lowercase();
                sections.push((heading, Vec::new()));
            } else if let Some((_, lines)) = sections.last_mut() {
                lines.push(trimmed);
            }
        }
        Sections(sections)
    }

    /// The list items of the sections whose heading starts with `heading`.
    fn items(&self, heading: &str) -> impl Iterator<Item = String> + '_ {
        let heading = heading.to_owned();
        self.items_where(move |name| name.starts_with(&heading))
    }

    /// The list items of the sections whose heading (lower case) `wanted` accepts.
    fn items_where(
        &self,
        wanted: impl Fn(&str) -> bool + 'static,
    ) -> impl Iterator<Item = String> + '_ {
        self.0
            .iter()
            .filter(move |(name, _)| wanted(name))
            .flat_map(|(_, lines)| lines.iter())
            .filter_map(|line| list_item(line))
            .filter(|item| !item.eq_ignore_ascii_case("(none)") && item.len() >= 4)
            .map(|item| clip(first_line(item), 240))
    }
}

/// The text of a list item (`- x`, `* x`, `1. x`, `- [ ] x`), without its marker.
fn list_item(line: &str) -> Option<&str> {
    let rest = if let Some(rest) = line.strip_prefix(['-', '*', '+']) {
        rest
    } else {
        let digits = line.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        line[digits..].strip_prefix(['.', ')'])?
    };
    let rest = rest.trim_start();
    let rest = rest
        .strip_prefix("[ ]")
        .or_else(|| rest.strip_prefix("[x]"))
        .unwrap_or(rest);
    Some(rest.trim()).filter(|r| !r.is_empty())
}
