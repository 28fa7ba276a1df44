//! The official provider SDKs as the callers of the compaction wires compactd serves at its gateway
//! (issue 66): each runs `scripts/sdk/*.py` with the SDK pinned by `scripts/sdks.sh`, against
//! compactd in front of a fake provider. What the SDK parses compactd's answers into is what its
//! users get; the next turn carries the summary; the provider never sees a compaction compactd
//! served.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::support::FakeProvider;
use crate::support::TestApp;
use crate::support::gateway::{gateway_config, summarizer_model};

/// Runs `scripts/sdk/<script>` with `job` on stdin (and the client's own provider key, which
/// compactd passes on); its JSON report.
fn run_sdk(script: &str, job: &Value) -> Value {
    let mut job = job.clone();
    job["api_key"] = json!("sk-client-provider-key");
    let mut child = Command::new(compactd_testkit::sdk_python())
        .arg(
            compactd_testkit::workspace_root()
                .join("scripts/sdk")
                .join(script),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(job.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A conversation with a standing rule, an edited file and a latest request, in Responses items.
fn responses_conversation() -> Value {
    json!([
        {"role": "user", "content": "Always run cargo fmt before you commit anything."},
        {"role": "user", "content": "The parser drops unary minus; fix it in src/parser.rs."},
        {"type": "function_call", "call_id": "call_1", "name": "write",
         "arguments": "{\"path\":\"src/parser.rs\",\"content\":\"fn unary() {}\"}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "wrote src/parser.rs"},
        {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "Fixed: unary minus is parsed in src/parser.rs."}]},
        {"role": "user", "content": "Now add a regression test for unary minus."},
    ])
}

#[tokio::test]
async fn openais_sdk_compacts_through_compactd_and_carries_the_item_into_the_next_turn() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let job = json!({
        "base_url": format!("{}/v1", app.url),
        "model": "gpt-5.2",
        "input": responses_conversation(),
        "instructions": "You are a coding agent.",
    });
    let report = tokio::task::spawn_blocking(move || run_sdk("openai_compact.py", &job))
        .await
        .unwrap();
    assert_eq!(report["class"], "CompactedResponse", "{report}");
    assert_eq!(report["object"], "response.compaction");
    assert_eq!(report["item_class"], "ResponseCompactionItem");
    assert_eq!(report["item_strict"], "compaction");
    assert!(report["usage_strict"].as_u64().unwrap() > 0);
    let output = report["output"].as_array().unwrap();
    assert_eq!(
        output.len(),
        4,
        "three user messages and the item: {report}"
    );

    // The provider saw only the next turn, with compactd's summary in place of the item.
    let seen = provider.received();
    assert_eq!(seen.len(), 1, "the provider never saw the compaction");
    assert_eq!(seen[0].path.as_str(), "/v1/responses");
    let next: Value = serde_json::from_slice(&seen[0].bytes).unwrap();
    let text = next["input"].to_string();
    assert!(!text.contains("compactd.v2."), "{text}");
    for kept in [
        "src/parser.rs",
        "Now add a regression test for unary minus.",
        "Always run cargo fmt before you commit anything.",
    ] {
        assert!(
            text.contains(kept),
            "{kept} is not in the next turn: {text}"
        );
    }
    let events = report["next_events"].as_array().unwrap();
    assert_eq!(events.last().unwrap(), "response.completed");

    let refused = &report["without_input"];
    assert_eq!(refused["status"], 422, "{report}");
    assert_eq!(refused["class"], "UnprocessableEntityError");
    assert_eq!(refused["param"], "input");
}

/// The same conversation in Anthropic Messages, with the system prompt and tools of a live agent.
fn messages_conversation() -> Value {
    json!([
        {"role": "user", "content": "Always run cargo fmt before you commit anything."},
        {"role": "assistant", "content": [{"type": "text", "text": "Understood."}]},
        {"role": "user", "content": "The parser drops unary minus; fix it in src/parser.rs."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "write",
             "input": {"path": "src/parser.rs", "content": "fn unary() {}"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "wrote src/parser.rs"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Fixed: unary minus is parsed in src/parser.rs."}]},
        {"role": "user", "content": "Now add a regression test for unary minus."},
    ])
}

#[tokio::test]
async fn anthropics_sdk_compacts_on_demand_through_compactd_and_the_block_opens_in_the_next_turn() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let job = json!({
        "base_url": app.url,
        "model": "claude-sonnet-4-6",
        "system": "You are a coding agent. Tools: read, write, bash.",
        "messages": messages_conversation(),
    });
    let report = tokio::task::spawn_blocking(move || run_sdk("anthropic_compact.py", &job))
        .await
        .unwrap();
    assert_eq!(report["class"], "BetaMessage", "{report}");
    assert_eq!(report["block_class"], "BetaCompactionBlock");
    assert_eq!(report["block_strict"], "compaction");
    assert_eq!(report["message_strict"], "compaction");
    assert_eq!(report["blocks"], 1, "the block alone");
    assert_eq!(report["iterations"], json!(["compaction"]));
    let block = &report["block"];
    let summary = block["content"].as_str().unwrap();
    for kept in [
        "src/parser.rs",
        "regression test for unary minus",
        "Always run cargo fmt before you commit anything.",
    ] {
        assert!(
            summary.contains(kept),
            "{kept} is not in the summary: {summary}"
        );
    }
    assert!(
        block["signature"]
            .as_str()
            .unwrap()
            .starts_with("compactd.v2.")
    );
    // Streamed, the SDK's own accumulator builds the same block.
    assert_eq!(report["streamed_stop_reason"], "compaction");
    assert_eq!(report["streamed_block"]["content"], block["content"]);
    assert!(report["streamed_block"]["signature"].is_string());
    let events = report["stream_events"].as_array().unwrap();
    assert!(events.contains(&json!("compaction")), "{events:?}");

    // The provider saw only the next turn, with the summary in place of compactd's block.
    let seen = provider.received();
    assert_eq!(seen.len(), 1, "the provider never saw a compaction");
    assert_eq!(seen[0].path.as_str(), "/v1/messages");
    let next: Value = serde_json::from_slice(&seen[0].bytes).unwrap();
    let text = next["messages"].to_string();
    assert!(
        !text.contains("compactd.v2.") && !text.contains("\"compaction\""),
        "{text}"
    );
    assert!(text.contains("src/parser.rs"), "{text}");
    assert!(
        report["next_text"]
            .as_str()
            .unwrap()
            .starts_with("PROVIDER SAYS OK")
    );

    // What the API refuses, compactd refuses as the API does: the SDK raises its typed errors.
    let refusals = &report["refusals"];
    for (case, class, code) in [
        (
            "nothing",
            "CompactionNothingToSummarizeError",
            "compaction_nothing_to_summarize",
        ),
        (
            "incomplete",
            "CompactionIncompleteTurnError",
            "compaction_incomplete_turn",
        ),
        (
            "edited",
            "CompactionContentMismatchError",
            "compaction_content_mismatch",
        ),
    ] {
        assert_eq!(refusals[case]["class"], class, "{case}: {refusals}");
        assert_eq!(refusals[case]["status"], 400);
        assert_eq!(refusals[case]["error_code"], code);
    }
    assert_eq!(
        refusals["with_context_management"]["class"],
        "BadRequestError"
    );
}

/// A tool's long output: what makes a conversation reach a compaction threshold.
fn long_output() -> String {
    (0..400)
        .map(|i| format!("src/parser.rs:{i}: fn rule_{i}() -> Result<Node, ParseError>\n"))
        .collect()
}

#[tokio::test]
async fn anthropics_sdk_gets_the_compact_edit_served_by_compactd_before_the_upstreams_reply() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut messages = messages_conversation();
    messages[4]["content"][0]["content"] = json!(long_output());
    let job = json!({"base_url": app.url, "model": "claude-sonnet-4-6", "messages": messages,
        "trigger": 2000});
    let report = tokio::task::spawn_blocking(move || run_sdk("anthropic_inline.py", &job))
        .await
        .unwrap();
    assert_eq!(report["class"], "BetaMessage", "{report}");
    assert_eq!(
        report["blocks"],
        json!(["BetaCompactionBlock", "BetaTextBlock"])
    );
    assert_eq!(report["block_strict"], "compaction");
    assert_eq!(report["message_strict"], "end_turn");
    assert_eq!(report["iterations"], json!(["compaction", "message"]));
    assert_eq!(report["reply"], "PROVIDER SAYS OK");
    let summary = report["summary"].as_str().unwrap();
    for kept in ["src/parser.rs", "regression test for unary minus"] {
        assert!(summary.contains(kept), "{kept}: {summary}");
    }
    assert_eq!(report["streamed_blocks"], json!(["compaction", "text"]));
    assert_eq!(report["streamed_summary"], report["summary"]);
    let streamed_reply = report["streamed_reply"].as_str().unwrap();
    assert!(streamed_reply.starts_with("PROVIDER SAYS OK"), "{report}");
    assert_eq!(
        report["paused"],
        json!({"stop_reason": "compaction", "blocks": ["compaction"]})
    );
    assert_eq!(report["next_blocks"], json!(["text"]));

    // The upstream answered the compacted requests (whole, streamed, the next turn), never the
    // paused one, and never saw the edit or compactd's block.
    let seen = provider.received();
    assert_eq!(seen.len(), 3, "{}", seen.len());
    for request in &seen {
        let body = String::from_utf8_lossy(&request.bytes);
        assert!(
            !body.contains("compact_20260112") && !body.contains("compactd.v2."),
            "{body}"
        );
        assert!(body.contains("SUMMARY BY COMPACTD"), "{body}");
        assert!(
            !body.contains("fn rule_399"),
            "the long output was compacted away"
        );
    }
    let next: Value = serde_json::from_slice(&seen[2].bytes).unwrap();
    assert!(next.to_string().contains("Go on."));
}

#[tokio::test]
async fn openais_sdk_gets_context_management_compaction_served_by_compactd() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut input = responses_conversation();
    input[3]["output"] = json!(long_output());
    let job = json!({"base_url": format!("{}/v1", app.url), "model": "gpt-5.2", "input": input,
        "threshold": 2000});
    let report = tokio::task::spawn_blocking(move || run_sdk("openai_inline.py", &job))
        .await
        .unwrap();
    assert_eq!(report["class"], "Response", "{report}");
    assert_eq!(
        report["items"],
        json!(["ResponseCompactionItem", "ResponseOutputMessage"])
    );
    assert_eq!(report["item_strict"], "compaction");
    assert_eq!(report["reply"], "PROVIDER SAYS OK");
    assert_eq!(report["streamed_first_item"], "ResponseCompactionItem");
    assert_eq!(report["completed_items"], json!(["compaction"]));
    assert_eq!(report["sequence_in_order"], true);
    assert_eq!(report["next_items"], json!(["message"]));

    let seen = provider.received();
    assert_eq!(seen.len(), 3);
    for request in &seen {
        let body = String::from_utf8_lossy(&request.bytes);
        assert!(
            !body.contains("compact_threshold") && !body.contains("compactd.v2."),
            "{body}"
        );
        assert!(body.contains("SUMMARY BY COMPACTD"), "{body}");
        assert!(
            !body.contains("fn rule_399"),
            "the long output was compacted away"
        );
    }
    // The next turn: what the item stood for dropped, its summary, the reply and the new words.
    let next: Value = serde_json::from_slice(&seen[2].bytes).unwrap();
    assert_eq!(next["input"].as_array().unwrap().len(), 3, "{next}");
}

#[tokio::test]
async fn anthropics_sdk_gets_the_clearing_edits_applied_by_compactd_for_an_upstream_without_them() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let mut config = gateway_config(&model, &provider);
    // The fake provider is not Anthropic's API: `auto` would choose compactd too.
    config.gateway.context_edits = compactd::config::ContextEdits::Compactd;
    let app = TestApp::spawn(config).await;
    let call = |id: &str, path: &str| {
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": format!("THOUGHT {id}"), "signature": "sig"},
            {"type": "tool_use", "id": id, "name": "read", "input": {"path": path}}]})
    };
    let result = |id: &str, text: &str| {
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": id, "content": text}]})
    };
    let messages = json!([
        {"role": "user", "content": "Why does the parser drop unary minus?"},
        call("t1", "src/lexer.rs"), result("t1", "OLD LEXER OUTPUT"),
        call("t2", "src/parser.rs"), result("t2", "NEW PARSER OUTPUT"),
    ]);
    let job = json!({"base_url": app.url, "model": "claude-sonnet-4-6", "messages": messages});
    let report = tokio::task::spawn_blocking(move || run_sdk("anthropic_edits.py", &job))
        .await
        .unwrap();
    assert_eq!(report["class"], "BetaMessage", "{report}");
    assert_eq!(report["reply"], "PROVIDER SAYS OK");
    assert_eq!(report["strict"], 2, "{report}");
    let kinds = |key: &str| -> Vec<(String, u64)> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let count = e
                    .get("cleared_thinking_turns")
                    .or(e.get("cleared_tool_uses"))
                    .and_then(Value::as_u64)
                    .unwrap();
                (e["type"].as_str().unwrap().to_owned(), count)
            })
            .collect()
    };
    let expected = vec![
        ("clear_thinking_20251015".to_owned(), 1),
        ("clear_tool_uses_20250919".to_owned(), 1),
    ];
    assert_eq!(kinds("applied"), expected, "{report}");
    assert_eq!(kinds("streamed_applied"), expected, "{report}");

    // The upstream got the conversation cleared and no edit it would have to know.
    let seen = provider.received();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        let body = String::from_utf8_lossy(&request.bytes);
        assert!(!body.contains("context_management"), "{body}");
        assert!(
            !body.contains("OLD LEXER OUTPUT") && !body.contains("THOUGHT t1"),
            "{body}"
        );
        assert!(
            body.contains("NEW PARSER OUTPUT") && body.contains("THOUGHT t2"),
            "{body}"
        );
        assert!(
            body.contains("src/lexer.rs"),
            "the call itself stays: {body}"
        );
    }
}

/// The OpenAI Agents SDK's `OpenAIResponsesCompactionSession` (it calls `responses.compact`
/// itself after a turn and keeps the answer as the session): compactd writes the compaction, the
/// SDK keeps compactd's item, and the next turn carries the summary to the provider.
#[tokio::test]
async fn the_agents_sdks_compaction_session_is_served_by_compactd() {
    compactd_testkit::needs!(Sdks);
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let job = json!({"base_url": app.url, "model": "gpt-5.2"});
    let report = tokio::task::spawn_blocking(move || run_sdk("openai_agents_compact.py", &job))
        .await
        .unwrap();
    assert_eq!(report["first"], "PROVIDER SAYS OK", "{report}");
    assert_eq!(report["second"], "PROVIDER SAYS OK", "{report}");
    let kept = report["kept"].as_array().unwrap();
    assert_eq!(kept.last().unwrap(), "compaction", "{report}");
    assert_eq!(report["sealed"][0], "compactd.v2.", "{report}");
    assert!(!model.received().is_empty(), "compactd's model wrote it");
    let seen = provider.received();
    let paths: Vec<&str> = seen.iter().map(|r| r.path.as_str()).collect();
    assert!(
        !paths.contains(&"/v1/responses/compact"),
        "the provider never compacted: {paths:?}"
    );
    let last = String::from_utf8_lossy(&seen.last().unwrap().bytes).into_owned();
    assert!(last.contains("SUMMARY BY COMPACTD"), "{last}");
    assert!(!last.contains("compactd.v2."), "{last}");
}
