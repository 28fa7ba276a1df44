//! The session API against real storage: every test runs on a fresh PostgreSQL database
//! (`#[sqlx::test]`, from `DATABASE_URL`) and on SQLite, with a fake upstream for the model.

use std::sync::Arc;

use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_core::session::{ParseOptions, Session};
use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fixture;
use crate::support::{TestApp, config};

on_both_backends!(
    every_fixture_uploads_and_comes_back,
    bad_uploads_name_their_line_and_store_nothing,
    listing_reading_and_deleting,
    appends_check_parents_and_are_idempotent,
    plans_of_stored_and_posted_sessions_match_the_core,
);

pub async fn json(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

pub async fn upload(app: &TestApp, body: impl Into<reqwest::Body>) -> Value {
    let response = app.upload(body).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    json(response).await
}

/// A v3 session: `turns` user/assistant pairs of `chars` characters each, with tool calls.
pub fn v3_session(turns: usize, chars: usize) -> String {
    let mut lines = vec![json!({"type":"session","version":3,"id":"sess-1","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}).to_string()];
    let mut parent: Option<String> = None;
    let mut push = |message: Value, lines: &mut Vec<String>| {
        let id = format!("{:08x}", lines.len() * 7919);
        lines.push(json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z","message":message}).to_string());
        parent = Some(id);
    };
    for i in 0..turns {
        push(
            json!({"role":"user","content":format!("request {i}: {}", "u".repeat(chars)),"timestamp":1}),
            &mut lines,
        );
        push(
            json!({"role":"assistant","content":[{"type":"text","text":"a".repeat(chars)},
            {"type":"toolCall","id":"c","name":"edit","arguments":{"path":format!("src/f{i}.rs")}}],
            "provider":"p","model":"m","stopReason":"toolUse","timestamp":2}),
            &mut lines,
        );
        push(
            json!({"role":"toolResult","toolCallId":"c","toolName":"edit","content":[{"type":"text","text":"ok"}],"isError":false,"timestamp":3}),
            &mut lines,
        );
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

async fn every_fixture_uploads_and_comes_back(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    for name in ["large-session.jsonl", "before-compaction.jsonl"] {
        let bytes = fixture(name);
        let view = upload(&app, bytes.clone()).await;
        assert_eq!(view["version"], 3);
        assert_eq!(view["sourceVersion"], 1);
        let expected = Session::parse(&bytes, ParseOptions::default()).unwrap();
        assert_eq!(view["entryCount"], expected.entries.len());
        assert!(view["contextTokens"].as_i64().unwrap() > 100_000, "{view}");
        // The stored v1 file comes back migrated; reading it again gives the same plan.
        let back = app
            .get(&format!(
                "/v1/sessions/{}/entries",
                view["id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(back.headers()["content-type"], "application/x-ndjson");
        let text = back.text().await.unwrap();
        let reread = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
        assert_eq!(reread.source_version, 3);
        assert_eq!(reread.entries.len(), expected.entries.len());
        assert_eq!(view["leafId"], reread.entries.last().unwrap().id);
        // A v3 upload comes back byte for byte.
        let again = upload(&app, text.clone()).await;
        let back = app
            .get(&format!(
                "/v1/sessions/{}/entries",
                again["id"].as_str().unwrap()
            ))
            .await;
        assert_eq!(back.text().await.unwrap(), text, "{name}");
    }
    // A title slot line survives too.
    let titled = format!(
        "{}\n{}",
        r#"{"type":"title","v":1,"title":"t","pad":"  "}"#,
        v3_session(1, 10)
    );
    let view = upload(&app, titled.clone()).await;
    let back = app
        .get(&format!(
            "/v1/sessions/{}/entries",
            view["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(back.text().await.unwrap(), titled);
}

async fn bad_uploads_name_their_line_and_store_nothing(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store.clone());
    let good = v3_session(2, 10);
    let mut lines: Vec<&str> = good.lines().collect();
    lines.insert(3, "{not json");
    let bad = lines.join("\n");
    let response = app.upload(bad.clone()).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body = json(response).await;
    assert_eq!(body["error"]["code"], "invalid_session");
    assert_eq!(body["error"]["line"], 4);
    assert_eq!(body["error"]["kind"], "invalid_json");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("line 4: "),
        "{body}"
    );
    assert!(
        store
            .list_sessions("", 10, None, None)
            .await
            .unwrap()
            .is_empty(),
        "nothing stored"
    );

    let lenient = app.post_raw("/v1/sessions?lenient=true", bad).await;
    assert_eq!(lenient.status(), StatusCode::CREATED);
    let view = json(lenient).await;
    assert_eq!(view["skippedLines"][0]["line"], 4);
    assert_eq!(view["entryCount"], 6);

    for (body, kind) in [
        ("".to_owned(), "empty"),
        (
            format!(
                "{}\n{}",
                lines[0],
                r#"{"type":"message","id":"a","parentId":"ghost","message":{"role":"user","content":"x"}}"#
            ),
            "dangling_parent",
        ),
        (
            format!(
                "{}\n{}\n{}",
                lines[0],
                r#"{"type":"label","id":"a","parentId":null}"#,
                r#"{"type":"label","id":"a","parentId":null}"#
            ),
            "duplicate_id",
        ),
    ] {
        let response = app.upload(body).await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{kind}"
        );
        assert_eq!(json(response).await["error"]["kind"], kind);
    }
    let response = app.post_raw("/v1/sessions?lenient=maybe", good).await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(json(response).await["error"]["param"], "lenient");
    assert_eq!(
        store.list_sessions("", 10, None, None).await.unwrap().len(),
        1
    );
}

async fn listing_reading_and_deleting(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(
            upload(&app, v3_session(1, 10)).await["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    // Oldest first, ties (uploads in the same millisecond) broken by id.
    let all = json(app.sessions().await).await;
    let order: Vec<(String, String)> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["createdAt"].as_str().unwrap().to_owned(),
                s["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(order.is_sorted(), "{order:?}");
    let mut listed: Vec<String> = order.into_iter().map(|(_, id)| id).collect();
    let mut uploaded = ids.clone();
    uploaded.sort();
    listed.sort();
    assert_eq!(listed, uploaded);
    let ids: Vec<Value> = all["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].clone())
        .collect();
    let first = json(app.get("/v1/sessions?limit=2").await).await;
    assert_eq!(first["sessions"].as_array().unwrap().len(), 2);
    assert_eq!(first["sessions"][0]["id"], ids[0]);
    assert_eq!(first["sessions"][1]["id"], ids[1]);
    let cursor = first["nextCursor"].as_str().unwrap();
    let second = json(
        app.get(&format!("/v1/sessions?limit=2&cursor={cursor}"))
            .await,
    )
    .await;
    assert_eq!(second["sessions"][0]["id"], ids[2]);
    assert_eq!(second["nextCursor"], Value::Null);
    assert_eq!(
        app.get("/v1/sessions?limit=0").await.status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );
    assert_eq!(
        app.get("/v1/sessions?cursor=bogus").await.status(),
        StatusCode::UNPROCESSABLE_ENTITY
    );

    let ids: Vec<&str> = ids.iter().map(|id| id.as_str().unwrap()).collect();
    let shown = json(app.get(&format!("/v1/sessions/{}", ids[1])).await).await;
    assert_eq!(shown["entryCount"], 3);
    assert_eq!(
        app.delete(&format!("/v1/sessions/{}", ids[1]))
            .await
            .status(),
        StatusCode::NO_CONTENT
    );
    for path in [
        format!("/v1/sessions/{}", ids[1]),
        format!("/v1/sessions/{}/entries", ids[1]),
    ] {
        let response = app.get(&path).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        assert_eq!(json(response).await["error"]["code"], "not_found");
    }
    assert_eq!(
        app.delete(&format!("/v1/sessions/{}", ids[1]))
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

async fn appends_check_parents_and_are_idempotent(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    let text = v3_session(1, 10);
    let view = upload(&app, text.clone()).await;
    let id = view["id"].as_str().unwrap();
    let leaf = view["leafId"].as_str().unwrap();
    let path = format!("/v1/sessions/{id}/entries");
    let new = |id: &str, parent: &str, text: &str| {
        json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:01:00.000Z",
               "message":{"role":"user","content":text,"timestamp":5}})
        .to_string()
    };
    let batch = format!(
        "{}\n{}\n",
        new("n1", leaf, "next"),
        new("n2", "n1", "and next")
    );
    let response = app.post_raw(&path, batch.clone()).await;
    assert_eq!(response.status(), StatusCode::OK);
    let body = json(response).await;
    assert_eq!(
        (body["appended"].as_u64(), body["unchanged"].as_u64()),
        (Some(2), Some(0))
    );
    assert_eq!(body["session"]["leafId"], "n2");
    assert_eq!(body["session"]["entryCount"], 5);

    // The same lines again: a no-op.
    let again = json(app.post_raw(&path, batch.clone()).await).await;
    assert_eq!(
        (again["appended"].as_u64(), again["unchanged"].as_u64()),
        (Some(0), Some(2))
    );
    // Same id, other content: 409, and nothing of the request is stored.
    let conflict = format!(
        "{}\n{}\n",
        new("n3", "n2", "fine"),
        new("n1", leaf, "changed")
    );
    let response = app.post_raw(&path, conflict).await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    assert_eq!(json(response).await["error"]["code"], "entry_conflict");
    // A parent that does not exist: 422 naming the line.
    let response = app
        .post_raw(
            &path,
            format!("{}\n{}\n", new("n4", "n2", "ok"), new("n5", "ghost", "x")),
        )
        .await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let error = json(response).await;
    assert_eq!(
        (
            error["error"]["line"].as_u64(),
            error["error"]["kind"].as_str()
        ),
        (Some(2), Some("dangling_parent"))
    );
    let response = app.post_raw(&path, "{broken\n").await;
    assert_eq!(json(response).await["error"]["line"], 1);

    let stored = app.get(&path).await.text().await.unwrap();
    assert_eq!(
        stored,
        format!("{text}{batch}"),
        "exactly the accepted lines, in order"
    );
    assert_eq!(
        app.post_raw("/v1/sessions/nope/entries", batch)
            .await
            .status(),
        StatusCode::NOT_FOUND
    );
}

async fn plans_of_stored_and_posted_sessions_match_the_core(store: Arc<dyn Store>) {
    let app = TestApp::handlers_with_store(config(), store);
    let bytes = fixture("before-compaction.jsonl");
    let view = upload(&app, bytes.clone()).await;
    let id = view["id"].as_str().unwrap();
    let stored_text = app.entries(id).await.text().await.unwrap();
    let session = Session::parse(stored_text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    let settings = CompactionSettings {
        keep_recent_tokens: 2000,
        ..Default::default()
    };
    let expected = serde_json::to_value(PlanOutcome::for_path(&path, &settings)).unwrap();

    let stored = json(app.plan(id, "keepRecentTokens=2000").await).await;
    assert_eq!(stored, expected);
    assert_eq!(stored["plan"]["firstKeptPathIndex"], 1000);
    let posted = json(app.plan_file("keepRecentTokens=2000", stored_text).await).await;
    assert_eq!(posted, expected);

    let leaf = &session.entries[500].id;
    let earlier = json(app.plan(id, &format!("leafId={leaf}")).await).await;
    assert!(earlier["plan"]["entryTokens"].as_object().unwrap().len() < 500);
    for query in [
        "keepRecentTokens=-1",
        "reserveTokens=0",
        "reserveTokens=99999999999",
        "keepRecentTokens=x",
        "leafId=nope",
    ] {
        let response = app.plan(id, query).await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query}"
        );
        let param = query.split('=').next().unwrap();
        assert_eq!(json(response).await["error"]["param"], param, "{query}");
    }
    // The context of the stored session: the previous compaction's summary leads.
    let context = json(app.context(id).await).await;
    assert_eq!(context["messages"].as_array().unwrap().len(), 446);
    assert_eq!(context["model"]["modelId"], "claude-opus-4-5");
}
