//! The official provider SDKs as the callers of the compaction wires compactd serves at its gateway
//! (issue 66): each runs `scripts/sdk/*.py` with the SDK pinned by `scripts/sdks.sh`, against
//! compactd in front of a fake provider. What the SDK parses compactd's answers into is what its
//! users get; the next turn carries the summary; the provider never sees a compaction compactd
//! served.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use crate::gateway_support::{Provider, gateway_config, summarizer_model};
use crate::support::TestApp;

/// Runs `scripts/sdk/<script>` with `job` on stdin; its JSON report.
fn run_sdk(script: &str, job: &Value) -> Value {
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
    let provider = Provider::start().await;
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
    let seen = provider.received().await;
    assert_eq!(seen.len(), 1, "the provider never saw the compaction");
    assert_eq!(seen[0].url.path(), "/v1/responses");
    let next: Value = serde_json::from_slice(&seen[0].body).unwrap();
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
