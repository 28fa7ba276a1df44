//! Zero-wait for stored pi sessions (issue 67): appended turn by turn, as the pi extension
//! appends them, a session past the share of its window has its history summarized in the
//! background on one replica; its compaction, arriving at another replica on the same store, is
//! answered from that summary without a model call, under pi 0.x's planner and pi 1.5's. A
//! compaction of another leaf (a rewind) or with a focus takes the normal path.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fixture;
use crate::gateway::prepare::{prepared_outcome, settled};
use crate::sessions::api::json;
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

on_both_backends!(
    a_stored_sessions_compaction_is_answered_on_another_replica_from_the_summary_prepared_as_it_grew,
    a_rewind_or_a_focus_takes_the_normal_path,
    a_script_appending_entries_spends_nothing_ahead,
    a_session_idle_past_half_the_share_is_prepared_and_answered_from_it,
    a_compaction_during_the_preparation_waits_for_it,
);

/// What compactd's model writes, whatever it is asked.
const WRITTEN: &str = "## Goal\nPREPARED: carry on with the session's work.";

/// Turns appended one by one after the upload.
const APPENDED: usize = 6;

/// The two planners' sessions, pi 0.x's and pi 1.5's, each with the `keepRecentTokens` its agent
/// compacts with (the pi 1.5 sample's history is short: under pi's default, nothing to summarize).
const SESSIONS: [(&str, u64); 2] = [("large-session.jsonl", 20_000), ("pi15/s0000.jsonl", 2_000)];

fn prepare_config(model: &FakeProvider) -> compactd::config::ServeConfig {
    let mut config = chain_config(model, "openai:gpt-test", false);
    // Every session here passes it: prepared on every append that grew the session enough.
    config.gateway.prepare_at = 0.01;
    config
}

/// Uploads `name` (as pi writes it today: migrated, its entries with ids) but its last
/// [`APPENDED`] lines, then appends those one at a time to `app`, each preparation awaited; the
/// session's id and its lines.
async fn grown(app: &TestApp, session: (&str, u64)) -> (String, Vec<String>) {
    let (_, keep) = session;
    let hints = format!("contextWindow=200000&keepRecentTokens={keep}");
    appended(app, session.0, &hints).await
}

/// [`grown`], each append with `query`.
async fn appended(app: &TestApp, name: &str, query: &str) -> (String, Vec<String>) {
    let migrated = json(app.upload(fixture(name)).await).await;
    let file = app.entries(migrated["id"].as_str().unwrap()).await;
    let text = file.text().await.unwrap();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let (head, tail) = lines.split_at(lines.len() - APPENDED);
    let response = app.upload(format!("{}\n", head.join("\n"))).await;
    assert_eq!(response.status(), StatusCode::CREATED, "{name}");
    let id = json(response).await["id"].as_str().unwrap().to_owned();
    for line in tail {
        // As the pi extension appends: with the settings pi compacts with.
        let path = format!("/v1/sessions/{id}/entries?{query}");
        let response = app.post_raw(&path, format!("{line}\n")).await;
        let status = response.status();
        assert_eq!(
            status,
            StatusCode::OK,
            "{name}: {}",
            response.text().await.unwrap()
        );
        settled(app).await;
    }
    (id, lines)
}

/// Fixture `name` as pi writes it today (migrated), stored without its last entry: the stored
/// session's id, that entry's line, and the whole session's context tokens.
async fn all_but_its_last_entry(app: &TestApp, name: &str) -> (String, String, u64) {
    let migrated = json(app.upload(fixture(name)).await).await;
    let tokens = migrated["contextTokens"].as_u64().unwrap();
    let text = app
        .entries(migrated["id"].as_str().unwrap())
        .await
        .text()
        .await
        .unwrap();
    let (head, last) = text.trim_end().rsplit_once('\n').unwrap();
    let id = json(app.upload(format!("{head}\n")).await).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    (id, last.to_owned(), tokens)
}

async fn a_stored_sessions_compaction_is_answered_on_another_replica_from_the_summary_prepared_as_it_grew(
    store: Arc<dyn Store>,
) {
    let model = FakeProvider::start(vec![], Reply::openai(WRITTEN)).await;
    let writer = TestApp::with_store(prepare_config(&model), store.clone()).await;
    let other = TestApp::with_store(prepare_config(&model), store).await;
    for (n, session) in SESSIONS.into_iter().enumerate() {
        let (id, _) = grown(&writer, session).await;
        let (name, keep) = session;
        assert!(
            prepared_outcome(&writer, "prepared").await >= (n + 1) as f64,
            "{name}: prepared while it grew"
        );
        let calls = model.received().len();
        let response = other
            .compact_session(&id, &json!({"keepRecentTokens": keep}))
            .await;
        assert_eq!(response.status(), StatusCode::CREATED, "{name}");
        let body: Value = json(response).await;
        assert_eq!(
            model.received().len(),
            calls,
            "{name}: no model call while the agent waits"
        );
        assert_eq!(prepared_outcome(&other, "used").await, (n + 1) as f64);
        let entry = &body["entry"];
        assert_eq!(entry["type"], "compaction", "{name}: {entry}");
        let summary = entry["summary"].as_str().unwrap();
        assert!(summary.contains("PREPARED"), "{name}: {summary}");
        assert_eq!(
            body["model"].as_str().unwrap().split('+').next(),
            Some("extractive")
        );
        // The plan is the planner's: the entry keeps what the session's own plan keeps.
        let leaf = entry["parentId"].as_str().unwrap();
        let plan = format!("/v1/sessions/{id}/plan?leafId={leaf}&keepRecentTokens={keep}");
        let plan = json(other.get(&plan).await).await;
        assert_eq!(
            entry["firstKeptEntryId"], plan["plan"]["firstKeptEntryId"],
            "{name}"
        );
    }
    assert_eq!(prepared_outcome(&other, "wasted").await, 0.0);
}

async fn a_rewind_or_a_focus_takes_the_normal_path(store: Arc<dyn Store>) {
    let model = FakeProvider::start(vec![], Reply::openai(WRITTEN)).await;
    let app = TestApp::with_store(prepare_config(&model), store).await;
    let (id, lines) = grown(&app, SESSIONS[0]).await;
    let normal = |body: Value| {
        let (app, model) = (&app, &model);
        let id = id.clone();
        async move {
            let calls = model.received().len();
            let response = app.compact_session(&id, &body).await;
            assert_eq!(response.status(), StatusCode::CREATED, "{body}");
            assert!(model.received().len() > calls, "the model wrote it: {body}");
        }
    };

    // A focus: the summary prepared without it is neither used nor spent.
    normal(json!({"customInstructions": "only the parser work"})).await;
    assert_eq!(prepared_outcome(&app, "used").await, 0.0);
    assert_eq!(prepared_outcome(&app, "wasted").await, 0.0);

    // A compaction from half-way (the user went back there): its history no longer begins with
    // what was prepared. The normal path; the summary is spent as wasted.
    let half_way: Value = serde_json::from_str(&lines[lines.len() / 2]).unwrap();
    normal(json!({"leafId": half_way["id"]})).await;
    assert_eq!(prepared_outcome(&app, "used").await, 0.0);
    assert_eq!(prepared_outcome(&app, "wasted").await, 1.0);
}

/// Entries appended by a client that does not say its model's window (a script, not a live
/// agent): nothing is summarized in the background.
async fn a_script_appending_entries_spends_nothing_ahead(store: Arc<dyn Store>) {
    let model = FakeProvider::start(vec![], Reply::openai(WRITTEN)).await;
    let app = TestApp::with_store(prepare_config(&model), store).await;
    let (name, _) = SESSIONS[0];
    appended(&app, name, "keepRecentTokens=20000").await;
    assert_eq!(prepared_outcome(&app, "prepared").await, 0.0);
    assert!(model.received().is_empty(), "no call in the background");
}

/// A session that stops between half the share and the share (the user reading, or away) is
/// prepared once idle, and its compaction answered from that summary.
async fn a_session_idle_past_half_the_share_is_prepared_and_answered_from_it(
    store: Arc<dyn Store>,
) {
    let model = FakeProvider::start(vec![], Reply::openai(WRITTEN)).await;
    let mut config = prepare_config(&model);
    config.gateway.prepare_at = 0.6;
    config.gateway.prepare_idle = std::time::Duration::from_secs(1);
    let app = TestApp::with_store(config, store).await;
    let (name, keep) = SESSIONS[0];
    let (id, last, tokens) = all_but_its_last_entry(&app, name).await;
    // One turn (no pace yet: prepared at the share) that leaves the session at 45 % of the
    // window: past half the share, short of it.
    let window = tokens * 100 / 45;
    let path = format!("/v1/sessions/{id}/entries?contextWindow={window}&keepRecentTokens={keep}");
    assert_eq!(
        app.post_raw(&path, format!("{last}\n")).await.status(),
        StatusCode::OK
    );
    // Not due: no preparation started with the append (one is counted before it is answered).
    assert_eq!(app.metric("compactd_preparing").await, 0.0, "not due");
    app.wait_for_metric(
        r#"compactd_prepared_summaries_total{outcome="prepared"}"#,
        1.0,
    )
    .await;
    settled(&app).await;
    let calls = model.received().len();
    let response = app.compact_session(&id, &json!({})).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(
        model.received().len(),
        calls,
        "answered from the idle preparation"
    );
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
}

/// The compaction comes while the session's first preparation is running (the turn before it
/// passed the share): it waits for that summary, most of the way there, rather than starting over.
async fn a_compaction_during_the_preparation_waits_for_it(store: Arc<dyn Store>) {
    let slow = Reply::openai(WRITTEN).after(std::time::Duration::from_millis(1500));
    let model = FakeProvider::start(vec![], slow).await;
    let app = TestApp::with_store(prepare_config(&model), store).await;
    let (name, keep) = SESSIONS[0];
    let (id, last, _) = all_but_its_last_entry(&app, name).await;
    let path = format!("/v1/sessions/{id}/entries?contextWindow=200000&keepRecentTokens={keep}");
    assert_eq!(
        app.post_raw(&path, format!("{last}\n")).await.status(),
        StatusCode::OK
    );
    // The preparation is counted before the append is answered: it is running now.
    assert_eq!(app.metric("compactd_preparing").await, 1.0);
    let response = app.compact_session(&id, &json!({})).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(prepared_outcome(&app, "used").await, 1.0);
    assert_eq!(model.received().len(), 1, "the preparation's call alone");
}
