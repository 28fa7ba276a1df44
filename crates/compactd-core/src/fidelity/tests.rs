//! Anchors from conversations and previous summaries, and the gate's decisions and repairs.

use super::anchors::{Anchor, AnchorKind};
use crate::transcript::Shape;

/// The anchors of an agent's prompt.
fn of_prompt(prompt: &str) -> Vec<Anchor> {
    super::anchors::of_shape(&Shape::of_prompt(prompt), 4096)
}
use super::gate::{Expectation, Unusable, append_missing, check, repair_prompt, unusable};
use crate::prompts::Prompts;
use crate::transcript::prompt::history_prompt;

const CONVERSATION: &str = "[User]: Fix the crash in `parse_header`. Do not change the public API.\n\n\
[Assistant]: Looking.\n\n\
[Assistant tool calls]: read(path=\"src/parse.rs\"); bash(command=\"cargo test parse\")\n\n\
[Tool result]: pub fn parse_header() {}\n\n\
[Tool result]: error[E0308]: mismatched types\nCommand exited with code 101\n\n\
[Assistant]: I'll use a bounds check.\n\n\
[Assistant tool calls]: edit(path=\"src/parse.rs\", oldText=\"a\", newText=\"b\"); write(path=\"tests/header.rs\", content=\"x\")\n\n\
[Tool result]: ok\n\n\
[Tool result]: ok\n\n\
[User]: Now also update the docs in README.md, and always run clippy before you finish.";

const PREVIOUS: &str = "## Goal\nShip 1.0\n\n## Constraints & Preferences\n- Keep MSRV 1.75\n\n\
## Progress\n### Done\n- [x] CI\n### In Progress\n- [ ] Migrate the config loader to TOML\n\n\
## Next Steps\n1. Write the changelog\n2. Tag the release\n\n## Critical Context\n- (none)";

fn of(anchors: &[Anchor], kind: AnchorKind) -> Vec<&str> {
    anchors
        .iter()
        .filter(|a| a.kind == kind)
        .map(|a| a.text.as_str())
        .collect()
}

#[test]
fn anchors_come_from_the_conversation_and_the_previous_summary() {
    let prompt = history_prompt(&Prompts::builtin(), CONVERSATION, Some(PREVIOUS), None);
    let anchors = of_prompt(&prompt);
    assert_eq!(
        of(&anchors, AnchorKind::LatestRequest),
        ["Now also update the docs in README.md, and always run clippy before you finish."]
    );
    assert_eq!(
        of(&anchors, AnchorKind::ModifiedFile),
        ["src/parse.rs", "tests/header.rs"]
    );
    assert_eq!(
        of(&anchors, AnchorKind::OpenWork),
        [
            "Migrate the config loader to TOML",
            "Write the changelog",
            "Tag the release"
        ]
    );
    assert_eq!(
        of(&anchors, AnchorKind::Constraint),
        // The latest request states a standing rule in its second clause: that clause is a rule.
        [
            "Keep MSRV 1.75",
            "Do not change the public API.",
            "always run clippy before you finish."
        ]
    );
    assert_eq!(
        of(&anchors, AnchorKind::FailedCommand),
        ["cargo test parse"]
    );
    // Errors count as unresolved in the last quarter of the span; this one was fixed after.
    assert_eq!(
        of(&anchors, AnchorKind::UnresolvedError),
        Vec::<&str>::new()
    );
    let failing = format!(
        "{CONVERSATION}\n\n[Assistant tool calls]: bash(command=\"cargo clippy\")\n\n[Tool result]: error: unused import: `std::fs`\nCommand exited with code 101"
    );
    let anchors = of_prompt(&history_prompt(&Prompts::builtin(), &failing, None, None));
    assert_eq!(
        of(&anchors, AnchorKind::UnresolvedError),
        [
            "error: unused import: `std::fs`",
            "Command exited with code 101"
        ]
    );
    assert_eq!(
        of(&anchors, AnchorKind::FailedCommand),
        ["cargo test parse", "cargo clippy"]
    );
    assert_eq!(
        of(&anchors, AnchorKind::ReadFile),
        Vec::<&str>::new(),
        "read, then modified"
    );
    assert_eq!(of(&anchors, AnchorKind::Identifier), ["parse_header"]);
}

#[test]
fn open_work_done_since_and_todo_lists_are_told_apart() {
    let conversation = "[User]: go on\n\n\
        [Assistant]: I've migrated the config loader to TOML.\n\n\
        [Assistant tool calls]: todo_write(todos=[{\"content\": \"Bump the version\", \"status\": \"in_progress\"}, {\"content\": \"Run the benches\", \"status\": \"completed\"}])";
    let prompt = history_prompt(&Prompts::builtin(), conversation, Some(PREVIOUS), None);
    assert_eq!(
        of(&of_prompt(&prompt), AnchorKind::OpenWork),
        ["Write the changelog", "Tag the release", "Bump the version"]
    );
    let checklist = "[User]: plan it\n\n[Assistant]: Plan:\n- [x] read the code\n- [ ] write the parser\n- [ ] add tests";
    let prompt = history_prompt(&Prompts::builtin(), checklist, None, None);
    assert_eq!(
        of(&of_prompt(&prompt), AnchorKind::OpenWork),
        ["write the parser", "add tests"]
    );
}

#[test]
fn answers_that_are_no_summary_are_told_from_summaries() {
    let prompt = history_prompt(&Prompts::builtin(), CONVERSATION, None, None);
    let expect = Expectation::of(&Shape::of_prompt(&prompt));
    for (answer, why) in [
        ("", Unusable::Nothing),
        (" \u{200B}\n\u{FEFF} ", Unusable::Nothing),
        ("(none)", Unusable::Nothing),
        ("I'm sorry, but I can't help with that.", Unusable::Refusal),
        (
            "The user fixed a crash and updated docs.",
            Unusable::NoStructure,
        ),
    ] {
        assert_eq!(unusable(answer, &expect), Some(why), "{answer:?}");
    }
    for answer in [
        "## Goal\nFix it\n\n## Progress\n- done",
        "**Goal**: fix it\n**Next Steps**: docs",
        "Goal:\nfix it\n\nCritical Context:\n- x",
    ] {
        assert_eq!(unusable(answer, &expect), None, "{answer:?}");
    }
    // A short summary asks for no structure.
    let short = crate::transcript::prompt::short_summary_prompt(
        &Prompts::builtin(),
        "[User]: a",
        "## Goal\nG",
    );
    assert_eq!(
        unusable(
            "I fixed the parser.",
            &Expectation::of(&Shape::of_prompt(&short))
        ),
        None
    );
}

#[test]
fn what_is_missing_is_appended_where_it_belongs_and_then_kept() {
    let summary = "## Goal\nShip 1.0\n\n## Constraints & Preferences\n- (none)\n\n## Next Steps\n1. Write the changelog\n\n## Critical Context\n- (none)\n\n<read-files>\nsrc/a.rs\n</read-files>\n\n<modified-files>\nsrc/b.rs\n</modified-files>";
    let missing = [
        Anchor::new(AnchorKind::LatestRequest, "Update the docs in README.md"),
        Anchor::new(AnchorKind::Constraint, "Never push to main"),
        Anchor::new(AnchorKind::OpenWork, "Tag the release"),
        Anchor::new(AnchorKind::ModifiedFile, "src/parse.rs"),
        Anchor::pinned("Deploy only from `release`."),
        Anchor::new(AnchorKind::ReadFile, "docs/guide.md"),
    ];
    let refs: Vec<&Anchor> = missing.iter().collect();
    let repaired = append_missing(summary, &refs);
    assert_eq!(
        repaired,
        "## Goal\nShip 1.0\n\n## Constraints & Preferences\n- Never push to main\n\n\
         ## Next Steps\n1. Write the changelog\n- Tag the release\n\n\
         ## Critical Context\n- Latest user request (verbatim): Update the docs in README.md\n\n\
         ## Pinned\n- Deploy only from `release`.\n\n\
         <read-files>\nsrc/a.rs\ndocs/guide.md\n</read-files>\n\n<modified-files>\nsrc/b.rs\nsrc/parse.rs\n</modified-files>"
    );
    let kept = check(&repaired, &missing);
    assert_eq!(kept, [true; 6]);
    // Sections that do not exist are created; a summary without file lists gets a line.
    let bare = append_missing("Fixed it.", &refs[..4]);
    assert!(
        bare.starts_with("Fixed it.\n\n## Critical Context\n- Latest user request"),
        "{bare}"
    );
    assert!(bare.contains("- Files modified: src/parse.rs"), "{bare}");
    assert!(bare.contains("## Next Steps\n- Tag the release"), "{bare}");
    assert_eq!(check(&bare, &missing[..4]), [true, true, true, true]);
}

#[test]
fn a_rule_is_kept_only_in_the_constraints_section_where_the_next_compaction_reads_it() {
    let rule = Anchor::new(AnchorKind::Constraint, "Use British spelling in docs.");
    // Claude Code's own layout: the rule under the user's requests, no Constraints section.
    let elsewhere = "1. Primary Request and Intent:\n   - Use British spelling in docs.\n\n2. Pending Tasks:\n   - none";
    assert_eq!(check(elsewhere, std::slice::from_ref(&rule)), [false]);
    let repaired = append_missing(elsewhere, &[&rule]);
    assert!(
        repaired.ends_with("## Constraints & Preferences\n- Use British spelling in docs."),
        "{repaired}"
    );
    assert_eq!(check(&repaired, std::slice::from_ref(&rule)), [true]);
    // In the model's words, in its constraints section: kept.
    let worded = "## Constraints & Preferences\n- Docs use British spelling.\n\n## Next Steps\n- x";
    assert_eq!(check(worded, &[rule]), [true]);
}

#[test]
fn the_repair_prompt_quotes_the_answer_and_lists_what_it_left_out() {
    let missing = Anchor::new(AnchorKind::ModifiedFile, "src/parse.rs");
    let prompt = repair_prompt("## Goal\nx", &[&missing]);
    assert!(prompt.starts_with("<summary>\n## Goal\nx\n</summary>\n\n"));
    assert!(prompt.contains("- a file that was modified: src/parse.rs\n"));
}

#[test]
fn an_earlier_summary_in_a_user_turn_is_not_the_users_words() {
    let conversation = "[User]: The conversation history before this point was compacted into the following summary:\n\n<summary>\n## Goal\nold goal\n</summary>\n\n[User]: fix the tokenizer in src/lex.rs please\n\n[Assistant]: done";
    let shape = Shape::of_prompt(&history_prompt(
        &Prompts::builtin(),
        conversation,
        None,
        None,
    ));
    let facts = super::facts::Facts::extract(&shape.conversation.messages);
    assert_eq!(facts.requests, ["fix the tokenizer in src/lex.rs please"]);
    assert!(
        facts.ledger.iter().all(|i| !i.contains("compacted")),
        "{:?}",
        facts.ledger
    );
}

/// Blocked holds each open error once, as a sentence saying where it happened: an agent's
/// markup around it taken off, a traceback as its exception, never a header line.
#[test]
fn errors_are_said_with_where_they_happened_without_their_markup() {
    use crate::extractive::summarize;
    use crate::summary::SummaryRequest;
    use serde_json::json;
    let conversation = crate::transcript::structured::from_anthropic(&[
        json!({"role": "user", "content": "Fix the parser."}),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "Bash",
            "input": {"command": "python -m pytest tests/test_parse.py"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": true,
            "content": "Traceback (most recent call last):\n  File \"tests/test_parse.py\", line 3, in <module>\n    import parse\nModuleNotFoundError: No module named 'parse'"}]}),
        json!({"role": "assistant", "content": [{"type": "tool_use", "id": "b", "name": "Edit",
            "input": {"file_path": "src/parse.py", "old_string": "a", "new_string": "b"}}]}),
        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "b", "is_error": true,
            "content": "<tool_use_error>String to replace not found in file.</tool_use_error>"}]}),
    ]);
    let prompt = format!(
        "<conversation>\n{}\n</conversation>\n\n{}",
        conversation.write(),
        Prompts::builtin().summary
    );
    let request = SummaryRequest::rendered(String::new(), prompt, 4096, conversation);
    let facts = request.facts();
    let errors: Vec<&str> = facts.errors.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(
        errors,
        [
            "ModuleNotFoundError: No module named 'parse'",
            "String to replace not found in file."
        ]
    );
    assert_eq!(
        facts.error_sentence(errors[0]),
        "`python -m pytest tests/test_parse.py` failed: ModuleNotFoundError: No module named 'parse'"
    );
    let text = summarize(&request).text;
    let blocked = text.split("### Blocked").nth(1).unwrap();
    let blocked = blocked.split("\n## ").next().unwrap();
    assert!(
        blocked.contains("`Edit` failed: String to replace not found in file."),
        "{text}"
    );
    for raw in ["<tool_use_error>", "Traceback (most recent call last)"] {
        assert!(!text.contains(raw), "{raw}: {text}");
    }
}

/// Done holds work that was done and Key Decisions what was decided: narration ("I have a clear
/// picture") and code run into a sentence are neither.
#[test]
fn narration_and_code_are_neither_work_done_nor_decisions() {
    use crate::transcript::{Message, Role};
    let said = "I have a clear picture of the module now. I've fixed the off-by-one in src/parse.rs. \
        Instead of a loop: print \"a\\n\";foreach $k (keys %ENV) { print \"$k\\n\"; }. \
        I'll use a BTreeMap instead of a HashMap for stable output.";
    let facts = super::facts::Facts::extract(&[Message::with_text(Role::Assistant, said)]);
    assert_eq!(
        facts.completed.items,
        ["I've fixed the off-by-one in src/parse.rs"]
    );
    assert_eq!(
        facts.decisions.items,
        ["I'll use a BTreeMap instead of a HashMap for stable output."]
    );
}

/// A harness that sends what each command printed as the next user turn (mini-swe-agent 1.x):
/// the task stays the request, the commands in the answers' fenced blocks are calls, their
/// output (even a bare final diff) is no request.
#[test]
fn a_harnesss_observations_are_results_of_the_commands_it_ran() {
    use crate::transcript::{Message, Role};
    let task = "Please solve this issue: division by zero in tests/missing_colon.py";
    let messages = [
        Message::with_text(Role::User, task),
        Message::with_text(
            Role::Assistant,
            "THOUGHT: fix the colon.\n\n```bash\nsed -i 's/float$/float:/' tests/missing_colon.py\n```",
        ),
        Message::with_text(
            Role::User,
            "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\n  File \"x\", line 1\nZeroDivisionError: division by zero\n</output>",
        ),
        Message::with_text(Role::Assistant, "Done.\n\n```bash\ngit diff\n```"),
        Message::with_text(
            Role::User,
            "diff --git a/tests/missing_colon.py b/tests/missing_colon.py\n+def division(a, b) -> float:",
        ),
    ];
    let facts = super::facts::Facts::extract(&messages);
    assert_eq!(facts.latest_request(), Some(task));
    assert_eq!(facts.modified.items, ["tests/missing_colon.py"]);
    let errors: Vec<&str> = facts.errors.iter().map(|(_, e)| e.as_str()).collect();
    assert_eq!(errors, ["ZeroDivisionError: division by zero"]);
    // A person's reply after an answer that ends in code is still theirs.
    let conversation = [
        Message::with_text(Role::User, "show me the fix"),
        Message::with_text(Role::Assistant, "Here:\n\n```rust\nlet x = 1;\n```"),
        Message::with_text(Role::User, "thanks, now run the tests"),
    ];
    let facts = super::facts::Facts::extract(&conversation);
    assert_eq!(facts.latest_request(), Some("thanks, now run the tests"));
}
