//! Every compaction compactd serves, on any wire, is a call of its tenant's log with the agent and
//! wire it came by, its tokens before and after and what the gate found — listed by
//! `GET /v1/calls` a page at a time and counted by `compactd_compactions_total{agent, wire}`:
//! Claude Code's, Codex's and OpenCode's compactions at the gateway (recorded from 2.1.332,
//! 0.171.0 and 1.18.33), the remote endpoint's, and a stored session's.

use std::collections::BTreeSet;
use std::sync::Arc;

use compactd::access::new_key;
use compactd_store::{Store, now_ms};
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::FakeProvider;
use crate::support::gateway::recorded;
use crate::support::{PROMPT, TestApp, compact_body, config, eventually};

on_both_backends!(the_call_log_pages_each_tenants_compactions_with_their_agent_and_wire);

/// The first compaction of a recorded session.
fn first_compaction(fixture: &'static str) -> crate::support::gateway::Recorded {
    recorded(fixture)
        .into_iter()
        .find(|r| r.compaction)
        .unwrap()
}

async fn page(app: &TestApp, key: &str, query: &str) -> Value {
    let response = app
        .send(
            app.client
                .get(format!("{}/v1/calls{query}", app.url))
                .bearer_auth(key),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

async fn the_call_log_pages_each_tenants_compactions_with_their_agent_and_wire(
    store: Arc<dyn Store>,
) {
    let mut keys = Vec::new();
    for tenant in ["alice", "bob"] {
        let (key, record) = new_key(tenant, None, now_ms());
        store.create_key(&record).await.unwrap();
        keys.push(key);
    }
    let (alice, bob) = (&keys[0], &keys[1]);
    let provider = FakeProvider::wires().await;
    let mut config = config();
    config.gateway.enabled = true;
    config.gateway.anthropic_upstream = provider.url.parse().unwrap();
    config.gateway.context_edits = compactd::config::ContextEdits::Upstream;
    config.gateway.openai_upstream = format!("{}/v1", provider.url).parse().unwrap();
    let app = TestApp::with_store(config, store.clone()).await;

    compact_as_alices_agents_and_bobs(&app, &provider, alice, bob).await;
    alices_pages_hold_each_call_once(&app, alice).await;
    bob_sees_his_own_and_the_metrics_count_all(&app, alice, bob).await;
}

/// Alice's agents compact at the gateway, and a pi-family agent at the remote endpoint, twice
/// for her and once for Bob.
async fn compact_as_alices_agents_and_bobs(
    app: &TestApp,
    provider: &FakeProvider,
    alice: &str,
    bob: &str,
) {
    let base = format!("{}/k/{alice}", app.url);
    for fixture in [
        "sessions/claude-code-2.1.332",
        "sessions/codex-custom-provider-0.171.0",
        "sessions/opencode-1.18.33",
    ] {
        let response = first_compaction(fixture)
            .request(&app.client, &base)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{fixture}");
    }
    for key in [alice, alice, bob] {
        let response = app
            .post(&format!("/k/{key}/v1/compact"), &compact_body(PROMPT))
            .await;
        assert_eq!(response.status(), StatusCode::OK);
    }
    assert!(
        provider.received().is_empty(),
        "every compaction was compactd's"
    );
}

/// Alice's calls, two at a time, newest first, each once, with their agent, wire, sizes and the
/// gate's finding, and no text.
async fn alices_pages_hold_each_call_once(app: &TestApp, alice: &str) {
    // The calls are written behind: wait until the log has them all.
    eventually("alice's five calls", || async {
        let calls = page(app, alice, "?limit=500").await;
        (calls["calls"].as_array()?.len() == 5).then_some(())
    })
    .await;
    // Two at a time, newest first, each once.
    let mut seen = Vec::new();
    let mut query = "?limit=2".to_owned();
    loop {
        let page = page(app, alice, &query).await;
        let calls = page["calls"].as_array().unwrap();
        assert!(calls.len() <= 2);
        seen.extend(calls.iter().cloned());
        match page["next"].as_i64() {
            Some(next) => query = format!("?limit=2&before={next}"),
            None => break,
        }
    }
    let ids: Vec<i64> = seen.iter().map(|c| c["id"].as_i64().unwrap()).collect();
    assert_eq!(ids.len(), 5, "{seen:?}");
    assert!(
        ids.windows(2).all(|w| w[0] > w[1]),
        "newest first, none twice: {ids:?}"
    );
    let by: BTreeSet<(String, String)> = seen
        .iter()
        .map(|c| {
            (
                c["agent"].as_str().unwrap().to_owned(),
                c["wire"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = [
        ("claude-code", "anthropic-messages"),
        ("codex", "responses"),
        ("opencode", "chat-completions"),
        ("pi-family", "remote-endpoint"),
    ]
    .iter()
    .map(|(a, w)| ((*a).to_owned(), (*w).to_owned()))
    .collect();
    assert_eq!(by, expected);
    for call in &seen {
        assert_eq!(call["outcome"], "ok");
        let (before, after) = (call["tokensBefore"].as_i64(), call["tokensAfter"].as_i64());
        assert!(before > Some(0) && after > Some(0), "{call}");
        // An agent's history is longer than its summary (the test's remote prompt is a line).
        if call["agent"] != "pi-family" {
            assert!(before > after, "a summary shorter than it replaced: {call}");
        }
        let (anchors, kept) = (call["anchors"].as_i64(), call["anchorsKept"].as_i64());
        assert!(
            anchors.is_some_and(|a| a > 0) && kept <= anchors,
            "the gate's finding: {call}"
        );
        assert!(call.get("prompt").is_none() && call.get("summary").is_none());
    }
}

/// Bob sees his one call, none of Alice's; the metrics count by agent and wire; a bad cursor is
/// named.
async fn bob_sees_his_own_and_the_metrics_count_all(app: &TestApp, alice: &str, bob: &str) {
    // Bob sees his one call, none of Alice's (the log is written in the background: once it is
    // there).
    let bobs = eventually("bob's call", || async {
        let bobs = page(app, bob, "").await["calls"].as_array()?.clone();
        (!bobs.is_empty()).then_some(bobs)
    })
    .await;
    assert_eq!(bobs.len(), 1);
    assert_eq!(bobs[0]["agent"], "pi-family");

    // Counted by agent and wire.
    for (labels, count) in [
        ("agent=\"claude-code\",wire=\"anthropic-messages\"", 1.0),
        ("agent=\"codex\",wire=\"responses\"", 1.0),
        ("agent=\"opencode\",wire=\"chat-completions\"", 1.0),
        ("agent=\"pi-family\",wire=\"remote-endpoint\"", 3.0),
    ] {
        let sample = format!("compactd_compactions_total{{{labels}}}");
        assert_eq!(app.metric(&sample).await, count, "{sample}");
    }
    assert!(app.metric("compactd_compaction_tokens_saved_total").await > 0.0);

    // A cursor that is not a number is named.
    let wrong = app
        .send(
            app.client
                .get(format!("{}/v1/calls?before=yesterday", app.url))
                .bearer_auth(alice),
        )
        .await;
    assert_eq!(wrong.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let body: Value = wrong.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("before"),
        "{body}"
    );
}
