//! The built-in extractive summarizer: deterministic, no network, no key.
//!
//! It works on the request's typed conversation (read once from whatever dialect the agent
//! wrote, see [`crate::transcript`]) and writes a summary in the format the instructions ask for from what
//! it can extract verbatim ([`crate::fidelity::facts`]): nothing is paraphrased, so paths, identifiers, commands
//! and errors survive exactly. A previous summary in the prompt is merged section by section
//! ([`render`]).

mod checkpoint;
mod render;
mod template;

use crate::fidelity::{Anchor, Weight, anchors, gate, ledger};

use crate::js_json::utf16_len;
use crate::summary::{Summary, SummaryRequest, TokenUsage};
use crate::transcript::prompt::Asks;

/// Characters per token, as the reference heuristic counts.
const CHARS_PER_TOKEN: u64 = 4;

/// Summarizes `request.prompt`, within `request.max_tokens` (estimated at 4 characters a token).
pub fn summarize(request: &SummaryRequest) -> Summary {
    let shape = request.shape();
    let previous_summary = shape.earlier_summary();
    let facts = request.facts();
    let budget = (request.max_tokens.max(64) * CHARS_PER_TOKEN) as usize;
    let text = match shape.asks {
        Asks::Checkpoint { critical_context } => {
            let anchors = anchors::of_facts(facts, previous_summary, request.max_tokens);
            let room = budget.saturating_sub(critical_size(&anchors, budget));
            let ledger = ledger::room(request.max_tokens);
            let text = checkpoint::checkpoint(
                facts,
                previous_summary,
                critical_context,
                room,
                ledger,
                anchors::latest_whole_chars(request.max_tokens),
            );
            let text = keep_anchors(text, &anchors, budget);
            // The caller's own template (OpenCode's), when it asks for other headings than pi's.
            match template::requested(&shape.instructions) {
                Some(headings) => template::retitle(&text, &headings),
                None => text,
            }
        }
        Asks::TurnPrefix => {
            let anchors = anchors::of_facts(facts, None, request.max_tokens);
            let room = budget.saturating_sub(critical_size(&anchors, budget));
            keep_anchors(render::turn_prefix(facts, room), &anchors, budget)
        }
        Asks::Short => render::short(facts, previous_summary),
    };
    let estimate = |s: &str| (utf16_len(s) as u64).div_ceil(CHARS_PER_TOKEN);
    Summary {
        usage: TokenUsage::new(
            estimate(&request.system_prompt) + estimate(&request.prompt),
            estimate(&text),
        ),
        text,
        model: "extractive".to_owned(),
        fidelity: None,
        flags: Default::default(),
    }
}

/// Characters the critical anchors take when appended: the room the rendered summary leaves them
/// (all of it when they need more; they are never dropped).
fn critical_size(anchors: &[Anchor], budget: usize) -> usize {
    anchors
        .iter()
        .filter(|a| a.weight() == Weight::Critical)
        .map(|a| a.text.chars().count() + 8)
        .sum::<usize>()
        .min(budget)
}

/// The rendered summary with every anchor of the text it does not hold yet, placed as the
/// fidelity gate places them, so that the extractive summary passes the gate by construction:
/// every critical anchor, and the important ones while the summary stays within `budget`.
fn keep_anchors(text: String, anchors: &[Anchor], budget: usize) -> String {
    let kept = gate::check(&text, anchors);
    let (critical, important): (Vec<&Anchor>, Vec<&Anchor>) = anchors
        .iter()
        .zip(kept)
        .filter(|(_, kept)| !kept)
        .map(|(a, _)| a)
        .partition(|a| a.weight() == Weight::Critical);
    let mut text = if critical.is_empty() {
        text
    } else {
        gate::append_missing(&text, &critical)
    };
    for anchor in important {
        let longer = gate::append_missing(&text, &[anchor]);
        if longer.chars().count() > budget {
            break;
        }
        text = longer;
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(prompt: &str, max_tokens: u64) -> String {
        summarize(&SummaryRequest::from_prompt(
            String::new(),
            prompt.to_owned(),
            max_tokens,
        ))
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
            text.contains("- I decided to use `u32` instead of `usize` for the offset."),
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

    /// Instructions that ask for no Critical Context (Claude Code's, say) still get the earlier
    /// summary's: its changed files and errors are the part of the work it stands for.
    #[test]
    fn a_previous_summarys_critical_context_is_carried_whatever_the_instructions_ask() {
        let previous = "## Goal\nShip v2\n\n## Critical Context\n- Files modified: src/early.rs, docs/plan.md\n- Error: E0308 in src/early.rs";
        let prompt = format!(
            "<conversation>\n{CONVERSATION}\n</conversation>\n\n<previous-summary>\n{previous}\n</previous-summary>\n\nUpdate the summary: ## Goal, ## Progress, ## Next Steps"
        );
        let text = run(&prompt, 4000);
        assert!(text.contains("src/early.rs, docs/plan.md"), "{text}");
        assert!(text.contains("E0308 in src/early.rs"), "{text}");
        let without = format!(
            "<conversation>\n{CONVERSATION}\n</conversation>\n\nSummarize: ## Goal, ## Progress, ## Next Steps"
        );
        assert!(
            !run(&without, 4000).contains("## Critical Context"),
            "none asked, none carried"
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
        // A plain sentence: the file by name, no markup.
        assert!(
            short_text.contains("I changed src/parse.rs."),
            "{short_text}"
        );
        assert!(!short_text.contains(['`', '<', '#']), "{short_text}");
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
