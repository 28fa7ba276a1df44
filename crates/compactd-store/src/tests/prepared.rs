//! Prepared summaries on both backends: one a session, replaced by a newer one, per tenant,
//! dropped only as the one that was read, and gone after a day.

use std::sync::Arc;

use crate::prepared::PREPARED_TTL_MS;
use crate::*;

on_both_backends!(
    a_session_keeps_its_newest_prepared_summary_for_its_tenant_only,
    one_replica_at_a_time_prepares_a_session_until_its_mark_expires
);

fn row(tenant: &str, session: &str, items: i64, at: i64) -> PreparedRow {
    PreparedRow {
        tenant: tenant.into(),
        session_key: session.into(),
        prefix_items: items,
        prefix_hash: format!("hash-{items}"),
        prefix_tokens: items * 100,
        summary: format!("## Goal\nsummary of {items} items"),
        model: "m".into(),
        created_at_ms: at,
    }
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
