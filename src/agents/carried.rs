//! The summary an agent carries from its previous compaction. Claude Code and Codex do not send
//! it apart: after a compaction their next requests hold it inside a user message (recorded from
//! Claude Code 2.1.330 and Codex 0.169.0, `tests/fixtures/agent-requests/`). The gateway takes it
//! out of that message and hands it to the pipeline as the previous summary, so that what it
//! carried (the user's standing rules above all) are anchors of the next compaction as they are
//! for pi's `<previous-summary>`, and so that it is not read as the user's latest request.

use crate::transcript::{Conversation, Role};

/// Claude Code's continuation message opens with this…
const CLAUDE_OPENING: &str =
    "This session is being continued from a previous conversation that ran out of context.";
/// … labels a tagged summary with this (an untagged one follows the reminder unlabelled) …
const CLAUDE_LABEL: &str = "Summary:\n";
/// … and ends the summary at the first of these.
const CLAUDE_ENDS: [&str; 2] = [
    "\n\nIf you need specific details from before compaction",
    "\nContinue the conversation from where it left off",
];
/// The paragraphs Claude Code writes after the summary, which belong to the continuation.
const CLAUDE_TAIL_ENDS: [&str; 2] = [
    "Pick up the last task as if the break never happened.\n",
    "may already have happened in them.\n",
];

/// How Codex hands a summary to the model: its local compaction, and compactd's expanded
/// remote-compaction item ([`super::codex`]).
use super::codex::HANDOFF as CODEX_HANDOFF;

/// Takes the summary the last carried-summary message holds out of `conversation` (the message
/// keeps what else it says; an emptied message is dropped) and returns it.
pub(super) fn take(conversation: &mut Conversation) -> Option<String> {
    let (index, summary, rest) =
        conversation
            .messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, message)| {
                if message.role != Role::User {
                    return None;
                }
                let (summary, rest) =
                    claude_code(&message.text).or_else(|| codex(&message.text))?;
                Some((index, summary, rest))
            })?;
    if rest.trim().is_empty() {
        conversation.messages.remove(index);
    } else {
        conversation.messages[index].text = rest;
    }
    Some(summary)
}

/// Claude Code's continuation: the summary, and the message without the continuation.
fn claude_code(text: &str) -> Option<(String, String)> {
    let start = text.find(CLAUDE_OPENING)?;
    let after = &text[start + CLAUDE_OPENING.len()..];
    // The summary follows the label, or (untagged) the `<system-reminder>` after the opening.
    let body_at = match after.find(CLAUDE_LABEL) {
        Some(at) => at + CLAUDE_LABEL.len(),
        None => after
            .find("</system-reminder>\n")
            .map(|at| at + "</system-reminder>\n".len())?,
    };
    let body = &after[body_at..];
    let body_end = CLAUDE_ENDS
        .iter()
        .filter_map(|end| body.find(end))
        .min()
        .unwrap_or(body.len());
    let summary = body[..body_end].trim();
    if summary.is_empty() {
        return None;
    }
    // The continuation ends after Claude Code's closing paragraphs (the last one it wrote).
    let tail = &body[body_end..];
    let tail_end = CLAUDE_TAIL_ENDS
        .iter()
        .filter_map(|end| tail.find(end).map(|at| at + end.len()))
        .max()
        .unwrap_or(tail.len());
    let end = start + CLAUDE_OPENING.len() + body_at + body_end + tail_end;
    let rest = format!("{}{}", &text[..start], &text[end..]);
    Some((summary.to_owned(), rest.trim().to_owned()))
}

/// Codex's handoff: the whole message after its prefix is the summary.
fn codex(text: &str) -> Option<(String, String)> {
    let summary = text.trim_start().strip_prefix(CODEX_HANDOFF)?.trim();
    (!summary.is_empty()).then(|| (summary.to_owned(), String::new()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::{Dialect, Message};

    fn conversation(texts: &[(Role, &str)]) -> Conversation {
        Conversation::new(
            Dialect::Generic,
            texts
                .iter()
                .map(|(role, text)| Message::with_text(*role, (*text).to_owned()))
                .collect(),
        )
    }

    /// Claude Code 2.1.330's continuation block as recorded (seq 7), around a summary.
    fn continuation(summary: &str) -> String {
        format!(
            "{CLAUDE_OPENING} The summary below covers the earlier portion of the conversation.\n\n<system-reminder>\n<tools-used-before-summary></tools-used-before-summary>\n</system-reminder>\nSummary:\n{summary}\n\nIf you need specific details from before compaction (like exact code snippets, error messages, or content you generated), read the full transcript at: /home/dev/.claude/projects/x/a.jsonl\nContinue the conversation from where it left off without asking the user any further questions. Resume directly — do not acknowledge the summary, do not recap what was happening, do not preface with \"I'll continue\" or similar. Pick up the last task as if the break never happened.\n\nThe messages after this summary are the most recent messages from before compaction, kept verbatim. The summary was written without seeing them, so something it says has not happened yet may already have happened in them.\n"
        )
    }

    #[test]
    fn claude_codes_continuation_gives_its_summary_and_keeps_the_rest_of_the_message() {
        let summary =
            "## Goal\nShip it.\n\n## Constraints & Preferences\n- Use British spelling in docs.";
        let text = format!(
            "<system-reminder>\nAs you answer…\n</system-reminder>\n{}\n<local-command-stdout>Compacted</local-command-stdout>\nThanks. Anything else?",
            continuation(summary)
        );
        let mut conv = conversation(&[(Role::User, &text), (Role::Assistant, "OK")]);
        assert_eq!(take(&mut conv).as_deref(), Some(summary));
        let rest = &conv.messages[0].text;
        assert!(
            rest.starts_with("<system-reminder>\nAs you answer…"),
            "{rest}"
        );
        assert!(rest.ends_with("Thanks. Anything else?"), "{rest}");
        assert!(!rest.contains("Summary:") && !rest.contains("break never happened"));
    }

    #[test]
    fn an_untagged_summary_and_a_continuation_alone_in_its_message() {
        // Seq 10: the retry was untagged too, and Claude Code kept the plain text unlabelled.
        let text = continuation("PLAIN SUMMARY WITHOUT TAGS.").replace("Summary:\n", "");
        let mut conv = conversation(&[(Role::User, &text), (Role::User, "next")]);
        assert_eq!(
            take(&mut conv).as_deref(),
            Some("PLAIN SUMMARY WITHOUT TAGS.")
        );
        assert_eq!(conv.messages.len(), 1, "the emptied message is dropped");
    }

    #[test]
    fn codexs_handoff_is_a_summary_and_other_messages_are_not() {
        let handoff = format!("{CODEX_HANDOFF}## Goal\nShip it.");
        let mut conv = conversation(&[
            (Role::User, "Never push to main."),
            (Role::User, &handoff),
            (Role::User, "And what about subtraction?"),
        ]);
        assert_eq!(take(&mut conv).as_deref(), Some("## Goal\nShip it."));
        assert_eq!(conv.messages.len(), 2);
        let mut plain = conversation(&[(Role::User, "The summary below covers nothing.")]);
        assert_eq!(take(&mut plain), None);
        assert_eq!(plain.messages.len(), 1);
    }
}
