//! The console's handoff in a real browser (issue 57): on a session page of two features'
//! work, a goal about one drafts the new thread's prompt; the draft page shows it for editing
//! with the files it names and the ones it left out; starting stores the new session with the
//! edited prompt, and the map of threads links the two. Another tenant cannot draft from it.

use std::sync::Arc;

use compactd_store::Store;
use serde_json::Value;

use crate::support::browser::Driver;
use crate::support::console_page::{Console, api, key};
use crate::support::{TestApp, config};
use crate::threads::handoff::{BILLING, GOAL, PARSER, RULE, two_feature_session};

on_both_backends!(a_person_hands_a_session_off_from_the_console);

async fn a_person_hands_a_session_off_from_the_console(store: Arc<dyn Store>) {
    compactd_testkit::needs!(Browser);
    let (alice, bob) = (key(&store, "alice").await, key(&store, "bob").await);
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let app = TestApp::with_store(config, store.clone()).await;
    let id = two_feature_session(&app, &alice).await;
    let driver = Driver::start();
    let console = Console::open(&driver, &app, store.as_ref()).await;
    console.sign_in(&alice).await;
    console.go(&format!("/ui/sessions/{id}")).await;
    console.fill("#handoff-goal", GOAL).await;
    console.click("#handoff").await;
    let draft = console.find("#handoff-prompt").await;
    let prompt = draft.prop("value").await.unwrap().unwrap_or_default();
    assert!(prompt.starts_with(GOAL), "{prompt}");
    assert!(prompt.contains(RULE), "{prompt}");
    assert_eq!(console.text("#drafted-by").await, "extractive");
    let files = console.text("#handoff-files").await;
    let left_out = console.text("#handoff-left-out").await;
    for file in PARSER {
        assert!(files.contains(file), "{files}");
    }
    for file in BILLING {
        assert!(
            !files.contains(file) && left_out.contains(file),
            "{left_out}"
        );
    }
    console.screenshot("handoff-draft").await;

    // The person edits the draft and starts the thread.
    draft
        .send_keys("\nKeep the public API unchanged.")
        .await
        .unwrap();
    console.click("#handoff-start").await;
    let here = console
        .wait_for_url("the new session", |p| {
            p.starts_with("/ui/sessions/") && p.ends_with("notice=handed-off")
        })
        .await;
    let new = here
        .trim_start_matches("/ui/sessions/")
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    assert_ne!(new, id);
    let parent = console.find("#thread-parent").await;
    assert_eq!(
        parent.attr("href").await.unwrap().as_deref(),
        Some(format!("/ui/sessions/{id}").as_str())
    );
    let file = app
        .send(
            app.client
                .get(format!("{}/v1/sessions/{new}/entries", app.url))
                .bearer_auth(&alice),
        )
        .await
        .text()
        .await
        .unwrap();
    let first: Value = serde_json::from_str(file.lines().nth(1).unwrap()).unwrap();
    let sent = first["message"]["content"][0]["text"].as_str().unwrap();
    assert!(sent.starts_with(GOAL), "{sent}");
    assert!(sent.ends_with("Keep the public API unchanged."), "{sent}");
    assert!(!sent.contains('\r'));

    // The old session's map leads to the new one.
    console.go(&format!("/ui/sessions/{id}")).await;
    let map = console.text("#thread-map").await;
    assert!(map.contains("handoff"), "{map}");
    let threads = api(
        &app,
        &alice,
        reqwest::Method::GET,
        &format!("/v1/sessions/{id}/threads"),
        None,
    )
    .await;
    assert_eq!(threads["children"][0]["id"], new.as_str());

    // Bob cannot draft from Alice's session, in the console or the API.
    // (A console page: not the API's JSON, so not checked against its document.)
    let refused = app
        .client
        .post(format!("{}/ui/sessions/{id}/handoff/draft", app.url))
        .header("cookie", format!("compactd_key={bob}"))
        .header("origin", app.url.as_str())
        .header("content-type", "application/x-www-form-urlencoded")
        .body("goal=Finish+tab+handling")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), reqwest::StatusCode::NOT_FOUND);
    console.browser.clone().close().await.unwrap();
}
