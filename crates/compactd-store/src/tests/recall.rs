//! Recall's queries on both backends.

use std::sync::Arc;

use super::{entry, session};
use crate::*;

on_both_backends!(
    recalls_expire_and_are_purged_per_tenant,
    a_sessions_recall_lasts_until_the_session_is_deleted,
);

/// Recall: a conversation is found until it expires, only by its tenant; the purge deletes the
/// expired ones (their index entries too: a new conversation with the same words is found alone).
async fn recalls_expire_and_are_purged_per_tenant(store: Arc<dyn Store>) {
    let turn = |seq: i32, text: &str| RecallTurn {
        seq,
        role: "tool".into(),
        tool: Some("bash".into()),
        paths: "src/lib.rs".into(),
        text: text.into(),
    };
    let recall = |id: &str, tenant: &str, expires: i64| NewRecall {
        id: id.into(),
        tenant: tenant.into(),
        source: "remote-endpoint".into(),
        session_id: None,
        created_at_ms: 1,
        expires_at_ms: expires,
        turns: vec![turn(0, "the quokka test failed"), turn(1, "nothing here")],
    };
    store
        .save_recalls(&[recall("r_old", "t", 100), recall("r_new", "t", 10_000)])
        .await
        .unwrap();
    let query = |now_ms: i64| RecallQuery {
        text: "quokka".into(),
        limit: 10,
        now_ms,
        ..RecallQuery::default()
    };
    let ids = |hits: Vec<RecallHit>| hits.into_iter().map(|h| h.recall_id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.search_recall("t", &query(50)).await.unwrap()).len(),
        2
    );
    assert_eq!(
        ids(store.search_recall("t", &query(500)).await.unwrap()),
        ["r_new"]
    );
    assert!(
        store
            .search_recall("other", &query(50))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .recall_turns("other", "r_new", 0, 10, 50)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .recall_turns("t", "r_old", 0, 10, 500)
            .await
            .unwrap()
            .is_none()
    );
    let (total, turns) = store
        .recall_turns("t", "r_new", 1, 10, 500)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (total, turns.len(), turns[0].text.as_str()),
        (2, 1, "nothing here")
    );
    assert_eq!(store.purge_recalls(500).await.unwrap(), 1);
    assert_eq!(
        ids(store.search_recall("t", &query(50)).await.unwrap()),
        ["r_new"]
    );
    // By path and by tool.
    let by_path = RecallQuery {
        path: Some("lib.rs".into()),
        ..query(500)
    };
    assert_eq!(store.search_recall("t", &by_path).await.unwrap().len(), 1);
    let by_tool = RecallQuery {
        tool: Some("read".into()),
        ..query(500)
    };
    assert!(store.search_recall("t", &by_tool).await.unwrap().is_empty());
}

/// A session's recall: no expiry, found by its session, added to by later compactions, and
/// deleted with the session.
async fn a_sessions_recall_lasts_until_the_session_is_deleted(store: Arc<dyn Store>) {
    for id in ["s", "other"] {
        store
            .insert_session(&session(id, 1), &[entry(0, "e1", None)])
            .await
            .unwrap();
    }
    let kept = |id: &str, session: &str, turns: Vec<RecallTurn>| NewRecall {
        id: id.into(),
        tenant: "t".into(),
        source: "session".into(),
        session_id: Some(session.into()),
        created_at_ms: 1,
        expires_at_ms: i64::MAX,
        turns,
    };
    // Two compactions of "s": the second repeats an entry of the first and adds one.
    store
        .save_recalls(&[kept("r_s", "s", vec![user_turn(0, "the wombat plan")])])
        .await
        .unwrap();
    store
        .save_recalls(&[
            kept(
                "r_s",
                "s",
                vec![
                    user_turn(0, "the wombat plan"),
                    user_turn(3, "wombat again"),
                ],
            ),
            kept("r_other", "other", vec![user_turn(0, "a wombat elsewhere")]),
        ])
        .await
        .unwrap();
    assert_eq!(store.purge_recalls(i64::MAX - 1).await.unwrap(), 0);
    let query = |session: Option<&str>| RecallQuery {
        text: "wombat".into(),
        session_id: session.map(str::to_owned),
        limit: 10,
        now_ms: 1_000,
        ..RecallQuery::default()
    };
    let found = |hits: Vec<RecallHit>| {
        let mut found: Vec<(String, i32)> = hits
            .into_iter()
            .map(|h| (h.session_id.unwrap(), h.seq))
            .collect();
        found.sort();
        found
    };
    assert_eq!(
        found(store.search_recall("t", &query(Some("s"))).await.unwrap()),
        [("s".to_owned(), 0), ("s".to_owned(), 3)]
    );
    assert_eq!(
        store.search_recall("t", &query(None)).await.unwrap().len(),
        3
    );
    let (total, _) = store
        .recall_turns("t", "r_s", 0, 10, 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, 2);
    assert!(store.delete_session("s").await.unwrap());
    assert!(
        store
            .recall_turns("t", "r_s", 0, 10, 1_000)
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        found(store.search_recall("t", &query(None)).await.unwrap()),
        [("other".to_owned(), 0)]
    );
}

/// SQLite: the turns of one save go into the full-text index as one segment, however many
/// statements wrote them (FTS5 ends a segment with every statement that feeds it, and each
/// segment is merged again later).
#[sqlx::test(migrations = false)]
async fn sqlite_indexes_the_turns_of_a_save_as_one_segment(pool: sqlx::SqlitePool) {
    let store = SqliteStore::from_pool(pool.clone()).await.unwrap();
    // Three conversations of two turns: six rows, written by two inserts (five, then one).
    let save = |round: usize| {
        let recalls: Vec<NewRecall> = (0..3)
            .map(|i| NewRecall {
                id: format!("r{round}-{i}"),
                tenant: "t".into(),
                source: "remote-endpoint".into(),
                session_id: None,
                created_at_ms: 1,
                expires_at_ms: i64::MAX,
                turns: vec![
                    user_turn(0, "the numbat plan"),
                    user_turn(1, "numbat again"),
                ],
            })
            .collect();
        let store = &store;
        async move { store.save_recalls(&recalls).await.unwrap() }
    };
    // A segment this small is one page of the index's data table.
    let pages = || async {
        sqlx::query_scalar::<_, i64>("select count(*) from recall_fts_data")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    save(0).await;
    for round in 1..=2 {
        let before = pages().await;
        save(round).await;
        assert_eq!(pages().await - before, 1, "save {round}: one new segment");
    }
    let query = RecallQuery {
        text: "numbat".into(),
        limit: 100,
        now_ms: 1_000,
        ..RecallQuery::default()
    };
    assert_eq!(store.search_recall("t", &query).await.unwrap().len(), 18);
    // The same conversations saved again add no turns, so nothing to the index either.
    save(2).await;
    assert_eq!(store.search_recall("t", &query).await.unwrap().len(), 18);
}

/// A user's turn of a conversation kept for recall.
fn user_turn(seq: i32, text: &str) -> RecallTurn {
    RecallTurn {
        seq,
        role: "user".into(),
        tool: None,
        paths: String::new(),
        text: text.into(),
    }
}
