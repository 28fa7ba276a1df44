//! What pi rebuilds from a compacted stored session, against real storage (PostgreSQL and
//! SQLite): branch summaries where pi puts them, and a v1 file that pi re-migrates with ids of
//! its own, replaced by the stored copy.

use std::sync::Arc;

use compactd_core::prompts::Prompts;
use compactd_core::session::{ParseOptions, Session};
use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::json;

use crate::fixture;
use crate::sessions::api::{json, upload, v3_session};
use crate::support::{FakeProvider, Reply, TestApp, chain_config, config};

on_both_backends!(
    branch_summaries_hang_where_pi_puts_them,
    a_v1_upload_is_replaced_by_the_stored_file_and_rebuilds_as_pi_would,
);

async fn branch_summaries_hang_where_pi_puts_them(store: Arc<dyn Store>) {
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nexplored branch")).await;
    let app = TestApp::handlers_with_store(chain_config(&fake, "openai:gpt-test", false), store);
    let text = v3_session(3, 20);
    let session = Session::parse(text.as_bytes(), ParseOptions::default()).unwrap();
    let view = upload(&app, text).await;
    let id = view["id"].as_str().unwrap();
    // Navigate back to the second user message: the summary hangs under its parent.
    let target = &session.entries[3];
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": target.id}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body = json(response).await;
    let entry = &body["entry"];
    let parent = session.entries[2].id.as_str();
    assert_eq!(entry["type"], "branch_summary");
    assert_eq!(
        (entry["parentId"].as_str(), entry["fromId"].as_str()),
        (Some(parent), Some(parent))
    );
    let summary = entry["summary"].as_str().unwrap();
    let preamble = Prompts::builtin().branch_preamble;
    assert!(
        summary.starts_with(&format!("{preamble}\n\n## Goal\nexplored branch")),
        "{summary}"
    );
    assert!(
        summary.ends_with("<modified-files>\nsrc/f1.rs\nsrc/f2.rs\n</modified-files>"),
        "{summary}"
    );
    assert_eq!(
        entry["details"]["modifiedFiles"],
        json!(["src/f1.rs", "src/f2.rs"])
    );
    let sent = fake.received()[0].body["messages"][1]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        !sent.contains("[Tool result]"),
        "tool results are left out of branch summaries"
    );
    assert_eq!(fake.received()[0].body["max_tokens"], 2048);

    // The summary is the new leaf: the context shows the kept branch and the summary.
    let context = json(app.context(id).await).await;
    let messages = context["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 4);
    assert!(
        messages[3]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("explored branch")
    );
    // Navigating to the current leaf's own path leaves nothing behind.
    let leaf_path_target = &session.entries[0].id;
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": leaf_path_target, "fromLeafId": leaf_path_target}),
        )
        .await;
    assert_eq!(response.status(), StatusCode::CONFLICT);
    let response = app
        .post(
            &format!("/v1/sessions/{id}/branch-summaries"),
            &json!({"targetId": "ghost"}),
        )
        .await;
    assert_eq!(json(response).await["error"]["param"], "targetId");
}

/// The context pi builds from a file: the messages of `buildSessionContext` at its last entry.
fn pi_context(file: &str) -> Vec<String> {
    let session = Session::parse(file.as_bytes(), ParseOptions::default()).unwrap();
    let path = session.active_path(None).unwrap();
    compactd_core::compaction::build_session_context(&path)
        .messages()
        .iter()
        .map(|m| m.role().to_owned())
        .collect()
}

/// pi re-migrates a v1 file with random ids of its own, so a compaction line compactd made for the
/// stored copy points at ids that do not exist in the client's file: the documented path is to
/// replace the file with the stored one, and that file rebuilds with every kept message.
async fn a_v1_upload_is_replaced_by_the_stored_file_and_rebuilds_as_pi_would(
    store: Arc<dyn Store>,
) {
    let app = TestApp::handlers_with_store(config(), store);
    let original = String::from_utf8(fixture("large-session.jsonl")).unwrap();
    let view = upload(&app, original.clone()).await;
    let id = view["id"].as_str().unwrap();
    let stored_file = format!("/v1/sessions/{id}/entries");
    assert_eq!(view["replaceFile"], stored_file, "{view}");
    assert!(
        view["notice"]
            .as_str()
            .unwrap()
            .contains("replace your local file")
    );

    let response = app.compact_session(id, &json!({})).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let compaction = json(response).await;
    assert_eq!(compaction["replaceFile"], stored_file);
    let line = compaction["line"].as_str().unwrap();

    // The documented path: the client's file becomes the stored one.
    let replaced = app.get(&stored_file).await.text().await.unwrap();
    assert!(replaced.ends_with(&format!("{line}\n")));
    let context = pi_context(&replaced);
    assert_eq!(context[0], "compactionSummary");
    // Appendix A: the cut keeps from index 837 of 1018 entries; its 181 messages come back.
    assert_eq!(
        context.len(),
        182,
        "every kept message is in the rebuilt context"
    );

    // What goes wrong otherwise: the line appended to the old v1 file, which is migrated again
    // with other ids, names a first kept entry that is not there, and every kept message is lost.
    let appended = format!("{original}{line}\n");
    assert_eq!(pi_context(&appended), ["compactionSummary"]);

    // A v3 upload needs none of this.
    let v3 = upload(&app, v3_session(2, 10)).await;
    assert!(v3.get("replaceFile").is_none(), "{v3}");
}
