//! Every query on both backends: each test body runs against a fresh PostgreSQL database (from
//! `DATABASE_URL`; skipped without it, see `compactd_testkit`) and a fresh SQLite database.

use std::sync::Arc;

use super::*;

/// Runs `$body(store)` once per backend.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            compactd_testkit::postgres_test! {
                async fn postgres(pool: sqlx::PgPool) {
                    super::$name(std::sync::Arc::new(crate::PgStore::from_pool(pool).await.unwrap())).await
                }
            }
            #[sqlx::test(migrations = false)]
            async fn sqlite(pool: sqlx::SqlitePool) {
                super::$name(std::sync::Arc::new(crate::SqliteStore::from_pool(pool).await.unwrap())).await
            }
        }
    )*};
}

on_both_backends!(
    sessions_round_trip_with_their_entries_in_order,
    listing_is_paginated_oldest_first,
    appends_are_guarded_by_the_entry_count,
    entry_facts_and_line_ranges_round_trip,
    deleting_removes_entries_and_compactions,
    pins_belong_to_their_session,
    concurrent_pins_keep_the_limit_and_are_not_doubled,
);

mod ledger;
mod prepared;
mod recall;

fn session(id: &str, created: i64) -> SessionRecord {
    SessionRecord {
        session_id: id.to_owned(),
        tenant: "t1".to_owned(),
        header_id: format!("header-{id}"),
        title_line: None,
        header: r#"{"type":"session","version":3,"id":"h"}"#.to_owned(),
        source_version: 3,
        leaf_id: Some("e2".into()),
        entry_count: 2,
        byte_size: 100,
        context_tokens: 10,
        created_at_ms: created,
        updated_at_ms: created,
        facts_version: 1,
        compaction_count: 0,
    }
}

/// The row at position `seq`; its facts are made up (the store keeps what it is given).
fn entry(seq: i64, id: &str, parent: Option<&str>) -> NewEntry {
    NewEntry {
        facts: FactRecord {
            seq,
            entry_id: id.to_owned(),
            parent_seq: parent.map(|_| seq - 1),
            entry_type: "message".into(),
            role: Some("user".into()),
            tokens: Some(seq * 3),
            usage_tokens: (seq % 2 == 1).then_some(seq as f64 + 0.5),
            ctx_usage: (seq % 3 == 0).then_some(1e21),
            ctx_trailing: seq,
            first_kept_id: (seq % 5 == 0).then(|| format!("k\t{seq}")),
        },
        parent_id: parent.map(str::to_owned),
        raw: format!(r#"{{"type":"message","id":"{id}","text":"é 😀 \n"}}"#),
    }
}

async fn sessions_round_trip_with_their_entries_in_order(store: Arc<dyn Store>) {
    store.ready().await.unwrap();
    let record = SessionRecord {
        title_line: Some(r#"{"type":"title","v":1}"#.into()),
        ..session("s1", 5)
    };
    let entries: Vec<NewEntry> = (0..4500)
        .map(|i| {
            entry(
                i,
                &format!("e{i}"),
                (i > 0).then(|| format!("e{}", i - 1)).as_deref(),
            )
        })
        .collect();
    store.insert_session(&record, &entries).await.unwrap();
    assert_eq!(store.get_session("s1").await.unwrap(), Some(record));
    assert_eq!(
        store.entries("s1").await.unwrap(),
        entries.iter().map(NewEntry::record).collect::<Vec<_>>(),
        "more than two insert batches, in order"
    );
    assert_eq!(store.get_session("nope").await.unwrap(), None);
    assert!(store.entries("nope").await.unwrap().is_empty());
    // The same session id twice is a conflict named by its constraint.
    let err = store
        .insert_session(&session("s1", 6), &[])
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
}

async fn listing_is_paginated_oldest_first(store: Arc<dyn Store>) {
    for (id, created) in [("b", 2), ("a", 2), ("c", 1), ("d", 3)] {
        store
            .insert_session(&session(id, created), &[])
            .await
            .unwrap();
    }
    let ids = |page: Vec<SessionRecord>| page.into_iter().map(|s| s.session_id).collect::<Vec<_>>();
    let first = store.list_sessions("t1", 2, None, None).await.unwrap();
    assert_eq!(ids(first.clone()), ["c", "a"]);
    let last = first.last().unwrap();
    let second = store
        .list_sessions(
            "t1",
            2,
            Some((last.created_at_ms, last.session_id.clone())),
            None,
        )
        .await
        .unwrap();
    assert_eq!(ids(second), ["b", "d"]);

    // Searching: by the start of the id, or anywhere in the header (its cwd), ignoring case;
    // LIKE's wildcards in the search are plain characters.
    let mut wild = session("x_1", 4);
    wild.header = r#"{"type":"session","cwd":"/Users/Ana/100%_Done"}"#.to_owned();
    store.insert_session(&wild, &[]).await.unwrap();
    let search = |q: &'static str| {
        let store = store.clone();
        async move { ids(store.list_sessions("t1", 10, None, Some(q)).await.unwrap()) }
    };
    assert_eq!(search("X_").await, ["x_1"]);
    assert_eq!(search("ana/100%_d").await, ["x_1"]);
    assert_eq!(search("%").await, ["x_1"]);
    assert_eq!(search("_").await, ["x_1"]);
    assert_eq!(search("c").await, ["c", "x_1"]);
    assert!(search("100%x").await.is_empty());
    assert!(
        store
            .list_sessions("t2", 10, None, Some("x"))
            .await
            .unwrap()
            .is_empty()
    );
}

async fn entry_facts_and_line_ranges_round_trip(store: Arc<dyn Store>) {
    // 100 rows go through PostgreSQL's COPY, 3 through its INSERT: both must store the same.
    for (id, count) in [("big", 100), ("small", 3)] {
        let rows: Vec<NewEntry> = (0..count)
            .map(|i| entry(i, &format!("e{i}"), (i > 0).then_some("p")))
            .collect();
        let record = SessionRecord {
            entry_count: count,
            ..session(id, 1)
        };
        store.insert_session(&record, &rows).await.unwrap();
        let facts: Vec<FactRecord> = rows.iter().map(|r| r.facts.clone()).collect();
        assert_eq!(store.entry_facts(id, 0).await.unwrap(), facts, "{id}");
        assert_eq!(store.entry_facts(id, 2).await.unwrap(), facts[2..], "{id}");
        let lines = store.entry_lines(id, 1, 2).await.unwrap();
        assert_eq!(
            lines,
            [(1, rows[1].raw.clone()), (2, rows[2].raw.clone())],
            "{id}"
        );
    }
    // Facts derived later replace the stored ones once: the session is claimed by its version.
    let stale = SessionRecord {
        facts_version: 0,
        compaction_count: 0,
        ..session("old", 2)
    };
    store
        .insert_session(&stale, &[entry(0, "a", None)])
        .await
        .unwrap();
    assert_eq!(store.stale_sessions(1, 10).await.unwrap(), ["old"]);
    let derived = FactRecord {
        tokens: Some(77),
        ctx_trailing: 77,
        ..entry(0, "a", None).facts
    };
    store
        .write_facts("old", std::slice::from_ref(&derived), 1)
        .await
        .unwrap();
    assert_eq!(
        store.entry_facts("old", 0).await.unwrap(),
        std::slice::from_ref(&derived)
    );
    assert!(store.stale_sessions(1, 10).await.unwrap().is_empty());
    let ignored = FactRecord {
        tokens: Some(1),
        ..derived.clone()
    };
    store.write_facts("old", &[ignored], 1).await.unwrap();
    assert_eq!(store.entry_facts("old", 0).await.unwrap(), [derived]);
}

async fn appends_are_guarded_by_the_entry_count(store: Arc<dyn Store>) {
    store
        .insert_session(
            &session("s", 1),
            &[entry(0, "e1", None), entry(1, "e2", Some("e1"))],
        )
        .await
        .unwrap();
    let append = Append {
        expected_entry_count: 2,
        entries: vec![entry(2, "e3", Some("e2"))],
        leaf_id: Some("e3".into()),
        context_tokens: 42,
        compaction: Some(CompactionRecord {
            session_id: "s".into(),
            entry_id: "e3".into(),
            leaf_id: "e2".into(),
            first_kept_entry_id: "e2".into(),
            model: "extractive".into(),
            input_tokens: 1,
            output_tokens: 2,
            latency_ms: 3,
            tokens_before: 100,
            tokens_after: 40,
            summary: "S".into(),
            created_at_ms: 9,
            fidelity: Some(r#"{"anchors":3}"#.into()),
            loop_detected: true,
            cached: true,
        }),
    };
    let mut append = append;
    append.entries[0].facts.entry_type = "compaction".into();
    store.append("s", &append, 77).await.unwrap();
    let stored = store.get_session("s").await.unwrap().unwrap();
    assert_eq!(
        (
            stored.entry_count,
            stored.leaf_id.as_deref(),
            stored.context_tokens,
            stored.updated_at_ms,
            stored.compaction_count
        ),
        (3, Some("e3"), 42, 77, 1)
    );
    assert_eq!(
        stored.byte_size,
        100 + entry(2, "e3", None).raw.len() as i64 + 1
    );
    assert_eq!(
        store.entries("s").await.unwrap().last().unwrap().entry_id,
        "e3"
    );
    assert_eq!(
        store.compactions("s").await.unwrap(),
        [append.compaction.clone().unwrap()]
    );
    // The entry made from a leaf is found by the leaf, and nothing for another leaf.
    assert_eq!(
        store.compaction_from("s", "e2").await.unwrap(),
        Some(append.entries[0].record())
    );
    assert_eq!(store.compaction_from("s", "e1").await.unwrap(), None);

    // A second writer that read the old count changes nothing.
    let stale = Append {
        entries: vec![entry(2, "e4", Some("e2"))],
        compaction: None,
        ..append.clone()
    };
    assert!(matches!(
        store.append("s", &stale, 78).await.unwrap_err(),
        StoreError::Changed
    ));
    assert_eq!(store.entries("s").await.unwrap().len(), 3);
    // A duplicate id rolls the whole append back.
    let duplicate = Append {
        expected_entry_count: 3,
        entries: vec![entry(3, "e5", None), entry(4, "e1", None)],
        compaction: None,
        ..append
    };
    assert!(matches!(
        store.append("s", &duplicate, 79).await.unwrap_err(),
        StoreError::Conflict(_)
    ));
    let stored = store.get_session("s").await.unwrap().unwrap();
    assert_eq!((stored.entry_count, stored.updated_at_ms), (3, 77));
    assert_eq!(store.entries("s").await.unwrap().len(), 3);
}

async fn deleting_removes_entries_and_compactions(store: Arc<dyn Store>) {
    store
        .insert_session(&session("s", 1), &[entry(0, "e1", None)])
        .await
        .unwrap();
    store
        .insert_session(&session("t", 1), &[entry(0, "e1", None)])
        .await
        .unwrap();
    assert!(store.delete_session("s").await.unwrap());
    assert!(!store.delete_session("s").await.unwrap());
    assert_eq!(store.get_session("s").await.unwrap(), None);
    assert!(store.entries("s").await.unwrap().is_empty());
    assert_eq!(
        store.entries("t").await.unwrap().len(),
        1,
        "other sessions keep their entries"
    );
}

async fn pins_belong_to_their_session(store: Arc<dyn Store>) {
    store
        .insert_session(&session("s", 1), &[entry(0, "e1", None)])
        .await
        .unwrap();
    store
        .insert_session(&session("other", 2), &[entry(0, "e1", None)])
        .await
        .unwrap();
    let pin = |id: &str, session: &str, at: i64| PinRecord {
        pin_id: id.into(),
        session_id: session.into(),
        text: format!("keep {id}\0"),
        created_at_ms: at,
    };
    for (id, session, at) in [("p2", "s", 2), ("p1", "s", 1), ("p3", "other", 1)] {
        assert_eq!(
            store.add_pin(&pin(id, session, at), 50).await.unwrap(),
            PinAdded::Added
        );
    }
    assert_eq!(
        store.add_pin(&pin("p9", "nowhere", 1), 50).await.unwrap(),
        PinAdded::NoSession
    );
    // The same text again is the pin it has; past the most pins, none is added.
    match store.add_pin(&pin("p1", "s", 5), 50).await.unwrap() {
        PinAdded::Existing(same) => assert_eq!(same.pin_id, "p1"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        store.add_pin(&pin("p4", "s", 4), 2).await.unwrap(),
        PinAdded::Full
    );
    let pins = store.pins("s").await.unwrap();
    let ids: Vec<&str> = pins.iter().map(|p| p.pin_id.as_str()).collect();
    assert_eq!(ids, ["p1", "p2"], "oldest first, this session's only");
    assert_eq!(
        pins[0].text, "keep p1\u{FFFD}",
        "NUL replaced as in every column"
    );
    assert!(
        !store.delete_pin("s", "p3").await.unwrap(),
        "another session's pin"
    );
    assert!(store.delete_pin("s", "p1").await.unwrap());
    assert!(!store.delete_pin("s", "p1").await.unwrap());
    assert!(store.delete_session("s").await.unwrap());
    assert!(
        store.pins("s").await.unwrap().is_empty(),
        "pins go with the session"
    );
    assert_eq!(store.pins("other").await.unwrap().len(), 1);
}

/// 40 + 30 concurrent adds of distinct texts stop at the limit; 12 concurrent adds of one text
/// make one pin.
async fn concurrent_pins_keep_the_limit_and_are_not_doubled(store: Arc<dyn Store>) {
    store
        .insert_session(&session("s", 1), &[entry(0, "e1", None)])
        .await
        .unwrap();
    store
        .insert_session(&session("t", 1), &[entry(0, "e1", None)])
        .await
        .unwrap();
    let add = |session: &'static str, id: String, text: String| {
        let store = store.clone();
        tokio::spawn(async move {
            let pin = PinRecord {
                pin_id: id,
                session_id: session.into(),
                text,
                created_at_ms: 1,
            };
            // SQLite may answer "busy" to a writer that waited too long: such an add is refused,
            // never half-done, and the caller would be told 503.
            store.add_pin(&pin, 50).await.ok()
        })
    };
    let mut tasks = Vec::new();
    for batch in [40, 30] {
        for n in 0..batch {
            tasks.push(add(
                "s",
                format!("{batch}-{n}"),
                format!("rule {batch}-{n}"),
            ));
        }
    }
    for n in 0..12 {
        tasks.push(add("t", format!("same-{n}"), "one rule".into()));
    }
    let mut added = 0;
    for task in tasks {
        if task.await.unwrap() == Some(PinAdded::Added) {
            added += 1;
        }
    }
    assert_eq!(store.pins("s").await.unwrap().len(), 50);
    assert_eq!(store.pins("t").await.unwrap().len(), 1);
    assert_eq!(added, 51, "50 distinct pins and one of the same text");
}

#[test]
fn fixed_chunks_cover_every_item_once_in_at_most_five_sizes() {
    for len in [0usize, 1, 4, 5, 6, 499, 500, 501, 1234, 16_384] {
        let items: Vec<usize> = (0..len).collect();
        let chunks: Vec<&[usize]> = fixed_chunks(&items).collect();
        let flat: Vec<usize> = chunks.iter().flat_map(|c| c.iter().copied()).collect();
        assert_eq!(flat, items, "every item once, in order ({len})");
        let mut sizes: Vec<usize> = chunks.iter().map(|c| c.len()).collect();
        sizes.dedup();
        assert!(
            sizes.iter().all(|s| [500, 100, 20, 5, 1].contains(s)),
            "{sizes:?}"
        );
    }
}

/// Every store call is a span (at debug level, named for the call), so a trace shows where a
/// request's time went in storage.
#[sqlx::test(migrations = false)]
async fn store_calls_are_traced_as_spans(pool: sqlx::SqlitePool) {
    use std::sync::Mutex;
    use tracing_subscriber::layer::SubscriberExt;

    struct Names(Arc<Mutex<Vec<String>>>);
    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Names {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _id: &tracing::span::Id,
            _ctx: tracing_subscriber::layer::Context<'_, S>,
        ) {
            let name = attrs.metadata().name().to_owned();
            self.0.lock().unwrap().push(name);
        }
    }
    let store = crate::SqliteStore::from_pool(pool).await.unwrap();
    let names = Arc::new(Mutex::new(Vec::new()));
    let subscriber = tracing_subscriber::registry()
        .with(Names(names.clone()))
        .with(tracing_subscriber::filter::LevelFilter::DEBUG);
    let _guard = tracing::subscriber::set_default(subscriber);
    store.ready().await.unwrap();
    assert!(
        store
            .get_session("no-such-session")
            .await
            .unwrap()
            .is_none()
    );
    let names = names.lock().unwrap().clone();
    assert!(names.iter().any(|n| n == "ready"), "{names:?}");
    assert!(names.iter().any(|n| n == "get_session"), "{names:?}");
}
