//! Sessions that scale: stored sessions are planned from their per-entry facts and the lines of
//! the path's tail, appended to through their index, shared by replicas, and migrated. Every
//! plan here is compared with the plan of the same file read whole by the core.

use std::sync::Arc;

use compactd_core::compaction::{
    CompactionSettings, PlanOutcome, build_session_context, estimate_context_tokens,
};
use compactd_core::session::{ParseOptions, Session};
use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fixture;
use crate::support::{TestApp, config};

on_both_backends!(
    stored_plans_equal_file_plans_on_every_fixture,
    stored_plans_equal_file_plans_after_appends_that_branch,
    replicas_plan_and_append_from_what_the_other_wrote,
);

async fn json(response: reqwest::Response) -> Value {
    let status = response.status();
    let body: Value = response.json().await.unwrap();
    assert!(status.is_success(), "{status}: {body}");
    body
}

async fn upload(app: &TestApp, bytes: Vec<u8>) -> String {
    let view = json(app.upload(bytes).await).await;
    view["id"].as_str().unwrap().to_owned()
}

/// The stored file, read whole by the core.
async fn stored_file(app: &TestApp, id: &str) -> Session {
    let text = app.entries(id).await.text().await.unwrap();
    Session::parse(text.as_bytes(), ParseOptions::default()).unwrap()
}

/// Plans every `leaves` entry (and the default leaf) of the stored session with several
/// settings, through the API, and compares each with the plan of the file; the contexts too.
async fn assert_plans_match(app: &TestApp, id: &str, leaves: &[String]) -> usize {
    let file = stored_file(app, id).await;
    let mut compared = 0;
    for leaf in std::iter::once(None).chain(leaves.iter().map(Some)) {
        let path = file.active_path(leaf.map(String::as_str)).unwrap();
        for keep in [0u64, 1500, 20_000] {
            let settings = CompactionSettings {
                keep_recent_tokens: keep,
                ..Default::default()
            };
            let expected = serde_json::to_value(PlanOutcome::for_path(&path, &settings)).unwrap();
            let query = match leaf {
                Some(leaf) => format!("keepRecentTokens={keep}&leafId={leaf}"),
                None => format!("keepRecentTokens={keep}"),
            };
            let stored = json(app.plan(id, &query).await).await;
            assert_eq!(stored, expected, "plan at {leaf:?}, keep {keep}");
            compared += 1;
        }
        let context = build_session_context(&path);
        let expected = json!({
            "messages": context.llm_json(),
            "thinkingLevel": context.thinking_level,
            "model": context.model,
        });
        let query = leaf.map_or(String::new(), |l| format!("?leafId={l}"));
        let stored = json(app.get(&format!("/v1/sessions/{id}/context{query}")).await).await;
        assert_eq!(stored, expected, "context at {leaf:?}");
    }
    compared
}

/// Every 29th entry, every compaction and the entry after it: leaves on both sides of a boundary.
fn sample_leaves(session: &Session) -> Vec<String> {
    let mut leaves: Vec<String> = Vec::new();
    for (i, entry) in session.entries.iter().enumerate() {
        let after_compaction = i > 0 && session.entries[i - 1].is_compaction();
        if i % 29 == 0 || entry.is_compaction() || after_compaction {
            leaves.push(entry.id.clone());
        }
    }
    leaves
}

async fn stored_plans_equal_file_plans_on_every_fixture(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    for name in ["large-session.jsonl", "before-compaction.jsonl"] {
        let id = upload(&app, fixture(name)).await;
        let file = stored_file(&app, &id).await;
        let compared = assert_plans_match(&app, &id, &sample_leaves(&file)).await;
        assert!(compared > 100, "{name}: {compared} plans compared");
        // The recorded context size is the core's estimate at the leaf.
        let record = json(app.session(&id).await).await;
        let path = file.active_path(None).unwrap();
        let estimate = estimate_context_tokens(&build_session_context(&path).messages());
        assert_eq!(record["contextTokens"], estimate.tokens as i64, "{name}");
    }
}

/// A JSONL line of a message entry.
fn message(id: &str, parent: &str, message: Value) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-11-22T10:00:00.000Z","message":message})
        .to_string()
}

fn user(text: &str) -> Value {
    json!({"role":"user","content":text,"timestamp":1_763_805_600_000i64})
}

fn assistant(text: &str, total: u64) -> Value {
    json!({"role":"assistant","content":[{"type":"text","text":text},
        {"type":"toolCall","id":"t1","name":"edit","arguments":{"path":"src/branch.rs"}}],
        "provider":"anthropic","model":"claude-sonnet-4-5","stopReason":"toolUse",
        "usage":{"input":total.saturating_sub(100),"output":total.min(100),"cacheRead":0,"cacheWrite":0,"totalTokens":total},
        "timestamp":1_763_805_600_001i64})
}

async fn append(app: &TestApp, id: &str, lines: &[String]) -> Value {
    let body = lines.join("\n") + "\n";
    json(app.append(id, body).await).await
}

async fn stored_plans_equal_file_plans_after_appends_that_branch(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    let id = upload(&app, fixture("before-compaction.jsonl")).await;
    let file = stored_file(&app, &id).await;
    let at = |i: usize| file.entries[i].id.clone();
    let long = "lorem ipsum ".repeat(400);

    // A branch off the middle, compacted by the client, then continued; its compaction keeps the
    // branch's first user message.
    append(
        &app,
        &id,
        &[
            message("b1", &at(600), user(&format!("branch request {long}"))),
            message("b2", "b1", assistant(&long, 91_000)),
            json!({"type":"compaction","id":"b3","parentId":"b2","timestamp":"2026-11-22T10:00:01.000Z",
                "summary":"## Goal\nthe branch","firstKeptEntryId":"b1","tokensBefore":91000,
                "details":{"readFiles":["a.rs"],"modifiedFiles":["src/branch.rs"]}})
            .to_string(),
            message("b4", "b3", user(&format!("after the branch's compaction {long}"))),
            message("b5", "b4", assistant(&long, 0)),
        ],
    )
    .await;
    // A second branch, off an entry before the fixture's first compaction, in two appends: the
    // settings entries and summaries come in the first, messages on top of them in the second.
    append(
        &app,
        &id,
        &[
            json!({"type":"model_change","id":"c1","parentId":at(120),"timestamp":"t","provider":"openai","modelId":"gpt-5"}).to_string(),
            json!({"type":"thinking_level_change","id":"c2","parentId":"c1","timestamp":"t","thinkingLevel":"high"}).to_string(),
            json!({"type":"branch_summary","id":"c3","parentId":"c2","timestamp":"t","fromId":at(400),"summary":"what the other branch did"}).to_string(),
            json!({"type":"custom_message","id":"c4","parentId":"c3","timestamp":"t","customType":"note","content":"remember the tests","display":true}).to_string(),
        ],
    )
    .await;
    append(
        &app,
        &id,
        &[
            message("c5", "c4", user(&long)),
            message("c6", "c5", assistant("done", 120_000)),
            json!({"type":"label","id":"c7","parentId":"c6","timestamp":"t","targetId":"c5","label":"here"}).to_string(),
        ],
    )
    .await;
    // And more on the fixture's own leaf, after its last compaction.
    let leaf = file.entries.last().unwrap().id.clone();
    let record = append(
        &app,
        &id,
        &[
            message("d1", &leaf, user(&long)),
            message("d2", "d1", assistant(&long, 150_000)),
        ],
    )
    .await;

    let after = stored_file(&app, &id).await;
    let mut leaves = sample_leaves(&file);
    leaves.extend(
        [
            "b1", "b2", "b3", "b4", "b5", "c1", "c3", "c4", "c6", "c7", "d1",
        ]
        .map(String::from),
    );
    assert_plans_match(&app, &id, &leaves).await;
    // The context size recorded by the last append: the estimate at its leaf.
    let path = after.active_path(None).unwrap();
    let estimate = estimate_context_tokens(&build_session_context(&path).messages());
    assert_eq!(record["session"]["contextTokens"], estimate.tokens as i64);
    assert_eq!(record["session"]["leafId"], "d2");
    assert_eq!(record["session"], json(app.session(&id).await).await);
}

async fn replicas_plan_and_append_from_what_the_other_wrote(store: Arc<dyn Store>) {
    let one = TestApp::handlers_with_store(config(), store.clone());
    let two = TestApp::handlers_with_store(config(), store);
    let id = upload(&one, fixture("large-session.jsonl")).await;
    let file = stored_file(&one, &id).await;
    let leaf = file.entries.last().unwrap().id.clone();
    // Both replicas index the session.
    for app in [&one, &two] {
        json(app.plan(&id, "").await).await;
    }
    // The second appends; the first plans at the new leaf and appends on top of it, from its
    // cached index, which must learn the new rows first.
    append(&two, &id, &[message("r1", &leaf, user("from replica two"))]).await;
    let plan = json(one.plan(&id, "leafId=r1").await).await;
    assert!(plan["plan"]["entryTokens"]["r1"].is_number(), "{plan}");
    append(
        &one,
        &id,
        &[message("r2", "r1", assistant("from one", 5000))],
    )
    .await;
    // The second, whose index stops at r1, accepts a child of r2 and refuses a re-sent r2 that
    // differs.
    append(&two, &id, &[message("r3", "r2", user("two again"))]).await;
    let changed = two
        .append(&id, message("r2", "r1", user("not what one wrote")))
        .await;
    assert_eq!(changed.status(), StatusCode::CONFLICT);
    assert_plans_match(&two, &id, &["r1".into(), "r2".into(), "r3".into()]).await;
    assert_plans_match(&one, &id, &["r3".into()]).await;
}

/// Rows stored before facts existed: the session is derived on first use (and by the sweep),
/// and plans the same as its file.
mod migrated_rows {
    use super::*;

    const FORGET: [&str; 2] = [
        "update entries set parent_seq = null, role = null, tokens = null, usage_tokens = null, \
         ctx_usage = null, ctx_trailing = 0, first_kept_id = null",
        "update sessions set facts_version = 0",
    ];

    async fn check(store: Arc<dyn Store>, forget: impl AsyncFnOnce()) {
        let app = TestApp::handlers_with_store(config(), store.clone());
        let first = upload(&app, fixture("before-compaction.jsonl")).await;
        let second = upload(&app, fixture("large-session.jsonl")).await;
        forget().await;
        assert_eq!(store.stale_sessions(1, 10).await.unwrap().len(), 2);
        // A fresh replica (no cached index): the first session is derived when planned...
        let fresh = TestApp::handlers_with_store(config(), store.clone());
        let file = stored_file(&fresh, &first).await;
        assert_plans_match(&fresh, &first, &sample_leaves(&file)).await;
        assert_eq!(
            store.stale_sessions(1, 10).await.unwrap(),
            std::slice::from_ref(&second)
        );
        // ...the other by the sweep.
        let state = compactd::http::AppState::with_store(&config(), store.clone()).unwrap();
        assert_eq!(state.app.derive_stale_facts().await.unwrap(), 1);
        let swept = TestApp::handlers_with_store(config(), store.clone());
        assert!(store.stale_sessions(1, 10).await.unwrap().is_empty());
        let file = stored_file(&swept, &second).await;
        assert_plans_match(&swept, &second, &sample_leaves(&file)).await;
    }

    compactd_testkit::postgres_test! {
        async fn postgres(pool: sqlx::PgPool) {
            let store = compactd_store::PgStore::from_pool(pool.clone())
                .await
                .unwrap();
            check(Arc::new(store), async || {
                for statement in FORGET {
                    sqlx::query(statement).execute(&pool).await.unwrap();
                }
            })
            .await;
        }
    }

    #[sqlx::test(migrations = false)]
    async fn sqlite(pool: sqlx::SqlitePool) {
        let store = compactd_store::SqliteStore::from_pool(pool.clone())
            .await
            .unwrap();
        check(Arc::new(store), async || {
            for statement in FORGET {
                sqlx::query(statement).execute(&pool).await.unwrap();
            }
        })
        .await;
    }
}
