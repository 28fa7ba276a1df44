//! The call log holds a true row for every summarization, whoever asked: the two agent wires,
//! session compactions (history and turn prefix), branch summaries, failures (the CLI's rows are
//! checked in `cli.rs`). Rows are written in the background, so the tests wait for them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd::access::new_key;
use compactd_store::{CallRecord, Store, now_ms};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body};

on_both_backends!(
    every_caller_leaves_a_true_row,
    a_failed_call_leaves_a_row_too,
    a_burst_of_calls_keeps_every_row,
    a_flood_of_rows_is_written_in_batches_without_a_drop
);

/// The tenant's rows once there are `count` of them, oldest first.
async fn rows(store: &dyn Store, tenant: &str, count: usize) -> Vec<CallRecord> {
    let started = Instant::now();
    loop {
        let mut rows = store.calls(tenant, None, 100).await.unwrap();
        if rows.len() >= count {
            rows.reverse();
            return rows;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{} of {count} rows: {rows:?}",
            rows.len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn every_caller_leaves_a_true_row(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("logged"))).await;
    let (key, record) = new_key("team-a", None, now_ms());
    store.create_key(&record).await.unwrap();
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());

    the_wires_leave_a_row_each(&app, store.as_ref(), &key).await;
    let (id, leaf) = a_session_compaction_leaves_a_row_a_part(&app, store.as_ref(), &key).await;
    let all = a_branch_summary_leaves_its_row(&app, store.as_ref(), &key, (&id, &leaf)).await;
    let upstream_calls: i64 = all.iter().map(|r| r.input_tokens / 120).sum();
    assert_eq!(
        fake.received().len() as i64,
        upstream_calls,
        "every upstream call is in a row"
    );
    // Texts stay out of the log unless COMPACTD_STORE_TEXT is set, and other tenants see nothing.
    assert!(
        all.iter()
            .all(|r| r.prompt.is_none() && r.summary.is_none())
    );
    assert!(store.calls("", None, 10).await.unwrap().is_empty());
}

/// The remote endpoint and the chat wire: a row each, with the model, sizes and usage.
async fn the_wires_leave_a_row_each(app: &TestApp, store: &dyn Store, key: &str) {
    let url = |path: &str| format!("{}{path}", app.url);
    let answered = app
        .post(&format!("/k/{key}/v1/compact"), &compact_body(PROMPT))
        .await;
    assert_eq!(answered.status(), StatusCode::OK);
    let chat = json!({"model": "m", "messages": [{"role": "user", "content": PROMPT}]});
    let answered = app
        .send(
            app.client
                .post(url(&format!("/k/{key}/v1/chat/completions")))
                .json(&chat),
        )
        .await;
    assert_eq!(answered.status(), StatusCode::OK);
    let wires = rows(store, "team-a", 2).await;
    for (row, endpoint) in wires.iter().zip(["/v1/compact", "/v1/chat/completions"]) {
        assert_eq!(row.endpoint, endpoint);
        assert_eq!(row.purpose, "prompt");
        assert_eq!(row.session_id, None);
        assert_eq!(row.model.as_deref(), Some("openai:gpt-test"));
        assert_eq!((row.outcome.as_str(), row.status), ("ok", 200));
        // The fake's usage, and the sizes of what went and came back.
        assert_eq!((row.input_tokens, row.output_tokens), (120, 7));
        assert_eq!(row.summary_bytes, answer("logged").len() as i64);
        assert!(row.prompt_bytes >= PROMPT.len() as i64, "{row:?}");
    }
}

/// A session compaction: a row for each part (the history and the split turn's prefix), adding
/// up to the compaction's own record. The session's id and its leaf before.
async fn a_session_compaction_leaves_a_row_a_part(
    app: &TestApp,
    store: &dyn Store,
    key: &str,
) -> (String, String) {
    let url = |path: &str| format!("{}{path}", app.url);
    let uploaded: Value = app
        .send(
            app.client
                .post(url("/v1/sessions"))
                .bearer_auth(key)
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(crate::fixture("large-session.jsonl")),
        )
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let leaf = uploaded["leafId"].as_str().unwrap().to_owned();
    let compacted = app
        .send(
            app.client
                .post(url(&format!("/v1/sessions/{id}/compactions")))
                .bearer_auth(key)
                .json(&json!({})),
        )
        .await;
    assert_eq!(compacted.status(), StatusCode::CREATED);
    let compacted: Value = compacted.json().await.unwrap();
    let after_compaction = rows(store, "team-a", 4).await;
    let mut parts: Vec<(&str, &str)> = after_compaction[2..]
        .iter()
        .map(|r| (r.endpoint.as_str(), r.purpose.as_str()))
        .collect();
    parts.sort_unstable();
    assert_eq!(
        parts,
        [
            ("session_compaction", "history"),
            ("session_compaction", "turn_prefix")
        ],
        "the fixture's cut splits a turn"
    );
    // A row per summary; its tokens include the fidelity gate's repair call when it made one
    // (this answer keeps none of the fixture's anchors).
    for row in &after_compaction[2..] {
        assert_eq!(row.session_id.as_deref(), Some(id.as_str()));
        assert_eq!((row.outcome.as_str(), row.status), ("ok", 200));
        assert!(
            matches!((row.input_tokens, row.output_tokens), (120, 7) | (240, 14)),
            "{row:?}"
        );
    }
    // The compaction's own record adds up its calls.
    let logged: i64 = after_compaction[2..].iter().map(|r| r.input_tokens).sum();
    assert_eq!(compacted["usage"]["inputTokens"], logged);
    assert_eq!(
        logged / 120,
        compacted["summarizerCalls"].as_i64().unwrap(),
        "every upstream call is in a row"
    );

    (id, leaf)
}

/// A branch summary: its row, under its session. Every row so far.
async fn a_branch_summary_leaves_its_row(
    app: &TestApp,
    store: &dyn Store,
    key: &str,
    (id, leaf): (&str, &str),
) -> Vec<compactd_store::CallRecord> {
    let url = |path: &str| format!("{}{path}", app.url);
    let entries = app
        .send(
            app.client
                .get(url(&format!("/v1/sessions/{id}/entries")))
                .bearer_auth(key),
        )
        .await
        .text()
        .await
        .unwrap();
    let target: Value = serde_json::from_str(entries.lines().nth(30).unwrap()).unwrap();
    let branch = app
        .send(
            app.client
                .post(url(&format!("/v1/sessions/{id}/branch-summaries")))
                .bearer_auth(key)
                .json(&json!({"targetId": target["id"], "fromLeafId": leaf})),
        )
        .await;
    assert_eq!(branch.status(), StatusCode::CREATED);
    let all = rows(store, "team-a", 5).await;
    let row = &all[4];
    assert_eq!(
        (row.endpoint.as_str(), row.purpose.as_str()),
        ("branch_summary", "branch")
    );
    assert_eq!(row.session_id.as_deref(), Some(id));
    assert_eq!(row.model.as_deref(), Some("openai:gpt-test"));
    all
}

async fn a_failed_call_leaves_a_row_too(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(
        vec![],
        Reply::json(
            500,
            json!({"error": {"message": "down", "type": "server_error"}}),
        ),
    )
    .await;
    let mut config = chain_config(&fake, "openai:gpt-test", false);
    config.summarizers.max_retries = 0;
    let app = TestApp::handlers_with_store(config, store.clone());
    let answer = app.compact(&compact_body(PROMPT)).await;
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    let row = rows(&*store, "", 1).await.remove(0);
    assert_eq!(row.endpoint, "/v1/compact");
    assert_eq!(
        (row.outcome.as_str(), row.status),
        ("upstream_unavailable", 503)
    );
    assert_eq!(row.model, None);
    assert_eq!((row.input_tokens, row.summary_bytes), (0, 0));
    assert!(row.prompt_bytes >= PROMPT.len() as i64);
}

/// Thousands of summarizations at once (what a fleet sends at its peak): the rows are written in
/// batches and every one is kept.
async fn a_burst_of_calls_keeps_every_row(store: Arc<dyn Store>) {
    const CALLS: usize = 1500;
    let mut config = crate::support::config();
    config.summarizers.max_concurrent_per_key = 0;
    config.summarizers.max_queue = CALLS;
    config.summarizers.stages.cache_bytes = 0;
    config.access.rate_limit_per_minute = 0;
    let app = Arc::new(TestApp::handlers_with_store(config, store.clone()));
    let mut tasks = Vec::new();
    for n in 0..CALLS {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let prompt =
                format!("<conversation>\n[User]: fix bug {n} in src/lib.rs\n</conversation>");
            app.compact(&compact_body(&prompt)).await.status()
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    let started = Instant::now();
    loop {
        let kept = store
            .calls("", None, 10 * CALLS as i64)
            .await
            .unwrap()
            .len();
        if kept == CALLS {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{kept} of {CALLS} rows kept"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(app.metric("compactd_call_log_dropped_total").await, 0.0);
}

/// 30,000 rows at once, faster than any database takes single inserts: queued, written in
/// batches, none dropped; a store that refuses them counts every row it lost.
async fn a_flood_of_rows_is_written_in_batches_without_a_drop(store: Arc<dyn Store>) {
    use compactd::pipeline::calllog::CallLog;
    use compactd::pipeline::{Context, Endpoint, Event, Observer, Purpose, Run, SummarizeError};
    use compactd::summarizer::{ChainError, SummaryRequest};
    const ROWS: usize = 30_000;
    let metrics = Arc::new(compactd::metrics::Metrics::new());
    let log = CallLog::spawn(store.clone(), false, metrics.clone());
    let context = Context::new(Endpoint::Compact, "flood", None);
    let request = SummaryRequest::plain("s".into(), "p".into(), 1);
    let failed = SummarizeError::Chain(ChainError::DeadlineExceeded);
    for _ in 0..ROWS {
        log.observe(
            Run {
                context: &context,
                purpose: Purpose::Prompt,
            },
            &Event::Finished {
                request: &request,
                outcome: Err(&failed),
                latency: Duration::from_millis(1),
            },
        );
    }
    log.flush().await;
    assert_eq!(metrics.call_log_dropped.get(), 0);
    assert_eq!(
        store
            .calls("flood", None, 2 * ROWS as i64)
            .await
            .unwrap()
            .len(),
        ROWS
    );
}
