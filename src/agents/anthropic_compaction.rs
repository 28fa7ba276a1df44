//! Anthropic's own compaction on the Messages wire, served by compactd (issue 66): the on-demand
//! `compaction: {"type": "summarize"}` (what oh-my-pi and the official SDKs send first on a Claude
//! 4.6 model) is summarized through compactd's pipeline and answered as the API answers — one
//! signed `compaction` block alone, `stop_reason: "compaction"`, whole or streamed.
//!
//! compactd's block is portable: its `signature` is compactd's seal of the summary ([`Seal`]), for
//! the tenant and key that asked. When a later request sends the block back, compactd puts the
//! summary in its place, as a user message the model reads, before the request goes to whichever
//! upstream serves it — no provider sees a block whose signature it would reject. A provider's
//! own blocks, and another tenant's, pass through untouched.
//!
//! Refusals are the API's own: 400 `invalid_request_error` with `error.details.error_code`
//! (`compaction_nothing_to_summarize`, `compaction_incomplete_turn`,
//! `compaction_content_mismatch`, `compaction_block_misplaced`), which the SDKs raise as their
//! typed errors.

use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{Value, json};

use super::Wire;
use super::answer::{Answer, id, json_response, sse};
use super::codex::{HANDOFF, Seal};
use super::recognize::{Compaction, Form, of_history};
use crate::access::Identity;
use crate::pipeline::Agent;

/// Any client of Anthropic's on-demand compaction (the official SDKs, oh-my-pi on Claude 4.6).
pub(crate) const ANTHROPIC_COMPACTION: Agent = Agent {
    name: "anthropic-compaction",
    endpoint: "gateway:anthropic-compaction",
    wire: Wire::AnthropicMessages,
};

/// Bytes every on-demand compaction holds (its `compaction.type`).
pub(super) const ON_DEMAND_MARKER: &str = "\"summarize\"";

/// The on-demand compaction a Messages body asks for: `compaction: {"type": "summarize"}`, its
/// `instructions` replacing compactd's history prompt (blank ones count as absent).
pub(super) fn on_demand(
    agent: Agent,
    _headers: &axum::http::HeaderMap,
    body: &Value,
) -> Option<Compaction> {
    let config = body.get("compaction")?;
    if config.get("type").and_then(Value::as_str) != Some("summarize") {
        return None;
    }
    let instructions = config
        .get("instructions")
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or_default()
        .to_owned();
    let messages = body.get("messages").and_then(Value::as_array)?;
    let conversation = Wire::AnthropicMessages.messages(messages);
    Some(of_history(
        agent,
        Form::CompactionBlock,
        body,
        conversation,
        instructions,
        None,
    ))
}

/// Why the API refuses a compaction request (400 `invalid_request_error`): its code, field and
/// message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) code: Option<&'static str>,
    /// The request's field at fault.
    pub(crate) param: &'static str,
    pub(crate) message: String,
}

impl Refusal {
    fn new(code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            code: Some(code),
            param: "messages",
            message: message.into(),
        }
    }

    /// The refusal in Anthropic's error shape (400 `invalid_request_error`), which also carries
    /// compactd's `code` and `param` for its own clients.
    pub(crate) fn response(&self) -> Response {
        let mut error = json!({"type": "invalid_request_error", "message": self.message,
            "code": self.code.unwrap_or("invalid_value"), "param": self.param});
        if let Some(code) = self.code {
            error["details"] = json!({"error_code": code});
        }
        let mut response = json_response(json!({"type": "error", "error": error}));
        *response.status_mut() = StatusCode::BAD_REQUEST;
        response
    }
}

/// What the API checks before it compacts a conversation on demand.
pub(super) fn check(body: &Value) -> Result<(), Refusal> {
    if body.get("context_management").is_some_and(|v| !v.is_null()) {
        return Err(Refusal {
            code: None,
            param: "compaction",
            message: "compaction: cannot be combined with context_management".into(),
        });
    }
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let has_content = |m: &Value| match m.get("content") {
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Array(blocks)) => !blocks.is_empty(),
        _ => false,
    };
    if !messages.iter().any(has_content) {
        return Err(Refusal::new(
            "compaction_nothing_to_summarize",
            "messages: there is no user or assistant content to summarize",
        ));
    }
    let last = messages.last().expect("a message has content");
    let ends_on_tool_use = last["content"]
        .as_array()
        .and_then(|blocks| blocks.last())
        .is_some_and(|b| b["type"] == "tool_use" || b["type"] == "server_tool_use");
    if last["role"] == "assistant" && ends_on_tool_use {
        return Err(Refusal::new(
            "compaction_incomplete_turn",
            "messages: the last assistant turn is not finished (its tool use has no result)",
        ));
    }
    Ok(())
}

/// The summary a compaction block of compactd's carries for `who`: `None` for a provider's
/// block, another tenant's, or a forged one.
fn ours(seal: &Seal, block: &Value, who: &Identity) -> Option<String> {
    if block.get("type").and_then(Value::as_str) != Some("compaction") {
        return None;
    }
    seal.open(block.get("signature")?.as_str()?, who)
}

/// Replaces compactd's compaction blocks for `who` in a Messages body: the last one and
/// everything before it (as the API drops what a block summarizes) become one user message with
/// its summary; what followed the block in its message stays. Returns how many blocks were
/// compactd's.
pub(crate) fn expand(seal: &Seal, body: &mut Value, who: &Identity) -> Result<usize, Refusal> {
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return Ok(0);
    };
    let mut found = 0;
    let mut last = None;
    for (m, message) in messages.iter().enumerate() {
        let Some(blocks) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (b, block) in blocks.iter().enumerate() {
            let Some(summary) = ours(seal, block, who) else {
                continue;
            };
            if message["role"] != "assistant" {
                return Err(Refusal::new(
                    "compaction_block_misplaced",
                    format!(
                        "messages.{m}.content.{b}: a compaction block belongs in an assistant message"
                    ),
                ));
            }
            match block.get("content") {
                Some(Value::String(content)) if *content != summary => {
                    return Err(Refusal::new(
                        "compaction_content_mismatch",
                        format!(
                            "messages.{m}.content.{b}: the compaction block's content is not what its signature covers"
                        ),
                    ));
                }
                _ => {}
            }
            found += 1;
            last = Some((m, b, summary));
        }
    }
    let Some((m, b, summary)) = last else {
        return Ok(0);
    };
    let rest: Vec<Value> = messages[m]["content"].as_array().expect("blocks")[b + 1..].to_vec();
    let role = messages[m]["role"].clone();
    let after: Vec<Value> = messages.drain(m + 1..).collect();
    messages.clear();
    messages.push(json!({"role": "user", "content": [{"type": "text", "text": format!("{HANDOFF}{summary}")}]}));
    if !rest.is_empty() {
        messages.push(json!({"role": role, "content": rest}));
    }
    messages.extend(after);
    Ok(found)
}

/// compactd's answer to an on-demand compaction: its block alone, signed with the seal.
pub(super) fn answer(answer: &Answer<'_>, signature: &str, stream: bool) -> Response {
    let usage = &answer.usage;
    // The compaction's own tokens are an iteration of their own; nothing else was sampled.
    let iteration = json!({"type": "compaction", "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens, "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens});
    let final_usage = json!({"input_tokens": 0, "output_tokens": 0,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "iterations": [iteration]});
    let id = id("msg");
    let message = |content: Value, stop: Value, usage: Value| {
        json!({"id": id, "type": "message", "role": "assistant", "model": answer.model,
            "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
    };
    if !stream {
        let block = json!({"type": "compaction", "content": answer.text, "signature": signature});
        return json_response(message(json!([block]), json!("compaction"), final_usage));
    }
    let start_usage = json!({"input_tokens": 0, "output_tokens": 0});
    // The SDKs' stream parsers take a block's signature from its start and replace its content
    // on each delta: the whole summary comes in one.
    sse(vec![
        (
            "message_start",
            json!({"type": "message_start", "message": message(json!([]), Value::Null, start_usage)}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "compaction", "content": null, "signature": signature}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "compaction_delta", "content": answer.text}}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "compaction", "stop_sequence": null},
                "usage": final_usage}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(tenant: &str) -> Identity {
        Identity {
            tenant: tenant.into(),
            key_id: Some("k".into()),
        }
    }

    fn block(seal: &Seal, summary: &str, who: &Identity) -> Value {
        json!({"type": "compaction", "content": summary, "signature": seal.seal(summary, who)})
    }

    #[test]
    fn compactds_last_block_and_what_it_summarized_become_the_summary() {
        let seal = Seal::new(b"s");
        let a = caller("a");
        let mut body = json!({"messages": [
            {"role": "user", "content": "old work"},
            {"role": "assistant", "content": [block(&seal, "first", &a)]},
            {"role": "user", "content": "more"},
            {"role": "assistant", "content": [block(&seal, "second", &a), {"type": "text", "text": "after"}]},
            {"role": "user", "content": "latest"},
        ]});
        assert_eq!(expand(&seal, &mut body, &a), Ok(2));
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "{body}");
        let text = messages[0]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(HANDOFF) && text.ends_with("second"));
        assert_eq!(
            messages[1]["content"],
            json!([{"type": "text", "text": "after"}])
        );
        assert_eq!(messages[2]["content"], "latest");
        assert!(!body.to_string().contains("compactd.v2."));
    }

    #[test]
    fn anothers_blocks_stay_and_an_edited_or_misplaced_one_is_refused() {
        let seal = Seal::new(b"s");
        let (a, b) = (caller("a"), caller("b"));
        let provider =
            json!({"type": "compaction", "content": "theirs", "signature": "EqQBCkYIAR"});
        let mut body = json!({"messages": [
            {"role": "assistant", "content": [provider.clone(), block(&seal, "b's", &b)]},
            {"role": "user", "content": "go"},
        ]});
        let before = body.clone();
        assert_eq!(expand(&seal, &mut body, &a), Ok(0));
        assert_eq!(body, before);

        let mut edited = block(&seal, "true summary", &a);
        edited["content"] = json!("a summary of the caller's choosing");
        let mut body = json!({"messages": [{"role": "assistant", "content": [edited]}]});
        let refused = expand(&seal, &mut body, &a).unwrap_err();
        assert_eq!(refused.code, Some("compaction_content_mismatch"));

        let mut body = json!({"messages": [{"role": "user", "content": [block(&seal, "s", &a)]}]});
        let refused = expand(&seal, &mut body, &a).unwrap_err();
        assert_eq!(refused.code, Some("compaction_block_misplaced"));
    }

    #[test]
    fn the_api_refuses_what_it_cannot_compact() {
        let code = |body: Value| check(&body).err().map(|r| r.code);
        assert_eq!(
            code(json!({"messages": []})),
            Some(Some("compaction_nothing_to_summarize"))
        );
        assert_eq!(
            code(json!({"messages": [{"role": "user", "content": "  "}]})),
            Some(Some("compaction_nothing_to_summarize"))
        );
        let pending = json!({"messages": [{"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "ls", "input": {}}]}]});
        assert_eq!(code(pending), Some(Some("compaction_incomplete_turn")));
        let both = json!({"messages": [{"role": "user", "content": "go"}],
            "context_management": {"edits": []}});
        assert_eq!(code(both), Some(None));
        assert_eq!(
            code(json!({"messages": [{"role": "user", "content": "go"}]})),
            None
        );
    }
}
