//! Fork (issue 57): `POST /v1/sessions/{id}/fork {entryId}` makes a new session of the caller's
//! holding the path from the root to that entry, its header naming the parent (pi's `/fork`);
//! the parent is unchanged, another tenant's session is 404, and the pinned pi opens the fork
//! with the entry as its leaf.

use std::path::Path;
use std::sync::Arc;

use compactd_core::session::{ParseOptions, Session};
use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::TestApp;

on_both_backends!(a_fork_holds_the_path_to_its_entry_and_names_its_parent);

fn fixture() -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pi15/s0001.jsonl"))
        .unwrap()
}

/// An entry before the session's leaf, and the raw lines of the path to it, as the session's own
/// tree says.
fn branch_entry(file: &str) -> (String, Vec<String>) {
    let session = Session::parse(file.as_bytes(), ParseOptions::default()).unwrap();
    let active: Vec<&str> = session
        .active_path(None)
        .unwrap()
        .iter()
        .map(|e| e.id.as_str())
        .collect();
    // Off the active path when the sample has a branch there, else halfway along it.
    let entry = session
        .entries
        .iter()
        .find(|e| !active.contains(&e.id.as_str()) && e.as_message().is_some())
        .or_else(|| {
            session
                .entries
                .iter()
                .find(|e| e.id == active[active.len() / 2])
        })
        .unwrap();
    let path = session
        .active_path(Some(&entry.id))
        .unwrap()
        .iter()
        .map(|e| e.raw.to_string())
        .collect();
    (entry.id.clone(), path)
}

async fn a_fork_holds_the_path_to_its_entry_and_names_its_parent(store: Arc<dyn Store>) {
    let keys = crate::support::tenant_keys(store.as_ref(), &["a", "b"]).await;
    let app = TestApp::handlers_with_store(crate::support::config(), store);
    let as_key = |key: &str, request: reqwest::RequestBuilder| request.bearer_auth(key);
    let uploaded: Value = app
        .send(as_key(
            &keys[0],
            app.client
                .post(format!("{}/v1/sessions", app.url))
                .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
                .body(fixture()),
        ))
        .await
        .json()
        .await
        .unwrap();
    let parent = uploaded["id"].as_str().unwrap().to_owned();
    let file_of = |id: String, key: String| {
        let request = as_key(
            &key,
            app.client
                .get(format!("{}/v1/sessions/{id}/entries", app.url)),
        );
        async { app.send(request).await.text().await.unwrap() }
    };
    let stored = file_of(parent.clone(), keys[0].clone()).await;
    let (entry, path) = branch_entry(&stored);
    let fork = |key: &str, body: Value| {
        as_key(
            key,
            app.client
                .post(format!("{}/v1/sessions/{parent}/fork", app.url))
                .json(&body),
        )
    };

    let forked = app.send(fork(&keys[0], json!({"entryId": entry}))).await;
    assert_eq!(forked.status(), StatusCode::CREATED);
    let forked: Value = forked.json().await.unwrap();
    assert_eq!(forked["parentSession"], parent.as_str());
    let child = forked["session"]["id"].as_str().unwrap().to_owned();
    assert_ne!(child, parent);
    assert_eq!(forked["session"]["leafId"], entry.as_str());
    assert_eq!(forked["session"]["entryCount"], path.len());
    let file = file_of(child.clone(), keys[0].clone()).await;
    let mut lines = file.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["type"], "session");
    assert_eq!(header["parentSession"], parent.as_str());
    assert_ne!(header["id"], uploaded["headerId"]);
    let kept: Vec<&str> = lines.collect();
    assert_eq!(kept, path, "the path to the entry, as stored");

    // The parent is as it was, and its map shows the fork; another tenant sees no map.
    assert_eq!(file_of(parent.clone(), keys[0].clone()).await, stored);
    let map = |key: &str| {
        as_key(
            key,
            app.client
                .get(format!("{}/v1/sessions/{parent}/threads", app.url)),
        )
    };
    let threads: Value = app.send(map(&keys[0])).await.json().await.unwrap();
    assert_eq!(threads["children"][0]["id"], child.as_str(), "{threads}");
    assert_eq!(threads["children"][0]["kind"], "fork");
    assert_eq!(
        app.send(map(&keys[1])).await.status(),
        StatusCode::NOT_FOUND
    );
    // Another tenant's session is no session; bad entries say which field is wrong.
    let theirs = app.send(fork(&keys[1], json!({"entryId": entry}))).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    for body in [json!({"entryId": "no-such-entry"}), json!({"entryId": " "})] {
        let response = app.send(fork(&keys[0], body)).await;
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["param"], "entryId", "{error}");
    }
    let response = app.send(fork(&keys[0], json!({}))).await;
    assert!(response.status().is_client_error());

    // The pinned pi opens the fork with the entry as its leaf and the parent in its header.
    compactd_testkit::needs!(Agents);
    let on_disk = std::env::temp_dir().join(format!(
        "compactd-fork-{}-{child}.jsonl",
        std::process::id()
    ));
    let read = crate::sessions::pi15::pi_reads_back(&on_disk, &file);
    assert_eq!(read["leafId"], entry.as_str());
    assert_eq!(read["header"]["parentSession"], parent.as_str());
}
