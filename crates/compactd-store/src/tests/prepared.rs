//! Prepared summaries on both backends: one a session, replaced by a newer one, per tenant,
//! dropped only as the one that was read, and gone after a day.

use std::sync::Arc;

use crate::prepared::PREPARED_TTL_MS;
use crate::*;

on_both_backends!(
    a_session_keeps_its_newest_prepared_summary_for_its_tenant_only,
    a_prepared_summary_is_found_by_its_opening_for_its_tenant_only,
    one_replica_at_a_time_prepares_a_session_until_its_mark_expires
);

fn row(tenant: &str, session: &str, items: i64, at: i64) -> PreparedRow {
    PreparedRow {
        tenant: tenant.into(),
        session_key: session.into(),
        opening: format!("first:{session}"),
        prefix_items: items,
        prefix_hash: format!("hash-{items}"),
        loose_hash: format!("loose-{items}"),
        prefix_tokens: items * 100,
        summary: format!("## Goal\nsummary of {items} items"),
        model: "m".into(),
        created_at_ms: at,
    }
}

async fn a_prepared_summary_is_found_by_its_opening_for_its_tenant_only(store: Arc<dyn Store>) {
    let now = 10 * PREPARED_TTL_MS;
    // Two sessions (their headers) of one conversation's opening: the newer answers.
    let older = PreparedRow {
        opening: "first:x".into(),
        ..row("a", "claude-code:1", 10, now)
    };
    let newer = PreparedRow {
        opening: "first:x".into(),
        ..row("a", "claude-code:2", 12, now + 5)
    };
    store.put_prepared(&older).await.unwrap();
    store.put_prepared(&newer).await.unwrap();
    store.put_prepared(&row("b", "s", 3, now)).await.unwrap();
    let found = store
        .prepared_opening("a", "first:x", now + 6)
        .await
        .unwrap();
    assert_eq!(found, Some(newer));
    assert_eq!(
        store
            .prepared_opening("b", "first:x", now + 6)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        store
            .prepared_opening("a", "first:y", now + 6)
            .await
            .unwrap(),
        None
    );
    // A row that was written without an opening is never found by an empty one.
    let unknown = PreparedRow {
        opening: String::new(),
        ..row("a", "s9", 1, now)
    };
    store.put_prepared(&unknown).await.unwrap();
    assert_eq!(
        store.prepared_opening("a", "", now + 6).await.unwrap(),
        None
    );
    // Gone after a day, like every prepared summary.
    let late = now + 5 + PREPARED_TTL_MS + 1;
    assert_eq!(
        store.prepared_opening("a", "first:x", late).await.unwrap(),
        None
    );
}

async fn a_session_keeps_its_newest_prepared_summary_for_its_tenant_only(store: Arc<dyn Store>) {
    let now = 10 * PREPARED_TTL_MS;
    store.put_prepared(&row("a", "s1", 10, now)).await.unwrap();
    store
        .put_prepared(&row("a", "s1", 20, now + 1))
        .await
        .unwrap();
    let kept = store.prepared("a", "s1", now + 2).await.unwrap().unwrap();
    assert_eq!(kept, row("a", "s1", 20, now + 1));
    assert_eq!(store.prepared("b", "s1", now + 2).await.unwrap(), None);
    assert_eq!(store.prepared("a", "s1\0", now + 2).await.unwrap(), None);

    // Dropped only as the one that was read: a newer preparation stays.
    assert!(!store.drop_prepared("a", "s1", now).await.unwrap());
    assert!(store.drop_prepared("a", "s1", now + 1).await.unwrap());
    assert_eq!(store.prepared("a", "s1", now + 2).await.unwrap(), None);

    // A day old: neither read nor kept.
    store.put_prepared(&row("a", "old", 5, now)).await.unwrap();
    let later = now + PREPARED_TTL_MS + 1;
    assert_eq!(store.prepared("a", "old", later).await.unwrap(), None);
    store
        .put_prepared(&row("a", "new", 5, later))
        .await
        .unwrap();
    assert!(
        !store.drop_prepared("a", "old", now).await.unwrap(),
        "purged"
    );
}

async fn one_replica_at_a_time_prepares_a_session_until_its_mark_expires(store: Arc<dyn Store>) {
    let now = 1_000_000;
    assert!(!store.preparing("a", "s1", now).await.unwrap());
    assert!(
        store
            .begin_preparing("a", "s1", now, now + 100)
            .await
            .unwrap()
    );
    assert!(store.preparing("a", "s1", now + 1).await.unwrap());
    assert!(
        !store
            .begin_preparing("a", "s1", now + 1, now + 101)
            .await
            .unwrap(),
        "another replica's"
    );
    assert!(
        store
            .begin_preparing("b", "s1", now, now + 100)
            .await
            .unwrap(),
        "per tenant"
    );
    // A replica that died mid-way: its mark expires.
    assert!(!store.preparing("a", "s1", now + 101).await.unwrap());
    assert!(
        store
            .begin_preparing("a", "s1", now + 101, now + 200)
            .await
            .unwrap()
    );
    store.end_preparing("a", "s1").await.unwrap();
    assert!(!store.preparing("a", "s1", now + 102).await.unwrap());
    assert!(
        store
            .begin_preparing("a", "s1", now + 102, now + 200)
            .await
            .unwrap()
    );
}
