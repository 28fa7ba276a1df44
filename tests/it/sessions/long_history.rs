//! A session compacted 60,000 times: its history pages, its console pages and its plan cost what
//! they show, not what the session holds, and while the heaviest of them are computed `/healthz`
//! keeps answering — CPU work runs off the runtime's threads. The real binary, with one runtime
//! thread so that any CPU work left on it would show, on both stores.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::binary::Served;

/// Compactions in the session.
const COMPACTIONS: usize = 60_000;

/// A chain of `n` user messages, each compacted right after it (`c{i}` keeps `u{i}`).
fn session(n: usize) -> String {
    let mut out = String::with_capacity(n * 200);
    out.push_str(r#"{"type":"session","version":3,"id":"long","timestamp":"2026-11-20T10:00:00.000Z","cwd":"/work/long"}"#);
    out.push('\n');
    let mut parent = Value::Null;
    for i in 0..n {
        let user = json!({"type": "message", "id": format!("u{i}"), "parentId": parent,
            "timestamp": "2026-11-20T10:00:00.000Z",
            "message": {"role": "user", "content": format!("step {i}"), "timestamp": 1}});
        let compaction = json!({"type": "compaction", "id": format!("c{i}"), "parentId": format!("u{i}"),
            "timestamp": "2026-11-20T10:00:00.000Z", "summary": format!("## Goal\nstep {i}"),
            "firstKeptEntryId": format!("u{i}"), "tokensBefore": 1000});
        out.push_str(&user.to_string());
        out.push('\n');
        out.push_str(&compaction.to_string());
        out.push('\n');
        parent = json!(format!("c{i}"));
    }
    out
}

async fn get(client: &reqwest::Client, url: String) -> (u16, String) {
    let response = client.get(url).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

async fn a_long_history_is_paged_and_never_starves_health(database_url: &str) {
    let served = Served::start(&[
        ("DATABASE_URL", database_url),
        ("COMPACTD_WORKER_THREADS", "1"),
        ("COMPACTD_LOG", "error"),
    ]);
    let base = served.base.clone();
    let client = reqwest::Client::new();
    let body = session(COMPACTIONS);
    let uploaded: Value = client
        .post(format!("{base}/v1/sessions"))
        .header("content-type", "application/x-ndjson")
        .body(body.clone())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = uploaded["id"].as_str().unwrap().to_owned();
    assert_eq!(uploaded["compactions"], COMPACTIONS);

    pages_of_the_history(&client, &base, &id).await;
    the_consoles_pages(&client, &base, &id).await;
    health_answers_under_the_heaviest_requests(&client, &base, &id, &body).await;
    drop(served);
}

/// The history, a page at a time, each compaction with the one it replaced.
async fn pages_of_the_history(client: &reqwest::Client, base: &str, id: &str) {
    let page: Value = client
        .get(format!("{base}/v1/sessions/{id}/compactions?limit=100"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page["total"], COMPACTIONS);
    let items = page["compactions"].as_array().unwrap();
    assert_eq!(items.len(), 100);
    assert_eq!(items[0]["entryId"], "c0");
    assert_eq!(items[0]["previousEntryId"], Value::Null);
    assert_eq!(items[99]["previousEntryId"], "c98");
    assert_eq!(items[99]["summary"], "## Goal\nstep 99");
    let next: Value = client
        .get(format!(
            "{base}/v1/sessions/{id}/compactions?limit=100&cursor={}",
            page["nextCursor"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(next["compactions"][0]["entryId"], "c100");
    assert_eq!(next["compactions"][0]["previousEntryId"], "c99");
    // The last page: the cursor of the entry before the last 10 compactions.
    let last: Value = client
        .get(format!(
            "{base}/v1/sessions/{id}/compactions?limit=100&cursor={}",
            2 * (COMPACTIONS - 10)
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last_items = last["compactions"].as_array().unwrap();
    assert_eq!(last_items.len(), 10, "{last}");
    assert_eq!(last_items[9]["entryId"], format!("c{}", COMPACTIONS - 1));
    assert_eq!(last["nextCursor"], Value::Null);
}

/// The console: the session page lists the latest compactions; a compaction's page shows the
/// one before it.
async fn the_consoles_pages(client: &reqwest::Client, base: &str, id: &str) {
    let (status, page) = get(client, format!("{base}/ui/sessions/{id}")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("The latest 50 of"), "{page}");
    assert!(page.contains(&format!("/compactions/c{}\"", COMPACTIONS - 1)));
    let middle = COMPACTIONS / 2;
    let (status, page) = get(
        client,
        format!("{base}/ui/sessions/{id}/compactions/c{middle}"),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains(&format!("/compactions/c{}\"", middle - 1)),
        "{page}"
    );
}

/// The heaviest requests at once: whole-page renders, thousand-compaction pages, plans of the
/// whole file. Meanwhile /healthz is asked again and again, and answers without waiting for them.
async fn health_answers_under_the_heaviest_requests(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    body: &str,
) {
    let heavy_started = Instant::now();
    let mut heavy = Vec::new();
    for n in 0..6 {
        let (client, base, id, body) = (
            client.clone(),
            base.to_owned(),
            id.to_owned(),
            body.to_owned(),
        );
        heavy.push(tokio::spawn(async move {
            let response = match n % 3 {
                0 => client.get(format!("{base}/ui/sessions/{id}")).send(),
                1 => client
                    .get(format!(
                        "{base}/v1/sessions/{id}/compactions?limit=1000&cursor={}",
                        n * 10_000
                    ))
                    .send(),
                _ => client
                    .post(format!("{base}/v1/plan"))
                    .header("content-type", "application/x-ndjson")
                    .body(body)
                    .send(),
            };
            response.await.unwrap().status().as_u16()
        }));
    }
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let prober = {
        let (client, base, done) = (client.clone(), base.to_owned(), done.clone());
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            while !done.load(std::sync::atomic::Ordering::Acquire) {
                let asked = Instant::now();
                let (status, _) = get(&client, format!("{base}/healthz")).await;
                assert_eq!(status, 200);
                latencies.push(asked.elapsed());
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            latencies
        })
    };
    for task in heavy {
        assert_eq!(task.await.unwrap(), 200);
    }
    let heavy_took = heavy_started.elapsed();
    done.store(true, std::sync::atomic::Ordering::Release);
    let latencies = prober.await.unwrap();
    let slowest = latencies.iter().max().copied().unwrap_or_default();
    // Compared with the heavy work itself, not with a fixed time: health never waits for it
    // (with the work on the one runtime thread, the slowest answer was a fifth of it).
    assert!(
        latencies.len() >= 3,
        "/healthz answered {} times in {heavy_took:?}",
        latencies.len()
    );
    assert!(
        slowest * 10 < heavy_took,
        "/healthz took {slowest:?} while the heavy requests took {heavy_took:?}"
    );
}

#[tokio::test]
async fn a_long_history_is_paged_and_never_starves_health_sqlite() {
    let dir = std::env::temp_dir().join(format!("compactd-long-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("state.db").display());
    a_long_history_is_paged_and_never_starves_health(&url).await;
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn a_long_history_is_paged_and_never_starves_health_postgres() {
    compactd_testkit::needs!(Postgres);
    let url = crate::sessions::crash::postgres_url("long_history").await;
    a_long_history_is_paged_and_never_starves_health(&url).await;
}
