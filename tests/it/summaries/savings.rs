//! Not paying twice: the summary cache (also across replicas sharing a store), provider prompt
//! caching, daily token budgets, and compaction loops flagged.

use std::sync::Arc;

use compactd_store::{CallRecord, Store};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    FakeProvider, PROMPT, Reply, TestApp, answer, chain_config, compact_body, metric_sample,
};

on_both_backends!(
    the_same_request_is_summarized_once_across_replicas,
    a_spent_budget_gets_extractive_summaries,
    a_compaction_loop_is_flagged_on_the_wire_and_in_the_history
);

/// The call log rows of the anonymous tenant, once at least `n` are written (rows are written
/// in the background).
async fn calls(store: &Arc<dyn Store>, n: usize) -> Vec<CallRecord> {
    for _ in 0..500 {
        let rows = store.calls("", None, 100).await.unwrap();
        if rows.len() >= n {
            return rows;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("fewer than {n} call log rows");
}

async fn the_same_request_is_summarized_once_across_replicas(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("cached"))).await;
    let config = chain_config(&fake, "openai:gpt-test", false);
    // Two replicas on one database.
    let state = compactd::http::AppState::with_store(&config, store.clone()).unwrap();
    let first_app = state.app.clone();
    let one = TestApp::in_process(state);
    let two = TestApp::handlers_with_store(config, store.clone());
    let body = compact_body(PROMPT);

    let first: Value = one.compact(&body).await.json().await.unwrap();
    assert_eq!(first["cached"], false);
    assert_eq!(fake.received().len(), 1);
    // The shared tier is written behind the answer, within moments (an agent retries after
    // seconds): the test waits for it rather than racing it.
    first_app.flush_writes().await;
    // An agent's retry on the same replica, then on the other: no model call.
    let again: Value = one.compact(&body).await.json().await.unwrap();
    let elsewhere: Value = two.compact(&body).await.json().await.unwrap();
    for hit in [&again, &elsewhere] {
        assert_eq!(hit["cached"], true);
        assert_eq!(hit["summary"], first["summary"]);
        assert_eq!(hit["fidelity"], first["fidelity"]);
    }
    assert_eq!(fake.received().len(), 1);
    // The chat wire shares the cache entry only when it is the same request; a different output
    // cap is another request.
    let mut capped = body.clone();
    capped["maxTokens"] = json!(500);
    let other: Value = two.compact(&capped).await.json().await.unwrap();
    assert_eq!(other["cached"], false);
    assert_eq!(fake.received().len(), 2);
    for app in [&one, &two] {
        let metrics = app.get("/metrics").await.text().await.unwrap();
        assert_eq!(
            metric_sample(&metrics, "compactd_summary_cache_total{outcome=\"hit\"}"),
            1.0
        );
    }
    // The call log tells hits from calls.
    let rows = calls(&store, 4).await;
    assert_eq!(rows.iter().filter(|r| r.cached).count(), 2);
}

#[tokio::test]
async fn a_fallback_summary_is_not_kept_for_the_retry() {
    // The model is down: the extractive summarizer answers, and the agent's retry asks the model
    // again instead of getting the fallback's summary from the cache.
    let fake = FakeProvider::start(
        vec![
            Reply::json(500, json!({"error": {"message": "down"}})),
            Reply::json(500, json!({"error": {"message": "down"}})),
            Reply::json(500, json!({"error": {"message": "down"}})),
        ],
        Reply::openai(&answer("back")),
    )
    .await;
    let app = TestApp::handlers(chain_config(&fake, "openai:gpt-test", true)).await;
    let first: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["model"], "extractive");
    let retry: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(retry["model"], "openai:gpt-test");
    assert_eq!(retry["cached"], false);
}

async fn a_spent_budget_gets_extractive_summaries(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai(&answer("paid"))).await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    // The fake's answers cost 127 tokens each: the budget allows one.
    store.set_budget("", Some(100), 0).await.unwrap();
    let paid: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(paid["model"], "openai:gpt-test");
    assert_eq!(paid["budgetExhausted"], false);
    calls(&store, 1).await;

    let other = PROMPT.replace("it broke", "it broke again");
    let response = app.compact(&compact_body(&other)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let fallback: Value = response.json().await.unwrap();
    assert_eq!(fallback["model"], "extractive");
    assert_eq!(fallback["budgetExhausted"], true);
    assert!(fallback["summary"].as_str().unwrap().contains("src/lib.rs"));
    assert_eq!(fake.received().len(), 1);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert_eq!(
        metric_sample(&metrics, "compactd_budget_exhausted_total"),
        1.0
    );
    // Extractive summaries cost nothing: the budget's use stays what the model cost.
    calls(&store, 2).await;
    assert_eq!(
        store.upstream_tokens_since("", 0).await.unwrap(),
        127,
        "only the model's tokens count"
    );
}

/// A history prompt as pi writes it, updating `previous` with `conversation`.
fn update_prompt(conversation: &str, previous: &str) -> String {
    format!(
        "<conversation>\n{conversation}\n</conversation>\n\n<previous-summary>\n{previous}\n</previous-summary>\n\nUpdate the summary. ## Critical Context"
    )
}

async fn a_compaction_loop_is_flagged_on_the_wire_and_in_the_history(store: Arc<dyn Store>) {
    let long = format!(
        "## Goal\nfix src/lib.rs\n\n## Progress\n{}",
        "- checked the parser and the tests again\n".repeat(10)
    );
    let fake = FakeProvider::start(vec![], Reply::openai(&long)).await;
    let app =
        TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store.clone());
    let first: Value = app
        .compact(&compact_body(PROMPT))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["loop"], false);
    calls(&store, 1).await;
    // An update of a summary nobody here wrote is a compaction like any other.
    let unrelated = update_prompt(
        "[User]: fix src/lib.rs",
        &"## Goal\nsomething else\n".repeat(20),
    );
    let normal: Value = app
        .compact(&compact_body(&unrelated))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(normal["loop"], false);
    // The agent comes back at once with the summary it just got (and pi's file lists after it)
    // and hardly anything new: a loop.
    let previous = format!(
        "{}\n\n<read-files>\nsrc/lib.rs\n</read-files>",
        first["summary"].as_str().unwrap()
    );
    let again = update_prompt("[User]: fix src/lib.rs", &previous);
    let looped: Value = app
        .compact(&compact_body(&again))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(looped["loop"], true);
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert_eq!(
        metric_sample(&metrics, "compactd_loops_total{endpoint=\"/v1/compact\"}"),
        1.0
    );

    // A stored session compacted twice in a row: the history lists the second as a loop.
    let header = json!({"type": "session", "version": 3, "id": "loop", "timestamp": "2026-11-22T10:00:00.000Z", "cwd": "/w"});
    let mut lines = vec![header.to_string()];
    let mut parent: Option<String> = None;
    for i in 0..12 {
        let id = format!("m{i:02}");
        let message = if i % 2 == 0 {
            json!({"role": "user", "content": format!("step {i}: {}", "u".repeat(400)), "timestamp": 1})
        } else {
            json!({"role": "assistant", "content": [{"type": "text", "text": "a".repeat(400)}],
                "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2})
        };
        lines.push(
            json!({"type": "message", "id": id, "parentId": parent, "timestamp": "2026-11-22T10:00:01.000Z", "message": message})
                .to_string(),
        );
        parent = Some(id);
    }
    let uploaded: Value = app
        .upload(lines.join("\n") + "\n")
        .await
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    let rows_before = store.calls("", None, 100).await.unwrap().len();
    let compacted: Value = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await
        .json()
        .await
        .unwrap();
    calls(&store, rows_before + 1).await;
    let leaf = compacted["entry"]["id"].as_str().unwrap();
    let next = json!({"type": "message", "id": "n0", "parentId": leaf, "timestamp": "2026-11-22T10:02:00.000Z",
        "message": {"role": "user", "content": format!("one more: {}", "v".repeat(1400)), "timestamp": 3}});
    let appended = app.append(&id, format!("{next}\n")).await;
    assert_eq!(appended.status(), StatusCode::OK);
    let second: Value = app
        .compact_session(&id, &json!({"keepRecentTokens": 300}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second["stages"]["loop"], true, "{second}");
    let history: Value = app.compactions(&id).await.json().await.unwrap();
    let flags: Vec<&Value> = history["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["loop"])
        .collect();
    assert_eq!(flags, [&json!(false), &json!(true)]);
}

#[tokio::test]
async fn anthropic_requests_mark_the_stable_prefix_and_cached_tokens_are_recorded() {
    let reply = Reply::json(
        200,
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
            "content": [{"type": "text", "text": answer("cached prefix")}], "stop_reason": "end_turn",
            "usage": {"input_tokens": 300, "cache_read_input_tokens": 4000,
                "cache_creation_input_tokens": 0, "output_tokens": 20}}),
    );
    let fake = FakeProvider::start(vec![], reply).await;
    let app = TestApp::handlers(chain_config(&fake, "anthropic:claude-test", false)).await;
    let previous =
        "## Goal\nfix src/lib.rs\n- a fact worth keeping across compactions\n".repeat(120);
    let prompt = update_prompt(
        "[User]: fix src/lib.rs\n\n[Tool result]: error: it broke",
        &previous,
    );
    let answered: Value = app
        .compact(&compact_body(&prompt))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(answered["usage"]["cachedInputTokens"], 4000);
    assert_eq!(answered["usage"]["inputTokens"], 4300);
    let sent = &fake.received()[0].body;
    assert_eq!(sent["system"][0]["cache_control"]["type"], "ephemeral");
    let content = sent["messages"][0]["content"].as_array().unwrap();
    // The previous summary first, as the cached block; then the conversation and instructions.
    assert!(
        content[0]["text"]
            .as_str()
            .unwrap()
            .starts_with("<previous-summary>")
    );
    assert_eq!(content[0]["cache_control"]["type"], "ephemeral");
    assert!(
        content[1]["text"]
            .as_str()
            .unwrap()
            .starts_with("<conversation>")
    );
    assert!(content[1].get("cache_control").is_none());
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert_eq!(
        metric_sample(
            &metrics,
            "compactd_upstream_cached_tokens_total{model=\"anthropic:claude-test\"}"
        ),
        4000.0
    );
}
