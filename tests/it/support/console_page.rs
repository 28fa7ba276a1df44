//! A browser on compactd's console for the console tests: pages by path, fields and buttons by
//! what a person sees, screenshots, and the API beside it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use compactd::access::new_key;
use compactd_store::{Store, now_ms};
use fantoccini::{Client, Locator};
use serde_json::Value;

use crate::support::TestApp;

/// How long a page may take to appear (a compaction of a 2 MB session on a loaded machine).
pub const PAGE_WAIT: Duration = Duration::from_secs(90);

/// A browser on compactd's console.
pub struct Console {
    pub browser: Client,
    pub base: String,
    pub shots: String,
}

impl Console {
    /// A browser of `driver` on `app`'s console; screenshots under the store's backend.
    pub async fn open(
        driver: &crate::support::browser::Driver,
        app: &TestApp,
        store: &dyn Store,
    ) -> Console {
        Console {
            browser: driver.browser().await,
            base: app.url.clone(),
            shots: format!(
                "{}/console-screenshots/{}",
                env!("CARGO_TARGET_TMPDIR").trim_end_matches("/tmp"),
                store.backend()
            ),
        }
    }

    pub async fn go(&self, path: &str) {
        self.browser
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap();
    }

    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.browser
            .wait()
            .at_most(PAGE_WAIT)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no {css} on the page: {e}"))
    }

    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.unwrap()
    }

    pub async fn count(&self, css: &str) -> usize {
        self.browser
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .len()
    }

    pub async fn fill(&self, css: &str, text: &str) {
        let field = self.find(css).await;
        field.clear().await.unwrap();
        field.send_keys(text).await.unwrap();
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// Waits until the browser is on a page whose path (and query) passes `test`.
    pub async fn wait_for_url(&self, what: &str, test: impl Fn(&str) -> bool) -> String {
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

    pub async fn screenshot(&self, name: &str) {
        let png = self.browser.screenshot().await.unwrap();
        std::fs::create_dir_all(&self.shots).unwrap();
        std::fs::write(format!("{}/{name}.png", self.shots), png).unwrap();
    }

    pub async fn sign_in(&self, key: &str) {
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

pub async fn key(store: &Arc<dyn Store>, tenant: &str) -> String {
    let (text, record) = new_key(tenant, None, now_ms());
    store.create_key(&record).await.unwrap();
    text
}

/// The REST API beside the browser, as an agent or a script would call it.
pub async fn api(
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
