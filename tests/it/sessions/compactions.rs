//! Compacting stored sessions against real storage (PostgreSQL and SQLite), with a fake upstream
//! for the model: the appended entry, failures that change nothing, races between requests and
//! replicas, branch summaries, and files pi re-migrates.

use std::sync::Arc;
use std::time::Duration;

use compactd_core::prompts::Prompts;
use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fixture;
use crate::sessions::api::{json, upload, v3_session};
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

on_both_backends!(
    compaction_appends_a_pi_shaped_entry_from_parallel_calls,
    a_failed_summarization_changes_nothing,
    concurrent_compactions_of_one_leaf_make_one_entry,
    replicas_racing_for_one_leaf_agree_on_one_entry,
    nothing_to_compact_is_a_409,
);

async fn compaction_appends_a_pi_shaped_entry_from_parallel_calls(store: Arc<dyn Store>) {
    // Each call is answered `ANSWER` after it arrives: in sequence, the second call could not
    // be sent before the first one's answer.
    const ANSWER: Duration = Duration::from_millis(1200);
    let fake =
        FakeProvider::start(vec![], Reply::openai("## Goal\nSUMMARY PART").after(ANSWER)).await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    let view = upload(&app, fixture("large-session.jsonl")).await;
    let id = view["id"].as_str().unwrap();
    let old_leaf = view["leafId"].as_str().unwrap().to_owned();
    let plan = json(app.plan(id, "").await).await["plan"].clone();
    assert_eq!(plan["isSplitTurn"], true);

    let response = app.compact_session(id, &json!({})).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = json(response).await;
    the_calls_ran_in_parallel(&fake.received(), &body, &plan, ANSWER);
    the_entry_is_in_pis_shape(&body["entry"], &plan, &old_leaf);
    the_summary_holds_what_the_gate_appended(&body);
    it_is_stored_as_the_leaf(&app, id, &body).await;
}

/// The history and the split turn's prefix were summarized at once, each as pi's prompts say, then
/// repaired once each (the answer keeps no anchor).
fn the_calls_ran_in_parallel(
    received: &[crate::support::fake_provider::Received],
    body: &Value,
    plan: &Value,
    answer: Duration,
) {
    // The two summaries, then a repair request for each (the answer keeps no anchor).
    assert_eq!(received.len(), 4);
    assert_eq!(body["summarizerCalls"], 4);
    // The second call arrived before the first was answered: not a speed limit (a slow machine
    // only narrows the margin), the order that a sequence of calls cannot have.
    let gap = received[1].at.duration_since(received[0].at);
    assert!(
        gap < answer,
        "history and prefix ran in parallel: {gap:?} apart"
    );
    let prompts = Prompts::builtin();
    let prompt_of = |r: &crate::support::fake_provider::Received| {
        r.body["messages"][1]["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (history, prefix): (Vec<_>, Vec<_>) = received
        .iter()
        .map(prompt_of)
        .partition(|p| p.ends_with(&prompts.summary));
    assert_eq!(history.len(), 1);
    assert!(prefix[0].ends_with(&prompts.turn_prefix));
    assert_eq!(
        history[0],
        format!(
            "<conversation>\n{}\n</conversation>\n\n{}",
            plan["conversation"].as_str().unwrap(),
            prompts.summary
        )
    );
    let max_tokens: Vec<u64> = received
        .iter()
        .map(|r| r.body["max_tokens"].as_u64().unwrap())
        .collect();
    assert!(
        max_tokens.contains(&13_107) && max_tokens.contains(&8_192),
        "{max_tokens:?}"
    );
}

/// The entry is pi's, key for key: its id, parent, cut, tokens and file lists.
fn the_entry_is_in_pis_shape(entry: &Value, plan: &Value, old_leaf: &str) {
    let keys: Vec<&str> = entry
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
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
            "fromHook"
        ]
    );
    assert_eq!(entry["type"], "compaction");
    let entry_id = entry["id"].as_str().unwrap();
    assert!(
        entry_id.len() == 8 && entry_id.bytes().all(|b| b.is_ascii_hexdigit()),
        "{entry_id}"
    );
    assert_eq!(entry["parentId"], old_leaf);
    assert!(entry["timestamp"].as_str().unwrap().ends_with('Z'));
    assert_eq!(entry["firstKeptEntryId"], plan["firstKeptEntryId"]);
    assert_eq!(entry["tokensBefore"], 177_657);
    assert_eq!(entry["fromHook"], false);
    assert_eq!(
        entry["details"],
        json!({"readFiles": plan["readFiles"], "modifiedFiles": plan["modifiedFiles"]})
    );
}

/// Each part as the model wrote it, with what it left out appended by the fidelity gate; the
/// usage of the four calls; the gate's report.
fn the_summary_holds_what_the_gate_appended(body: &Value) {
    let entry = &body["entry"];
    let summary = entry["summary"].as_str().unwrap();
    // Each part as the model wrote it, with what it left out appended by the fidelity gate: the
    // user's earlier messages under its Goal, the latest request in Critical Context.
    assert!(
        summary.starts_with("## Goal\nSUMMARY PART\n- "),
        "{summary}"
    );
    assert!(
        summary.contains(
            "\n- i removed them all good\n\n## Critical Context\n- Latest user request (verbatim): "
        ),
        "{summary}"
    );
    assert!(
        summary.contains("\n\n---\n\n**Turn Context (split turn):**\n\n## Goal\nSUMMARY PART\n\n"),
        "{summary}"
    );
    assert!(
        summary.contains("\n\n<read-files>\nAGENTS.md\n"),
        "{summary}"
    );
    assert!(summary.ends_with("~/.pi/agent/themes/nord.json\n</modified-files>"));
    assert_eq!(
        body["line"].as_str().unwrap(),
        serde_json::to_string(entry).unwrap()
    );
    // Four calls of 120 + 7 tokens.
    assert_eq!(
        body["usage"],
        json!({"inputTokens": 480, "outputTokens": 28})
    );
    // The gate's report: the model kept nothing critical; one repair call each; the rest
    // appended, and what the summary still does not hold is listed as forgotten.
    let fidelity = &body["fidelity"];
    assert_eq!(fidelity["repairCall"], true);
    assert!(fidelity["appended"].as_u64().unwrap() >= 1, "{fidelity}");
    assert_eq!(body["forgotten"], fidelity["missing"]);
    assert!(
        body["forgotten"].as_array().unwrap().iter().all(|m| ![
            "latest_request",
            "modified_file",
            "open_work",
            "constraint",
            "pinned"
        ]
        .contains(&m["kind"].as_str().unwrap())),
        "critical anchors are never forgotten: {}",
        body["forgotten"]
    );
}

/// Stored: the entry is the new leaf, the context starts with its summary, the history lists it,
/// and there is nothing more to compact.
async fn it_is_stored_as_the_leaf(app: &TestApp, id: &str, body: &Value) {
    let entry_id = body["entry"]["id"].as_str().unwrap();
    let stored = app.entries(id).await.text().await.unwrap();
    assert_eq!(
        stored.lines().last().unwrap(),
        body["line"].as_str().unwrap()
    );
    let shown = json(app.session(id).await).await;
    assert_eq!(shown["leafId"], entry_id);
    assert_eq!(shown["entryCount"], 1019);
    let context = json(app.context(id).await).await;
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 182);
    assert!(
        messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>\n## Goal\nSUMMARY PART")
    );
    let history = json(app.compactions(id).await).await;
    let made = &history["compactions"][0];
    assert_eq!(
        (made["source"].as_str(), made["model"].as_str()),
        (Some("compactd"), Some("openai:gpt-test"))
    );
    assert!(made["tokensSaved"].as_i64().unwrap() > 100_000, "{made}");
    assert_eq!(
        made["fidelity"], body["fidelity"],
        "stored with the compaction"
    );
    assert_eq!(made["forgotten"], body["forgotten"]);
    // The leaf is now a compaction: nothing more to compact.
    let again = app.compact_session(id, &json!({})).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(json(again).await["error"]["code"], "already_compacted");
}

async fn a_failed_summarization_changes_nothing(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    let view = upload(&app, v3_session(20, 400)).await;
    let id = view["id"].as_str().unwrap();
    let before = app.entries(id).await.text().await.unwrap();
    let response = app
        .compact_session(id, &json!({"keepRecentTokens": 500}))
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        json(response).await["error"]["code"],
        "upstream_unavailable"
    );
    assert_eq!(app.entries(id).await.text().await.unwrap(), before);
    assert!(store.compactions(id).await.unwrap().is_empty());
    assert_eq!(json(app.session(id).await).await, view_without_extras(view));
}

fn view_without_extras(mut view: Value) -> Value {
    let object = view.as_object_mut().unwrap();
    object.remove("skippedLines");
    object.remove("repairedLines");
    view
}

async fn concurrent_compactions_of_one_leaf_make_one_entry(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai("## Goal\nonce").after(Duration::from_millis(300)),
    )
    .await;
    let app = Arc::new(TestApp::handlers_with_store(
        chain_config(&fake, "openai:gpt-test", false),
        store.clone(),
    ));
    let view = upload(&app, v3_session(20, 400)).await;
    let id = view["id"].as_str().unwrap().to_owned();
    let leaf = view["leafId"].as_str().unwrap().to_owned();
    let requests = (0..3).map(|i| {
        let (app, id, leaf) = (app.clone(), id.clone(), leaf.clone());
        // One without leafId, two naming the same leaf.
        let body = if i == 0 {
            json!({"keepRecentTokens": 500})
        } else {
            json!({"keepRecentTokens": 500, "leafId": leaf})
        };
        tokio::spawn(async move {
            let response = app.compact_session(&id, &body).await;
            (response.status(), response.json::<Value>().await.unwrap())
        })
    });
    let results: Vec<(StatusCode, Value)> = futures_util::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let created: Vec<_> = results
        .iter()
        .filter(|(s, _)| *s == StatusCode::CREATED)
        .collect();
    assert_eq!(created.len(), 1, "{results:?}");
    let entry_id = &created[0].1["entry"]["id"];
    for (status, body) in &results {
        assert!(
            matches!(*status, StatusCode::CREATED | StatusCode::OK),
            "{status} {body}"
        );
        assert_eq!(&body["entry"]["id"], entry_id);
    }
    let calls = created[0].1["summarizerCalls"].as_u64().unwrap() as usize;
    assert_eq!(
        fake.received().len(),
        calls,
        "the calls of one compaction, no more"
    );
    one_compaction_stored(&app, &*store, &id).await;
}

/// Two replicas (each with its own leaf locks) on one database compact the same leaf at once:
/// both summarize, one append wins, and the other answers with the winner's entry.
async fn replicas_racing_for_one_leaf_agree_on_one_entry(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(
        vec![],
        Reply::openai("## Goal\nraced").after(Duration::from_millis(300)),
    )
    .await;
    let config = chain_config(&fake, "openai:gpt-test", false);
    let replicas = [
        Arc::new(TestApp::handlers_with_store(config.clone(), store.clone())),
        Arc::new(TestApp::handlers_with_store(config, store.clone())),
    ];
    let view = upload(&replicas[0], v3_session(20, 400)).await;
    let id = view["id"].as_str().unwrap().to_owned();
    let requests = replicas.iter().map(|app| {
        let (app, id) = (app.clone(), id.clone());
        tokio::spawn(async move {
            let response = app
                .compact_session(&id, &json!({"keepRecentTokens": 500}))
                .await;
            (response.status(), response.json::<Value>().await.unwrap())
        })
    });
    let mut results: Vec<(StatusCode, Value)> = futures_util::future::join_all(requests)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    results.sort_by_key(|(status, _)| std::cmp::Reverse(*status));
    assert_eq!(
        results.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        [StatusCode::CREATED, StatusCode::OK],
        "{results:?}"
    );
    assert_eq!(results[0].1["entry"]["id"], results[1].1["entry"]["id"]);
    assert_eq!(results[1].1["created"], false);
    // Both summarized (neither saw the other's entry before appending): the loser's append was
    // refused and it answered with the winner's entry.
    let calls = results[0].1["summarizerCalls"].as_u64().unwrap() as usize;
    assert_eq!(fake.received().len(), 2 * calls);
    one_compaction_stored(&replicas[1], &*store, &id).await;
}

/// The session `id` holds one compaction, in the store's records and in its entries.
async fn one_compaction_stored(app: &TestApp, store: &dyn Store, id: &str) {
    assert_eq!(store.compactions(id).await.unwrap().len(), 1);
    let stored = app.entries(id).await.text().await.unwrap();
    assert_eq!(stored.matches(r#""type":"compaction""#).count(), 1);
}

async fn nothing_to_compact_is_a_409(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai("unused")).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let view = upload(&app, v3_session(2, 10)).await;
    let id = view["id"].as_str().unwrap();
    // No body at all: every field has a default.
    let response = app
        .send(
            app.client
                .post(format!("{}/v1/sessions/{id}/compactions", app.url)),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let body = json(response).await;
    assert_eq!(body["error"]["code"], "nothing_to_compact");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("keepRecentTokens")
    );
    assert!(
        fake.received().is_empty(),
        "no summarizer call for an empty conversation"
    );
    for (body, param) in [
        (json!({"leafId": "nope"}), "leafId"),
        (json!({"keepRecentTokens": -5}), "keepRecentTokens"),
        (json!({"bogus": 1}), "bogus"),
    ] {
        let response = app.compact_session(id, &body).await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}"
        );
        let error = json(response).await;
        assert!(
            error["error"]["param"]
                .as_str()
                .unwrap_or_default()
                .contains(param)
                || error["error"]["message"].as_str().unwrap().contains(param),
            "{error}"
        );
    }
    assert_eq!(
        app.post("/v1/sessions/missing/compactions", &json!({}))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}
