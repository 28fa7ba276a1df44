//! Standing instructions survive every compaction (issue 28): a session whose first stretch
//! states ten rules in varied phrasing (prose, a rules list, a preference) and two one-off
//! requests worded like rules, then five stretches of ordinary work, one of which withdraws a
//! rule, is compacted six times in a chain — as an uploaded session (both stores) and through
//! `/v1/compact` and the chat wire with each request carrying the previous summary (the gateway's
//! agents: `standing_gateway.rs`) — once with the extractive
//! summarizer and once behind a model that writes a plausible summary without any rule.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, Reply, TestApp, chain_config};

on_both_backends!(
    rules_survive_six_session_compactions_with_the_extractive_summarizer,
    rules_survive_six_session_compactions_behind_a_lossy_model
);

/// The rules of the first stretch, as the user wrote them (the first is withdrawn later).
const RULES: [&str; 10] = [
    "Never call unwrap() in library code.",
    "No new crate dependencies unless I approve them.",
    "Use British spelling in docs.",
    "Run cargo fmt and clippy before you say a task is done.",
    "I prefer small commits with imperative messages.",
    "Don't touch the generated files under src/gen/.",
    "From now on, put every new setting in .env.example too.",
    "Every public function must have a doc comment.",
    "keep SQL in the store module",
    "write the tests first",
];
const WITHDRAWAL: &str = "You can use unwrap in tests now.";
const ONE_OFF: [&str; 2] = [
    "Use the new helper here.",
    "Now make sure the parser handles tabs before you call it done.",
];

/// What a forgetful model writes: the asked structure, no rule.
pub const LOSSY: &str = "## Goal\nKeep improving the project.\n\n## Progress\n### Done\n- Several modules were refactored.\n\n## Next Steps\n1. Continue with the next module.";

/// The user turns of stretch `round` (0: the rules; 3: the withdrawal; else ordinary work).
pub fn user_turns(round: usize) -> Vec<String> {
    let work = |i: usize| {
        format!(
            "Round {round}, step {i}: refactor the module m{round}_{i} and report what changed. {}",
            "The module has grown over the years and needs splitting. ".repeat(4)
        )
    };
    match round {
        0 => vec![
            format!("Let's clean up the crate. {} {}", RULES[0], RULES[1]),
            format!("{} {}", RULES[2], RULES[3]),
            format!("{} {}", RULES[4], ONE_OFF[0]),
            format!("{} Also: {}", RULES[5], RULES[6]),
            format!(
                "{}\n\nGround rules for the whole job:\n- {}\n- {}",
                RULES[7], RULES[8], RULES[9]
            ),
            ONE_OFF[1].to_owned(),
            work(6),
            work(7),
        ],
        3 => vec![
            work(0),
            format!("{WITHDRAWAL} {}", work(1)),
            work(2),
            work(3),
        ],
        _ => (0..4).map(work).collect(),
    }
}

/// pi v3 entries for stretch `round` after `parent`, and the last id.
fn stretch(round: usize, parent: Option<&str>) -> (String, String) {
    let mut lines = String::new();
    let mut parent = parent.map(str::to_owned);
    for (i, text) in user_turns(round).into_iter().enumerate() {
        for (j, message) in [
            json!({"role": "user", "content": text, "timestamp": 1}),
            json!({"role": "assistant", "content": [{"type": "text", "text": format!("Done with step {i} of round {round}. {}", "I split the module and ran the tests. ".repeat(6))}],
                   "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2}),
        ]
        .into_iter()
        .enumerate()
        {
            let id = format!("r{round}s{i}m{j}");
            lines.push_str(&json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-01-01T00:00:01.000Z", "message": message}).to_string());
            lines.push('\n');
            parent = Some(id);
        }
    }
    (lines, parent.unwrap())
}

/// The body of a summary's `## Constraints & Preferences` section.
fn constraints_of(summary: &str) -> &str {
    let start = summary
        .find("## Constraints & Preferences\n")
        .unwrap_or_else(|| panic!("no constraints section:\n{summary}"));
    let body = &summary[start + "## Constraints & Preferences\n".len()..];
    &body[..body.find("\n## ").unwrap_or(body.len())]
}

/// Every rule but the withdrawn one is in the last summary's constraints, verbatim, with the
/// withdrawal instead of the rule it lifted; no one-off request became a rule.
pub fn assert_rules_carried(summary: &str) {
    let constraints = constraints_of(summary);
    for rule in &RULES[1..] {
        assert!(constraints.contains(rule), "lost {rule:?}:\n{summary}");
    }
    assert!(constraints.contains(WITHDRAWAL), "{summary}");
    // (The extractive Goal quotes the user's first request, which stated it, as written.)
    assert!(
        !constraints.contains(RULES[0]),
        "the withdrawn rule is kept:\n{summary}"
    );
    for request in ONE_OFF {
        assert!(
            !constraints.contains(request),
            "{request:?} became a rule:\n{summary}"
        );
    }
}

async fn six_session_compactions(app: &TestApp) -> String {
    let header = json!({"type": "session", "version": 3, "id": "rules", "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/w"});
    let (first, _) = stretch(0, None);
    let uploaded = app.upload(format!("{header}\n{first}")).await;
    assert_eq!(uploaded.status(), StatusCode::CREATED);
    let id = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut summary = String::new();
    for round in 1..=6 {
        let compacted = app
            .compact_session(&id, &json!({"keepRecentTokens": 200}))
            .await;
        assert_eq!(compacted.status(), StatusCode::CREATED, "round {round}");
        let compacted: Value = compacted.json().await.unwrap();
        summary = compacted["entry"]["summary"].as_str().unwrap().to_owned();
        // The fidelity report lists the rules the summary carries.
        let rules: Vec<&str> = compacted["fidelity"]["rules"]
            .as_array()
            .unwrap_or_else(|| panic!("round {round}: {}", compacted["fidelity"]))
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(rules.contains(&RULES[1]), "round {round}: {rules:?}");
        if round < 6 {
            let leaf = compacted["entry"]["id"].as_str().unwrap();
            let (more, _) = stretch(round, Some(leaf));
            let appended = app.append(&id, more).await;
            assert_eq!(appended.status(), StatusCode::OK, "round {round}");
        }
    }
    summary
}

async fn rules_survive_six_session_compactions_with_the_extractive_summarizer(
    store: Arc<dyn Store>,
) {
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "extractive", false), store);
    assert_rules_carried(&six_session_compactions(&app).await);
    assert!(fake.received().is_empty());
}

async fn rules_survive_six_session_compactions_behind_a_lossy_model(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let summary = six_session_compactions(&app).await;
    assert_rules_carried(&summary);
    // The model wrote the summary (the gate added the rules to it); it was asked to repair.
    assert!(
        summary.starts_with("## Goal\nKeep improving the project."),
        "{summary}"
    );
    let repairs = fake
        .received()
        .iter()
        .filter(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap()
                .starts_with("<summary>")
        })
        .count();
    assert!(repairs >= 6, "{repairs} repair calls");
}

/// The conversation of stretch `round` as pi serializes it for its summary prompt.
fn serialized(round: usize) -> String {
    user_turns(round)
        .iter()
        .enumerate()
        .map(|(i, text)| {
            format!(
                "[User]: {text}\n\n[Assistant]: Done with step {i} of round {round}. {}",
                "I split the module and ran the tests. ".repeat(6)
            )
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Where a pi-family agent sends its summary request.
#[derive(Clone, Copy)]
enum Wire {
    /// `compaction.remoteEndpoint`: `{systemPrompt, prompt}`, answered `{summary}`.
    RemoteEndpoint,
    /// A remote endpoint ending in `/chat/completions`: an OpenAI chat body, the agent's
    /// provider key as Bearer.
    Chat,
}

/// Six requests on `wire`, each carrying the previous answer as its `<previous-summary>`, as
/// oh-my-pi sends it.
async fn six_wire_compactions(app: &TestApp, wire: Wire) -> String {
    let prompts = compactd_core::prompts::Prompts::builtin();
    let mut previous: Option<String> = None;
    for round in 0..6 {
        let prompt = compactd_core::transcript::prompt::history_prompt(
            &prompts,
            &serialized(round),
            previous.as_deref(),
            None,
        );
        let response = match wire {
            Wire::RemoteEndpoint => {
                app.compact(&json!({"systemPrompt": prompts.system, "prompt": prompt}))
                    .await
            }
            Wire::Chat => {
                app.send(
                    app.client
                        .post(format!("{}/v1/chat/completions", app.url))
                        .bearer_auth("sk-the-agents-own-provider-key")
                        .json(&json!({"model": "m", "stream": false, "messages": [
                            {"role": "system", "content": prompts.system},
                            {"role": "user", "content": prompt},
                        ]})),
                )
                .await
            }
        };
        assert_eq!(response.status(), StatusCode::OK, "round {round}");
        let body: Value = response.json().await.unwrap();
        let summary = match wire {
            Wire::RemoteEndpoint => &body["summary"],
            Wire::Chat => &body["choices"][0]["message"]["content"],
        };
        previous = Some(summary.as_str().unwrap().to_owned());
    }
    previous.unwrap()
}

#[tokio::test]
async fn rules_survive_six_wire_compactions_with_the_extractive_summarizer() {
    for wire in [Wire::RemoteEndpoint, Wire::Chat] {
        let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
        let app = TestApp::handlers(chain_config(&fake, "extractive", false)).await;
        assert_rules_carried(&six_wire_compactions(&app, wire).await);
    }
}

#[tokio::test]
async fn rules_survive_six_wire_compactions_behind_a_lossy_model() {
    for wire in [Wire::RemoteEndpoint, Wire::Chat] {
        let fake = FakeProvider::start(vec![], Reply::openai(LOSSY)).await;
        let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", false)).await;
        let summary = six_wire_compactions(&app, wire).await;
        assert_rules_carried(&summary);
        assert!(
            summary.starts_with("## Goal\nKeep improving the project."),
            "{summary}"
        );
    }
}
