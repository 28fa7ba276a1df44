//! Zero-wait compaction across a fleet and paid for openly (issue 67): a summary one replica
//! prepared answers the compaction that reaches another on the same PostgreSQL; every
//! preparation is a call-log row of its own, shown in the console as spend ahead (not as a
//! compaction served), counted in the tenant's budget, and stops at half of it.

use std::sync::Arc;
use std::time::Duration;

use compactd_store::{CallRecord, Prepared, Store};
use reqwest::StatusCode;
use serde_json::json;

use crate::gateway::prepare::{
    claude_compaction, claude_turn, config, messages, post_as, prepared_outcome, settled,
};
use crate::support::gateway::summarizer_model;
use crate::support::{FakeProvider, TestApp, eventually};

on_both_backends!(a_preparation_is_spend_of_its_own_and_stops_at_half_the_budget);

/// More work after the prepared part, and a compaction of it.
fn later_compaction() -> serde_json::Value {
    let mut later = messages("Now add a regression test for unary minus.");
    later.push(json!({"role": "assistant", "content": "Added tests/unary.rs."}));
    later.push(json!({"role": "user", "content": "Run the tests and open a pull request."}));
    claude_compaction(&later, None)
}

/// Two replicas of `config` on one PostgreSQL database, each with its own pool, preparer and
/// caches; the first one's store.
async fn two_replicas(
    pool: sqlx::PgPool,
    config: compactd::config::ServeConfig,
) -> (Arc<compactd_store::PgStore>, TestApp, TestApp) {
    let options = pool.connect_options().as_ref().clone();
    let other = sqlx::PgPool::connect_with(options).await.unwrap();
    let store = Arc::new(compactd_store::PgStore::from_pool(pool).await.unwrap());
    let two = compactd_store::PgStore::from_pool(other).await.unwrap();
    let one = TestApp::with_store(config.clone(), store.clone()).await;
    let two = TestApp::with_store(config, Arc::new(two)).await;
    (store, one, two)
}

compactd_testkit::postgres_test! {
    async fn a_summary_prepared_by_one_replica_answers_the_compaction_at_another(pool: sqlx::PgPool) {
        let model = summarizer_model().await;
        let provider = FakeProvider::wires().await;
        let (_, one, two) = two_replicas(pool, config(&model, &provider)).await;

        let early = messages("Now add a regression test for unary minus.");
        post_as(&one, "s1", &claude_turn(&early)).await;
        settled(&one).await;
        let asked = model.received().len();
        assert_eq!(asked, 1, "prepared at the first replica");

        let (status, answer) = post_as(&two, "s1", &later_compaction()).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(model.received().len(), asked, "no model call at the second");
        assert_eq!(
            prepared_outcome(&two, "used").await,
            1.0
        );
        assert!(answer.contains("open a pull request"), "{answer}");
    }
}

compactd_testkit::postgres_test! {
    async fn a_compaction_at_another_replica_waits_for_the_preparation_under_way(pool: sqlx::PgPool) {
        use crate::support::{FakeProvider, Reply};
        let slow = Reply::openai(crate::support::gateway::MODEL_SUMMARY)
            .after(Duration::from_millis(1500));
        let model = FakeProvider::start(vec![], slow).await;
        let provider = FakeProvider::wires().await;
        let (store, one, two) = two_replicas(pool, config(&model, &provider)).await;

        let early = messages("Now add a regression test for unary minus.");
        post_as(&one, "s1", &claude_turn(&early)).await;
        // Once the preparation is marked in the store, the compaction at the other replica finds
        // it under way, and waits for it rather than asking the model again.
        eventually("the session marked as being prepared", || async {
            let now = compactd_store::now_ms();
            store.preparing("", "claude-code:s1", now).await.unwrap().then_some(())
        })
        .await;
        let (status, answer) = post_as(&two, "s1", &later_compaction()).await;
        assert_eq!(status, StatusCode::OK);
        assert!(answer.contains("open a pull request"), "{answer}");
        assert_eq!(
            prepared_outcome(&two, "used").await,
            1.0
        );
        settled(&one).await;
        assert_eq!(model.received().len(), 1, "one summarization for both replicas");
    }
}

/// The tenant's rows once there are `count` of them (written behind the answers).
async fn rows(store: &dyn Store, count: usize) -> Vec<CallRecord> {
    eventually("the call log's rows", || async {
        let rows = store.calls("", None, 100).await.unwrap();
        (rows.len() >= count).then_some(rows)
    })
    .await
}

/// The figure the console's fleet page shows beside `label`.
async fn figure(app: &TestApp, label: &str) -> String {
    // The console is HTML, not the documented API: asked with the plain client.
    let url = format!("{}/ui/fleet", app.url);
    let page = app
        .client
        .get(url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let at = page
        .find(&format!(">{label}<"))
        .unwrap_or_else(|| panic!("{label} not on the page"));
    let rest = &page[at + label.len() + 2..];
    let start = rest.find(|c: char| c.is_ascii_digit()).unwrap();
    let end = start
        + rest[start..]
            .find(|c: char| !c.is_ascii_digit() && c != ',')
            .unwrap();
    rest[start..end].to_owned()
}

async fn a_preparation_is_spend_of_its_own_and_stops_at_half_the_budget(store: Arc<dyn Store>) {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = config(&model, &provider);
    config.summarizers.stages.cache_bytes = 0;
    let app = TestApp::with_store(config.clone(), store.clone()).await;
    let early = messages("Now add a regression test for unary minus.");
    post_as(&app, "s1", &claude_turn(&early)).await;
    settled(&app).await;
    let logged = rows(store.as_ref(), 1).await;
    let row = &logged[0];
    assert_eq!(row.endpoint, "gateway:prepared", "{row:?}");
    assert_eq!(row.wire, "prepared");
    let spent = row.input_tokens + row.output_tokens;
    assert!(spent > 0, "{row:?}");
    // The console shows it as spend ahead, not as a compaction served.
    assert_eq!(figure(&app, "Prepared ahead").await, "1");
    assert_eq!(figure(&app, "Compactions served").await, "0");
    assert_eq!(
        figure(&app, "Tokens spent preparing ahead").await,
        spent.to_string()
    );

    // A budget the preparation spent half of: the next session is not prepared ahead, and its
    // compaction is still summarized when asked (the budget is not spent).
    store
        .set_budget("", Some(spent * 2 - 1), compactd_store::now_ms())
        .await
        .unwrap();
    let capped = TestApp::with_store(config, store.clone()).await;
    let asked = model.received().len();
    post_as(&capped, "s2", &claude_turn(&early)).await;
    settled(&capped).await;
    assert_eq!(
        model.received().len(),
        asked,
        "nothing prepared past half the budget"
    );
    let (status, _) = post_as(&capped, "s2", &later_compaction()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(model.received().len() > asked, "summarized when asked");
}
