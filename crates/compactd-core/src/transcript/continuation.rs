//! Claude Code's continuation: after a compaction its next requests open with a user turn that
//! says the session is continued from a previous conversation, labels the summary (or follows
//! its reminder with it), and closes with paragraphs about the compaction itself, whose wording
//! and order change between releases. Read by that structure, not by one exact string (recorded
//! from Claude Code 2.1.39, 2.1.330 and 2.1.332). The gateway takes it out of the conversation;
//! a text dialect (pi's serialization of a Claude Code session) keeps it as a user turn, which is
//! the earlier summary, never the user's words.

/// What Claude Code's continuation says in its opening paragraph.
const CLAUDE_OPENING: &str = "is being continued from a previous conversation";
/// The label before a tagged summary (an untagged one follows the reminder unlabelled).
const CLAUDE_LABEL: &str = "Summary:";
/// What Claude Code's closing paragraphs speak of, one of these in each of their lines: the
/// compaction, its transcript, the summary as such, resuming. A summary's own last paragraph
/// (a heading, a list, compactd's recall line) speaks of the work.
const CLOSING_WORDS: [&str; 8] = [
    "compaction",
    "transcript",
    "this summary",
    "the summary",
    "continue the conversation",
    "where it left off",
    "resume directly",
    "previous conversation",
];

/// The summary in a text that is Claude Code's continuation, if it is one.
pub fn claude_summary(text: &str) -> Option<&str> {
    // The opening first: every user turn of a conversation is asked, and almost none is one.
    let (opening, _) = text.trim_start().split_once("\n\n")?;
    if !opening.contains(CLAUDE_OPENING) {
        return None;
    }
    // What Claude Code wrote after it in the same turn (a command's echo, a notification) is
    // not the summary's.
    let (_, rest) = until_agent_element(text).trim_start().split_once("\n\n")?;
    // The summary follows its label, or the reminder that lists the tools used before it.
    let body = match rest.find(&format!("\n{CLAUDE_LABEL}\n")) {
        Some(at) => &rest[at + CLAUDE_LABEL.len() + 2..],
        None if rest.starts_with(&format!("{CLAUDE_LABEL}\n")) => &rest[CLAUDE_LABEL.len() + 1..],
        None => match rest.find("</system-reminder>\n") {
            Some(at) => &rest[at + "</system-reminder>\n".len()..],
            None => rest,
        },
    };
    let summary = without_closing(body).trim();
    (!summary.is_empty()).then_some(summary)
}

/// `text` without its closing paragraphs: the trailing ones each of whose lines speaks of the
/// compaction. Paragraphs end at a blank line, or at a line that opens a new sentence of the
/// closing where Claude Code wrote no blank line before it.
fn without_closing(text: &str) -> &str {
    let mut end = text.trim_end().len();
    loop {
        let kept = &text[..end];
        let line_start = kept.rfind('\n').map_or(0, |i| i + 1);
        let line = kept[line_start..].trim();
        if line.is_empty() {
            if line_start == 0 {
                return kept;
            }
            end = line_start - 1;
            continue;
        }
        if !is_closing(line) {
            return kept;
        }
        end = line_start.saturating_sub(1);
        if line_start == 0 {
            return "";
        }
    }
}

fn is_closing(line: &str) -> bool {
    let lower = line.to_lowercase();
    CLOSING_WORDS.iter().any(|w| lower.contains(w))
        && !line.starts_with('#')
        && !line.starts_with('-')
        && !line.starts_with('*')
}

/// Where Claude Code's continuation ends in `text` (what follows it in the same turn: a
/// command's echo, a notification, the user's next words), when `text` opens with one.
pub fn continuation_end(text: &str) -> Option<usize> {
    claude_summary(text)?;
    Some(until_agent_element(text).len())
}

/// `text` up to the first line that opens one of Claude Code's own elements after the summary.
fn until_agent_element(text: &str) -> &str {
    const AFTER: [&str; 5] = [
        "<local-command-",
        "<command-name>",
        "<command-message>",
        "<bash-input>",
        "<task-notification>",
    ];
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if AFTER.iter().any(|tag| line.trim_start().starts_with(tag)) {
            return &text[..at];
        }
        at += line.len();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Claude Code 2.1.39's continuation as a session file holds it, and what a text dialect
    /// writes after it into the same user turn.
    #[test]
    fn the_continuation_ends_where_claude_codes_next_text_begins() {
        let continuation = "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request and Intent:\n   Work on bead spotter-4te.\n\nIf you need specific details from before compaction, read the full transcript at: /home/u/.claude/projects/x.jsonl\n";
        let turn = format!(
            "{continuation}<local-command-caveat>Caveat: local commands.</local-command-caveat>\n<command-name>/compact</command-name>\ncontinue implementation"
        );
        assert_eq!(
            claude_summary(&turn),
            Some("1. Primary Request and Intent:\n   Work on bead spotter-4te.")
        );
        let end = continuation_end(&turn).unwrap();
        assert!(turn[end..].starts_with("<local-command-caveat>"));
        assert_eq!(continuation_end("continue implementation"), None);
    }
}
