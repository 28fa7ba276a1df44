//! The console for anonymous callers on loopback, in a real browser: served without a key as the
//! API is, with its security headers, and guarded against forms posted from other sites.

use serde_json::{Value, json};

use crate::support::{TestApp, config};

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
