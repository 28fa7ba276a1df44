//! Recall (issue 27): a remoteEndpoint summarization keeps its redacted conversation; a real MCP
//! client (the official Rust SDK, `rmcp`, over Streamable HTTP; and the reference TypeScript
//! SDK in a node script) initializes against `/mcp`, lists the tools, finds a term only a
//! dropped tool result held and reads that turn back byte for byte — on both stores; another
//! tenant finds nothing, a revoked key is refused, a planted secret is neither stored nor
//! returned; the REST equivalents answer the same.

use std::sync::Arc;

use compactd::access::new_key;
use compactd_store::{Store, now_ms};
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, ClientConfig};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use crate::support::{TestApp, config};

on_both_backends!(an_agent_gets_back_what_compaction_dropped);

/// What only the dropped tool result says, and a secret it printed.
const NEEDLE: &str = "ZEBRA-7731";
const SECRET: &str = "ghp_Xk3Lm9Pq2Rs7Tv4Wy8Za1Bc5De6Fg0Hj2Kl4";

/// A tool result as pi writes it, with JavaScript's escapes of a lone surrogate and a quote.
fn tool_output() -> String {
    format!(
        "checksum mismatch in vendor/blob.bin ({NEEDLE}): expected 9f2c, got 11ab\n\
         GITHUB_TOKEN={SECRET}\n\
         note: \"half an emoji\" \u{FFFD} follows"
    )
}

fn prompt() -> String {
    let conversation = format!(
        "[User]: Verify the vendored blobs.\n\n\
         [Assistant tool calls]: verify(path=\"vendor/blob.bin\")\n\n\
         [Tool result]: {}\n\n\
         [Assistant]: One blob differs; I will re-download it.\n\n\
         [User]: Now update the lockfile.",
        tool_output()
    );
    compactd_core::transcript::prompt::history_prompt(
        &compactd_core::prompts::Prompts::builtin(),
        &conversation,
        None,
        None,
    )
}

async fn key(store: &Arc<dyn Store>, tenant: &str) -> (String, String) {
    let (text, record) = new_key(tenant, None, now_ms());
    store.create_key(&record).await.unwrap();
    (text, record.key_id)
}

/// A GET with a key, its status and JSON body.
pub async fn get(app: &TestApp, key: &str, path: &str) -> (StatusCode, Value) {
    let response = app
        .send(
            app.client
                .get(format!("{}{path}", app.url))
                .bearer_auth(key),
        )
        .await;
    (
        response.status(),
        response.json().await.unwrap_or(Value::Null),
    )
}

pub async fn mcp(
    url: &str,
    key: &str,
) -> Result<rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>, String> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{url}/mcp")).auth_header(key),
    );
    ClientConfig::default()
        .serve(transport)
        .await
        .map_err(|e| e.to_string())
}

pub async fn call(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ClientConfig>,
    tool: &str,
    arguments: Value,
) -> Value {
    let result = client
        .call_tool(
            CallToolRequestParams::new(tool.to_owned())
                .with_arguments(arguments.as_object().unwrap().clone()),
        )
        .await
        .unwrap();
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = result.content[0].as_text().unwrap().text.clone();
    serde_json::from_str(&text).unwrap()
}

async fn an_agent_gets_back_what_compaction_dropped(store: Arc<dyn Store>) {
    compactd_testkit::needs!(Node);
    let mut config = config();
    config.http.listen = "0.0.0.0:0".parse().unwrap();
    config.summarizers.models = vec!["extractive".parse().unwrap()];
    config.summarizers.stages.recall_footer = true;
    let app = TestApp::with_store(config, store.clone()).await;
    let (alice, _) = key(&store, "alice").await;
    let (bob, _) = key(&store, "bob").await;
    let (revoked, revoked_id) = key(&store, "alice").await;
    store.revoke_key(&revoked_id, now_ms()).await.unwrap();

    let id = compacts_and_is_kept(&app, &alice).await;
    let (seq, expected) = the_rust_sdk_searches_and_reads(&app, &alice, &id).await;
    no_one_else_finds_it(&app, (&alice, &bob, &revoked), &id).await;
    rest_reads_the_same(&app, (&alice, &bob), &id, seq, &expected).await;
    the_typescript_sdk_reads_the_same(&app, &alice, &expected).await;
}

/// The agent compacts through the remoteEndpoint wire (the key in the path, as it sends it); the
/// conversation is kept once, and the summary names it. The conversation's recall id.
async fn compacts_and_is_kept(app: &TestApp, alice: &str) -> String {
    // As JavaScript writes it: the half emoji pi's truncation left is a lone-surrogate escape.
    let raw = json!({"systemPrompt": "Summarize.", "prompt": prompt()})
        .to_string()
        .replace('\u{FFFD}', "\\ud83d");
    assert!(raw.contains("\\ud83d"));
    let response = app
        .post_json_text(&format!("/k/{alice}/v1/compact"), raw.clone())
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let body: Value = response.json().await.unwrap();
    let id = body["recallId"].as_str().unwrap().to_owned();
    let summary = body["summary"].as_str().unwrap();
    assert!(
        summary
            .trim_end()
            .ends_with(&format!("recall_search in compactd (MCP at /mcp), id {id}")),
        "{summary}"
    );

    // Kept write-behind: the conversation is searchable within moments of the answer.
    crate::support::eventually("the conversation kept", || async {
        let (_, found) = get(app, alice, &format!("/v1/recall/search?q={NEEDLE}")).await;
        (!found["hits"].as_array()?.is_empty()).then_some(())
    })
    .await;

    // The agent's retry of the same request names the conversation already kept.
    let again: Value = app
        .post_json_text(&format!("/k/{alice}/v1/compact"), raw)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(again["recallId"], id.as_str());

    // The next compaction carries the summary on, with one recall line: its own.
    let next = compactd_core::transcript::prompt::history_prompt(
        &compactd_core::prompts::Prompts::builtin(),
        "[User]: Then bump the version.",
        Some(summary),
        None,
    );
    let chained: Value = app
        .post(&format!("/k/{alice}/v1/compact"), &json!({"prompt": next}))
        .await
        .json()
        .await
        .unwrap();
    let chained_summary = chained["summary"].as_str().unwrap();
    assert_eq!(
        chained_summary
            .matches("Earlier detail is searchable")
            .count(),
        1,
        "{chained_summary}"
    );
    assert_ne!(chained["recallId"], id.as_str());

    id
}

/// The official Rust SDK: initialize, list the tools, search, read, filter. The hit's turn and
/// its text as stored.
async fn the_rust_sdk_searches_and_reads(app: &TestApp, alice: &str, id: &str) -> (i64, String) {
    let client = mcp(&app.url, alice).await.unwrap();
    let tools = client.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names.len(), 4);
    assert!(names.contains(&"recall_search") && names.contains(&"recall_read"));
    assert!(names.contains(&"read_thread") && names.contains(&"handoff"));
    assert!(
        tools
            .iter()
            .all(|t| t.description.as_ref().is_some_and(|d| d.len() > 80))
    );
    let found = call(&client, "recall_search", json!({"query": NEEDLE})).await;
    let hits = found["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 1, "{found}");
    assert_eq!(hits[0]["recallId"], id);
    assert_eq!(hits[0]["role"], "tool");
    let snippet = hits[0]["snippet"].as_str().unwrap().to_lowercase();
    assert!(snippet.contains("[zebra"), "the word is marked: {snippet}");
    let seq = hits[0]["seq"].as_i64().unwrap();
    let read = call(
        &client,
        "recall_read",
        json!({"recall_id": id, "from": seq}),
    )
    .await;
    let text = read["turns"][0]["text"].as_str().unwrap();
    // Byte for byte, but for the secret, which never reached the store.
    let expected = tool_output().replace(SECRET, "[REDACTED:github-pat:1]");
    assert_eq!(text, expected);
    // Filters: by role and by the path a call named.
    let by_role = call(
        &client,
        "recall_search",
        json!({"query": "blob", "role": "tool"}),
    )
    .await;
    assert_eq!(by_role["hits"].as_array().unwrap().len(), 1, "{by_role}");
    assert_eq!(by_role["hits"][0]["seq"].as_i64(), Some(seq));
    // The call and its result, both filed under the tool.
    let by_tool = call(
        &client,
        "recall_search",
        json!({"query": "blob", "tool": "verify"}),
    )
    .await;
    assert_eq!(by_tool["hits"].as_array().unwrap().len(), 2, "{by_tool}");
    let elsewhere = call(
        &client,
        "recall_search",
        json!({"query": NEEDLE, "path": "src/"}),
    )
    .await;
    assert_eq!(
        elsewhere["hits"].as_array().unwrap().len(),
        0,
        "{elsewhere}"
    );
    client.cancel().await.unwrap();

    (seq, expected)
}

/// The secret is neither stored nor found; another tenant finds nothing and cannot read it; a
/// revoked key is refused at the door.
async fn no_one_else_finds_it(app: &TestApp, (alice, bob, revoked): (&str, &str, &str), id: &str) {
    // The secret is neither stored nor found.
    let client = mcp(&app.url, alice).await.unwrap();
    let secret = call(&client, "recall_search", json!({"query": SECRET})).await;
    assert_eq!(secret["hits"].as_array().unwrap().len(), 0);
    client.cancel().await.unwrap();

    // Another tenant finds nothing and cannot read it.
    let client = mcp(&app.url, bob).await.unwrap();
    let theirs = call(&client, "recall_search", json!({"query": NEEDLE})).await;
    assert_eq!(theirs["hits"].as_array().unwrap().len(), 0);
    let refused = client
        .call_tool(
            CallToolRequestParams::new("recall_read")
                .with_arguments(json!({"recall_id": id}).as_object().unwrap().clone()),
        )
        .await;
    assert!(refused.is_err() || refused.unwrap().is_error == Some(true));
    client.cancel().await.unwrap();

    // A revoked key is refused at the door.
    assert!(mcp(&app.url, revoked).await.is_err());
    let raw = reqwest::Client::new()
        .post(format!("{}/mcp", app.url))
        .bearer_auth(revoked)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), StatusCode::UNAUTHORIZED);
}

/// The REST equivalents (through `send`: checked against the documentation).
async fn rest_reads_the_same(
    app: &TestApp,
    (alice, bob): (&str, &str),
    id: &str,
    seq: i64,
    expected: &str,
) {
    let (_, rest) = get(
        app,
        alice,
        &format!("/v1/recall/search?q={NEEDLE}&path=vendor"),
    )
    .await;
    assert_eq!(rest["hits"][0]["seq"].as_i64(), Some(seq));
    let (_, page) = get(
        app,
        alice,
        &format!("/v1/recall/{id}/turns?from={seq}&limit=1"),
    )
    .await;
    assert_eq!(page["turns"][0]["text"].as_str(), Some(expected));
    assert_eq!(page["total"], 5);
    let (status, _) = get(app, bob, &format!("/v1/recall/{id}/turns")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// The reference TypeScript SDK, from npm, does the same in a node script.
async fn the_typescript_sdk_reads_the_same(app: &TestApp, alice: &str, expected: &str) {
    let (node, modules) = crate::support::node_with_mcp_sdk();
    let output = tokio::process::Command::new(node)
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/mcp/recall-client.mjs"
        ))
        .env("MCP_SDK_MODULES", modules)
        .env("COMPACTD_URL", &app.url)
        .env("COMPACTD_KEY", alice)
        .env("NEEDLE", NEEDLE)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        answer["tools"],
        json!(["handoff", "read_thread", "recall_read", "recall_search"])
    );
    assert_eq!(answer["text"].as_str(), Some(expected));
}
