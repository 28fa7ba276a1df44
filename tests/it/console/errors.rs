//! The console's errors are console pages (HTML, the console's security headers), whatever went
//! wrong: an address that is not UTF-8, an unknown page, an upload that is not the form, a
//! method a page does not take; and text from sessions never puts raw control characters into a
//! page.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{TestApp, config};

/// Asserts `response` is a console page with `status`, and returns its HTML.
async fn page(response: reqwest::Response, status: u16) -> String {
    assert_eq!(response.status().as_u16(), status);
    let headers = response.headers().clone();
    let html = response.text().await.unwrap();
    assert!(
        headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/html"),
        "{headers:?}: {html}"
    );
    assert!(
        headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("script-src 'self'"),
        "{headers:?}"
    );
    assert_eq!(headers["cache-control"], "no-store");
    html
}

#[tokio::test]
async fn console_errors_are_pages_and_session_text_shows_no_control_characters() {
    let app = TestApp::spawn(config()).await;
    let client = &app.client;
    let url = |path: &str| format!("{}{path}", app.url);

    // What a terminal printed: colour escapes, a NUL, a bell; a right-to-left override.
    let header = json!({"type": "session", "version": 3, "id": "ctl", "timestamp": "2026-01-01T00:00:00.000Z",
        "cwd": "/w/proj\u{1b}[2J"});
    let message = json!({"type": "message", "id": "a", "parentId": null, "timestamp": "2026-01-01T00:00:01.000Z",
        "message": {"role": "user", "content": "run \u{1b}[31mred\u{1b}[0m \u{0}\u{7} tests \u{202e}gnp.exe", "timestamp": 1}});
    let created: Value = app
        .upload(format!("{header}\n{message}\n"))
        .await
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    for path in [format!("/ui/sessions/{id}"), "/ui".to_owned()] {
        let html = page(client.get(url(&path)).send().await.unwrap(), 200).await;
        let raw: Vec<char> = html
            .chars()
            .filter(|c| {
                (c.is_control() && *c != '\n' && *c != '\t')
                    || ('\u{202a}'..='\u{202e}').contains(c)
            })
            .collect();
        assert!(raw.is_empty(), "{path}: {raw:?}");
        assert!(html.contains("\\u{1b}"), "{path}");
    }
    let html = page(
        client
            .get(url(&format!("/ui/sessions/{id}")))
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert!(html.contains("\\u{202e}"));

    // An address whose id is not UTF-8, an unknown page, the wrong method, an upload that is not
    // the form.
    page(
        client.get(url("/ui/sessions/%C3%28")).send().await.unwrap(),
        400,
    )
    .await;
    let html = page(
        client.get(url("/ui/no/such/page")).send().await.unwrap(),
        404,
    )
    .await;
    assert!(html.contains("404"), "{html}");
    page(client.delete(url("/ui")).send().await.unwrap(), 405).await;
    let html = page(
        client
            .post(url("/ui/sessions"))
            .header("content-type", "text/plain")
            .body("not a form")
            .send()
            .await
            .unwrap(),
        400,
    )
    .await;
    assert!(html.contains("multipart/form-data"), "{html}");
    assert_eq!(
        client.get(url("/ui/nope")).send().await.unwrap().status(),
        StatusCode::NOT_FOUND
    );
}
