//! Anthropic's clearing edits, applied by compactd for an upstream that does not offer them:
//! `clear_tool_uses_20250919` (older tool results replaced by a placeholder, the most recent
//! `keep` uses left whole) and `clear_thinking_20251015` (thinking taken out of all but the last
//! `keep` assistant turns that hold it). The edits leave the request before it goes upstream, and
//! what they cleared comes back in the answer's `context_management.applied_edits`, whole or in
//! the stream's `message_delta`, as the API reports it. Behind Anthropic's own API the edits pass
//! through for the provider to apply (`COMPACTD_GATEWAY_CONTEXT_EDITS`).

mod spliced;

pub(crate) use spliced::{Spliced, without_inert};

use serde_json::{Value, json};

use super::inline::anthropic::input_tokens;
use super::inline::sse::{Event, Rewrite};
use compactd_core::transcript::estimate_tokens;

const CLEAR_TOOL_USES: &str = "clear_tool_uses_20250919";
const CLEAR_THINKING: &str = "clear_thinking_20251015";

/// What a cleared tool result says instead of its content.
pub(crate) const PLACEHOLDER: &str = "[tool result cleared to save context]";

/// The API's defaults: clear past 100,000 input tokens, keep the 3 most recent tool uses, keep
/// the thinking of the last assistant turn that has any.
const DEFAULT_TRIGGER_TOKENS: u64 = 100_000;
const DEFAULT_KEEP_TOOL_USES: usize = 3;
const DEFAULT_KEEP_THINKING_TURNS: usize = 1;

/// Whether a body may ask for a clearing edit: a byte scan, so that the ordinary turns that name
/// none pass unparsed.
pub(crate) fn may_ask(plain: &[u8]) -> bool {
    use std::sync::LazyLock;
    // One search for what the two names begin with (the searcher built once), then each hit
    // read on: two searches of every 50 KB turn were a visible part of forwarding it.
    static COMMON: LazyLock<memchr::memmem::Finder<'static>> =
        LazyLock::new(|| memchr::memmem::Finder::new(b"clear_t"));
    COMMON.find_iter(plain).any(|at| {
        [CLEAR_TOOL_USES, CLEAR_THINKING]
            .iter()
            .any(|name| plain[at..].starts_with(name.as_bytes()))
    })
}

/// Takes the clearing edits out of a Messages body and applies them, in the order the request
/// lists them; what they cleared, as `applied_edits` entries (an edit that cleared nothing is not
/// reported). `None` when the body asked for none (the body is then unchanged).
pub(crate) fn apply(body: &mut Value) -> Option<Vec<Value>> {
    let edits = body
        .pointer_mut("/context_management/edits")?
        .as_array_mut()?;
    let is_clearing = |e: &Value| {
        matches!(
            e.get("type").and_then(Value::as_str),
            Some(CLEAR_TOOL_USES | CLEAR_THINKING)
        )
    };
    let (clearing, rest): (Vec<Value>, Vec<Value>) = edits.drain(..).partition(is_clearing);
    *edits = rest;
    if clearing.is_empty() {
        return None;
    }
    if edits.is_empty()
        && let Some(object) = body.as_object_mut()
    {
        object.remove("context_management");
    }
    let mut applied = Vec::new();
    for edit in &clearing {
        let report = match edit.get("type").and_then(Value::as_str) {
            Some(CLEAR_TOOL_USES) => clear_tool_uses(body, edit),
            _ => clear_thinking(body, edit),
        };
        applied.extend(report);
    }
    Some(applied)
}

/// The assistant turns' content blocks, oldest first, as (message index, block index).
fn assistant_blocks(body: &Value, kind: &str) -> Vec<(usize, usize)> {
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (m, message) in messages.iter().enumerate() {
        if message.get("role").and_then(Value::as_str) != Some("assistant") {
            continue;
        }
        let Some(blocks) = message.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (b, block) in blocks.iter().enumerate() {
            if block.get("type").and_then(Value::as_str) == Some(kind) {
                out.push((m, b));
            }
        }
    }
    out
}

fn count(value: Option<&Value>, default: u64) -> u64 {
    value.and_then(Value::as_u64).unwrap_or(default)
}

/// `clear_tool_uses_20250919`: past its trigger, the results of every tool use but the most
/// recent `keep` (and those of `exclude_tools`) become the placeholder, and with
/// `clear_tool_inputs` their calls' inputs are emptied too; nothing when less than `clear_at_least`
/// tokens would go.
fn clear_tool_uses(body: &mut Value, edit: &Value) -> Option<Value> {
    let uses = assistant_blocks(body, "tool_use");
    let triggered = match edit.pointer("/trigger/type").and_then(Value::as_str) {
        Some("tool_uses") => uses.len() as u64 >= count(edit.pointer("/trigger/value"), 0),
        _ => input_tokens(body) >= count(edit.pointer("/trigger/value"), DEFAULT_TRIGGER_TOKENS),
    };
    if !triggered {
        return None;
    }
    let keep = edit
        .pointer("/keep/value")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_KEEP_TOOL_USES, |k| k as usize);
    let names = |key: &str| -> Vec<String> {
        edit.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect()
    };
    let excluded = names("exclude_tools");
    let inputs: Box<dyn Fn(&str) -> bool> = match edit.get("clear_tool_inputs") {
        Some(Value::Bool(all)) => {
            let all = *all;
            Box::new(move |_| all)
        }
        Some(Value::Array(_)) => {
            let listed = names("clear_tool_inputs");
            Box::new(move |name| listed.iter().any(|n| n == name))
        }
        _ => Box::new(|_| false),
    };
    let older = uses.len().saturating_sub(keep);
    let mut cleared = Vec::new();
    for &(m, b) in &uses[..older] {
        let call = &body["messages"][m]["content"][b];
        let name = call.get("name").and_then(Value::as_str).unwrap_or_default();
        if excluded.iter().any(|e| e == name) {
            continue;
        }
        let Some(id) = call.get("id").and_then(Value::as_str) else {
            continue;
        };
        cleared.push((m, b, id.to_owned(), inputs(name)));
    }
    // What each clearing takes out, before anything is cleared (`clear_at_least` is all or none).
    let mut plan = Vec::new();
    let mut tokens = 0;
    for (m, b, id, input) in cleared {
        let result = find_result(body, m, &id);
        let result_tokens = result
            .and_then(|(rm, rb)| body["messages"][rm]["content"][rb].get("content"))
            .filter(|c| c.as_str() != Some(PLACEHOLDER))
            .map_or(0, |c| estimate_tokens(&c.to_string()));
        let input_tokens = if input {
            let input = &body["messages"][m]["content"][b]["input"];
            if input.as_object().is_some_and(|o| o.is_empty()) {
                0
            } else {
                estimate_tokens(&input.to_string())
            }
        } else {
            0
        };
        if result_tokens + input_tokens > 0 {
            tokens += result_tokens + input_tokens;
            plan.push((m, b, result, input));
        }
    }
    if plan.is_empty() || tokens < count(edit.pointer("/clear_at_least/value"), 0) {
        return None;
    }
    let uses = plan.len();
    for (m, b, result, input) in plan {
        if let Some((rm, rb)) = result {
            body["messages"][rm]["content"][rb]["content"] = json!(PLACEHOLDER);
        }
        if input {
            body["messages"][m]["content"][b]["input"] = json!({});
        }
    }
    Some(
        json!({"type": CLEAR_TOOL_USES, "cleared_tool_uses": uses, "cleared_input_tokens": tokens}),
    )
}

/// Where the result of tool use `id` (called in message `after`) is: the user turns after it.
fn find_result(body: &Value, after: usize, id: &str) -> Option<(usize, usize)> {
    let messages = body.get("messages")?.as_array()?;
    messages
        .iter()
        .enumerate()
        .skip(after + 1)
        .find_map(|(m, message)| {
            let blocks = message.get("content")?.as_array()?;
            let b = blocks.iter().position(|block| {
                block.get("type").and_then(Value::as_str) == Some("tool_result")
                    && block.get("tool_use_id").and_then(Value::as_str) == Some(id)
            })?;
            Some((m, b))
        })
}

/// `clear_thinking_20251015`: the thinking of every assistant turn but the last `keep` that hold
/// some (`"all"` keeps all). A turn that is nothing but thinking keeps it: the API takes no empty
/// turn.
fn clear_thinking(body: &mut Value, edit: &Value) -> Option<Value> {
    let keep = match edit.get("keep") {
        Some(Value::String(all)) if all == "all" => return None,
        Some(keep) if keep.get("type").and_then(Value::as_str) == Some("all") => return None,
        Some(keep) => keep
            .get("value")
            .and_then(Value::as_u64)
            .map_or(DEFAULT_KEEP_THINKING_TURNS, |k| k as usize),
        None => DEFAULT_KEEP_THINKING_TURNS,
    };
    let messages = body.get_mut("messages")?.as_array_mut()?;
    let is_thinking = |b: &Value| {
        matches!(
            b.get("type").and_then(Value::as_str),
            Some("thinking" | "redacted_thinking")
        )
    };
    let turns: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .filter(|(_, m)| {
            m.get("content")
                .and_then(Value::as_array)
                .is_some_and(|blocks| blocks.iter().any(is_thinking))
        })
        .map(|(i, _)| i)
        .collect();
    let older = turns.len().saturating_sub(keep);
    let (mut cleared, mut tokens) = (0, 0);
    for &i in &turns[..older] {
        let Some(blocks) = messages[i].get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        if blocks.iter().all(is_thinking) {
            continue;
        }
        tokens += blocks
            .iter()
            .filter(|b| is_thinking(b))
            .map(|b| estimate_tokens(&b.to_string()))
            .sum::<u64>();
        blocks.retain(|b| !is_thinking(b));
        cleared += 1;
    }
    (cleared > 0).then(|| {
        json!({"type": CLEAR_THINKING, "cleared_thinking_turns": cleared,
            "cleared_input_tokens": tokens})
    })
}

/// `applied` added to an answer's `context_management.applied_edits` (after what the upstream
/// applied itself, if it did).
pub(crate) fn reported(answer: &mut Value, applied: &[Value]) {
    let Some(object) = answer.as_object_mut() else {
        return;
    };
    let management = object
        .entry("context_management")
        .or_insert_with(|| json!({"applied_edits": []}));
    if !management.is_object() {
        *management = json!({"applied_edits": []});
    }
    let edits = management
        .as_object_mut()
        .expect("made an object above")
        .entry("applied_edits")
        .or_insert_with(|| json!([]));
    if let Some(edits) = edits.as_array_mut() {
        edits.extend(applied.iter().cloned());
    } else {
        *edits = Value::Array(applied.to_vec());
    }
}

/// The streamed answer with `applied` reported in its `message_delta`, where the SDKs read it.
pub(crate) fn rewrite(applied: Vec<Value>) -> Rewrite {
    Box::new(move |mut event: Event| {
        if event.name == "message_delta"
            && let Some(data) = event.data.as_mut()
        {
            reported(data, &applied);
        }
        vec![event]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, name: &str, result: &str) -> [Value; 2] {
        [
            json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": format!("thinking about {id}"), "signature": "s"},
                {"type": "tool_use", "id": id, "name": name, "input": {"path": format!("{id}.rs")}}]}),
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": result}]}),
        ]
    }

    fn body(edits: Value) -> Value {
        let mut messages = vec![json!({"role": "user", "content": "fix the lexer"})];
        for (i, name) in ["read", "read", "bash", "read", "edit"].iter().enumerate() {
            messages.extend(turn(&format!("t{i}"), name, &"output ".repeat(50)));
        }
        json!({"model": "m", "messages": messages,
            "context_management": {"edits": edits}})
    }

    #[test]
    fn older_tool_results_become_the_placeholder_and_the_latest_stay() {
        let mut body = body(json!([{"type": CLEAR_TOOL_USES,
            "trigger": {"type": "tool_uses", "value": 4}, "keep": {"type": "tool_uses", "value": 2},
            "exclude_tools": ["bash"], "clear_tool_inputs": ["read"]}]));
        let applied = apply(&mut body).unwrap();
        assert_eq!(applied.len(), 1);
        assert_eq!(
            applied[0]["cleared_tool_uses"], 2,
            "t0 and t1; bash is excluded"
        );
        assert!(applied[0]["cleared_input_tokens"].as_u64().unwrap() > 50);
        let results: Vec<&Value> = (0..5)
            .map(|i| &body["messages"][2 + 2 * i]["content"][0]["content"])
            .collect();
        assert_eq!(results[0], PLACEHOLDER);
        assert_eq!(results[1], PLACEHOLDER);
        assert_ne!(results[2], PLACEHOLDER, "excluded tool");
        assert_ne!(results[3], PLACEHOLDER);
        assert_ne!(results[4], PLACEHOLDER);
        assert_eq!(body["messages"][1]["content"][1]["input"], json!({}));
        assert!(body.get("context_management").is_none());
        // Applied again, nothing more is cleared and nothing is reported.
        let mut again = body.clone();
        again["context_management"] = json!({"edits": [{"type": CLEAR_TOOL_USES, "trigger": {"type": "tool_uses", "value": 1}, "keep": {"type": "tool_uses", "value": 2}, "exclude_tools": ["bash"]}]});
        assert_eq!(apply(&mut again), Some(vec![]));
    }

    #[test]
    fn under_the_trigger_or_clear_at_least_nothing_is_cleared_but_the_edit_leaves() {
        let mut under = body(json!([{"type": CLEAR_TOOL_USES}, {"type": "compact_20260112"}]));
        let before = under["messages"].clone();
        assert_eq!(apply(&mut under), Some(vec![]), "100k default trigger");
        assert_eq!(under["messages"], before);
        assert_eq!(
            under["context_management"]["edits"],
            json!([{"type": "compact_20260112"}])
        );
        let mut short = body(json!([{"type": CLEAR_TOOL_USES,
            "trigger": {"type": "tool_uses", "value": 1},
            "clear_at_least": {"type": "input_tokens", "value": 1_000_000}}]));
        assert_eq!(apply(&mut short), Some(vec![]));
        assert!(!short.to_string().contains(PLACEHOLDER));
    }

    #[test]
    fn thinking_is_kept_for_the_last_turns_only() {
        let mut body = body(json!([{"type": CLEAR_THINKING,
            "keep": {"type": "thinking_turns", "value": 2}}]));
        let applied = apply(&mut body).unwrap();
        assert_eq!(applied[0]["cleared_thinking_turns"], 3);
        let thinking = |i: usize| {
            body["messages"][1 + 2 * i]
                .to_string()
                .contains("thinking about")
        };
        assert_eq!(
            (0..5).map(thinking).collect::<Vec<_>>(),
            [false, false, false, true, true]
        );
        let mut all = self::body(json!([{"type": CLEAR_THINKING, "keep": "all"}]));
        let before = all["messages"].clone();
        assert_eq!(apply(&mut all), Some(vec![]));
        assert_eq!(all["messages"], before);
    }

    #[test]
    fn either_edits_name_is_found_after_look_alikes() {
        for name in [CLEAR_TOOL_USES, CLEAR_THINKING] {
            let body = format!(
                "{{\"text\": \"clear_text clear_tool clear_thinking\", \"type\": \"{name}\"}}"
            );
            assert!(may_ask(body.as_bytes()), "{body}");
        }
        assert!(!may_ask(b"clear_text clear_thinking_2025 clear_tool_uses"));
    }

    #[test]
    fn a_body_without_clearing_edits_is_untouched() {
        let mut body = body(json!([{"type": "compact_20260112"}]));
        let before = body.clone();
        assert_eq!(apply(&mut body), None);
        assert_eq!(body, before);
        assert!(!may_ask(body.to_string().as_bytes()));
    }

    #[test]
    fn the_answer_reports_what_was_applied_after_the_upstreams_own() {
        let mine =
            json!({"type": CLEAR_THINKING, "cleared_thinking_turns": 1, "cleared_input_tokens": 9});
        let mut plain = json!({"type": "message", "content": []});
        reported(&mut plain, std::slice::from_ref(&mine));
        assert_eq!(plain["context_management"]["applied_edits"], json!([mine]));
        let theirs = json!({"type": "clear_tool_uses_20250919", "cleared_tool_uses": 1, "cleared_input_tokens": 3});
        let mut both = json!({"context_management": {"applied_edits": [theirs]}});
        reported(&mut both, std::slice::from_ref(&mine));
        assert_eq!(
            both["context_management"]["applied_edits"],
            json!([theirs, mine])
        );
    }
}
