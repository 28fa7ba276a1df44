//! OpenAI's `context_management: [{"type": "compaction", "compact_threshold": N}]` on
//! `/v1/responses`, served by compactd: once the rendered input reaches the threshold, compactd
//! summarizes it, sends the compacted request (the summary, then the latest user turn) to the
//! upstream, and answers with its `compaction` item first in `output` (streamed before the
//! reply) and the upstream's reply after it. The item stands for everything before it: when it
//! comes back, what preceded it goes ([`super::super::codex::Seal::item_replacing`]). Below the
//! threshold the setting is taken out before the request goes on.

use serde_json::{Value, json};

use super::super::Wire;
use super::super::recognize::{Compaction, Form, of_history};
use super::sse::{Event, Rewrite};
use crate::pipeline::Agent;
use compactd_core::transcript::estimate_tokens;

/// Bytes every request with the setting holds.
pub(crate) const THRESHOLD_MARKER: &str = "compact_threshold";

/// The compaction threshold a Responses body sets, if any.
pub(crate) fn threshold_of(body: &Value) -> Option<u64> {
    body.get("context_management")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("compaction"))?
        .get(THRESHOLD_MARKER)?
        .as_u64()
}

/// The rendered input's tokens, estimated (characters / 4): instructions, input and tools.
pub(crate) fn input_tokens(body: &Value) -> u64 {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => estimate_tokens(s),
        Some(other) => estimate_tokens(&other.to_string()),
        None => 0,
    };
    text(body.get("instructions")) + text(body.get("input")) + text(body.get("tools"))
}

/// Whether part of the history is the upstream's alone: a compaction item compactd did not open,
/// or an earlier response the request continues.
fn upstream_history(body: &Value) -> bool {
    let item = body
        .get("input")
        .and_then(Value::as_array)
        .is_some_and(|items| items.iter().any(|i| i["type"] == "compaction"));
    item || body
        .get("previous_response_id")
        .is_some_and(Value::is_string)
}

/// The compaction a request with the setting is, once its input reaches the threshold.
pub(crate) fn over_threshold(
    agent: Agent,
    _headers: &axum::http::HeaderMap,
    body: &Value,
) -> Option<Compaction> {
    let threshold = threshold_of(body)?;
    if upstream_history(body) || input_tokens(body) < threshold {
        return None;
    }
    let input = body.get("input")?.as_array()?;
    let conversation = Wire::Responses.messages(input);
    Some(of_history(
        agent,
        Form::Inline,
        body,
        conversation,
        String::new(),
        None,
    ))
}

/// Takes the compaction setting out of a body compactd serves; `false` when there was none, or
/// when history only the upstream reads needs it.
pub(crate) fn without_setting(body: &mut Value) -> bool {
    if upstream_history(body) || threshold_of(body).is_none() {
        return false;
    }
    let Some(settings) = body
        .get_mut("context_management")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    settings.retain(|c| c.get("type").and_then(Value::as_str) != Some("compaction"));
    if settings.is_empty()
        && let Some(object) = body.as_object_mut()
    {
        object.remove("context_management");
    }
    true
}

/// The request the upstream answers after compactd compacted it: the summary as a user message
/// (as an opened item reads), then the latest user message when the input ends on one.
pub(crate) fn compacted_request(body: &Value, summary: &str) -> Value {
    let mut out = body.clone();
    without_setting(&mut out);
    let mut input = vec![json!({"type": "message", "role": "user", "content": [
        {"type": "input_text", "text": format!("{}{summary}", super::super::codex::HANDOFF)}]})];
    if let Some(last) = body
        .get("input")
        .and_then(Value::as_array)
        .and_then(|i| i.last())
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
    {
        input.push(last.clone());
    }
    out["input"] = Value::Array(input);
    out
}

/// The upstream's whole answer with compactd's item first in `output`.
pub(crate) fn merged(mut answer: Value, item: &Value) -> Value {
    if let Some(output) = answer.get_mut("output").and_then(Value::as_array_mut) {
        output.insert(0, item.clone());
    }
    answer
}

/// The upstream's streamed answer with compactd's item first: `output_item.added` and `.done` for
/// it after `response.created`, every later `output_index` one on and `sequence_number` two on,
/// and the item first in the response that closes the stream.
pub(crate) fn rewrite(item: Value) -> Rewrite {
    let mut shift = 0u64;
    Box::new(move |mut event: Event| {
        let Some(data) = event.data.as_mut() else {
            return vec![event];
        };
        if let Some(index) = data.get("output_index").and_then(Value::as_u64) {
            data["output_index"] = json!(index + 1);
        }
        if let Some(seq) = data.get("sequence_number").and_then(Value::as_u64) {
            data["sequence_number"] = json!(seq + shift);
        }
        let closing = matches!(
            data.get("type").and_then(Value::as_str),
            Some("response.completed" | "response.incomplete" | "response.failed")
        );
        if closing
            && let Some(output) = data
                .pointer_mut("/response/output")
                .and_then(Value::as_array_mut)
        {
            output.insert(0, item.clone());
        }
        if data.get("type").and_then(Value::as_str) != Some("response.created") {
            return vec![event];
        }
        let seq = data.get("sequence_number").and_then(Value::as_u64);
        let numbered = |kind: &str, offset: u64| {
            let mut value = json!({"type": kind, "output_index": 0, "item": item});
            if let Some(seq) = seq {
                value["sequence_number"] = json!(seq + offset);
            }
            Event::new(kind, value)
        };
        shift = 2;
        vec![
            event,
            numbered("response.output_item.added", 1),
            numbered("response.output_item.done", 2),
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(chars: usize) -> Value {
        json!({"model": "gpt-5.2", "context_management": [{"type": "compaction", "compact_threshold": 1000}],
            "input": [{"role": "user", "content": "x".repeat(chars)},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
                {"role": "user", "content": "and now?"}]})
    }

    #[test]
    fn the_setting_compacts_at_its_threshold_and_is_taken_out_below_it() {
        let agent = super::super::super::responses_compact::RESPONSES_COMPACT;
        assert!(over_threshold(agent, &Default::default(), &body(4_400)).is_some());
        assert!(over_threshold(agent, &Default::default(), &body(3_000)).is_none());
        let mut continued = body(4_400);
        continued["previous_response_id"] = json!("resp_1");
        assert!(over_threshold(agent, &Default::default(), &continued).is_none());
        let mut under = body(3_000);
        assert!(without_setting(&mut under));
        assert!(under.get("context_management").is_none());
        let out = compacted_request(&body(4_400), "## Goal\nship");
        let input = out["input"].as_array().unwrap();
        assert_eq!(input.len(), 2);
        assert_eq!(input[1]["content"], "and now?");
    }
}
