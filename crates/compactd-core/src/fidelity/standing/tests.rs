use super::*;

#[test]
fn rules_in_varied_phrasing_are_recognized() {
    for rule in [
        "Never call unwrap() in library code.",
        "No new crate dependencies unless I approve them.",
        "Use British spelling in docs.",
        "Run cargo fmt and clippy before you say a task is done.",
        "From now on, answer in short paragraphs.",
        "I prefer small commits with imperative messages.",
        "Don't touch the generated files under src/gen/.",
        "Every public function must have a doc comment.",
        "Always add a test for each bug you fix.",
    ] {
        assert_eq!(classify(rule), Some(Statement::Rule), "{rule}");
    }
}

#[test]
fn a_rule_scoped_by_a_lead_is_a_rule() {
    for rule in [
        "One rule for all billing work: never write a card number or a CVC to any log line, not even masked.",
        "A rule for all payments code: always round half to even.",
        "For all billing work, never write a card number to any log line.",
        "Rule for the billing module: card numbers must never reach a log.",
        "Important: never push to main without a review.",
        "Across the codebase, use tracing instead of println.",
        "'Before running `pnpm test`, run `pnpm install` from the worktree root first'",
    ] {
        assert_eq!(classify(rule), Some(Statement::Rule), "{rule}");
    }
    for request in [
        "For this fix, use the helper here.",
        "In the billing module, the invoice total is wrong.",
        "Rule of thumb for this one: it is fine.",
        "For all I know, the test is flaky.",
    ] {
        assert_eq!(classify(request), None, "{request}");
    }
}

#[test]
fn one_off_requests_are_not_rules() {
    for request in [
        "Use the new helper here.",
        "Now make sure the migration runs on both stores before you call it done.",
        "Can you run the tests?",
        "Fix the failing test in src/parse.rs.",
        "Don't do that.",
        "Keep going.",
        "➜  pi-mono git:(main) ✗ echo $TERM. Always. Never! ✗",
        "No, the other file.",
        "I must have forgotten to save it.",
    ] {
        assert_eq!(classify(request), None, "{request}");
    }
}

#[test]
fn a_withdrawal_lifts_the_rule_it_shares_a_topic_with() {
    let lifted = "You can use unwrap in tests now.";
    assert_eq!(classify(lifted), Some(Statement::Withdrawal));
    assert!(withdraws(lifted, "Never call unwrap() in library code."));
    assert!(!withdraws(lifted, "Use British spelling in docs."));
    assert!(
        !withdraws(lifted, "write the tests first"),
        "tests is the scope, not the topic"
    );
}

#[test]
fn the_items_of_a_rules_list_and_of_a_pasted_agents_md_are_rules() {
    let turn = "Ground rules for this job:\n- keep functions short\n- write tests first\n\nNow fix the parser.";
    let rules: Vec<&str> = of_turn(turn).into_iter().map(|(_, s)| s).collect();
    assert_eq!(rules, ["keep functions short", "write tests first"]);
    let pasted = "Here is our AGENTS.md:\n# Project\nA parser.\n## Style\n- Prefer iterators to index loops\n- Error types live in src/error.rs";
    let rules: Vec<&str> = of_turn(pasted).into_iter().map(|(_, s)| s).collect();
    assert_eq!(rules, ["Prefer iterators to index loops"]);
}

#[test]
fn the_rules_files_agents_paste_are_read_and_their_own_reminders_are_not() {
    // Claude Code 2.1.330 puts CLAUDE.md in a reminder of the first user message, beside
    // its own instructions ("you MUST follow them", "You should not respond to this
    // context") and an attribution reminder naming CLAUDE.md; Codex 0.169.0 sends AGENTS.md
    // as a user message of its own.
    let claude = "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\nCodebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written.\n\nContents of /home/dev/repo/CLAUDE.md (project instructions, checked into the codebase):\n\n# Project\nA calculator.\n\n## Rules\n- Never call unwrap() in library code.\n- Keep SQL in the store module.\n- Run cargo fmt before committing.\n\nUse British spelling in docs.\n# currentDate\nToday's date is 2026-11-25.\n\n      IMPORTANT: this context may or may not be relevant to your tasks. You should not respond to this context unless it is highly relevant to your task.\n</system-reminder>\n<system-reminder>\nAttribution for git commits and pull requests you create from here on (this replaces Claude Code's own earlier attribution guidance, such as a previous copy of this reminder; the user's own instructions about these lines, such as a CLAUDE.md or memory rule, take precedence over this reminder, but do not add attribution lines this reminder leaves out):\n- End git commit messages with:\nCo-Authored-By: Claude Opus 5.5 <noreply@anthropic.com>\n- End pull request descriptions with:\n🤖 Generated with [Claude Code](https://claude.com/claude-code)\n</system-reminder>\nWhat does calc.py do?";
    let codex = "# AGENTS.md instructions for /home/dev/repo\n\n<INSTRUCTIONS>\n# Repository guidelines\n\n- Never call unwrap() in library code.\n- Keep SQL in the store module.\n- Tests live next to the code they test.\n\nUse British spelling in docs.\n</INSTRUCTIONS>";
    let rules = |text| -> Vec<&str> { of_turn(text).into_iter().map(|(_, s)| s).collect() };
    // The same files in a system turn: only the file is read, not the agent's own prompt.
    let system = "You are opencode. NEVER commit changes unless the user explicitly asks you to. If you find the command, suggest writing it to AGENTS.md.\nInstructions from: /home/dev/repo/AGENTS.md\n# Repository guidelines\n\n- Never call unwrap() in library code.\n- Keep SQL in the store module.\n";
    let pasted = |text| -> Vec<&str> { of_pasted_file(text).into_iter().map(|(_, s)| s).collect() };
    assert_eq!(pasted(claude), rules(claude));
    assert_eq!(pasted(codex), rules(codex));
    assert_eq!(
        pasted(system),
        [
            "Never call unwrap() in library code.",
            "Keep SQL in the store module."
        ]
    );
    assert!(
        pasted("Always be concise. NEVER commit unless asked. Read AGENTS.md first.").is_empty()
    );
    assert_eq!(
        rules(claude),
        [
            "Never call unwrap() in library code.",
            "Keep SQL in the store module.",
            "Run cargo fmt before committing.",
            "Use British spelling in docs."
        ]
    );
    assert_eq!(
        rules(codex),
        [
            "Never call unwrap() in library code.",
            "Keep SQL in the store module.",
            "Use British spelling in docs."
        ]
    );
}
