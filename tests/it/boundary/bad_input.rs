//! Bad input over every endpoint: each case gets a clear 4xx with a JSON error body (never a
//! 5xx), and the stored data is the same afterwards. Runs on PostgreSQL and SQLite. Here uploads
//! and appends; plans, compactions and the wire in `bad_input_requests`.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::Method;
use serde_json::{Value, json};

use crate::support::{TestApp, config};

on_both_backends!(sessions_answer_bad_input_with_a_clear_4xx_and_change_nothing);

pub const HEADER: &str =
    r#"{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z"}"#;

pub fn entry(id: &str, parent: Option<&str>) -> String {
    json!({"type":"message","id":id,"parentId":parent,"timestamp":"2026-01-01T00:00:01.000Z",
           "message":{"role":"user","content":"hello","timestamp":1}})
    .to_string()
}

pub fn lines(lines: &[String]) -> Vec<u8> {
    lines
        .iter()
        .map(|l| format!("{l}\n"))
        .collect::<String>()
        .into_bytes()
}

pub fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// Everything stored, for before/after comparison.
async fn snapshot(app: &TestApp) -> Value {
    let sessions: Value = app.sessions().await.json().await.unwrap();
    let mut all = vec![sessions.clone()];
    for session in sessions["sessions"].as_array().unwrap() {
        let id = session["id"].as_str().unwrap();
        all.push(Value::String(app.entries(id).await.text().await.unwrap()));
        all.push(app.compactions(id).await.json().await.unwrap());
    }
    Value::Array(all)
}

/// (what, method, path, body, status, code, kind of the bad line)
pub type Case = (
    &'static str,
    Method,
    String,
    Vec<u8>,
    u16,
    &'static str,
    Option<&'static str>,
);

/// The session every bad-input test starts from: a root and one child.
fn good_session() -> Vec<u8> {
    lines(&[HEADER.into(), entry("a", None), entry("b", Some("a"))])
}

/// A fresh app (prompts up to 1 MiB) holding one good session: the app, the session's id and a
/// snapshot of everything stored.
pub async fn with_one_session(store: Arc<dyn Store>) -> (TestApp, String, Value) {
    let mut config = config();
    config.summarizers.max_prompt_bytes = 1 << 20;
    let app = TestApp::handlers_with_store(config, store);
    let created: Value = app.upload(good_session()).await.json().await.unwrap();
    let id = created["id"].as_str().unwrap().to_owned();
    let before = snapshot(&app).await;
    (app, id, before)
}

/// Sends every case with the content type its route documents, checks the clear 4xx each names,
/// and that nothing stored changed.
pub async fn check(app: &TestApp, before: &Value, cases: Vec<Case>) {
    for (what, method, path, body, status, code, kind) in cases {
        // Each body with the type its route documents.
        let route = path.split('?').next().unwrap_or_default();
        let jsonl = route == "/v1/sessions" || route == "/v1/plan" || route.ends_with("/entries");
        let content_type = if jsonl {
            "application/x-ndjson"
        } else {
            "application/json"
        };
        let response = app
            .send(
                app.client
                    .request(method, format!("{}{path}", app.url))
                    .header(reqwest::header::CONTENT_TYPE, content_type)
                    .body(body),
            )
            .await;
        assert_eq!(response.status().as_u16(), status, "{what}");
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{what}: JSON error"
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{what}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "{what}");
        if let Some(kind) = kind {
            assert_eq!(body["error"]["kind"], kind, "{what}: {body}");
            if kind != "empty" {
                assert!(
                    body["error"]["line"].as_u64().is_some(),
                    "{what}: names the line: {body}"
                );
            }
        }
        if code == "limit_exceeded" {
            assert!(
                message.contains("limit"),
                "{what}: names the limit: {message}"
            );
        }
        if what.contains("deep nesting") {
            assert!(
                message.contains("nested deeper than 128"),
                "{what}: {message}"
            );
        }
    }
    assert_eq!(&snapshot(app).await, before, "stored data unchanged");
}

async fn sessions_answer_bad_input_with_a_clear_4xx_and_change_nothing(store: Arc<dyn Store>) {
    let (app, id, before) = with_one_session(store).await;
    let good = good_session();
    let ten_mb_line = format!(
        r#"{{"type":"custom","id":"big","parentId":null,"data":"{}"}}"#,
        "x".repeat(10 << 20)
    );
    let mut invalid_utf8 = lines(&[HEADER.into()]);
    invalid_utf8.extend_from_slice(b"{\"type\":\"label\",\"id\":\"\xc3\x28\"}\n");
    let truncated = entry("c", Some("b"));
    let truncated = &truncated[..truncated.len() - 10];
    let deep_line = format!(
        r#"{{"type":"custom","id":"deep","parentId":null,"data":{}}}"#,
        nested(200)
    );
    let sessions = "/v1/sessions".to_owned();
    let append = format!("/v1/sessions/{id}/entries");
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("upload: empty body", Method::POST, sessions.clone(), vec![], 422, "invalid_session", Some("empty")),
        ("upload: not JSON", Method::POST, sessions.clone(), b"not json at all\n".to_vec(), 422, "invalid_session", Some("invalid_json")),
        ("upload: no header", Method::POST, sessions.clone(), lines(&[entry("a", None)]), 422, "invalid_session", Some("invalid_header")),
        ("upload: truncated line", Method::POST, sessions.clone(), lines(&[HEADER.into(), entry("a", None), truncated.into()]), 422, "invalid_session", Some("invalid_json")),
        ("upload: invalid UTF-8", Method::POST, sessions.clone(), invalid_utf8.clone(), 422, "invalid_session", Some("invalid_utf8")),
        ("upload: 10 MB line", Method::POST, sessions.clone(), lines(&[HEADER.into(), ten_mb_line.clone()]), 413, "limit_exceeded", Some("line_too_long")),
        ("upload: deep nesting", Method::POST, sessions.clone(), lines(&[HEADER.into(), deep_line.clone()]), 422, "invalid_session", Some("too_deep")),
        ("append: deep nesting", Method::POST, append.clone(), lines(std::slice::from_ref(&deep_line)), 422, "invalid_session", Some("too_deep")),
        ("upload: parentId cycle", Method::POST, sessions.clone(), lines(&[HEADER.into(), entry("a", Some("b")), entry("b", Some("a"))]), 422, "invalid_session", Some("parent_cycle")),
        ("upload: dangling parent", Method::POST, sessions.clone(), lines(&[HEADER.into(), entry("a", Some("ghost"))]), 422, "invalid_session", Some("dangling_parent")),
        ("upload: duplicate ids", Method::POST, sessions.clone(), lines(&[HEADER.into(), entry("a", None), entry("a", None)]), 422, "invalid_session", Some("duplicate_id")),
        ("upload: wrong field type", Method::POST, sessions.clone(), lines(&[ HEADER.into(), r#"{"type":"compaction","id":"c","summary":5}"#.into(), ]), 422, "invalid_session", Some("invalid_field")),
        ("upload: entry without type", Method::POST, sessions.clone(), lines(&[HEADER.into(), r#"{"id":"c"}"#.into()]), 422, "invalid_session", Some("missing_type")),
        ("upload: bad lenient flag", Method::POST, format!("{sessions}?lenient=2"), good.clone(), 422, "invalid_value", None),
        ("append: not JSON", Method::POST, append.clone(), b"{oops\n".to_vec(), 422, "invalid_session", Some("invalid_json")),
        ("append: invalid UTF-8", Method::POST, append.clone(), b"{\"id\":\"\xff\"}\n".to_vec(), 422, "invalid_session", Some("invalid_utf8")),
        ("append: dangling parent", Method::POST, append.clone(), lines(&[entry("c", Some("ghost"))]), 422, "invalid_session", Some("dangling_parent")),
        ("append: duplicate in request", Method::POST, append.clone(), lines(&[entry("c", Some("b")), entry("c", Some("b"))]), 422, "invalid_session", Some("duplicate_id")),
        ("append: other content for a stored id", Method::POST, append.clone(), lines(&[json!({"type":"label","id":"a","parentId":null}).to_string()]), 409, "entry_conflict", None),
        ("append: 10 MB line", Method::POST, append.clone(), lines(std::slice::from_ref(&ten_mb_line)), 413, "limit_exceeded", Some("line_too_long")),
        ("append: a session header", Method::POST, append.clone(), lines(&[r#"{"type":"session","version":3,"id":"another","timestamp":"2026-01-01T00:00:00.000Z"}"#.into()]), 422, "invalid_session", Some("unexpected_header")),
        ("append: NUL in an id", Method::POST, append.clone(), lines(&[json!({"type":"label","id":"nul\u{0}id","parentId":"b"}).to_string()]), 422, "invalid_session", Some("invalid_field")),
        ("upload: NUL in a parentId", Method::POST, sessions.clone(), lines(&[HEADER.into(), entry("a", Some("a\u{0}"))]), 422, "invalid_session", Some("invalid_field")),
        ("upload: NUL in the session id", Method::POST, sessions.clone(), lines(&[r#"{"type":"session","version":3,"id":"s\u0000"}"#.into(), entry("a", None)]), 422, "invalid_session", Some("invalid_header")),
        ("session id with NUL in the path", Method::GET, "/v1/sessions/a%00b".into(), vec![], 404, "not_found", None),
        ("session id that is not UTF-8 in the path", Method::GET, "/v1/sessions/%FF%FE/plan".into(), vec![], 400, "invalid_path", None),
        ("append: empty body", Method::POST, append.clone(), vec![], 422, "invalid_value", None),
        ("append: unknown session", Method::POST, "/v1/sessions/nope/entries".into(), lines(&[entry("c", None)]), 404, "not_found", None),
    ];
    check(&app, &before, cases).await;

    // Unknown entry types are not bad input: they are kept, byte for byte (spec §1.9).
    let unknown = lines(&[
        HEADER.into(),
        r#"{"type":"mode_change","id":"m","parentId":null,"mode":"plan"}"#.into(),
    ]);
    let created: Value = app.upload(unknown.clone()).await.json().await.unwrap();
    let back = app
        .get(&format!(
            "/v1/sessions/{}/entries",
            created["id"].as_str().unwrap()
        ))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(back.into_bytes(), unknown);
}
