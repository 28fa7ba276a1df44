//! The summary an agent carries from its previous compaction. Claude Code and Codex do not send
//! it apart: after a compaction their next requests hold it in a user turn (recorded from Claude
//! Code 2.1.330 and 2.1.332 and Codex 0.169.0 and 0.171.0, `tests/fixtures/agent-requests/`). The
//! gateway takes it out and hands it to the pipeline as the previous summary, so that what it
//! carried (the files, the requests, the user's standing rules) are anchors of the next
//! compaction as they are for pi's `<previous-summary>`, and so that none of it is read as the
//! user's latest request.
//!
//! Read by its structure, not by one exact string: Claude Code's continuation is a text block of
//! its own (or a whole user message) that opens by saying the session is continued from a
//! previous conversation, labels the summary (or follows its reminder with it), and closes with
//! paragraphs about the compaction itself, whose wording and order change between releases.

use serde_json::Value;

use compactd_core::transcript::continuation::claude_summary;
use compactd_core::transcript::{Conversation, Role};

/// How Codex hands a summary to the model: its local compaction, and compactd's expanded
/// remote-compaction item ([`super::codex`]).
use super::codex::HANDOFF as CODEX_HANDOFF;

/// Takes Claude Code's continuation out of its messages (the last one: an older one was already
/// summarized again) and returns the summary it carries. The block goes, or the whole message
/// when it held nothing else.
pub(super) fn take_claude(messages: &mut Vec<Value>) -> Option<String> {
    for at in (0..messages.len()).rev() {
        if messages[at].get("role").and_then(Value::as_str) != Some("user") {
            continue;
        }
        let Some(content) = messages[at].get_mut("content") else {
            continue;
        };
        match content {
            Value::String(text) => {
                if let Some(summary) = claude_summary(text).map(str::to_owned) {
                    messages.remove(at);
                    return Some(summary);
                }
            }
            Value::Array(blocks) => {
                let found = blocks.iter().enumerate().rev().find_map(|(i, block)| {
                    let text = block.get("text").and_then(Value::as_str)?;
                    claude_summary(text).map(|summary| (i, summary.to_owned()))
                });
                if let Some((i, summary)) = found {
                    blocks.remove(i);
                    if blocks.is_empty() {
                        messages.remove(at);
                    }
                    return Some(summary);
                }
            }
            _ => {}
        }
    }
    None
}

/// Takes the summary Codex handed over (its local compaction's, or compactd's expanded item) out
/// of `conversation` and returns it: the message is the handoff and the summary after it.
pub(super) fn take(conversation: &mut Conversation) -> Option<String> {
    take_handoff(conversation)
        .or_else(|| take_answered(conversation))
        .or_else(|| take_opening(conversation))
}

/// The most a preamble before a carried `<summary>` may say (pi's and oh-my-pi's are one or two
/// sentences).
const PREAMBLE: usize = 400;

/// pi's and oh-my-pi's form: after a compaction the conversation they send opens with a user
/// message that is a short preamble and the summary in one `<summary>` element ending it
/// (oh-my-pi 18.3.4: "Prior model work/tool state available. …"; pi: "The conversation history
/// before this point was compacted into the following summary:"). Read by that structure; the
/// message goes.
fn take_opening(conversation: &mut Conversation) -> Option<String> {
    let first = conversation.messages.first()?;
    if first.role != Role::User || !first.calls.is_empty() {
        return None;
    }
    let body = first.text.trim().strip_suffix("</summary>")?;
    let open = body.find("<summary>")?;
    // The element on lines of its own, after a preamble that ends its line.
    let inside = &body[open + "<summary>".len()..];
    let apart = body[..open].ends_with('\n') && inside.starts_with('\n') && inside.ends_with('\n');
    let summary = inside.trim();
    if !apart || open > PREAMBLE || summary.is_empty() || summary.contains("<summary>") {
        return None;
    }
    let summary = summary.to_owned();
    conversation.messages.remove(0);
    Some(summary)
}

/// OpenCode's form: after a compaction its turns open with a question and the summary it got as
/// the answer (an assistant message that is one `<summary>` element); what came before is gone
/// from its requests. The question, the answer and anything before them are taken out.
fn take_answered(conversation: &mut Conversation) -> Option<String> {
    let index = conversation.messages.iter().rposition(|message| {
        let text = message.text.trim();
        message.role == Role::Assistant
            && message.calls.is_empty()
            && text.starts_with("<summary>")
            && text.ends_with("</summary>")
    })?;
    if index == 0 || conversation.messages[index - 1].role != Role::User {
        return None;
    }
    let text = conversation.messages[index].text.trim();
    let summary = text["<summary>".len()..text.len() - "</summary>".len()].trim();
    if summary.is_empty() {
        return None;
    }
    let summary = summary.to_owned();
    conversation.messages.drain(..=index);
    Some(summary)
}

fn take_handoff(conversation: &mut Conversation) -> Option<String> {
    let (index, summary) =
        conversation
            .messages
            .iter()
            .enumerate()
            .rev()
            .find_map(|(index, message)| {
                if message.role != Role::User {
                    return None;
                }
                let summary = message
                    .text
                    .trim_start()
                    .strip_prefix(CODEX_HANDOFF)?
                    .trim();
                (!summary.is_empty()).then(|| (index, summary.to_owned()))
            })?;
    conversation.messages.remove(index);
    Some(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactd_core::transcript::{Dialect, Message};
    use serde_json::json;

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
    fn continuation_330(summary: &str) -> String {
        format!(
            "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\n<system-reminder>\n<tools-used-before-summary></tools-used-before-summary>\n</system-reminder>\nSummary:\n{summary}\n\nIf you need specific details from before compaction (like exact code snippets, error messages, or content you generated), read the full transcript at: /home/dev/.claude/projects/x/a.jsonl\nContinue the conversation from where it left off without asking the user any further questions. Resume directly — do not acknowledge the summary, do not recap what was happening, do not preface with \"I'll continue\" or similar. Pick up the last task as if the break never happened.\n\nThe messages after this summary are the most recent messages from before compaction, kept verbatim. The summary was written without seeing them, so something it says has not happened yet may already have happened in them.\n"
        )
    }

    const SUMMARY: &str = "## Goal\nShip it.\n\n## Constraints & Preferences\n- Use British spelling in docs.\n\nEarlier detail is searchable: recall_search in compactd (MCP at /mcp), id r_0123";

    #[test]
    fn a_pi_family_opening_summary_gives_its_summary_and_goes() {
        let omp = format!(
            "Prior model work/tool state available.\nMUST build on prior work; NEVER duplicate \
             prior work.\n\n<summary>\n{SUMMARY}\n</summary>\n"
        );
        let pi = format!(
            "The conversation history before this point was compacted into the following \
             summary:\n\n<summary>\n{SUMMARY}\n</summary>"
        );
        for opening in [omp, pi] {
            let mut c = conversation(&[
                (Role::User, &opening),
                (Role::User, "now the parser"),
                (Role::Assistant, "on it"),
            ]);
            assert_eq!(take(&mut c).as_deref(), Some(SUMMARY));
            assert_eq!(c.messages.len(), 2);
            assert_eq!(c.messages[0].text, "now the parser");
        }
        // A user's own words that end in a tag, a summary not first, a long preamble: kept.
        let long = format!("{}\n<summary>x</summary>", "context ".repeat(60));
        for texts in [
            vec![(Role::User, "please wrap it as <summary>done</summary>")],
            vec![(Role::User, "<summary>\nmy notes\n</summary>")],
            vec![
                (Role::User, "fix it"),
                (Role::User, "Earlier:\n<summary>x</summary>"),
            ],
            vec![(Role::User, long.as_str())],
        ] {
            let mut c = conversation(&texts);
            let before = c.messages.len();
            assert_eq!(take(&mut c), None, "{texts:?}");
            assert_eq!(c.messages.len(), before);
        }
    }

    #[test]
    fn claude_codes_continuation_block_gives_its_summary_and_goes() {
        let mut messages = vec![
            json!({"role": "user", "content": [
                {"type": "text", "text": "<system-reminder>\nAs you answer…\n</system-reminder>"},
                {"type": "text", "text": continuation_330(SUMMARY)},
                {"type": "text", "text": "<local-command-stdout>Compacted</local-command-stdout>\n"},
                {"type": "text", "text": "Thanks. Anything else?"}]}),
            json!({"role": "assistant", "content": "OK"}),
        ];
        assert_eq!(take_claude(&mut messages).as_deref(), Some(SUMMARY));
        let blocks = messages[0]["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 3);
        assert!(
            !messages
                .to_vec()
                .iter()
                .any(|m| m.to_string().contains("Summary:"))
        );
    }

    #[test]
    fn the_closing_in_any_of_its_forms_and_without_a_final_newline_is_not_the_summary() {
        // 2.1.332: no final newline; a message of its own after /compact.
        let closing_332 = continuation_330(SUMMARY).trim_end().to_owned();
        // A later release might reorder its closing paragraphs or join them.
        let reordered = continuation_330(SUMMARY).replace(
            "\n\nIf you need specific details",
            "\nThe messages after this summary are kept verbatim.\nIf you need specific details",
        );
        for text in [closing_332, reordered] {
            let mut messages = vec![json!({"role": "user", "content": text})];
            assert_eq!(take_claude(&mut messages).as_deref(), Some(SUMMARY));
            assert!(
                messages.is_empty(),
                "the continuation was the whole message"
            );
        }
    }

    #[test]
    fn an_untagged_summary_follows_the_reminder() {
        // Claude Code keeps an untagged answer whole, unlabelled (2.1.330, seq 10).
        let text = continuation_330("PLAIN SUMMARY WITHOUT TAGS.").replace("Summary:\n", "");
        let mut messages = vec![json!({"role": "user", "content": text})];
        assert_eq!(
            take_claude(&mut messages).as_deref(),
            Some("PLAIN SUMMARY WITHOUT TAGS.")
        );
    }

    #[test]
    fn a_user_who_quotes_the_opening_is_not_carrying_a_summary() {
        let text = "Why does it say the session is being continued from a previous conversation?";
        let mut messages = vec![json!({"role": "user", "content": text})];
        assert_eq!(take_claude(&mut messages), None);
        assert_eq!(messages.len(), 1);
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

    /// OpenCode 1.18's turns after a compaction, as recorded (seq 7): the question, the summary
    /// as its answer, then the work since.
    #[test]
    fn opencodes_answered_summary_is_taken_out_with_its_question() {
        let mut turns = conversation(&[
            (Role::User, "What did we do so far?"),
            (
                Role::Assistant,
                "<summary>\nFAKE SUMMARY: the user asked for small edits.\n</summary>",
            ),
            (Role::User, "Continue if you have next steps."),
            (Role::Assistant, "OK, noted."),
            (Role::User, "And what about subtraction?"),
        ]);
        assert_eq!(
            take(&mut turns).as_deref(),
            Some("FAKE SUMMARY: the user asked for small edits.")
        );
        assert_eq!(turns.messages.len(), 3);
        assert_eq!(turns.messages[0].text, "Continue if you have next steps.");
        // A summary the user asked the assistant to write mid-session, with nothing before it,
        // is not taken: it has no question.
        let mut alone = conversation(&[(Role::Assistant, "<summary>x</summary>")]);
        assert_eq!(take(&mut alone), None);
    }
}
