//! The ledger's queries on both backends: the call log, budgets, cached summaries, keys and the
//! secrets the replicas share.

use std::sync::Arc;

use super::session;
use crate::*;

on_both_backends!(
    the_call_log_takes_rows,
    budgets_cached_summaries_and_fingerprints_are_kept,
    keys_are_found_by_hash_until_revoked_and_sessions_listed_per_tenant,
    the_first_shared_secret_stored_is_everyones,
);

/// Replicas racing to make a secret all get the one stored first.
async fn the_first_shared_secret_stored_is_everyones(store: Arc<dyn Store>) {
    let tries = (0..8).map(|i| {
        let store = store.clone();
        async move {
            store
                .shared_secret("s", &format!("candidate-{i}"), i)
                .await
                .unwrap()
        }
    });
    let got = futures_util::future::join_all(tries).await;
    assert!(got[0].starts_with("candidate-"), "{got:?}");
    assert!(got.iter().all(|g| *g == got[0]), "{got:?}");
    assert_eq!(store.shared_secret("s", "later", 9).await.unwrap(), got[0]);
    assert_eq!(store.shared_secret("other", "x", 9).await.unwrap(), "x");
}

async fn the_call_log_takes_rows(store: Arc<dyn Store>) {
    let call = CallRecord {
        endpoint: "/v1/compact".into(),
        tenant: "team-a".into(),
        purpose: "prompt".into(),
        session_id: None,
        model: Some("extractive".into()),
        outcome: "ok".into(),
        status: 200,
        prompt_bytes: 10,
        summary_bytes: 5,
        input_tokens: 3,
        output_tokens: 2,
        latency_ms: 1,
        prompt: None,
        summary: None,
        created_at_ms: 1,
        cached: false,
        cached_input_tokens: 0,
        summary_fingerprint: None,
        loop_detected: false,
        budget_exhausted: false,
        agent: "claude-code".into(),
        wire: "anthropic-messages".into(),
        tokens_before: 1200,
        tokens_after: 150,
        anchors: Some(7),
        anchors_kept: Some(6),
        call_id: 0,
    };
    store.log_calls(std::slice::from_ref(&call)).await.unwrap();
    let second = CallRecord {
        prompt: Some("p\0".into()),
        summary: Some("s".into()),
        created_at_ms: 2,
        ..call.clone()
    };
    store
        .log_calls(std::slice::from_ref(&second))
        .await
        .unwrap();
    store
        .log_calls(&[CallRecord {
            tenant: "team-b".into(),
            ..call.clone()
        }])
        .await
        .unwrap();
    // A batch of more rows than one statement carries goes in whole.
    let batch: Vec<CallRecord> = (0..1200)
        .map(|n| CallRecord {
            tenant: "team-c".into(),
            created_at_ms: n,
            ..call.clone()
        })
        .collect();
    store.log_calls(&batch).await.unwrap();
    assert_eq!(store.calls("team-c", None, 5000).await.unwrap().len(), 1200);
    // Newest first, the tenant's only; NUL in a stored prompt is replaced, as in every column.
    let read = store.calls("team-a", None, 10).await.unwrap();
    assert_eq!(read.len(), 2);
    assert_eq!(read[0].prompt.as_deref(), Some("p\u{FFFD}"));
    // Every column as written; the id is the log's.
    assert!(read[0].call_id > read[1].call_id && read[1].call_id > 0);
    assert_eq!(
        CallRecord {
            call_id: 0,
            ..read[1].clone()
        },
        call
    );
    assert_eq!(store.calls("team-a", None, 1).await.unwrap().len(), 1);
    // A page from a call on: the ones before it, none of another tenant's.
    let older = store
        .calls("team-a", Some(read[0].call_id), 10)
        .await
        .unwrap();
    assert_eq!(older.len(), 1);
    assert_eq!(older[0].call_id, read[1].call_id);
    assert!(
        store
            .calls("team-a", Some(read[1].call_id), 10)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn budgets_cached_summaries_and_fingerprints_are_kept(store: Arc<dyn Store>) {
    // Budgets: set, replaced, removed.
    assert_eq!(store.budget("team-a").await.unwrap(), None);
    store.set_budget("team-a", Some(1000), 1).await.unwrap();
    store.set_budget("team-a", Some(2000), 2).await.unwrap();
    assert_eq!(store.budget("team-a").await.unwrap(), Some(2000));
    assert_eq!(store.budget("team-b").await.unwrap(), None);
    store.set_budget("team-a", None, 3).await.unwrap();
    assert_eq!(store.budget("team-a").await.unwrap(), None);

    // Upstream tokens: model calls since a time; cache hits and the extractive summarizer free.
    let row = |model: &str, cached: bool, at: i64, fingerprint: Option<&str>| CallRecord {
        endpoint: "/v1/compact".into(),
        tenant: "team-a".into(),
        purpose: "prompt".into(),
        session_id: None,
        model: Some(model.into()),
        outcome: "ok".into(),
        status: 200,
        prompt_bytes: 10,
        summary_bytes: 5,
        input_tokens: 100,
        output_tokens: 10,
        latency_ms: 1,
        prompt: None,
        summary: None,
        created_at_ms: at,
        cached,
        cached_input_tokens: 0,
        summary_fingerprint: fingerprint.map(str::to_owned),
        loop_detected: false,
        budget_exhausted: false,
        agent: String::new(),
        wire: String::new(),
        tokens_before: 0,
        tokens_after: 0,
        anchors: None,
        anchors_kept: None,
        call_id: 0,
    };
    for call in [
        row("openai:m", false, 10, Some("f1")),
        row("openai:m", false, 20, None),
        row("openai:m", true, 30, None),
        row("extractive", false, 40, None),
        row("openai:m", false, 5, None),
    ] {
        store.log_calls(std::slice::from_ref(&call)).await.unwrap();
    }
    assert_eq!(
        store.upstream_tokens_since("team-a", 10).await.unwrap(),
        220
    );
    assert_eq!(store.upstream_tokens_since("team-b", 0).await.unwrap(), 0);
    assert!(
        store
            .summary_written_since("team-a", "f1", 10)
            .await
            .unwrap()
    );
    assert!(
        !store
            .summary_written_since("team-a", "f1", 11)
            .await
            .unwrap()
    );
    assert!(
        !store
            .summary_written_since("team-b", "f1", 0)
            .await
            .unwrap()
    );
    let read = store.calls("team-a", None, 10).await.unwrap();
    assert!(read.iter().any(|r| r.cached));

    // Cached summaries: until they expire; a second put replaces (in one batch too).
    let row = |summary: &str, created_at_ms: i64, expires_at_ms: i64| CachedSummaryRow {
        key: "k".into(),
        summary: summary.into(),
        created_at_ms,
        expires_at_ms,
    };
    store
        .put_cached_summaries(&[row("{\"a\":0}", 90, 200), row("{\"a\":1}", 100, 200)])
        .await
        .unwrap();
    assert_eq!(
        store.cached_summary("k", 150).await.unwrap().as_deref(),
        Some("{\"a\":1}")
    );
    assert_eq!(store.cached_summary("k", 200).await.unwrap(), None);
    store
        .put_cached_summaries(&[row("{\"a\":2}", 300, 400)])
        .await
        .unwrap();
    assert_eq!(
        store.cached_summary("k", 350).await.unwrap().as_deref(),
        Some("{\"a\":2}")
    );
    assert_eq!(store.cached_summary("other", 350).await.unwrap(), None);
}

/// SQLite is one process's store: a cache miss (every new conversation) is known without a
/// query, from the keys read when it opened and those written since — so a row written around
/// the store (another process on the file) is not found until the store is opened again.
#[tokio::test]
async fn sqlite_knows_its_cache_keys_across_a_restart_and_misses_without_a_query() {
    let dir = std::env::temp_dir().join(format!("compactd-cache-keys-{}", fastrand::u64(..)));
    let path = dir.join("cache.db");
    let far = now_ms() + 60_000;
    let (ours, around) = (format!("{:064x}", 7), format!("{:064x}", 8));
    let row = CachedSummaryRow {
        key: ours.clone(),
        summary: "{}".into(),
        created_at_ms: 0,
        expires_at_ms: far,
    };
    {
        let store = SqliteStore::open(&path, std::time::Duration::from_secs(5))
            .await
            .unwrap();
        store.put_cached_summaries(&[row]).await.unwrap();
        assert!(store.cached_summary(&ours, 0).await.unwrap().is_some());
        sqlx::query("insert into summary_cache (cache_key, summary, created_at_ms, expires_at_ms) values ($1, '{}', 0, $2)")
            .bind(&around)
            .bind(far)
            .execute(&store.pool)
            .await
            .unwrap();
        assert_eq!(store.cached_summary(&around, 0).await.unwrap(), None);
        store.close().await;
    }
    let reopened = SqliteStore::open(&path, std::time::Duration::from_secs(5))
        .await
        .unwrap();
    for key in [&ours, &around] {
        assert!(
            reopened.cached_summary(key, 0).await.unwrap().is_some(),
            "{key}"
        );
    }
    assert_eq!(
        reopened
            .cached_summary(&format!("{:064x}", 9), 0)
            .await
            .unwrap(),
        None
    );
    reopened.close().await;
    let _ = std::fs::remove_dir_all(dir);
}

async fn keys_are_found_by_hash_until_revoked_and_sessions_listed_per_tenant(
    store: Arc<dyn Store>,
) {
    assert_eq!(store.active_key_count().await.unwrap(), 0);
    // The store keeps what access control hashes; any hash will do here.
    let record = KeyRecord {
        key_id: "k1".into(),
        tenant: "team-a".into(),
        name: Some("ci".into()),
        key_hash: "5f1c0d…the hash of team-a's key".into(),
        created_at_ms: 1,
        revoked_at_ms: None,
    };
    store.create_key(&record).await.unwrap();
    assert_eq!(
        store.find_key(&record.key_hash).await.unwrap(),
        Some(record.clone())
    );
    assert_eq!(store.find_key("the hash of another").await.unwrap(), None);
    assert_eq!(store.active_key_count().await.unwrap(), 1);
    assert!(store.revoke_key(&record.key_id, 2).await.unwrap());
    assert!(
        !store.revoke_key(&record.key_id, 3).await.unwrap(),
        "revoked once"
    );
    assert_eq!(store.find_key(&record.key_hash).await.unwrap(), None);
    assert_eq!(store.list_keys().await.unwrap()[0].revoked_at_ms, Some(2));
    assert_eq!(store.active_key_count().await.unwrap(), 0);

    store
        .insert_session(&session("mine", 1), &[])
        .await
        .unwrap();
    store
        .insert_session(
            &SessionRecord {
                tenant: "t2".into(),
                ..session("theirs", 1)
            },
            &[],
        )
        .await
        .unwrap();
    let listed: Vec<String> = store
        .list_sessions("t1", 10, None, None)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.session_id)
        .collect();
    assert_eq!(listed, ["mine"]);
}
