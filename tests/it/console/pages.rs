//! The web console in a real browser: Debian's headless `chromium` driven through
//! `chromedriver` (WebDriver, by fantoccini) against compactd on a socket, on both stores.
//! `scripts/test.sh` installs both when they are missing. Screenshots of the main pages are
//! written to `target/console-screenshots/` (not committed).

use std::sync::Arc;

use compactd_store::Store;
use fantoccini::Locator;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::browser::Driver;
use crate::support::console_page::{Console, api, key};
use crate::support::{TestApp, config};

on_both_backends!(a_person_uploads_plans_compacts_pins_and_another_tenant_sees_none_of_it);

async fn a_person_uploads_plans_compacts_pins_and_another_tenant_sees_none_of_it(
    store: Arc<dyn Store>,
) {
    compactd_testkit::needs!(Browser);
    let (alice, bob) = (key(&store, "alice").await, key(&store, "bob").await);
    // Listening beyond loopback: the console, like the API, wants a key.
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    // The gateway on, for the fleet page's agents (no request here goes to its upstreams).
    config.gateway.enabled = true;
    let app = TestApp::with_store(config, store.clone()).await;
    let driver = Driver::start();
    let console = Console::open(&driver, &app, store.as_ref()).await;
    let scene = Scene {
        app,
        console,
        alice,
        bob,
    };
    scene.signs_in().await;
    let id = scene.uploads_and_plans().await;
    let made = scene.compacts_with_instructions(&id).await;
    scene.searches_the_sessions_recall(&id, &made).await;
    scene.pins_and_compacts_again(&id, &made).await;
    scene.downloads_the_stored_file(&id).await;
    scene.lists_sessions_and_the_fleet(&id, &made).await;
    scene.finds_the_wire_conversation_in_recall().await;
    scene.shows_each_agent_on_the_fleet().await;
    scene.another_tenant_sees_none(&id, &made).await;
    scene.console.browser.clone().close().await.unwrap();
    drop(driver);
}

/// The scenario's parts: compactd, the browser on its console, and the two tenants' keys.
pub(super) struct Scene {
    pub(super) app: TestApp,
    pub(super) console: Console,
    pub(super) alice: String,
    pub(super) bob: String,
}

/// What the first compaction made: its page, its entry, the model that wrote it.
pub(super) struct Made {
    pub(super) here: String,
    pub(super) entry_id: String,
    pub(super) model: String,
}

impl Scene {
    /// Alice signs in: her key is kept in an HttpOnly cookie, never in the URL.
    async fn signs_in(&self) {
        let (console, alice) = (&self.console, &self.alice);
        console.sign_in(alice).await;
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
    }

    /// She uploads a real pi session with two compactions in it, and plans it: the tree and
    /// the cut are the API's plan, with her settings too. The session's id.
    async fn uploads_and_plans(&self) -> String {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
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
            app,
            alice,
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
            app,
            alice,
            Method::GET,
            &format!("/v1/sessions/{id}/plan?keepRecentTokens=5000"),
            None,
        )
        .await;
        let first_kept_5000 = replanned["plan"]["firstKeptEntryId"].as_str().unwrap();
        assert_ne!(first_kept_5000, first_kept);
        assert_eq!(console.text("#first-kept").await, first_kept_5000);
        id
    }

    /// She compacts with instructions: the compaction page shows the summary, its diff against
    /// the compaction it replaces, and the fidelity report.
    async fn compacts_with_instructions(&self, id: &str) -> Made {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
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
            app,
            alice,
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
        Made {
            here,
            entry_id,
            model: made["model"].as_str().unwrap().to_owned(),
        }
    }

    /// The session page searches what its compactions summarized.
    async fn searches_the_sessions_recall(&self, id: &str, made: &Made) {
        let console = &self.console;
        let here = &made.here;
        // The session page searches what its compactions summarized (recall, by session).
        console.click("#back").await;
        console.fill("#session-recall input[name=q]", "the").await;
        console.click("#session-recall button").await;
        console
            .wait_for_url("the session's recall results", |p| {
                p.starts_with("/ui/recall?") && p.contains("session=")
            })
            .await;
        assert!(console.text("#recall-session").await.contains(id));
        assert!(console.count("#recall-results li.hit").await > 0);
        assert_eq!(
            console.count("#recall-results li.hit").await,
            console
                .count(&format!("#recall-results a[href='/ui/sessions/{id}']"))
                .await,
            "every hit is an entry of this session"
        );
        console.go(here).await;
    }

    /// A pin; the agent goes on; the next compaction carries the pin.
    async fn pins_and_compacts_again(&self, id: &str, made: &Made) {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
        let entry_id = &made.entry_id;
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
        let leaf =
            api(app, alice, Method::GET, &format!("/v1/sessions/{id}"), None).await["leafId"]
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
            app,
            alice,
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
                p.contains("/compactions/") && !p.ends_with(entry_id.as_str())
            })
            .await;
        assert!(
            console.text("#summary").await.contains(pin),
            "the pin is in the next summary"
        );
        assert_eq!(&console.text("#previous").await, entry_id);
    }

    /// The download is the stored file.
    async fn downloads_the_stored_file(&self, id: &str) {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
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
            .bearer_auth(alice)
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
    }

    /// The sessions list, searched by cwd; the fleet's series.
    async fn lists_sessions_and_the_fleet(&self, id: &str, made: &Made) {
        let console = &self.console;
        // The sessions list, searched by cwd; the fleet.
        console.go("/ui?q=workspaces/pi-mono").await;
        let listed = console.find(&format!("tr.session[data-id='{id}']")).await;
        assert!(listed.text().await.unwrap().contains("pi-mono"));
        console.screenshot("sessions").await;
        console.go("/ui?q=no-such-project").await;
        console.find("#no-sessions").await;
        console.go("/ui/fleet").await;
        assert!(console.text("#series").await.contains(made.model.as_str()));
        console.screenshot("fleet").await;
    }

    /// What the agent wire summarized is found by the recall page.
    async fn finds_the_wire_conversation_in_recall(&self) {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
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
            let found = api(app, alice, Method::GET, "/v1/recall/search?q=wombat", None).await;
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
    }

    /// The fleet shows each agent and wire.
    async fn shows_each_agent_on_the_fleet(&self) {
        let (app, console, alice) = (&self.app, &self.console, &self.alice);
        // The fleet: Claude Code's compaction at the gateway beside the remote endpoint's and the
        // session's, each under its agent and wire.
        let claude = crate::support::gateway::recorded("sessions/claude-code-2.1.332")
            .into_iter()
            .find(|r| r.compaction)
            .unwrap();
        let served = claude
            .request(&app.client, &format!("{}/k/{alice}", app.url))
            .send()
            .await
            .unwrap();
        assert!(served.status().is_success());
        crate::support::eventually("the gateway's call logged", || async {
            let calls = api(app, alice, Method::GET, "/v1/calls", None).await;
            calls["calls"]
                .as_array()?
                .iter()
                .any(|c| c["agent"] == "claude-code")
                .then_some(())
        })
        .await;
        console.go("/ui/fleet").await;
        let agents = console.text("#agent-table").await;
        for shown in [
            "claude-code",
            "anthropic-messages",
            "pi-family",
            "remote-endpoint",
            "session",
        ] {
            assert!(agents.contains(shown), "{shown}: {agents}");
        }
        assert!(console.text("#recent-table").await.contains("claude-code"));
        console.screenshot("fleet-agents").await;
    }
}
