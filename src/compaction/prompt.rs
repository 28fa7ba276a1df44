//! Prompt assembly for the summarizer (spec §6.2, §6.3): one user message of text, the
//! conversation in tags, then the instructions.

use crate::prompts::Prompts;

/// Output budget of the history summary: `floor(0.8 × reserveTokens)`.
pub fn history_max_tokens(reserve_tokens: u64) -> u64 {
    reserve_tokens * 8 / 10
}

/// Output budget of the turn-prefix summary: `floor(0.5 × reserveTokens)`.
pub fn turn_prefix_max_tokens(reserve_tokens: u64) -> u64 {
    reserve_tokens / 2
}

/// Output budget of a branch summary.
pub const BRANCH_MAX_TOKENS: u64 = 2048;

/// Output budget of the short summary: `min(512, floor(0.2 × reserveTokens))`.
pub fn short_summary_max_tokens(reserve_tokens: u64) -> u64 {
    (reserve_tokens / 5).min(512)
}

fn conversation_block(conversation: &str) -> String {
    format!("<conversation>\n{conversation}\n</conversation>\n\n")
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
            text.push_str(&format!(
                "<previous-summary>\n{previous}\n</previous-summary>\n\n"
            ));
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
        "{}<previous-summary>\n{summary}\n</previous-summary>\n\n{}",
        conversation_block(recent_conversation),
        prompts.short_summary
    )
}

/// Merges the history and turn-prefix summaries of a split turn (spec §7.8).
pub fn merge_split_turn(history: &str, turn_prefix: &str) -> String {
    format!("{history}\n\n---\n\n**Turn Context (split turn):**\n\n{turn_prefix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_follow_the_reference() {
        assert_eq!(history_max_tokens(16_384), 13_107);
        assert_eq!(turn_prefix_max_tokens(16_384), 8_192);
        assert_eq!(short_summary_max_tokens(16_384), 512);
        assert_eq!(short_summary_max_tokens(1_000), 200);
        assert_eq!(history_max_tokens(10_000), 8_000);
    }

    #[test]
    fn history_prompts_have_the_reference_layout() {
        let p = Prompts::builtin();
        assert_eq!(
            history_prompt(&p, "[User]: hi", None, None),
            format!(
                "<conversation>\n[User]: hi\n</conversation>\n\n{}",
                p.summary
            )
        );
        assert_eq!(
            history_prompt(&p, "", Some("old"), Some("the tests")),
            format!(
                "<conversation>\n\n</conversation>\n\n<previous-summary>\nold\n</previous-summary>\n\n{}\n\nAdditional focus: the tests",
                p.update
            )
        );
        assert_eq!(
            turn_prefix_prompt(&p, "x"),
            format!("<conversation>\nx\n</conversation>\n\n{}", p.turn_prefix)
        );
        assert!(branch_prompt(&p, "x", Some("only this"), true).ends_with("\n\nonly this"));
        assert!(
            branch_prompt(&p, "x", Some("focus"), false).ends_with("\n\nAdditional focus: focus")
        );
        assert_eq!(
            merge_split_turn("H", "P"),
            "H\n\n---\n\n**Turn Context (split turn):**\n\nP"
        );
    }
}
