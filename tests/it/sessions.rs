//! The session API against real storage: every test runs on a fresh PostgreSQL database
//! (`#[sqlx::test]`, from `DATABASE_URL`) and on SQLite, with a fake upstream for the model.

use std::sync::Arc;
use std::time::Duration;

use compactd::compaction::{CompactionSettings, PlanOutcome};
use compactd::prompts::Prompts;
use compactd::session::{ParseOptions, Session};
use compactd::store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture;
use crate::support::{FakeUpstream, Reply, TestApp, chain_config, config};

on_both_backends!(
    every_fixture_uploads_and_comes_back,
    bad_uploads_name_their_line_and_store_nothing,
    listing_reading_and_deleting,
    appends_check_parents_and_are_idempotent,
    plans_of_stored_and_posted_sessions_match_the_core,
    compaction_appends_a_pi_shaped_entry_from_parallel_calls,
    a_failed_summarization_changes_nothing,
    concurrent_compactions_of_one_leaf_make_one_entry,
    replicas_racing_for_one_leaf_agree_on_one_entry,
    nothing_to_compact_is_a_409,
    branch_summaries_hang_where_pi_puts_them,
    a_v1_upload_is_replaced_by_the_stored_file_and_rebuilds_as_pi_would,
);

async fn json(response: reqwest::Response) -> Value {
    response.json().await.unwrap()
}

async fn upload(app: &TestApp, body: impl Into<reqwest::Body>) -> Value {
    let response = app.post_raw("/v1/sessions", body).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    json(response).await
}

/// A v3 session: `turns` user/assistant pairs of `chars` characters each, with tool calls.
fn v3_session(turns: usize, chars: usize) -> String {
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
    let response = app.post_raw("/v1/sessions", bad.clone()).await;
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
        let response = app.post_raw("/v1/sessions", body).await;
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
    let all = json(app.get("/v1/sessions").await).await;
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
    let stored_text = app
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    let session = Session::parse(stored_text.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    let settings = CompactionSettings {
        keep_recent_tokens: 2000,
        ..Default::default()
    };
    let expected = serde_json::to_value(PlanOutcome::for_path(&path, &settings)).unwrap();

    let stored = json(
        app.get(&format!("/v1/sessions/{id}/plan?keepRecentTokens=2000"))
            .await,
    )
    .await;
    assert_eq!(stored, expected);
    assert_eq!(stored["plan"]["firstKeptPathIndex"], 1000);
    let posted = json(
        app.post_raw("/v1/plan?keepRecentTokens=2000", stored_text)
            .await,
    )
    .await;
    assert_eq!(posted, expected);

    let leaf = &session.entries[500].id;
    let earlier = json(
        app.get(&format!("/v1/sessions/{id}/plan?leafId={leaf}"))
            .await,
    )
    .await;
    assert!(earlier["plan"]["entryTokens"].as_object().unwrap().len() < 500);
    for query in [
        "keepRecentTokens=-1",
        "reserveTokens=0",
        "reserveTokens=99999999999",
        "keepRecentTokens=x",
        "leafId=nope",
    ] {
        let response = app.get(&format!("/v1/sessions/{id}/plan?{query}")).await;
        assert_eq!(
            response.status(),
            StatusCode::UNPROCESSABLE_ENTITY,
            "{query}"
        );
        let param = query.split('=').next().unwrap();
        assert_eq!(json(response).await["error"]["param"], param, "{query}");
    }
    // The context of the stored session: the previous compaction's summary leads.
    let context = json(app.get(&format!("/v1/sessions/{id}/context")).await).await;
    assert_eq!(context["messages"].as_array().unwrap().len(), 446);
    assert_eq!(context["model"]["modelId"], "claude-opus-4-5");
}

async fn compaction_appends_a_pi_shaped_entry_from_parallel_calls(store: Arc<dyn Store>) {
    // Each call is answered `ANSWER` after it arrives: in sequence, the second call could not
    // be sent before the first one's answer.
    const ANSWER: Duration = Duration::from_millis(1200);
    let fake =
        FakeUpstream::start(vec![], Reply::openai("## Goal\nSUMMARY PART").after(ANSWER)).await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    let view = upload(&app, fixture("large-session.jsonl")).await;
    let id = view["id"].as_str().unwrap();
    let old_leaf = view["leafId"].as_str().unwrap().to_owned();
    let plan = json(app.get(&format!("/v1/sessions/{id}/plan")).await).await["plan"].clone();
    assert_eq!(plan["isSplitTurn"], true);

    let response = app
        .post(&format!("/v1/sessions/{id}/compactions"), &json!({}))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = json(response).await;
    let received = fake.received();
    // The two summaries, then a repair request for each (the answer keeps no anchor).
    assert_eq!(received.len(), 4);
    assert_eq!(body["summarizerCalls"], 4);
    // The second call arrived before the first was answered: not a speed limit (a slow machine
    // only narrows the margin), the order that a sequence of calls cannot have.
    let gap = received[1].at.duration_since(received[0].at);
    assert!(
        gap < ANSWER,
        "history and prefix ran in parallel: {gap:?} apart"
    );
    let prompts = Prompts::builtin();
    let prompt_of = |r: &crate::upstream::Received| {
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

    let entry = &body["entry"];
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
    let summary = entry["summary"].as_str().unwrap();
    // Each part as the model wrote it, with what it left out appended by the fidelity gate.
    assert!(
        summary.starts_with(
            "## Goal\nSUMMARY PART\n\n## Critical Context\n- Latest user request (verbatim): "
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

    // Stored: the entry is the new leaf, and the context now starts with its summary.
    let stored = app
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        stored.lines().last().unwrap(),
        body["line"].as_str().unwrap()
    );
    let shown = json(app.get(&format!("/v1/sessions/{id}")).await).await;
    assert_eq!(shown["leafId"], entry_id);
    assert_eq!(shown["entryCount"], 1019);
    let context = json(app.get(&format!("/v1/sessions/{id}/context")).await).await;
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 182);
    assert!(
        messages[0]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("<summary>\n## Goal\nSUMMARY PART")
    );
    let history = json(app.get(&format!("/v1/sessions/{id}/compactions")).await).await;
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
    let again = app
        .post(&format!("/v1/sessions/{id}/compactions"), &json!({}))
        .await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(json(again).await["error"]["code"], "already_compacted");
}

async fn a_failed_summarization_changes_nothing(store: Arc<dyn Store>) {
    let fake = FakeUpstream::start(
        vec![],
        Reply::json(500, json!({"error": {"message": "down"}})),
    )
    .await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    let view = upload(&app, v3_session(20, 400)).await;
    let id = view["id"].as_str().unwrap();
    let before = app
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    let response = app
        .post(
            &format!("/v1/sessions/{id}/compactions"),
            &json!({"keepRecentTokens": 500}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        json(response).await["error"]["code"],
        "upstream_unavailable"
    );
    assert_eq!(
        app.get(&format!("/v1/sessions/{id}/entries"))
            .await
            .text()
            .await
            .unwrap(),
        before
    );
    assert!(store.compactions(id).await.unwrap().is_empty());
    assert_eq!(
        json(app.get(&format!("/v1/sessions/{id}")).await).await,
        view_without_extras(view)
    );
}

fn view_without_extras(mut view: Value) -> Value {
    let object = view.as_object_mut().unwrap();
    object.remove("skippedLines");
    object.remove("repairedLines");
    view
}

async fn concurrent_compactions_of_one_leaf_make_one_entry(store: Arc<dyn Store>) {
    let fake = FakeUpstream::start(
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
            let response = app
                .post(&format!("/v1/sessions/{id}/compactions"), &body)
                .await;
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
    assert_eq!(store.compactions(&id).await.unwrap().len(), 1);
    let stored = app
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(stored.matches(r#""type":"compaction""#).count(), 1);
}

/// Two replicas (each with its own leaf locks) on one database compact the same leaf at once:
/// both summarize, one append wins, and the other answers with the winner's entry.
async fn replicas_racing_for_one_leaf_agree_on_one_entry(store: Arc<dyn Store>) {
    let fake = FakeUpstream::start(
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
                .post(
                    &format!("/v1/sessions/{id}/compactions"),
                    &json!({"keepRecentTokens": 500}),
                )
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
    assert_eq!(store.compactions(&id).await.unwrap().len(), 1);
    let stored = replicas[1]
        .get(&format!("/v1/sessions/{id}/entries"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(stored.matches(r#""type":"compaction""#).count(), 1);
}

async fn nothing_to_compact_is_a_409(store: Arc<dyn Store>) {
    let fake = FakeUpstream::start(vec![], Reply::openai("unused")).await;
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
        let response = app
            .post(&format!("/v1/sessions/{id}/compactions"), &body)
            .await;
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

async fn branch_summaries_hang_where_pi_puts_them(store: Arc<dyn Store>) {
    let fake = FakeUpstream::start(vec![], Reply::openai("## Goal\nexplored branch")).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let text = v3_session(3, 20);
    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let view = upload(&app, text).await;
    let id = view["id"].as_str().unwrap();
    // Navigate back to the second user message: the summary hangs under its parent.
    let target = &session.entries[3];
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": target.id}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = json(response).await;
    let entry = &body["entry"];
    let parent = session.entries[2].id.as_str();
    assert_eq!(entry["type"], "branch_summary");
    assert_eq!(
        (entry["parentId"].as_str(), entry["fromId"].as_str()),
        (Some(parent), Some(parent))
    );
    let summary = entry["summary"].as_str().unwrap();
    let preamble = Prompts::builtin().branch_preamble;
    assert!(
        summary.starts_with(&format!("{preamble}\n\n## Goal\nexplored branch")),
        "{summary}"
    );
    assert!(
        summary.ends_with("<modified-files>\nsrc/f1.rs\nsrc/f2.rs\n</modified-files>"),
        "{summary}"
    );
    assert_eq!(
        entry["details"]["modifiedFiles"],
        json!(["src/f1.rs", "src/f2.rs"])
    );
    let sent = fake.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !sent.contains("[Tool result]"),
        "tool results are left out of branch summaries"
    );
    assert_eq!(fake.received()[0].body["max_tokens"], 2048);

    // The summary is the new leaf: the context shows the kept branch and the summary.
    let context = json(app.get(&format!("/v1/sessions/{id}/context")).await).await;
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert!(
        messages[3]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("explored branch")
    );
    // Navigating to the current leaf's own path leaves nothing behind.
    let leaf_path_target = &session.entries[0].id;
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": leaf_path_target, "fromLeafId": leaf_path_target}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": "ghost"}),
        )
        .await;
    assert_eq!(json(response).await["error"]["param"], "targetId");
}

/// The context pi builds from a file: the messages of `buildSessionContext` at its last entry.
fn pi_context(file: &str) -> Vec<String> {
    let session = Session::parse(file.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    compactd::compaction::build_session_context(&path)
        .messages()
        .iter()
        .map(|m| m.role().to_owned())
        .collect()
}

/// pi re-migrates a v1 file with random ids of its own, so a compaction line compactd made for the
/// stored copy points at ids that do not exist in the client's file: the documented path is to
/// replace the file with the stored one, and that file rebuilds with every kept message.
async fn a_v1_upload_is_replaced_by_the_stored_file_and_rebuilds_as_pi_would(
    store: Arc<dyn Store>,
) {
    let app = TestApp::handlers_with_store(config(), store);
    let original = String::from_utf8(fixture("large-session.jsonl")).unwrap();
    let view = upload(&app, original.clone()).await;
    let id = view["id"].as_str().unwrap();
    let stored_file = format!("/v1/sessions/{id}/entries");
    assert_eq!(view["replaceFile"], stored_file, "{view}");
    assert!(
        view["notice"]
            .as_str()
            .unwrap()
            .contains("replace your local file")
    );

    let response = app
        .post(&format!("/v1/sessions/{id}/compactions"), &json!({}))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let compaction = json(response).await;
    assert_eq!(compaction["replaceFile"], stored_file);
    let line = compaction["line"].as_str().unwrap();

    // The documented path: the client's file becomes the stored one.
    let replaced = app.get(&stored_file).await.text().await.unwrap();
    assert!(replaced.ends_with(&format!("{line}\n")));
    let context = pi_context(&replaced);
    assert_eq!(context[0], "compactionSummary");
    // Appendix A: the cut keeps from index 837 of 1018 entries; its 181 messages come back.
    assert_eq!(
        context.len(),
        182,
        "every kept message is in the rebuilt context"
    );

    // What goes wrong otherwise: the line appended to the old v1 file, which is migrated again
    // with other ids, names a first kept entry that is not there, and every kept message is lost.
    let appended = format!("{original}{line}\n");
    assert_eq!(pi_context(&appended), ["compactionSummary"]);

    // A v3 upload needs none of this.
    let v3 = upload(&app, v3_session(2, 10)).await;
    assert!(v3.get("replaceFile").is_none(), "{v3}");
}
