//! The extractive summarizer on the real sessions of `tests/fixtures`: the prompt compactd would
//! send for their planned compaction, summarized without any model.

use compactd::summarizer::SummaryRequest;
use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_core::extractive::summarize;
use compactd_core::prompts::Prompts;
use compactd_core::session::{ParseOptions, Session};
use compactd_core::transcript::prompt::history_prompt;

use crate::fixture;

const SECTIONS: [&str; 9] = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
];

/// Texts of the parts with `marker` in a serialized conversation.
fn parts<'a>(conversation: &'a str, marker: &str) -> Vec<&'a str> {
    let mut found = Vec::new();
    let mut rest = conversation;
    while let Some(start) = rest.find(marker) {
        let after = &rest[start + marker.len()..];
        let end = after.find("\n\n[").unwrap_or(after.len());
        found.push(&after[..end]);
        rest = &after[end..];
    }
    found
}

#[test]
fn extractive_summaries_of_the_fixtures_keep_paths_requests_and_errors() {
    let prompts = Prompts::builtin();
    for name in ["large-session.jsonl", "before-compaction.jsonl"] {
        let session = Session::parse(&fixture(name), ParseOptions::default()).unwrap();
        let path = session.active_path(None).unwrap();
        let plan = PlanOutcome::for_path(&path, &CompactionSettings::default())
            .plan
            .unwrap();
        let prompt = history_prompt(
            &prompts,
            &plan.conversation,
            plan.previous_summary.as_deref(),
            None,
        );
        let summary = summarize(&SummaryRequest::from_prompt(
            prompts.system.clone(),
            prompt,
            13_107,
        ));
        let text = &summary.text;
        assert!(text.len() <= 13_107 * 4, "{name}: within the output budget");

        let mut at = 0;
        for heading in SECTIONS {
            let found = text[at..]
                .find(&format!("{heading}\n"))
                .unwrap_or_else(|| panic!("{name}: no {heading}"));
            at += found;
        }
        for file in plan.read_files.iter().chain(&plan.modified_files) {
            assert!(
                text.contains(&format!("`{file}`")),
                "{name}: file {file} missing"
            );
        }
        let latest = parts(&plan.conversation, "[User]: ")
            .into_iter()
            .rfind(|p| !p.starts_with("Ran `"))
            .unwrap();
        let latest_line = latest
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap()
            .trim();
        assert!(
            text.contains(latest_line),
            "{name}: latest request {latest_line:?} missing"
        );
        let last_error = parts(&plan.conversation, "[Tool result]: ")
            .iter()
            .flat_map(|p| p.lines())
            .map(str::trim)
            .rfind(|l| {
                // Error messages as compilers, npm and shells print them.
                ["Error", "error", "npm error", "Command exited with code"]
                    .iter()
                    .any(|p| l.starts_with(p))
                    || l.contains(": error TS")
                    || l.contains("error[E")
            })
            .unwrap_or_else(|| panic!("{name} has an error message in a tool result"));
        assert!(
            text.contains(last_error),
            "{name}: error {last_error:?} missing"
        );
        if let Some(previous) = &plan.previous_summary {
            // The first line of the previous summary's goal survives the merge.
            let goal = previous
                .split("## Goal\n")
                .nth(1)
                .and_then(|g| g.lines().next())
                .unwrap();
            assert!(
                text.contains(goal.trim()),
                "{name}: previous goal {goal:?} lost"
            );
        }
        assert_eq!(summary.model, "extractive");
        assert!(summary.usage.input_tokens > 10_000 && summary.usage.output_tokens > 100);
    }
}
