//! The web console in a real browser: Debian's headless `chromium` driven through
//! `chromedriver` (WebDriver, by fantoccini) against compactd on a socket, on both stores.
//! `scripts/test.sh` installs both when they are missing. Screenshots of the main pages are
//! written to `target/console-screenshots/` (not committed).

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd::access::new_key;
use compactd::store::{Store, now_ms};
use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use crate::browser::Driver;
use crate::support::{TestApp, config};

on_both_backends!(a_person_uploads_plans_compacts_pins_and_another_tenant_sees_none_of_it);

/// How long a page may take to appear (a compaction of a 2 MB session on a loaded machine).
const PAGE_WAIT: Duration = Duration::from_secs(90);

/// A browser on compactd's console.
struct Console {
    browser: Client,
    base: String,
    shots: String,
}

impl Console {
    async fn go(&self, path: &str) {
        self.browser
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap();
    }

    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.browser
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
    }

    async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    async fn count(&self, css: &str) -> usize {
        self.browser
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .len()
    }

    async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// Waits until the browser is on a page whose path (and query) passes `test`.
    async fn wait_for_url(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + PAGE_WAIT;
        loop {
            let url = self.browser.current_url().await.unwrap();
            let here = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_owned(),
            };
            if test(&here) {
                return here;
            }
            if Instant::now() > deadline {
                // What the browser shows instead, for whoever reads the failure.
                self.screenshot("failure").await;
                let page = self.browser.source().await.unwrap_or_default();
                panic!("never reached {what}; at {here}:\n{page}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn screenshot(&self, name: &str) {
        let png = self.browser.screenshot().await.unwrap();
        std::fs::create_dir_all(&self.shots).unwrap();
        std::fs::write(format!("{}/{name}.png", self.shots), png).unwrap();
    }

    async fn sign_in(&self, key: &str) {
        self.go("/ui").await;
        // Without a key beyond loopback, the console asks for one.
        self.wait_for_url("the login page", |p| p.starts_with("/ui/login"))
            .await;
        self.fill("#key", key).await;
        self.click("#sign-in").await;
        self.wait_for_url("the sessions", |p| p == "/ui").await;
        self.find("#sessions").await;
    }
}

async fn key(store: &Arc<dyn Store>, tenant: &str) -> String {
    let (text, record) = new_key(tenant, None, now_ms());
    store.create_key(&record).await.unwrap();
    text
}

/// The REST API beside the browser, as an agent or a script would call it.
async fn api(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<String>,
) -> Value {
    let mut request = app
        .client
        .request(method, format!("{}{path}", app.url))
        .bearer_auth(key);
    if let Some(body) = body {
        // JSON lines to append, or a JSON object.
        let content_type = if path.ends_with("/entries") {
            "application/x-ndjson"
        } else {
            "application/json"
        };
        request = request
            .header(reqwest::header::CONTENT_TYPE, content_type)
            .body(body);
    }
    let response = request.send().await.unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

async fn a_person_uploads_plans_compacts_pins_and_another_tenant_sees_none_of_it(
    store: Arc<dyn Store>,
) {
    let (alice, bob) = (key(&store, "alice").await, key(&store, "bob").await);
    // Listening beyond loopback: the console, like the API, wants a key.
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let app = TestApp::with_store(config, store.clone()).await;
    let driver = Driver::start();
    let console = Console {
        browser: driver.browser().await,
        base: app.url.clone(),
        shots: format!(
            "{}/console-screenshots/{}",
            env!("CARGO_TARGET_TMPDIR").trim_end_matches("/tmp"),
            store.backend()
        ),
    };
    use reqwest::Method;

    console.sign_in(&alice).await;
    // The key is kept in an HttpOnly cookie, never in the URL.
    let cookie = console
        .browser
        .get_named_cookie("compactd_key")
        .await
        .unwrap();
    assert_eq!(cookie.value(), alice);
    assert_eq!(cookie.http_only(), Some(true));
    assert!(
        !console
            .browser
            .current_url()
            .await
            .unwrap()
            .as_str()
            .contains("cmpd_")
    );

    // Upload a real pi session with two compactions in it.
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/before-compaction.jsonl");
    let upload = console.find("details.upload").await;
    if upload.attr("open").await.unwrap().is_none() {
        console.click("details.upload summary").await;
    }
    console
        .find("#file")
        .await
        .send_keys(fixture.to_str().unwrap())
        .await
        .unwrap();
    console.click("#upload-button").await;
    let here = console
        .wait_for_url("the session page", |p| p.starts_with("/ui/sessions/"))
        .await;
    let id = here.trim_start_matches("/ui/sessions/").to_owned();
    assert_eq!(console.text("#session-title").await, "pi-mono");

    // The tree and the planned cut are the API's plan.
    let plan = api(
        &app,
        &alice,
        Method::GET,
        &format!("/v1/sessions/{id}/plan"),
        None,
    )
    .await;
    let first_kept = plan["plan"]["firstKeptEntryId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(console.text("#first-kept").await, first_kept);
    let row = console.find(&format!("#e-{first_kept}")).await;
    assert_eq!(
        row.attr("data-part").await.unwrap().as_deref(),
        Some("kept")
    );
    assert!(console.count(".row.summarized").await > 0);
    assert!(console.count(".row.kept").await > 0);
    assert_eq!(
        console.count(".row.prefix").await,
        plan["plan"]["turnPrefixMessages"].as_u64().unwrap() as usize,
        "the split turn's prefix is drawn entry by entry"
    );
    assert_eq!(console.count("#compactions tr.compaction").await, 2);
    assert_eq!(console.count("#compactions tr.compaction.on-path").await, 2);
    console.screenshot("session").await;
    // The uploaded compactions are marked on the tree, on the pages that hold them.
    console.go(&format!("/ui/sessions/{id}?page=3")).await;
    let marked = console.find(".row.type-compaction.path").await;
    assert!(marked.find(Locator::Css("a.open")).await.is_ok());

    // Plan with other settings.
    console.fill("#keep", "5000").await;
    console.click("#replan").await;
    console
        .wait_for_url("the plan for 5000", |p| p.contains("keepRecentTokens=5000"))
        .await;
    let replanned = api(
        &app,
        &alice,
        Method::GET,
        &format!("/v1/sessions/{id}/plan?keepRecentTokens=5000"),
        None,
    )
    .await;
    let first_kept_5000 = replanned["plan"]["firstKeptEntryId"].as_str().unwrap();
    assert_ne!(first_kept_5000, first_kept);
    assert_eq!(console.text("#first-kept").await, first_kept_5000);

    // Compact now, with custom instructions: the compaction page shows the summary, its diff
    // against the uploaded compaction it replaces, and the fidelity report.
    console
        .fill("#instructions", "focus on the interactive mode refactor")
        .await;
    console.click("#compact").await;
    let here = console
        .wait_for_url("the compaction page", |p| p.contains("/compactions/"))
        .await;
    let entry_id = here.rsplit('/').next().unwrap().to_owned();
    let history = api(
        &app,
        &alice,
        Method::GET,
        &format!("/v1/sessions/{id}/compactions"),
        None,
    )
    .await;
    let made = history["compactions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["entryId"] == entry_id.as_str())
        .unwrap_or_else(|| panic!("{entry_id} is not in {history}"))
        .clone();
    assert_eq!(
        console.text("#model").await,
        made["model"].as_str().unwrap()
    );
    assert_eq!(console.text("#cached").await, "no");
    let summary = console.text("#summary").await;
    let first_line = made["summary"]
        .as_str()
        .unwrap()
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap();
    assert!(
        summary.contains(first_line.trim_start_matches('#').trim()),
        "{summary}"
    );
    assert_eq!(
        console.text("#previous").await,
        made["previousEntryId"].as_str().unwrap()
    );
    assert!(
        console.count("#diff .added").await > 0,
        "the new summary adds lines"
    );
    assert_eq!(
        console.text("#anchors").await,
        made["fidelity"]["anchors"].to_string()
    );
    // The standing rules the summary carries are listed (the fixture's user turns state none
    // that hold beyond their task, so this counts what the previous summaries carried).
    assert_eq!(
        console.count("#rules li").await,
        made["fidelity"]["rules"].as_array().map_or(0, Vec::len)
    );
    assert_eq!(
        console.text("#forgotten-count").await,
        made["forgotten"].as_array().unwrap().len().to_string()
    );
    console.screenshot("compaction").await;

    // The session page searches what its compactions summarized (recall, by session).
    console.click("#back").await;
    console.fill("#session-recall input[name=q]", "the").await;
    console.click("#session-recall button").await;
    console
        .wait_for_url("the session's recall results", |p| {
            p.starts_with("/ui/recall?") && p.contains("session=")
        })
        .await;
    assert!(console.text("#recall-session").await.contains(&id));
    assert!(console.count("#recall-results li.hit").await > 0);
    assert_eq!(
        console.count("#recall-results li.hit").await,
        console
            .count(&format!("#recall-results a[href='/ui/sessions/{id}']"))
            .await,
        "every hit is an entry of this session"
    );
    console.go(&here).await;

    // Pin a text; the agent goes on (its new entries synced through the API); the next
    // compaction carries the pin.
    console.click("#back").await;
    let pin = "Never edit files under migrations/ by hand (console pin)";
    console.fill("#pin-text", pin).await;
    console.click("#pin").await;
    console
        .wait_for_url("the pinned notice", |p| p.contains("notice=pinned"))
        .await;
    assert_eq!(console.text(".pin-text").await, pin);
    let leaf = api(
        &app,
        &alice,
        Method::GET,
        &format!("/v1/sessions/{id}"),
        None,
    )
    .await["leafId"]
        .as_str()
        .unwrap()
        .to_owned();
    // Two more turns, long enough that a small keepRecentTokens cuts between them.
    let mut parent = leaf;
    let mut lines = Vec::new();
    for n in 0..4u64 {
        let (role, text) = if n % 2 == 0 {
            (
                "user",
                "Now wire the console into the router and write its tests. ",
            )
        } else {
            (
                "assistant",
                "Wired src/http/console/mod.rs into the router; every page renders. ",
            )
        };
        let mut message = json!({"role": role, "content": [{"type": "text", "text": text.repeat(8)}],
                                 "timestamp": 1765274400000u64 + n});
        if role == "assistant" {
            message["api"] = json!("anthropic-messages");
            message["provider"] = json!("anthropic");
            message["model"] = json!("claude-sonnet-4-5");
            message["usage"] = json!({"input": 10, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 30,
                                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}});
            message["stopReason"] = json!("stop");
        }
        let id = format!("c0n5o1e{n}");
        lines.push(json!({"type": "message", "id": id, "parentId": parent,
                          "timestamp": "2025-12-09T10:00:00.000Z", "message": message}));
        parent = id;
    }
    let body = lines
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    api(
        &app,
        &alice,
        Method::POST,
        &format!("/v1/sessions/{id}/entries"),
        Some(body),
    )
    .await;
    console
        .go(&format!("/ui/sessions/{id}?keepRecentTokens=100"))
        .await;
    console.find("#e-c0n5o1e3.leaf").await;
    console.click("#compact").await;
    console
        .wait_for_url("the second compaction", |p| {
            p.contains("/compactions/") && !p.ends_with(&entry_id)
        })
        .await;
    assert!(
        console.text("#summary").await.contains(pin),
        "the pin is in the next summary"
    );
    assert_eq!(console.text("#previous").await, entry_id);

    // Download: the stored file, with the browser's own cookie.
    let downloaded = app
        .client
        .get(format!("{}/ui/sessions/{id}/download", app.url))
        .header("cookie", format!("compactd_key={alice}"))
        .send()
        .await
        .unwrap();
    assert_eq!(downloaded.status(), 200);
    let downloaded = downloaded.text().await.unwrap();
    let stored = app
        .client
        .get(format!("{}/v1/sessions/{id}/entries", app.url))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(downloaded, stored);
    console.click("#back").await;
    assert_eq!(
        console
            .find("#download")
            .await
            .attr("href")
            .await
            .unwrap()
            .as_deref(),
        Some(format!("/ui/sessions/{id}/download").as_str())
    );

    // The sessions list, searched by cwd; the fleet.
    console.go("/ui?q=workspaces/pi-mono").await;
    let listed = console.find(&format!("tr.session[data-id='{id}']")).await;
    assert!(listed.text().await.unwrap().contains("pi-mono"));
    console.screenshot("sessions").await;
    console.go("/ui?q=no-such-project").await;
    console.find("#no-sessions").await;
    console.go("/ui/fleet").await;
    assert!(
        console
            .text("#series")
            .await
            .contains(made["model"].as_str().unwrap())
    );
    console.screenshot("fleet").await;

    // Recall: what the agent wire summarized is found by the search box, the word marked.
    let compacted = app
        .client
        .post(format!("{}/k/{alice}/v1/compact", app.url))
        .json(&serde_json::json!({"prompt": "<conversation>\n[User]: why does the wombat cache miss?\n\n[Assistant]: The wombat cache keys omit the tenant.\n</conversation>"}))
        .send()
        .await
        .unwrap();
    assert!(compacted.status().is_success());
    // Kept write-behind: wait until the API finds it.
    crate::support::eventually("the conversation kept", || async {
        let found = api(
            &app,
            &alice,
            Method::GET,
            "/v1/recall/search?q=wombat",
            None,
        )
        .await;
        (!found["hits"].as_array()?.is_empty()).then_some(())
    })
    .await;
    console.go("/ui").await;
    console.click("#nav-recall").await;
    console.fill("#recall-q", "wombat tenant").await;
    console.click("#recall-search").await;
    console
        .wait_for_url("the recall results", |p| p.starts_with("/ui/recall?q="))
        .await;
    assert_eq!(console.count("#recall-results li.hit").await, 1);
    assert!(
        console.text("#recall-results").await.contains("[wombat]")
            || console
                .text("#recall-results")
                .await
                .to_lowercase()
                .contains("[wombat]")
    );
    console.screenshot("recall").await;

    // Another tenant's key sees none of it.
    console.click("#logout").await;
    console
        .wait_for_url("the login page", |p| p.starts_with("/ui/login"))
        .await;
    console.sign_in(&bob).await;
    assert_eq!(console.text("#tenant").await, "bob");
    console.find("#no-sessions").await;
    assert_eq!(console.count("tr.session").await, 0);
    console.go("/ui/recall?q=wombat").await;
    console.find("#recall-none").await;
    for path in [
        format!("/ui/sessions/{id}"),
        format!("/ui/sessions/{id}/compactions/{entry_id}"),
        format!("/ui/sessions/{id}/download"),
    ] {
        console.go(&path).await;
        let message = console.text("#error-message").await;
        assert!(
            message.contains("no session") || message.contains("no compaction"),
            "{path}: {message}"
        );
    }
    console.go("/ui/fleet").await;
    assert!(
        !console
            .text("#series")
            .await
            .contains(made["model"].as_str().unwrap())
    );
    // Bob's forms cannot reach it either.
    let refused = app
        .client
        .post(format!("{}/ui/sessions/{id}/pins", app.url))
        .header("cookie", format!("compactd_key={bob}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("text=bob+was+here")
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 404);
    console.browser.clone().close().await.unwrap();
    drop(driver);
}

/// On loopback the console serves without a key, as the API does; its pages carry the security
/// headers; a form posted from another site is refused and changes nothing; bad input is a page
/// that names the field.
#[tokio::test]
async fn anonymous_on_loopback_guarded_against_other_sites() {
    let app = TestApp::spawn(config()).await;
    let client = &app.client;
    let created: Value = client
        .post(format!("{}/v1/sessions", app.url))
        .header(reqwest::header::CONTENT_TYPE, "application/x-ndjson")
        .body(crate::fixture("before-compaction.jsonl"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();

    let page = client.get(format!("{}/ui/", app.url)).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
    assert_eq!(page.headers()["cache-control"], "no-store");
    assert!(page.text().await.unwrap().contains(id));

    let pin = |origin: String| {
        client
            .post(format!("{}/ui/sessions/{id}/pins", app.url))
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body("text=from+elsewhere")
            .send()
    };
    assert_eq!(
        pin("https://evil.example".into()).await.unwrap().status(),
        403
    );
    let pins = || async {
        let listed: Value = app
            .get(&format!("/v1/sessions/{id}/pins"))
            .await
            .json()
            .await
            .unwrap();
        listed["pins"].clone()
    };
    assert_eq!(pins().await, json!([]), "a refused form changes nothing");
    // From the console's own page it lands (and the redirect leads back to the session).
    let landed = pin(app.url.clone()).await.unwrap();
    assert!(landed.url().path().ends_with(id), "{}", landed.url());
    assert_eq!(pins().await[0]["text"], "from elsewhere");

    let bad = client
        .get(format!(
            "{}/ui/sessions/{id}?keepRecentTokens=lots",
            app.url
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 422);
    assert!(
        bad.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html")
    );
    assert!(
        bad.text()
            .await
            .unwrap()
            .contains("keepRecentTokens must be a whole number")
    );
    let missing = client
        .get(format!("{}/ui/sessions/no-such-session", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    // The assets are compiled in and cacheable.
    let script = client
        .get(format!("{}/ui/assets/console.js", app.url))
        .send()
        .await
        .unwrap();
    assert_eq!(script.headers()["content-type"], "text/javascript");
    assert!(
        script.text().await.unwrap().len() < 4096,
        "a few KB of script"
    );
}
