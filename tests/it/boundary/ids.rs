//! Ids are checked once, where they come in (issue 64): an id no resource could have (a NUL or
//! another control character in it, or longer than any id) in a path, a body or an MCP argument
//! is the caller's mistake — a 400 or a 404, the MCP's own error — on both stores, and never
//! reaches SQL (PostgreSQL refused a NUL with a 500, SQLite answered 404).

use std::sync::Arc;

use compactd_store::Store;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::recall::endpoint::mcp;
use crate::support::{TestApp, config, tenant_keys};

on_both_backends!(
    a_malformed_id_is_the_callers_mistake_on_every_way_in,
    a_malformed_id_in_a_console_address_is_a_page_not_a_500,
);

/// Ids no resource could have: a NUL, an escape, one longer than any id.
fn malformed() -> Vec<String> {
    vec![
        "abc\u{0}".to_owned(),
        "\u{0}".to_owned(),
        "a\u{1b}[2J".to_owned(),
        "x".repeat(compactd_core::ids::MAX_ID_BYTES + 1),
    ]
}

fn in_path(id: &str) -> String {
    id.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn a_malformed_id_is_the_callers_mistake_on_every_way_in(store: Arc<dyn Store>) {
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    let app = TestApp::with_store(config, store.clone()).await;
    let key = &tenant_keys(store.as_ref(), &["alice"]).await[0];
    for id in malformed() {
        // A body: 400 naming the field.
        let read = app
            .send(
                app.client
                    .post(format!("{}/v1/threads/read", app.url))
                    .bearer_auth(key)
                    .json(&json!({"thread": id, "question": "which queue?"})),
            )
            .await;
        assert_eq!(read.status(), StatusCode::BAD_REQUEST, "{id:?}");
        let body: Value = read.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_id", "{body}");
        assert_eq!(body["error"]["param"], "thread", "{body}");
        // A path: no session has it (404), asked of no store.
        for (method, route, body) in [
            ("GET", "", None),
            ("GET", "/threads", None),
            (
                "POST",
                "/handoff",
                Some(json!({"goal": "Finish the parser"})),
            ),
            ("POST", "/compactions", Some(json!({}))),
            ("POST", "/fork", Some(json!({"entryId": "e1"}))),
            ("GET", "/pins", None),
        ] {
            let url = format!("{}/v1/sessions/{}{route}", app.url, in_path(&id));
            let mut request = match method {
                "GET" => app.client.get(url),
                _ => app.client.post(url),
            }
            .bearer_auth(key);
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = app.send(request).await;
            assert_eq!(
                response.status(),
                StatusCode::NOT_FOUND,
                "{method} {route} {id:?}"
            );
        }
        let turns = app
            .send(
                app.client
                    .get(format!("{}/v1/recall/{}/turns", app.url, in_path(&id)))
                    .bearer_auth(key),
            )
            .await;
        assert_eq!(turns.status(), StatusCode::BAD_REQUEST, "{id:?}");
    }
    // MCP: its own error shape for a bad argument, never a storage error.
    let client = mcp(&app.url, key).await.unwrap();
    for id in malformed() {
        for (tool, args) in [
            ("read_thread", json!({"thread": id, "question": "q"})),
            (
                "handoff",
                json!({"thread": id, "goal": "Finish the parser"}),
            ),
            ("recall_read", json!({"recall_id": id})),
        ] {
            let refused = client
                .call_tool(
                    rmcp::model::CallToolRequestParams::new(tool)
                        .with_arguments(args.as_object().unwrap().clone()),
                )
                .await;
            // A protocol error, or a tool result flagged as an error: both are MCP's shapes.
            let message = match refused {
                Err(error) => error.to_string(),
                Ok(result) if result.is_error == Some(true) => format!("{:?}", result.content),
                Ok(result) => panic!("{tool} {id:?} answered {result:?}"),
            };
            assert!(
                message.contains("not an id") && !message.contains("storage"),
                "{tool}: {message}"
            );
        }
    }
    client.cancel().await.unwrap();
}

async fn a_malformed_id_in_a_console_address_is_a_page_not_a_500(store: Arc<dyn Store>) {
    // On loopback without keys: the console serves the anonymous tenant.
    let app = TestApp::with_store(config(), store).await;
    let origin = app.url.clone();
    for id in malformed() {
        let id = in_path(&id);
        for (method, path) in [
            ("GET", format!("/ui/sessions/{id}")),
            ("POST", format!("/ui/sessions/{id}/handoff/draft")),
            ("POST", format!("/ui/sessions/{id}/handoff")),
        ] {
            let url = format!("{}{path}", app.url);
            let request = match method {
                "GET" => app.client.get(url),
                _ => app
                    .client
                    .post(url)
                    .header("origin", &origin)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body("goal=Finish+the+parser&prompt=Go+on"),
            };
            let response = request.send().await.unwrap();
            let status = response.status();
            assert!(
                status == StatusCode::BAD_REQUEST || status == StatusCode::NOT_FOUND,
                "{method} {path}: {status}"
            );
            let page = response.text().await.unwrap();
            assert!(
                page.contains("<html") || page.contains("<!doctype"),
                "{page}"
            );
        }
    }
}
