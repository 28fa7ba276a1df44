//! Anthropic's `compact_20260112` context-management edit, served by compactd: once a request's
//! input reaches the edit's trigger (150,000 tokens unless it names another), compactd
//! summarizes the conversation, sends the compacted request (the summary, then the latest user
//! turn) to the upstream, and answers with its `compaction` block first and the upstream's reply
//! after it — or, with `pause_after_compaction`, the block alone (`stop_reason: "compaction"`).
//! Below the trigger the edit is taken out before the request goes on, so that no upstream (one
//! that lacks it, or Anthropic's own) compacts what compactd serves.

use serde_json::{Value, json};

use super::super::Wire;
use super::super::recognize::{Compaction, Form, of_history};
use super::sse::{Event, Rewrite};
use crate::pipeline::Agent;
use compactd_core::transcript::estimate_tokens;

/// Bytes every request with the edit holds.
pub(crate) const EDIT_MARKER: &str = "compact_20260112";

/// The API's trigger when the edit names none.
const DEFAULT_TRIGGER: u64 = 150_000;

/// The edit as a request asks for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edit {
    pub(crate) trigger: u64,
    pub(crate) instructions: String,
    pub(crate) pause: bool,
}

/// The `compact_20260112` edit of a Messages body, if it has one.
pub(crate) fn edit_of(body: &Value) -> Option<Edit> {
    let edit = body
        .pointer("/context_management/edits")?
        .as_array()?
        .iter()
        .find(|e| e.get("type").and_then(Value::as_str) == Some(EDIT_MARKER))?;
    let trigger = edit
        .pointer("/trigger/value")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_TRIGGER);
    Some(Edit {
        trigger,
        instructions: edit
            .get("instructions")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned(),
        pause: edit
            .get("pause_after_compaction")
            .and_then(Value::as_bool)
            .unwrap_or(false),
    })
}

/// The request's input tokens, estimated as the reference does (characters / 4) over what the
/// model reads: the system prompt, the messages and the tools.
pub(crate) fn input_tokens(body: &Value) -> u64 {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => estimate_tokens(s),
        Some(other) => estimate_tokens(&other.to_string()),
        None => 0,
    };
    text(body.get("system")) + text(body.get("messages")) + text(body.get("tools"))
}

/// Whether the messages hold a `compaction` block (the provider's own: compactd's were opened
/// before this is asked), which only the provider reads and which needs the edit beside it.
fn holds_block(body: &Value) -> bool {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("compaction"))
}

/// The compaction a request with the edit is, once its input reaches the trigger.
pub(crate) fn over_trigger(
    agent: Agent,
    _headers: &axum::http::HeaderMap,
    body: &Value,
) -> Option<Compaction> {
    let edit = edit_of(body)?;
    if holds_block(body) || input_tokens(body) < edit.trigger {
        return None;
    }
    let messages = body.get("messages")?.as_array()?;
    let conversation = Wire::AnthropicMessages.messages(messages);
    Some(of_history(
        agent,
        Form::Inline,
        body,
        conversation,
        edit.instructions,
        None,
    ))
}

/// Takes the edit out of a body compactd serves (the rest of `context_management` stays); `false`
/// when there was none to take, or when a provider's block needs it.
pub(crate) fn without_edit(body: &mut Value) -> bool {
    if holds_block(body) {
        return false;
    }
    let Some(edits) = body
        .pointer_mut("/context_management/edits")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let before = edits.len();
    edits.retain(|e| e.get("type").and_then(Value::as_str) != Some(EDIT_MARKER));
    if edits.len() == before {
        return false;
    }
    if edits.is_empty()
        && let Some(object) = body.as_object_mut()
    {
        object.remove("context_management");
    }
    true
}

/// The request the upstream answers after compactd compacted it: one user turn with the summary
/// (as the model reads an opened block) and what the latest user turn said beside its tools'
/// results, whose calls the summary now stands for.
pub(crate) fn compacted_request(body: &Value, summary: &str) -> Value {
    let mut out = body.clone();
    without_edit(&mut out);
    let mut content = vec![json!({"type": "text",
        "text": format!("{}{summary}", super::super::codex::HANDOFF)})];
    if let Some(last) = body
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|m| m.last())
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    {
        match last.get("content") {
            Some(Value::String(text)) => content.push(json!({"type": "text", "text": text})),
            Some(Value::Array(blocks)) => content.extend(
                blocks
                    .iter()
                    .filter(|b| b.get("type").and_then(Value::as_str) != Some("tool_result"))
                    .cloned(),
            ),
            _ => {}
        }
    }
    out["messages"] = json!([{"role": "user", "content": content}]);
    out
}

/// The reply's own iteration, from the upstream's usage (every count the SDKs require).
fn reply_iteration(usage: &serde_json::Map<String, Value>) -> Value {
    let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
    json!({"type": "message", "input_tokens": count("input_tokens"),
        "output_tokens": count("output_tokens"),
        "cache_creation_input_tokens": count("cache_creation_input_tokens"),
        "cache_read_input_tokens": count("cache_read_input_tokens")})
}

/// The upstream's whole answer with compactd's block first and the compaction's iteration
/// before the reply's in `usage.iterations`.
pub(crate) fn merged(mut answer: Value, block: &Value, iteration: &Value) -> Value {
    if let Some(content) = answer.get_mut("content").and_then(Value::as_array_mut) {
        content.insert(0, block.clone());
    }
    if let Some(usage) = answer.get_mut("usage").and_then(Value::as_object_mut) {
        let reply = reply_iteration(usage);
        usage.insert("iterations".into(), json!([iteration, reply]));
    }
    answer
}

/// The upstream's streamed answer with compactd's block first: its events after `message_start`
/// (the signature at the block's start, the summary in one `compaction_delta`, as the SDKs read
/// them), every later block one index on, the compaction's iteration in the final usage.
pub(crate) fn rewrite(block: Value, iteration: Value) -> Rewrite {
    Box::new(move |mut event: Event| {
        let Some(data) = event.data.as_mut() else {
            return vec![event];
        };
        if let Some(index) = data.get("index").and_then(Value::as_u64) {
            data["index"] = json!(index + 1);
        }
        match event.name.as_str() {
            "message_start" => {
                let mut start = block.clone();
                start["content"] = Value::Null;
                vec![
                    event,
                    Event::new(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0, "content_block": start}),
                    ),
                    Event::new(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": 0,
                            "delta": {"type": "compaction_delta", "content": block["content"]}}),
                    ),
                    Event::new(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ),
                ]
            }
            "message_delta" => {
                if let Some(usage) = data.get_mut("usage").and_then(Value::as_object_mut) {
                    let reply = reply_iteration(usage);
                    usage.insert("iterations".into(), json!([iteration, reply]));
                }
                vec![event]
            }
            _ => vec![event],
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(edit: Value, chars: usize) -> Value {
        json!({"model": "claude-sonnet-4-6", "messages": [
            {"role": "user", "content": "x".repeat(chars)},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "ls", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "a.rs"},
                {"type": "text", "text": "and now?"}]}],
            "context_management": {"edits": [{"type": "clear_thinking_20251015"}, edit]}})
    }

    #[test]
    fn the_edit_compacts_at_its_trigger_and_is_taken_out_below_it() {
        let edit =
            json!({"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 1000}});
        let over = body(edit.clone(), 4_400);
        let parsed = edit_of(&over).unwrap();
        assert_eq!((parsed.trigger, parsed.pause), (1000, false));
        assert!(
            over_trigger(
                super::super::super::anthropic_compaction::ANTHROPIC_COMPACTION,
                &Default::default(),
                &over
            )
            .is_some()
        );
        let under = body(edit, 3_000);
        assert!(
            over_trigger(
                super::super::super::anthropic_compaction::ANTHROPIC_COMPACTION,
                &Default::default(),
                &under
            )
            .is_none()
        );
        let mut stripped = under.clone();
        assert!(without_edit(&mut stripped));
        assert_eq!(
            stripped["context_management"]["edits"],
            json!([{"type": "clear_thinking_20251015"}])
        );
        let default = json!({"messages": [], "context_management": {"edits": [{"type": "compact_20260112"}]}});
        assert_eq!(edit_of(&default).unwrap().trigger, 150_000);
    }

    #[test]
    fn the_compacted_request_is_the_summary_and_the_latest_words_without_orphaned_results() {
        let edit = json!({"type": "compact_20260112"});
        let out = compacted_request(&body(edit, 10), "## Goal\nship");
        let messages = out["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 1);
        let content = messages[0]["content"].as_array().unwrap();
        assert!(
            content[0]["text"]
                .as_str()
                .unwrap()
                .ends_with("## Goal\nship")
        );
        assert_eq!(content[1], json!({"type": "text", "text": "and now?"}));
        assert_eq!(content.len(), 2, "no tool_result without its call");
        assert!(!out.to_string().contains(EDIT_MARKER));
    }

    #[test]
    fn a_provider_block_keeps_its_edit() {
        let mut with_block = json!({"messages": [{"role": "assistant", "content": [
            {"type": "compaction", "content": "theirs", "signature": "Eq"}]}],
            "context_management": {"edits": [{"type": "compact_20260112"}]}});
        assert!(!without_edit(&mut with_block));
        assert!(with_block.to_string().contains(EDIT_MARKER));
    }
}
