//! Recall kept before its turns were keyed by conversation number (issue 26) is still read,
//! searched and purged after the upgrade, on both stores: the migration moves every turn to its
//! conversation's number, and SQLite's full-text index keeps pointing at the same turns.

use compactd_store::{NewRecall, Recall, RecallQuery, RecallTurn};

/// The last migration before turns were keyed by number (the same version on both stores).
const BEFORE_NUMBERS: i64 = 20261129000001;
const NOW: i64 = 1_800_000_000_000;

/// Two conversations written as the old schema held them: (id, expires_at_ms, turn texts).
const OLD: [(&str, i64, [&str; 2]); 2] = [
    (
        "r-old-1",
        NOW + 60_000,
        [
            "fix the flaky retry in src/net/backoff.rs",
            "done: jitter added",
        ],
    ),
    (
        "r-old-2",
        NOW - 1,
        ["an expired conversation about zebras", "zebras noted"],
    ),
];

const INSERT_RECALL: &str = "insert into recalls (id, tenant, source, created_at_ms, expires_at_ms) \
     values ($1, 'acme', 'remote-endpoint', 1, $2)";
const INSERT_TURN: &str = "insert into recall_turns (recall_id, tenant, seq, role, tool, paths, text) \
     values ($1, 'acme', $2, 'user', null, '', $3)";

/// A test per store: its migrations up to [`BEFORE_NUMBERS`], the old rows written as that
/// schema held them, then the store opened on the database, which applies the rest.
macro_rules! upgraded {
    ($pool:ident, $store:ty, $migrations:literal) => {{
        let pool = $pool;
        sqlx::migrate!($migrations)
            .run_to(BEFORE_NUMBERS, &pool)
            .await
            .unwrap();
        for (id, expires, texts) in OLD {
            sqlx::query(INSERT_RECALL)
                .bind(id)
                .bind(expires)
                .execute(&pool)
                .await
                .unwrap();
            for (seq, text) in texts.iter().enumerate() {
                sqlx::query(INSERT_TURN)
                    .bind(id)
                    .bind(seq as i32)
                    .bind(*text)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        }
        let store = <$store>::from_pool(pool).await.unwrap();
        kept_across_the_upgrade(&store).await;
    }};
}

compactd_testkit::postgres_test! {
    async fn postgres(pool: sqlx::PgPool) {
        upgraded!(pool, compactd_store::PgStore, "./crates/compactd-store/migrations/postgres")
    }
}

#[sqlx::test(migrations = false)]
async fn sqlite(pool: sqlx::SqlitePool) {
    upgraded!(
        pool,
        compactd_store::SqliteStore,
        "./crates/compactd-store/migrations/sqlite"
    )
}

/// SQLite's full-text index merges sixteen segments at a time (FTS5's default is four).
#[sqlx::test(migrations = false)]
async fn sqlite_full_text_index_merges_sixteen_segments_at_a_time(pool: sqlx::SqlitePool) {
    compactd_store::SqliteStore::from_pool(pool.clone())
        .await
        .unwrap();
    let automerge: i64 =
        sqlx::query_scalar("select v from recall_fts_config where k = 'automerge'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(automerge, 16);
}

async fn kept_across_the_upgrade(store: &impl Recall) {
    old_conversations_read_back(store).await;
    a_new_conversation_sits_beside_them(store).await;
    the_expired_one_goes(store).await;
}

fn search(text: &str) -> RecallQuery {
    RecallQuery {
        text: text.to_owned(),
        limit: 10,
        now_ms: NOW,
        ..RecallQuery::default()
    }
}

/// An old conversation reads back whole and in order, and its words are found.
async fn old_conversations_read_back(store: &impl Recall) {
    let (total, turns) = store
        .recall_turns("acme", "r-old-1", 0, 50, NOW)
        .await
        .unwrap()
        .expect("the old conversation is still there");
    assert_eq!(total, 2);
    let texts: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
    assert_eq!(texts, OLD[0].2);
    // Its words are found, under its id, in the turn that holds them.
    let hits = store
        .search_recall("acme", &search("jitter"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!((hits[0].recall_id.as_str(), hits[0].seq), ("r-old-1", 1));
    let hits = store
        .search_recall(
            "acme",
            &RecallQuery {
                recall_id: Some("r-old-1".into()),
                ..search("flaky")
            },
        )
        .await
        .unwrap();
    assert_eq!(hits.len(), 1, "{hits:?}");
    assert_eq!(hits[0].seq, 0);
}

/// A conversation kept after the upgrade sits beside the old ones; keeping it again adds
/// nothing.
async fn a_new_conversation_sits_beside_them(store: &impl Recall) {
    let new = NewRecall {
        id: "r-new".into(),
        tenant: "acme".into(),
        source: "chat".into(),
        session_id: None,
        created_at_ms: NOW,
        expires_at_ms: NOW + 60_000,
        turns: (0..3)
            .map(|seq| RecallTurn {
                seq,
                role: "assistant".into(),
                tool: None,
                paths: String::new(),
                text: format!("turn {seq} mentions jitter again"),
            })
            .collect(),
    };
    store
        .save_recalls(std::slice::from_ref(&new))
        .await
        .unwrap();
    store.save_recalls(&[new]).await.unwrap();
    let (total, _) = store
        .recall_turns("acme", "r-new", 0, 50, NOW)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(total, 3);
    let hits = store
        .search_recall("acme", &search("jitter"))
        .await
        .unwrap();
    let mut found: Vec<(&str, i32)> = hits.iter().map(|h| (h.recall_id.as_str(), h.seq)).collect();
    found.sort();
    assert_eq!(
        found,
        [("r-new", 0), ("r-new", 1), ("r-new", 2), ("r-old-1", 1)]
    );
}

/// The expired old conversation goes with its turns (searched as of before it expired, to see
/// them go from the index too); the rest stay.
async fn the_expired_one_goes(store: &impl Recall) {
    let before_expiry = |text: &str| RecallQuery {
        now_ms: NOW - 10,
        ..search(text)
    };
    let hits = store
        .search_recall("acme", &before_expiry("zebras"))
        .await
        .unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert_eq!(store.purge_recalls(NOW).await.unwrap(), 1);
    assert!(
        store
            .recall_turns("acme", "r-old-2", 0, 50, NOW - 10)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .search_recall("acme", &before_expiry("zebras"))
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .recall_turns("acme", "r-old-1", 0, 50, NOW)
            .await
            .unwrap()
            .is_some()
    );
}
