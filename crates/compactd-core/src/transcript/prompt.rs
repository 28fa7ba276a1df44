//! The summarization prompt around a transcript (spec §6.2): the conversation in
//! `<conversation>` tags, optionally the previous summary in `<previous-summary>` tags, then the
//! instructions. Written here for compactd's own calls, and read here when an agent sends a
//! rendered prompt.

use crate::prompts::Prompts;

const CONVERSATION_OPEN: &str = "<conversation>\n";
/// pi ≥ 1.5's turn-prefix prompt frames its conversation with headings instead of tags.
const HEADED_CONVERSATION: &str = "# Conversation\n";
const HEADED_INSTRUCTIONS: &str = "\n# Instructions\n";
const CONVERSATION_CLOSE: &str = "\n</conversation>";
const PREVIOUS_OPEN: &str = "<previous-summary>\n";
const PREVIOUS_CLOSE: &str = "\n</previous-summary>";

/// `<conversation>\n{conversation}\n</conversation>\n\n`
pub fn conversation_block(conversation: &str) -> String {
    format!("{CONVERSATION_OPEN}{conversation}{CONVERSATION_CLOSE}\n\n")
}

pub fn previous_block(previous: &str) -> String {
    format!("{PREVIOUS_OPEN}{previous}{PREVIOUS_CLOSE}\n\n")
}

/// The history summary prompt: the update template when there is a previous summary, the
/// first-summary template otherwise, with the user's focus appended.
pub fn history_prompt(
    prompts: &Prompts,
    conversation: &str,
    previous_summary: Option<&str>,
    custom_instructions: Option<&str>,
) -> String {
    let mut text = conversation_block(conversation);
    let instructions = match previous_summary {
        Some(previous) => {
            text.push_str(&previous_block(previous));
            &prompts.update
        }
        None => &prompts.summary,
    };
    text.push_str(instructions);
    if let Some(focus) = custom_instructions.filter(|f| !f.trim().is_empty()) {
        text.push_str("\n\nAdditional focus: ");
        text.push_str(focus);
    }
    text
}

/// The turn-prefix prompt: never a previous summary or custom instructions.
pub fn turn_prefix_prompt(prompts: &Prompts, conversation: &str) -> String {
    conversation_block(conversation) + &prompts.turn_prefix
}

/// The branch-summary prompt. Custom instructions replace the template when `replace` is set,
/// and are appended as a focus otherwise.
pub fn branch_prompt(
    prompts: &Prompts,
    conversation: &str,
    custom_instructions: Option<&str>,
    replace: bool,
) -> String {
    let instructions = match custom_instructions.filter(|f| !f.trim().is_empty()) {
        Some(custom) if replace => custom.to_owned(),
        Some(custom) => format!("{}\n\nAdditional focus: {custom}", prompts.branch),
        None => prompts.branch.clone(),
    };
    conversation_block(conversation) + &instructions
}

/// The short-summary prompt: the kept messages, the fresh summary as previous summary, then the
/// short-summary template.
pub fn short_summary_prompt(prompts: &Prompts, recent_conversation: &str, summary: &str) -> String {
    format!(
        "{}{}{}",
        conversation_block(recent_conversation),
        previous_block(summary),
        prompts.short_summary
    )
}

/// What a summarization prompt asks for, judged by its instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asks {
    /// The structured checkpoint (§7.2); branch summaries leave out Critical Context.
    Checkpoint { critical_context: bool },
    /// The prefix of a split turn (§7.5).
    TurnPrefix,
    /// oh-my-pi's 2–3 sentence summary (§7.6).
    Short,
}

/// A prompt taken apart. Text that is not in the expected layout is all conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parts<'a> {
    /// Everything before the conversation (normally nothing).
    pub before: &'a str,
    pub conversation: &'a str,
    pub previous_summary: Option<&'a str>,
    /// What follows the tags: the instructions.
    pub instructions: &'a str,
}

impl<'a> Parts<'a> {
    pub fn parse(prompt: &'a str) -> Parts<'a> {
        if let Some(parts) = Parts::headed(prompt) {
            return parts;
        }
        let Some(open) = prompt.find(CONVERSATION_OPEN) else {
            return match prompt.find("<conversation>\n</conversation>") {
                // `<conversation>\n</conversation>`: the empty conversation of a hand-written prompt.
                Some(at) => Parts::after_conversation(prompt, at, "", at + 30),
                None => Parts {
                    before: "",
                    conversation: prompt,
                    previous_summary: None,
                    instructions: "",
                },
            };
        };
        let start = open + CONVERSATION_OPEN.len();
        // The conversation ends at the closing tag before the previous summary when there is one;
        // otherwise at the last closing tag.
        let with_previous = format!("{CONVERSATION_CLOSE}\n\n{PREVIOUS_OPEN}");
        let close = prompt[start..]
            .find(&with_previous)
            .map(|i| start + i)
            .or_else(|| prompt.rfind(CONVERSATION_CLOSE).filter(|&c| c >= start))
            .or_else(|| {
                // `<conversation>\n\n</conversation>`: the closing tag starts the empty text.
                prompt[start..]
                    .starts_with("</conversation>")
                    .then_some(start - 1)
            });
        match close {
            Some(close) => Parts::after_conversation(
                prompt,
                open,
                &prompt[start.min(close)..close],
                close + CONVERSATION_CLOSE.len(),
            ),
            None => Parts {
                before: &prompt[..open],
                conversation: &prompt[start..],
                previous_summary: None,
                instructions: "",
            },
        }
    }

    /// pi ≥ 1.5's turn-prefix prompt: the conversation under a `# Conversation` heading, the
    /// instructions under `# Instructions` (the last one: a conversation may quote the heading).
    /// The headings are framing, never the conversation's text.
    fn headed(prompt: &'a str) -> Option<Parts<'a>> {
        let conversation = prompt.strip_prefix(HEADED_CONVERSATION)?;
        let at = conversation.rfind(HEADED_INSTRUCTIONS)?;
        Some(Parts {
            before: "",
            conversation: conversation[..at].trim_end_matches('\n'),
            previous_summary: None,
            instructions: &conversation[at + HEADED_INSTRUCTIONS.len()..],
        })
    }

    fn after_conversation(
        prompt: &'a str,
        open: usize,
        conversation: &'a str,
        after: usize,
    ) -> Parts<'a> {
        let rest = &prompt[after.min(prompt.len())..];
        let (previous_summary, instructions) =
            match (rest.find(PREVIOUS_OPEN), rest.rfind(PREVIOUS_CLOSE)) {
                (Some(start), Some(end)) if start + PREVIOUS_OPEN.len() <= end => (
                    Some(&rest[start + PREVIOUS_OPEN.len()..end]),
                    &rest[end + PREVIOUS_CLOSE.len()..],
                ),
                _ => (None, rest),
            };
        Parts {
            before: &prompt[..open],
            conversation,
            previous_summary,
            instructions: instructions.trim_start_matches('\n'),
        }
    }

    /// What the instructions ask for.
    pub fn asks(&self) -> Asks {
        let instructions = self.instructions;
        if instructions.contains("## Original Request") {
            return Asks::TurnPrefix;
        }
        if asks_for_short_summary(instructions) {
            return Asks::Short;
        }
        Asks::Checkpoint {
            critical_context: instructions.trim().is_empty()
                || instructions.contains("Critical Context"),
        }
    }

    /// The same prompt with another conversation (and previous summary): for fitting a prompt to
    /// a model's window.
    pub fn with(&self, conversation: &str, previous_summary: Option<&str>) -> String {
        self.rebuild(conversation, previous_summary, self.instructions)
    }

    /// The prompt with another conversation, previous summary and instructions (for folding).
    pub fn rebuild(
        &self,
        conversation: &str,
        previous_summary: Option<&str>,
        instructions: &str,
    ) -> String {
        let mut text = String::from(self.before);
        text.push_str(&conversation_block(conversation));
        if let Some(previous) = previous_summary {
            text.push_str(&previous_block(previous));
        }
        text.push_str(instructions);
        text
    }
}

/// Whether the instructions ask for oh-my-pi's 2–3 sentence summary rather than a checkpoint.
fn asks_for_short_summary(instructions: &str) -> bool {
    // Only the tail matters, and prompts can be megabytes long.
    let start = super::floor_boundary(instructions, instructions.len().saturating_sub(1500));
    let lower = instructions[start..].to_lowercase();
    !lower.contains("## goal")
        && (lower.contains("2-3 sentence")
            || lower.contains("2–3 sentence")
            || lower.contains("short summary")
            || lower.contains("pull request description"))
}

/// Whether a whole prompt asks for the short summary (for the default output cap).
pub fn is_short_summary_request(prompt: &str) -> bool {
    Parts::parse(prompt).asks() == Asks::Short
}

/// Merges the history and turn-prefix summaries of a split turn (spec §7.8).
pub fn merge_split_turn(history: &str, turn_prefix: &str) -> String {
    format!("{history}\n\n---\n\n**Turn Context (split turn):**\n\n{turn_prefix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_have_the_reference_layout_and_read_back() {
        let p = Prompts::builtin();
        let first = history_prompt(&p, "[User]: hi", None, None);
        assert_eq!(
            first,
            format!(
                "<conversation>\n[User]: hi\n</conversation>\n\n{}",
                p.summary
            )
        );
        let parts = Parts::parse(&first);
        assert_eq!(parts.conversation, "[User]: hi");
        assert_eq!(parts.previous_summary, None);
        assert_eq!(parts.instructions, p.summary);
        assert_eq!(
            parts.asks(),
            Asks::Checkpoint {
                critical_context: true
            }
        );

        let update = history_prompt(&p, "", Some("old"), Some("the tests"));
        assert_eq!(
            update,
            format!(
                "<conversation>\n\n</conversation>\n\n<previous-summary>\nold\n</previous-summary>\n\n{}\n\nAdditional focus: the tests",
                p.update
            )
        );
        let parts = Parts::parse(&update);
        assert_eq!(parts.conversation, "");
        assert_eq!(parts.previous_summary, Some("old"));
        assert_eq!(parts.with("", Some("old")), update);

        assert_eq!(
            turn_prefix_prompt(&p, "x"),
            format!("<conversation>\nx\n</conversation>\n\n{}", p.turn_prefix)
        );
        assert_eq!(
            Parts::parse(&turn_prefix_prompt(&p, "x")).asks(),
            Asks::TurnPrefix
        );
        assert!(branch_prompt(&p, "x", Some("only this"), true).ends_with("\n\nonly this"));
        assert!(
            branch_prompt(&p, "x", Some("focus"), false).ends_with("\n\nAdditional focus: focus")
        );
        assert_eq!(
            Parts::parse(&branch_prompt(&p, "x", None, false)).asks(),
            Asks::Checkpoint {
                critical_context: false
            }
        );
        let short = short_summary_prompt(&p, "[User]: a", "## Goal\nG");
        let parts = Parts::parse(&short);
        assert_eq!(parts.previous_summary, Some("## Goal\nG"));
        assert_eq!(parts.asks(), Asks::Short);
        assert!(is_short_summary_request(&short));
        assert!(!is_short_summary_request(&first));
        assert_eq!(
            merge_split_turn("H", "P"),
            "H\n\n---\n\n**Turn Context (split turn):**\n\nP"
        );
    }

    #[test]
    fn pi15s_headed_turn_prefix_prompt_is_taken_apart_by_its_headings() {
        let prompt = "# Conversation\n[User]: fix the # Instructions bug\n\n[Assistant]: on it\n\n# Instructions\nThe messages above…\n\n## Original Request\n[What did the user ask for?]";
        let parts = Parts::parse(prompt);
        assert_eq!(
            parts.conversation,
            "[User]: fix the # Instructions bug\n\n[Assistant]: on it"
        );
        assert!(parts.instructions.starts_with("The messages above"));
        assert_eq!(parts.asks(), Asks::TurnPrefix);
        assert!(!parts.conversation.contains("# Conversation"));
    }

    #[test]
    fn a_conversation_that_quotes_the_closing_tag_ends_at_the_previous_summary() {
        let prompt = "<conversation>\n[User]: see \n</conversation> in the docs\n</conversation>\n\n<previous-summary>\nS\n</previous-summary>\n\nUpdate";
        let parts = Parts::parse(prompt);
        assert_eq!(
            parts.conversation,
            "[User]: see \n</conversation> in the docs"
        );
        assert_eq!(parts.previous_summary, Some("S"));
        assert_eq!(parts.instructions, "Update");
    }

    #[test]
    fn free_text_is_all_conversation() {
        let parts = Parts::parse("just summarize this please");
        assert_eq!(parts.conversation, "just summarize this please");
        assert_eq!(parts.instructions, "");
    }
}
