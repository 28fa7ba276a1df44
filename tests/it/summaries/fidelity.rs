//! Summaries compactd can vouch for: a lossy model's summary repaired (one repair call, then
//! compactd's own append) and reported; a prompt ten times a model's window folded; anchors read
//! alike from every dialect oh-my-pi writes (pins: `pins.rs`).

use std::collections::BTreeSet;

use compactd_core::fidelity::Anchor;
use compactd_core::fidelity::gate::check;
use compactd_core::fidelity::{AnchorKind, Weight};
use compactd_core::transcript::estimate_tokens;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::summaries::dialects::{oracle, recorded};
use crate::support::{FakeProvider, Reply, TestApp, chain_config, metric_sample};

/// The anchors of an agent's prompt, read as compactd reads one.
fn of_prompt(prompt: &str) -> Vec<Anchor> {
    compactd_core::fidelity::anchors::of_shape(
        &compactd_core::transcript::Shape::of_prompt(prompt),
        16_384,
    )
}

/// What a forgetful model writes: the asked structure, none of the facts.
pub const LOSSY: &str = "## Goal\nWork on the project.\n\n## Progress\n### Done\n- Some changes were made.\n\n## Next Steps\n1. Continue.";

#[tokio::test]
async fn a_lossy_summary_is_repaired_with_one_call_and_reported() {
    // The exact body oh-my-pi posted for the Claude-dialect history summary of a real session.
    let sample = recorded("before.jsonl")
        .into_iter()
        .find(|r| r.model == "claude-sonnet-4-5" && r.call == "history")
        .unwrap();
    let anchors = of_prompt(sample.prompt());
    let (modified, latest) = oracle(sample.prompt());
    let request = anchors
        .iter()
        .find(|a| a.kind == AnchorKind::LatestRequest)
        .unwrap();
    assert!(latest.starts_with(&request.text[..40]), "{latest}");
    let critical: Vec<_> = anchors
        .iter()
        .filter(|a| a.weight() == Weight::Critical)
        .collect();
    assert!(critical.len() > 10, "{critical:?}");
    // The repair answer restores the latest request only; compactd appends the rest.
    let repaired_answer = format!("{LOSSY}\n\n## Critical Context\n- {}", request.text);
    let fake = FakeProvider::start(
        vec![Reply::openai(LOSSY), Reply::openai(&repaired_answer)],
        Reply::openai(LOSSY),
    )
    .await;
    let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app.compact(&sample.request).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let summary = body["summary"].as_str().unwrap();

    // Every critical anchor is in the summary returned, the modified files by their paths.
    let kept = check(summary, &anchors);
    for (anchor, kept) in anchors.iter().zip(&kept) {
        if anchor.weight() == Weight::Critical {
            assert!(kept, "lost {anchor:?}");
        }
    }
    for path in &modified {
        assert!(summary.contains(path.as_str()), "{path}");
    }
    assert!(
        summary.contains(&format!("## Critical Context\n- {}\n", request.text)),
        "the repaired answer is taken: {summary}"
    );

    // One repair call, listing what the first answer left out.
    let received = fake.received();
    assert_eq!(
        received.len(),
        2,
        "the summary and one repair call, no more"
    );
    let repair = received[1].body["messages"][1]["content"].as_str().unwrap();
    assert!(repair.starts_with(&format!("<summary>\n{LOSSY}\n</summary>")));
    assert!(repair.contains(&request.text));
    assert!(modified.iter().all(|p| repair.contains(p.as_str())));

    // The report: nothing critical kept at first, the request repaired, the rest appended.
    let fidelity = &body["fidelity"];
    assert_eq!(fidelity["anchors"], anchors.len());
    assert_eq!(fidelity["repairCall"], true);
    // Repaired: every critical anchor (and important ones the added text happens to hold); all
    // by compactd's append but the request, which the repair call restored.
    let repaired = fidelity["repaired"].as_u64().unwrap();
    assert!(repaired >= critical.len() as u64, "{fidelity}");
    assert_eq!(fidelity["appended"].as_u64(), Some(repaired - 1));
    assert_eq!(
        fidelity["kept"].as_u64().unwrap()
            + repaired
            + fidelity["missing"].as_array().unwrap().len() as u64,
        anchors.len() as u64
    );
    assert!(
        fidelity["missing"].as_array().unwrap().iter().all(|m| ![
            "latest_request",
            "modified_file",
            "open_work",
            "constraint"
        ]
        .contains(&m["kind"].as_str().unwrap())),
        "{fidelity}"
    );
    // Both usages are counted, and the metrics say what happened to each kind.
    assert_eq!(body["usage"]["inputTokens"], 240);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    let sample_of =
        |labels: &str| metric_sample(&metrics, &format!("compactd_anchors_total{{{labels}}}"));
    assert_eq!(
        sample_of(r#"kind="latest_request",outcome="repaired""#),
        1.0
    );
    // Every modified file the anchors name (pi's edits, and the shell's `rm`, `mv`, `sed -i`).
    let modified_anchors = anchors
        .iter()
        .filter(|a| a.kind == AnchorKind::ModifiedFile)
        .count();
    assert!(modified_anchors >= modified.len());
    assert_eq!(
        sample_of(r#"kind="modified_file",outcome="appended""#),
        modified_anchors as f64
    );
    assert_eq!(metric_sample(&metrics, "compactd_repair_calls_total"), 1.0);
}

#[tokio::test]
async fn no_repair_call_when_the_model_kept_everything_critical() {
    let sample = recorded("large.jsonl")
        .into_iter()
        .find(|r| r.model == "qwen3-coder" && r.call == "history")
        .unwrap();
    // A summary that holds every critical anchor: the extractive one, passed through a model.
    let complete =
        compactd_core::extractive::summarize(&compactd::summarizer::SummaryRequest::from_prompt(
            String::new(),
            sample.prompt().to_owned(),
            13_107,
        ))
        .text;
    let fake = FakeProvider::start(vec![], Reply::openai(&complete)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", false)).await;
    let body: Value = app.compact(&sample.request).await.json().await.unwrap();
    assert_eq!(body["summary"], complete, "passed through untouched");
    assert_eq!(body["fidelity"]["repairCall"], false);
    assert_eq!(body["fidelity"]["kept"], body["fidelity"]["anchors"]);
    assert_eq!(fake.received().len(), 1);
}

/// A pi-format conversation of `turns` turns: the first edits `src/first.rs` under a constraint,
/// the last asks for the release notes.
fn long_conversation(turns: usize) -> String {
    let mut parts = vec![
        "[User]: Refactor the parser. Never change the public API.".to_owned(),
        "[Assistant tool calls]: edit(path=\"src/first.rs\", oldText=\"a\", newText=\"b\")"
            .to_owned(),
        "[Tool result]: Successfully replaced text in src/first.rs.".to_owned(),
    ];
    for i in 0..turns {
        parts.push(format!(
            "[User]: step {i}: {}",
            "keep going with the refactor ".repeat(12)
        ));
        parts.push(format!(
            "[Assistant]: done with step {i}. {}",
            "checked the output ".repeat(12)
        ));
    }
    parts.push("[User]: Now write the release notes for 2.0 in CHANGELOG.md".to_owned());
    parts.join("\n\n")
}

#[tokio::test]
async fn a_prompt_ten_times_the_window_is_folded_and_keeps_both_ends() {
    let prompts = compactd_core::prompts::Prompts::builtin();
    let prompt = compactd_core::transcript::prompt::history_prompt(
        &prompts,
        &long_conversation(260),
        None,
        None,
    );
    let window = 4096;
    assert!(
        estimate_tokens(&prompt) > 10 * window,
        "{}",
        estimate_tokens(&prompt)
    );
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(
        &fake,
        &format!("openai:small@{window}"),
        false,
    ))
    .await;
    let response = app
        .compact(&json!({"systemPrompt": prompts.system, "prompt": prompt}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let summary = body["summary"].as_str().unwrap();
    let received = fake.received();
    let windows = received
        .iter()
        .filter(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .starts_with("<conversation>")
        })
        .count();
    assert!(windows >= 10, "{windows} windows");
    // Every upstream request fits the window: system prompt, prompt and output cap.
    for request in &received {
        let messages = request.body["messages"].as_array().unwrap();
        let tokens: u64 = messages
            .iter()
            .map(|m| estimate_tokens(m["content"].as_str().unwrap()))
            .sum::<u64>()
            + request.body["max_tokens"].as_u64().unwrap();
        assert!(tokens <= window, "a request of {tokens} tokens");
    }
    // Anchors of the first window and of the last are in the summary.
    for anchor in [
        "src/first.rs",
        "Never change the public API",
        "Now write the release notes for 2.0 in CHANGELOG.md",
    ] {
        assert!(summary.contains(anchor), "{anchor} lost:\n{summary}");
    }
}

/// The commands of the bash calls in a Claude-dialect prompt, as written.
fn bash_commands(prompt: &str) -> Vec<String> {
    let needle = "<invoke name=\"bash\"><parameter name=\"command\">";
    prompt
        .split(needle)
        .skip(1)
        .filter_map(|rest| rest.split("</parameter>").next())
        .map(|command| serde_json::from_str(command).unwrap_or_else(|_| command.to_owned()))
        .collect()
}

#[test]
fn every_dialect_gives_the_same_critical_anchors() {
    for file in ["before.jsonl", "large.jsonl"] {
        let histories: Vec<_> = recorded(file)
            .into_iter()
            .filter(|r| r.call == "history")
            .collect();
        assert_eq!(histories.len(), 5, "{file}: five dialects");
        let claude = histories
            .iter()
            .find(|r| r.model == "claude-sonnet-4-5")
            .unwrap();
        let (modified, latest) = oracle(claude.prompt());
        let commands = bash_commands(claude.prompt());
        let claude_files: BTreeSet<String> = of_prompt(claude.prompt())
            .into_iter()
            .filter(|a| a.kind == AnchorKind::ModifiedFile)
            .map(|a| a.text)
            .collect();
        for sample in &histories {
            let anchors = of_prompt(sample.prompt());
            let of = |kind: AnchorKind| -> BTreeSet<String> {
                anchors
                    .iter()
                    .filter(|a| a.kind == kind)
                    .map(|a| a.text.clone())
                    .collect()
            };
            let request = of(AnchorKind::LatestRequest);
            assert_eq!(request.len(), 1, "{file} {}", sample.model);
            let request = request.into_iter().next().unwrap();
            assert!(
                latest.starts_with(request.trim_end_matches('…')),
                "{file} {}: {request:?} is not the latest request {latest:?}",
                sample.model
            );
            // The most recent 40 files modified, as the oracle finds them.
            let files = of(AnchorKind::ModifiedFile);
            // pi's edits (the oracle), and files its shell commands changed: each such file is
            // named in one of the conversation's commands.
            let in_a_command = |path: &String| {
                let name = path.rsplit('/').next().unwrap_or(path);
                commands.iter().any(|c| c.contains(name))
            };
            let extra: Vec<&String> = files.difference(&modified).collect();
            assert!(
                !files.is_empty() && extra.iter().all(|p| in_a_command(p)),
                "{file} {}: {extra:?}",
                sample.model
            );
            let kept = compactd_core::fidelity::anchors::MODIFIED_FILES_KEPT;
            assert!(
                files.len() == kept || modified.is_subset(&files),
                "{file} {}: the most recent {kept}, or every file pi edited",
                sample.model
            );
            assert_eq!(files, claude_files, "{file} {}", sample.model);
            assert_eq!(
                (of(AnchorKind::Constraint), of(AnchorKind::OpenWork)),
                {
                    let first = of_prompt(claude.prompt());
                    let of_first = |kind: AnchorKind| -> BTreeSet<String> {
                        first
                            .iter()
                            .filter(|a| a.kind == kind)
                            .map(|a| a.text.clone())
                            .collect()
                    };
                    (
                        of_first(AnchorKind::Constraint),
                        of_first(AnchorKind::OpenWork),
                    )
                },
                "{file} {}: the same constraints and open work as the Claude dialect",
                sample.model
            );
        }
    }
}

/// "Verbatim" is the whole request: a multi-paragraph list of what to do next survives a model
/// that forgets it, every item of it, not its first line.
#[tokio::test]
async fn the_whole_latest_request_survives_a_forgetful_model() {
    let request = "Please explore the following next:\n\n1. how the lexer handles tabs in src/lexer.rs\n2. whether the parser recovers after a missing semicolon\n\nThen write up what you found in NOTES.md.";
    let prompt = format!(
        "<conversation>\n[User]: fix the parser in src/parser.rs\n\n[Assistant]: done\n\n[User]: {request}\n</conversation>\n\n## Critical Context"
    );
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", false)).await;
    let response = app
        .compact(&json!({"systemPrompt": "You summarize.", "prompt": prompt}))
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let summary = body["summary"].as_str().unwrap();
    for line in request.lines().filter(|l| !l.trim().is_empty()) {
        assert!(summary.contains(line), "{line:?} lost:\n{summary}");
    }
}
