//! Bad input to plans, compactions, branch summaries and the summary wire: each case gets a clear
//! 4xx with a JSON error body (never a 5xx), and the stored data is the same afterwards. Runs on
//! PostgreSQL and SQLite.

use std::sync::Arc;

use compactd_store::Store;
use reqwest::Method;
use serde_json::json;

use crate::boundary::bad_input::{Case, HEADER, check, entry, lines, nested, with_one_session};

on_both_backends!(requests_answer_bad_input_with_a_clear_4xx_and_change_nothing);

async fn requests_answer_bad_input_with_a_clear_4xx_and_change_nothing(store: Arc<dyn Store>) {
    let (app, id, before) = with_one_session(store).await;
    let compactions = format!("/v1/sessions/{id}/compactions");
    let branches = format!("/v1/sessions/{id}/branch-summaries");
    let prompt_of = |n: usize| json!({"prompt": "x".repeat(n)}).to_string().into_bytes();
    #[rustfmt::skip]
    let cases: Vec<Case> = vec![
        ("plan: negative keep", Method::GET, format!("/v1/sessions/{id}/plan?keepRecentTokens=-1"), vec![], 422, "invalid_value", None),
        ("append: a window too small to be one", Method::POST, format!("/v1/sessions/{id}/entries?contextWindow=5"), lines(&[entry("hinted", None)]), 422, "invalid_value", None),
        ("append: negative keep", Method::POST, format!("/v1/sessions/{id}/entries?keepRecentTokens=-1"), lines(&[entry("hinted", None)]), 422, "invalid_value", None),
        ("plan: huge keep", Method::GET, format!("/v1/sessions/{id}/plan?keepRecentTokens=99999999999999999999999"), vec![], 422, "invalid_value", None),
        ("plan: zero reserve", Method::GET, format!("/v1/sessions/{id}/plan?reserveTokens=0"), vec![], 422, "invalid_value", None),
        ("plan: unknown leaf", Method::GET, format!("/v1/sessions/{id}/plan?leafId=nope"), vec![], 422, "invalid_value", None),
        ("plan upload: cycle", Method::POST, "/v1/plan".into(), lines(&[HEADER.into(), entry("a", Some("a"))]), 422, "invalid_session", Some("parent_cycle")),
        ("context: unknown leaf", Method::GET, format!("/v1/sessions/{id}/context?leafId=nope"), vec![], 422, "invalid_value", None),
        ("compaction: not JSON", Method::POST, compactions.clone(), b"{".to_vec(), 400, "invalid_json", None),
        ("compaction: wrong type", Method::POST, compactions.clone(), br#"{"keepRecentTokens":"many"}"#.to_vec(), 422, "invalid_value", None),
        ("compaction: negative setting", Method::POST, compactions.clone(), br#"{"reserveTokens":-5}"#.to_vec(), 422, "invalid_value", None),
        ("compaction: huge setting", Method::POST, compactions.clone(), br#"{"keepRecentTokens":1e30}"#.to_vec(), 422, "invalid_value", None),
        ("compaction: unknown leaf", Method::POST, compactions.clone(), br#"{"leafId":"nope"}"#.to_vec(), 422, "invalid_value", None),
        ("compaction: unknown field", Method::POST, compactions.clone(), br#"{"keep":1}"#.to_vec(), 422, "invalid_value", None),
        ("compaction: deep nesting", Method::POST, compactions.clone(), format!(r#"{{"leafId":{}}}"#, nested(200)).into_bytes(), 422, "invalid_value", None),
        ("branch: missing target", Method::POST, branches.clone(), b"{}".to_vec(), 422, "invalid_value", None),
        ("branch: unknown target", Method::POST, branches.clone(), br#"{"targetId":"nope"}"#.to_vec(), 422, "invalid_value", None),
        ("compact: not JSON", Method::POST, "/v1/compact".into(), b"prompt=hi".to_vec(), 400, "invalid_json", None),
        ("compact: missing prompt", Method::POST, "/v1/compact".into(), br#"{"systemPrompt":"s"}"#.to_vec(), 422, "invalid_value", None),
        ("compact: wrong type", Method::POST, "/v1/compact".into(), br#"{"prompt":["a"]}"#.to_vec(), 422, "invalid_value", None),
        ("compact: negative maxTokens", Method::POST, "/v1/compact".into(), br#"{"prompt":"a","maxTokens":-1}"#.to_vec(), 422, "invalid_value", None),
        ("compact: fractional maxTokens", Method::POST, "/v1/compact".into(), br#"{"prompt":"a","maxTokens":1.5}"#.to_vec(), 422, "invalid_value", None),
        ("compact: invalid UTF-8", Method::POST, "/v1/compact".into(), b"{\"prompt\":\"\xff\"}".to_vec(), 400, "invalid_json", None),
        ("compact: deep nesting", Method::POST, "/v1/compact".into(), format!(r#"{{"prompt":"a","x":{}}}"#, nested(200)).into_bytes(), 422, "invalid_value", None),
        ("compact: prompt over the limit", Method::POST, "/v1/compact".into(), prompt_of(2 << 20), 413, "limit_exceeded", None),
        ("chat: messages not a list", Method::POST, "/v1/chat/completions".into(), br#"{"messages":"hi"}"#.to_vec(), 422, "invalid_value", None),
        ("chat: content a number", Method::POST, "/v1/chat/completions".into(), br#"{"messages":[{"role":"user","content":7}]}"#.to_vec(), 422, "invalid_value", None),
        ("chat: negative max_tokens", Method::POST, "/v1/chat/completions".into(), br#"{"messages":[{"role":"user","content":"x"}],"max_tokens":-3}"#.to_vec(), 422, "invalid_value", None),
        ("unknown session", Method::GET, "/v1/sessions/00000000-0000-0000-0000-000000000000".into(), vec![], 404, "not_found", None),
        ("unknown route", Method::GET, "/v2/anything".into(), vec![], 404, "not_found", None),
        ("wrong method", Method::PUT, "/v1/compact".into(), vec![], 405, "method_not_allowed", None),
    ];
    check(&app, &before, cases).await;
}
