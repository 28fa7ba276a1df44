//! Web pages must not drive a loopback compactd. A real headless chromium (see `browser.rs`)
//! opens a page on another site (`attacker.test`, mapped to 127.0.0.1 with
//! `--host-resolver-rules`) that tries every request a page can make without a CORS preflight —
//! `fetch` in `no-cors` mode with `text/plain` and without a type, forms posted into a frame,
//! `sendBeacon` — and a page on a rebound name (`rebound.test` on compactd's own port, as DNS
//! rebinding delivers it) that reads and writes as the same origin. Nothing is read, nothing is
//! stored, the paid upstream is never called. Both stores.

use std::sync::Arc;

use axum::response::Html;
use compactd_store::Store;
use serde_json::{Value, json};

use crate::support::browser::Driver;
use crate::support::{FakeProvider, Reply, TestApp, chain_config};

on_both_backends!(web_pages_on_other_sites_cannot_use_a_loopback_compactd);

/// A session whose cwd the attacker would like to read.
const VICTIM: &str = "{\"type\":\"session\",\"version\":3,\"id\":\"victim\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"cwd\":\"/home/victim/secret-project\"}\n{\"type\":\"message\",\"id\":\"a\",\"parentId\":null,\"timestamp\":\"2026-01-01T00:00:01.000Z\",\"message\":{\"role\":\"user\",\"content\":\"fix src/lib.rs\"}}\n";

/// What the attacker's page runs: each request a page can send to another site without asking
/// first. Resolves with what the page could observe of each.
const ATTACKS: &str = r#"
const [base, session, done] = arguments;
const body = JSON.stringify({systemPrompt: "You summarize.", prompt: "<conversation>\n[User]: fix src/lib.rs\n</conversation>"});
const chat = JSON.stringify({model: "x", messages: [{role: "user", content: "summarize"}]});
const results = {};
async function attempt(name, work) {
  try { results[name] = await work(); } catch (e) { results[name] = "error: " + e.name; }
}
function postForm(action, enctype, name, value) {
  return new Promise((resolve) => {
    const frame = document.createElement("iframe");
    frame.name = "f" + Math.random().toString(36).slice(2);
    document.body.appendChild(frame);
    frame.onload = () => resolve("submitted");
    const form = document.createElement("form");
    form.method = "POST"; form.action = action; form.enctype = enctype; form.target = frame.name;
    const input = document.createElement("input");
    input.name = name; input.value = value;
    form.appendChild(input);
    document.body.appendChild(form);
    form.submit();
  });
}
(async () => {
  await attempt("read sessions", async () => {
    const r = await fetch(base + "/v1/sessions");
    return "read: " + (await r.text());
  });
  await attempt("no-cors compact text/plain", async () => {
    await fetch(base + "/v1/compact", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body});
    return "sent";
  });
  await attempt("no-cors compact via /k/", async () => {
    await fetch(base + "/k/cmpd_guess/v1/compact", {method: "POST", mode: "no-cors", body});
    return "sent";
  });
  await attempt("no-cors chat", async () => {
    await fetch(base + "/v1/chat/completions", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: chat});
    return "sent";
  });
  await attempt("no-cors upload", async () => {
    await fetch(base + "/v1/sessions", {method: "POST", mode: "no-cors", body: new Blob([session])});
    return "sent";
  });
  await attempt("no-cors upload text/plain", async () => {
    await fetch(base + "/v1/sessions", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: session});
    return "sent";
  });
  // The classic text/plain form whose body is JSON: name `{"systemPrompt":"x","prompt":"`, value `…"}`.
  await attempt("form compact", () => postForm(base + "/v1/compact", "text/plain",
    '{"systemPrompt":"x","prompt":"', '<conversation>[User]: hi</conversation>"}'));
  await attempt("form upload", () => postForm(base + "/v1/sessions", "text/plain", session.slice(0, 20), session.slice(21)));
  await attempt("form upload urlencoded", () => postForm(base + "/v1/sessions", "application/x-www-form-urlencoded", "a", session));
  await attempt("beacon compact", async () => navigator.sendBeacon(base + "/v1/compact", body) ? "queued" : "refused");
  done(results);
})();
"#;

/// What a page on a rebound name runs against its own origin (which is compactd).
const SAME_ORIGIN: &str = r#"
const [session, done] = arguments;
const results = {};
(async () => {
  for (const [name, init, path] of [
    ["GET /v1/sessions", {}, "/v1/sessions"],
    ["GET /ui", {}, "/ui"],
    ["GET /metrics", {}, "/metrics"],
    ["POST /v1/sessions", {method: "POST", headers: {"Content-Type": "application/x-ndjson"}, body: session}, "/v1/sessions"],
    ["POST /v1/compact", {method: "POST", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({systemPrompt: "s", prompt: "<conversation>[User]: hi</conversation>"})}, "/v1/compact"],
  ]) {
    try {
      const r = await fetch(path, init);
      results[name] = {status: r.status, body: await r.text()};
    } catch (e) { results[name] = {error: e.name}; }
  }
  done(results);
})();
"#;

async fn web_pages_on_other_sites_cannot_use_a_loopback_compactd(store: Arc<dyn Store>) {
    compactd_testkit::needs!(Browser);
    let fake = FakeProvider::start(vec![], Reply::openai("## Goal\nfix src/lib.rs")).await;
    // Loopback, no key: anyone on this machine may call it, as on a developer's laptop.
    let app =
        TestApp::with_store(chain_config(&fake, "openai:gpt-test", false), store.clone()).await;
    let uploaded = app.upload(VICTIM).await;
    assert_eq!(uploaded.status(), 201);
    let victim_id = uploaded.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let port = app.url.rsplit(':').next().unwrap().to_owned();

    // The attacker's site: an empty page to run script in.
    let attacker = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let attacker_port = attacker.local_addr().unwrap().port();
    tokio::spawn(async move {
        let site = axum::Router::new().route(
            "/",
            axum::routing::get(|| async { Html("<!doctype html><title>cats</title><p>cats</p>") }),
        );
        axum::serve(attacker, site).await.unwrap();
    });

    let driver = Driver::start();
    let browser = driver
        .browser_with(&[
            "--host-resolver-rules=MAP attacker.test 127.0.0.1, MAP rebound.test 127.0.0.1",
            "--disable-features=HttpsUpgrades,HttpsFirstBalancedModeAutoEnable",
        ])
        .await;
    browser
        .goto(&format!("http://attacker.test:{attacker_port}/"))
        .await
        .unwrap();
    let cross_site = browser
        .execute_async(
            ATTACKS,
            vec![json!(format!("http://127.0.0.1:{port}")), json!(VICTIM)],
        )
        .await
        .unwrap();

    // DNS rebinding: the attacker's name now resolves to compactd, on compactd's port.
    let rebound = format!("http://rebound.test:{port}");
    browser
        .goto(&format!("{rebound}/v1/sessions"))
        .await
        .unwrap();
    let page = browser.source().await.unwrap();
    let same_origin = browser
        .execute_async(SAME_ORIGIN, vec![json!(VICTIM)])
        .await
        .unwrap();
    browser.close().await.unwrap();
    drop(driver);

    // Nothing was read.
    let everything = format!("{cross_site} {page} {same_origin}");
    assert!(
        !everything.contains(&victim_id) && !everything.contains("secret-project"),
        "a page read the stored sessions: {everything}"
    );
    assert!(page.contains("host_not_allowed"), "{page}");
    for (request, result) in same_origin.as_object().unwrap() {
        assert_eq!(
            result["status"], 421,
            "{request} through a rebound name: {result}"
        );
    }
    assert!(
        cross_site["read sessions"]
            .as_str()
            .unwrap()
            .starts_with("error"),
        "{cross_site}"
    );
    // Nothing was stored, the upstream never called.
    let sessions = store.list_sessions("", 100, None, None).await.unwrap();
    assert_eq!(
        sessions.iter().map(|s| &s.session_id).collect::<Vec<_>>(),
        [&victim_id],
        "a page stored a session: {cross_site}"
    );
    assert!(
        fake.received().is_empty(),
        "a page made compactd call the upstream ({} calls): {cross_site}",
        fake.received().len()
    );
    // The same requests from an agent (no Origin, no Sec-Fetch-*) still work.
    let agent = app
        .compact(&json!({"systemPrompt": "You summarize.", "prompt": "<conversation>\n[User]: fix src/lib.rs\n</conversation>"}),
        )
        .await;
    assert_eq!(agent.status(), 200);
    assert_eq!(fake.received().len(), 1);
}
