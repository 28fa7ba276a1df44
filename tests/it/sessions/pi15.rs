//! pi 1.5's planner: compactd plans sessions pi ≥ 1.5 wrote as pi 1.5.2 does — checked against
//! the published samples (`tests/fixtures/pi15/`, pi 1.5.2's plans in `expected.jsonl`) and, on
//! generated sessions holding every 1.5 type (system messages with sections and tools, context
//! edits omitting and replacing, custom messages, branch summaries, compactions with a system
//! message and usage, bash executions, images, thinking, all-zero usage), against the pinned pi itself (1.6.0; 1.5.2 before)
//! run as an oracle (`scripts/pi15/oracle.mjs`; `scripts/agents.sh install` puts pi in place).
//! Older files keep pi 0.x's planner: the conformance tests of `src/compaction/tests/` run
//! unchanged.

use std::path::Path;

use compactd_core::compaction::pi15::Planner;
use compactd_core::compaction::plan::PlanOutcome;
use compactd_core::compaction::tokens::CompactionSettings;
use compactd_core::session::{ParseOptions, Session};
use serde_json::{Value, json};

use compactd_testkit::agents_bin;

const SETTINGS: [u64; 2] = [2000, 20000];

fn plan(text: &str, keep: u64) -> Value {
    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    assert_eq!(Planner::of_entries(path.iter().copied()), Planner::Pi15);
    let settings = CompactionSettings {
        keep_recent_tokens: keep,
        reserve_tokens: 16384,
        ..Default::default()
    };
    serde_json::to_value(PlanOutcome::for_path(&path, &settings)).unwrap()["plan"].clone()
}

/// The fields pi's plan and compactd's share.
fn comparable(plan: &Value) -> Value {
    if plan.is_null() {
        return Value::Null;
    }
    json!({
        "firstKeptEntryId": plan["firstKeptEntryId"], "isSplitTurn": plan["isSplitTurn"],
        "tokensBefore": plan["tokensBefore"], "messagesToSummarize": plan["messagesToSummarize"],
        "turnPrefixMessages": plan["turnPrefixMessages"], "readFiles": plan["readFiles"],
        "modifiedFiles": plan["modifiedFiles"], "firstKeptPathIndex": plan["firstKeptPathIndex"],
        "hasPreviousSummary": plan.get("hasPreviousSummary").cloned()
            .unwrap_or_else(|| json!(!plan["previousSummary"].is_null())),
    })
}

#[test]
fn the_published_pi15_samples_plan_as_pi_1_5_2_planned_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi15");
    let expected = std::fs::read_to_string(dir.join("expected.jsonl")).unwrap();
    let mut checked = 0;
    for line in expected.lines() {
        let expected: Value = serde_json::from_str(line).unwrap();
        let text =
            std::fs::read_to_string(dir.join(expected["session"].as_str().unwrap())).unwrap();
        let keep = expected["keepRecentTokens"].as_u64().unwrap();
        let ours = plan(&text, keep);
        assert_eq!(
            comparable(&ours),
            comparable(&expected["plan"]),
            "{line:.120}"
        );
        if !ours.is_null() {
            assert_eq!(ours["planner"], "pi-1.5");
            // pi's estimate of every message entry.
            let tokens: serde_json::Map<String, Value> =
                ours["entryTokens"].as_object().unwrap().clone();
            assert_eq!(Value::Object(tokens), expected["entryTokens"]);
        }
        checked += 1;
    }
    assert_eq!(checked, 6);
}

/// compactd's context of a session file, as `/context` answers it.
fn our_context(text: &str) -> Value {
    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    let view = compactd::app::compaction::plans::ContextView::of_path(&path);
    let model = view
        .model
        .map(|m| json!({"provider": m.provider, "modelId": m.model_id}))
        .unwrap_or(Value::Null);
    json!({"messages": view.messages, "thinkingLevel": view.thinking_level, "model": model})
}

/// The pinned pi's own plans of `file`, one per setting.
fn oracle(file: &Path) -> Vec<Value> {
    let keeps = SETTINGS.map(|k| k.to_string()).join(",");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pi15/oracle.mjs");
    let out = std::process::Command::new(agents_bin().join("node22"))
        .arg(script)
        .arg(file)
        .arg(keeps)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

#[test]
fn generated_pi15_sessions_plan_as_the_pinned_pi_does() {
    compactd_testkit::needs!(Agents);
    let dir = std::env::temp_dir().join(format!("compactd-pi15-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut checked, mut planned, mut split) = (0, 0, 0);
    for seed in 0..40u64 {
        let text = crate::support::pi15_sessions::generate(seed);
        let file = dir.join(format!("g{seed}.jsonl"));
        std::fs::write(&file, &text).unwrap();
        for (keep, want) in SETTINGS.iter().zip(oracle(&file)) {
            let ours = plan(&text, *keep);
            let want_plan = &want["plan"];
            assert_eq!(
                comparable(&ours),
                comparable(want_plan),
                "seed {seed} k={keep}"
            );
            if !ours.is_null() {
                planned += 1;
                split += usize::from(ours["isSplitTurn"] == true);
                assert_eq!(
                    ours["conversation"], want_plan["conversation"],
                    "seed {seed} k={keep}"
                );
                assert_eq!(
                    ours["turnPrefixConversation"], want_plan["turnPrefixConversation"],
                    "seed {seed} k={keep}"
                );
                let tokens = ours["entryTokens"].as_object().unwrap().clone();
                assert_eq!(Value::Object(tokens), want["entryTokens"], "seed {seed}");
            }
            // The context the pinned pi builds for the model, as compactd's /context gives it.
            assert_eq!(our_context(&text), want["context"], "seed {seed}");
            checked += 1;
        }
    }
    assert_eq!(checked, 80);
    // The sessions make plans of every kind, not only "nothing to do".
    assert!(
        planned >= 30 && split >= 10,
        "{planned} plans, {split} split turns"
    );
}

#[tokio::test]
async fn the_file_decides_the_planner_unless_the_request_names_one() {
    let app = crate::support::TestApp::spawn(crate::support::config()).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let pi15 = std::fs::read(dir.join("pi15/s0000.jsonl")).unwrap();
    let older = std::fs::read(dir.join("before-compaction.jsonl")).unwrap();
    let plan = |body: Vec<u8>, query: &'static str| {
        let app = &app;
        async move {
            let response = app
                .post_typed(
                    &format!("/v1/plan?keepRecentTokens=2000{query}"),
                    "application/x-ndjson",
                    body,
                )
                .await;
            assert_eq!(response.status(), reqwest::StatusCode::OK);
            response.json::<Value>().await.unwrap()["plan"].clone()
        }
    };
    let automatic = plan(pi15.clone(), "").await;
    assert_eq!(automatic["planner"], "pi-1.5");
    assert_eq!(automatic["firstKeptEntryId"], "d054414d", "pi 1.5.2's cut");
    let forced = plan(pi15, "&planner=pi-0.x").await;
    assert_eq!(forced["planner"], "pi-0.x");
    assert_ne!(forced["firstKeptEntryId"], automatic["firstKeptEntryId"]);
    assert_eq!(plan(older.clone(), "").await["planner"], "pi-0.x");
    assert_eq!(plan(older, "&planner=pi-1.5").await["planner"], "pi-1.5");
}

on_both_backends!(a_pi15_session_is_compacted_as_pi_1_5_writes_it_and_pi_reads_it_back);

/// A pi 1.5 session compacted through the API: pi 1.5.2's cut, its prompts, an entry in pi 1.5's
/// shape (`usage`, `systemMessage`), and the pinned pi itself rebuilds the context from it.
async fn a_pi15_session_is_compacted_as_pi_1_5_writes_it_and_pi_reads_it_back(
    store: std::sync::Arc<dyn compactd_store::Store>,
) {
    compactd_testkit::needs!(Agents);
    use crate::support::{FakeProvider, Reply, TestApp, chain_config};
    let model = FakeProvider::start(
        vec![],
        Reply::openai("## Goal\nSUMMARY OF THE PI 1.5 SESSION"),
    )
    .await;
    let app = TestApp::with_store(chain_config(&model, "openai:gpt-test", true), store).await;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi15");
    let uploaded: Value = app
        .post_typed(
            "/v1/sessions",
            "application/x-ndjson",
            std::fs::read(dir.join("s0001.jsonl")).unwrap(),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap();
    let compacted = app
        .compact_session(id, &json!({"keepRecentTokens": 2000}))
        .await;
    assert_eq!(compacted.status(), reqwest::StatusCode::CREATED);
    let compacted: Value = compacted.json().await.unwrap();
    let entry = &compacted["entry"];
    // pi 1.5.2's plan of this file (expected.jsonl): its cut and its tokensBefore.
    assert_eq!(entry["firstKeptEntryId"], "947f2330");
    assert_eq!(entry["tokensBefore"], 75750);
    let line = compacted["line"].as_str().unwrap();
    let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Value>>(line)
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        keys,
        [
            "type",
            "id",
            "parentId",
            "timestamp",
            "summary",
            "firstKeptEntryId",
            "tokensBefore",
            "details",
            "usage",
            "fromHook",
            "systemMessage"
        ]
    );
    assert_eq!(entry["systemMessage"]["role"], "system");
    assert!(entry["usage"]["totalTokens"].as_u64().unwrap() > 0);
    // pi 1.5's prompts: the update prompt with the previous summary, the turn prefix in its form.
    let prompts: Vec<String> = model
        .received()
        .iter()
        .map(|r| {
            r.body["messages"][1]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert!(prompts.iter().any(|p| p.starts_with("<conversation>\n")
        && p.contains("<previous-summary>\n")
        && p.contains("The messages above are NEW conversation messages")));
    assert!(
        prompts
            .iter()
            .any(|p| p.starts_with("# Conversation\n") && p.contains("\n\n# Instructions\n"))
    );

    // The pinned pi reads the session back with compactd's entry on it.
    let file = std::env::temp_dir().join(format!(
        "compactd-pi15-back-{}-{id}.jsonl",
        std::process::id()
    ));
    let text = app.entries(id).await.text().await.unwrap();
    let read = pi_reads_back(&file, &text);
    assert_eq!(read["leafType"], "compaction");
    assert_eq!(read["leafId"], entry["id"]);
    assert_eq!(
        read["summary"], entry["summary"],
        "pi carries compactd's summary"
    );
    assert_eq!(
        read["roles"][0], "system",
        "then the system message the entry carries"
    );
    assert_eq!(read["roles"][1], "compactionSummary");
    assert_eq!(read["plan"], Value::Null, "pi sees nothing left to compact");
    // compactd's /context is the context the pinned pi rebuilds.
    let ours: Value = app.context(id).await.json().await.unwrap();
    assert_eq!(ours["messages"], read["context"]["messages"]);
    assert_eq!(ours["thinkingLevel"], read["context"]["thinkingLevel"]);
}

/// What the pinned pi (1.6.0) makes of the session file `text`, written at `file`:
/// `scripts/pi15/read-back.mjs`'s answer (leaf, header, rebuilt context, plan).
pub fn pi_reads_back(file: &Path, text: &str) -> Value {
    std::fs::write(file, text).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pi15/read-back.mjs");
    let out = std::process::Command::new(agents_bin().join("node22"))
        .arg(script)
        .arg(file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}
