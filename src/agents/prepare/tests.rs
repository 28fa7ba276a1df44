//! The preparer's pure parts: prefixes, freshness, windows.

use super::reading::{model_in, prefix_hashes, window};
use super::*;
use compactd_core::transcript::{Message, Role};

fn message(role: Role, text: &str) -> Message {
    let mut conversation = Wire::ChatCompletions.messages(&[serde_json::json!({
        "role": match role { Role::User => "user", _ => "assistant" }, "content": text})]);
    conversation.messages.remove(0)
}

#[test]
fn a_prefix_matches_only_as_it_reads() {
    let a = [
        message(Role::User, "fix the lexer"),
        message(Role::Assistant, "done"),
        message(Role::User, "now the parser"),
    ];
    let mut b = a.to_vec();
    b.push(message(Role::Assistant, "on it"));
    let (ha, hb) = (prefix_hashes(&a), prefix_hashes(&b));
    assert_eq!(ha[..], hb[..3]);
    let mut edited = b.clone();
    edited[1] = message(Role::Assistant, "done!");
    let he = prefix_hashes(&edited);
    assert_eq!(he[0], ha[0]);
    assert!(
        he[1..].iter().zip(&hb[1..]).all(|(x, y)| x != y),
        "an edit changes every later hash"
    );
}

#[test]
fn a_session_is_prepared_again_once_it_grew_or_after_it_shrank() {
    let window = 200_000;
    assert!(fresh(120_000, 130_000, window));
    assert!(
        !fresh(120_000, 140_000, window),
        "grew by a tenth of the window"
    );
    assert!(
        !fresh(160_000, 125_000, window),
        "compacted since, and grown back"
    );
}

#[test]
fn the_window_and_model_are_read_without_parsing() {
    assert_eq!(window("claude-sonnet-4-6"), 200_000);
    assert_eq!(window("anthropic/claude-opus-4-6"), 200_000);
    assert_eq!(window("gpt-5.2-codex"), 400_000);
    assert_eq!(window("qwen3-coder"), DEFAULT_WINDOW);
    let body = br#"{"model" : "claude-sonnet-4-6","messages":[{"content":"the \"model\": x"}]}"#;
    assert_eq!(model_in(body), Some("claude-sonnet-4-6"));
    let nested = br#"{"messages":[{"content":"say \"model\":\"x\""}],"model":"gpt-5.2"}"#;
    assert_eq!(model_in(nested), Some("gpt-5.2"));
    assert_eq!(model_in(b"{}"), None);
}
