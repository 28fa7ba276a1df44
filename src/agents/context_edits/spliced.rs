//! The clearing edits of a turn that would clear nothing, taken out of its bytes: Claude Code asks
//! for `clear_thinking_20251015` with `keep: "all"` on every turn, and parsing each 50 KB turn to
//! take that one member out, then writing it again, cost three times the CPU of forwarding it
//! (BENCHMARKS.md). Whatever may clear something is left to [`super::apply`] on the parsed body.

use memchr::memmem;
use serde_json::{Value, json};

use super::{CLEAR_THINKING, CLEAR_TOOL_USES, apply};
use compactd_core::js_json::{Member, members};

/// What becomes of a turn's bytes.
#[derive(Debug, PartialEq)]
pub(crate) enum Spliced {
    /// It asks for no clearing edit (the edits' names were in its text, not its settings).
    Unchanged,
    /// Its clearing edits taken out, nothing else touched: what the upstream gets.
    Rewritten(Vec<u8>),
}

const MANAGEMENT: &[u8] = b"\"context_management\"";
const MESSAGES: &[u8] = b"\"messages\"";

/// The body as [`apply`] would leave it when its clearing edits would clear nothing, spliced from
/// the bytes as they came; `None` when an edit may clear something, or the body is not as expected
/// (then the parsed body is edited).
pub(crate) fn without_inert(plain: &[u8]) -> Option<Spliced> {
    let members = members(plain)?;
    let named = |name: &[u8]| -> Option<Option<usize>> {
        let mut found = members
            .iter()
            .enumerate()
            .filter(|(_, m)| &plain[m.key.clone()] == name);
        let first = found.next().map(|(at, _)| at);
        // A key written twice is read as its last; left to the parse.
        found.next().is_none().then_some(first)
    };
    // A key spelled with escapes would not be matched by its bytes: left to the parse.
    if members
        .iter()
        .any(|m| plain[m.key.clone()].contains(&b'\\'))
    {
        return None;
    }
    let Some(at) = named(MANAGEMENT)? else {
        return Some(Spliced::Unchanged);
    };
    let management: Value = serde_json::from_slice(&plain[members[at].value.clone()]).ok()?;
    // Whether any message may hold thinking: searched only for an edit that keeps not all.
    let messages = named(MESSAGES)?;
    let no_thinking = || match messages {
        Some(m) => memmem::find(&plain[members[m].value.clone()], b"thinking").is_none(),
        None => true,
    };
    let edits = management.get("edits")?.as_array()?;
    let inert = edits
        .iter()
        .all(|edit| match edit.get("type").and_then(Value::as_str) {
            Some(CLEAR_THINKING) => keeps_all(edit) || no_thinking(),
            Some(CLEAR_TOOL_USES) => false,
            _ => true,
        });
    if !inert {
        return None;
    }
    let mut left = json!({ "context_management": management });
    if apply(&mut left).is_none() {
        return Some(Spliced::Unchanged);
    }
    Some(Spliced::Rewritten(match left.get("context_management") {
        Some(rest) => replaced(plain, &members[at], &rest.to_string()),
        None => removed(plain, &members, at),
    }))
}

/// Whether a `clear_thinking` edit keeps every turn's thinking.
fn keeps_all(edit: &Value) -> bool {
    match edit.get("keep") {
        Some(Value::String(all)) => all == "all",
        Some(keep) => keep.get("type").and_then(Value::as_str) == Some("all"),
        None => false,
    }
}

fn replaced(plain: &[u8], member: &Member, value: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(plain.len());
    out.extend_from_slice(&plain[..member.value.start]);
    out.extend_from_slice(value.as_bytes());
    out.extend_from_slice(&plain[member.value.end..]);
    out
}

/// The body without member `at`, and without the comma that parted it from its neighbour.
fn removed(plain: &[u8], members: &[Member], at: usize) -> Vec<u8> {
    let cut = match (at.checked_sub(1), members.get(at + 1)) {
        (Some(before), _) => members[before].value.end..members[at].value.end,
        (None, Some(after)) => members[at].key.start..after.key.start,
        (None, None) => members[at].key.start..members[at].value.end,
    };
    let mut out = Vec::with_capacity(plain.len());
    out.extend_from_slice(&plain[..cut.start]);
    out.extend_from_slice(&plain[cut.end..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the parsed path makes of `body`: the body the upstream gets, if it changed.
    fn parsed(body: &Value) -> Option<Value> {
        let mut body = body.clone();
        apply(&mut body).map(|_| body)
    }

    fn spliced(body: &Value) -> Option<Spliced> {
        without_inert(body.to_string().as_bytes())
    }

    fn turn(thinking: bool, edits: Value) -> Value {
        let mut assistant = vec![json!({"type": "text", "text": "Reading it."})];
        if thinking {
            assistant.insert(
                0,
                json!({"type": "thinking", "thinking": "hm", "signature": "s"}),
            );
        }
        json!({"model": "m", "messages": [
            {"role": "user", "content": "fix the lexer"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": "go on"},
            {"role": "assistant", "content": assistant},
            {"role": "user", "content": "and?"}],
            "thinking": {"type": "adaptive"},
            "context_management": {"edits": edits}, "stream": true})
    }

    #[test]
    fn an_edit_that_clears_nothing_leaves_as_the_parsed_path_leaves_it() {
        let keep_all = json!([{"type": CLEAR_THINKING, "keep": "all"}]);
        let keep_one =
            json!([{"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 1}}]);
        let other = json!({"type": "compact_20260112"});
        for body in [
            turn(true, keep_all.clone()),
            turn(false, keep_one.clone()),
            turn(false, json!([{"type": CLEAR_THINKING}, other])),
            turn(
                true,
                json!([other, {"type": CLEAR_THINKING, "keep": {"type": "all"}}]),
            ),
        ] {
            let Some(Spliced::Rewritten(bytes)) = spliced(&body) else {
                panic!("spliced: {body}");
            };
            let bytes: Value = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(Some(bytes), parsed(&body), "{body}");
        }
        // The member first, last or alone: its comma goes with it.
        for text in [
            r#"{"context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}, "model":"m"}"#,
            r#"{"model":"m" , "context_management":{"edits":[{"type":"clear_thinking_20251015","keep":"all"}]}}"#,
            r#"{ "context_management" : {"edits":[{"type":"clear_thinking_20251015","keep":"all"}]} }"#,
        ] {
            let Some(Spliced::Rewritten(bytes)) = without_inert(text.as_bytes()) else {
                panic!("{text}");
            };
            let read: Value = serde_json::from_slice(&bytes).expect("still JSON");
            let mut expected: Value = serde_json::from_str(text).unwrap();
            apply(&mut expected);
            assert_eq!(read, expected, "{text}");
        }
    }

    #[test]
    fn an_edit_that_may_clear_something_is_left_to_the_parse() {
        let keep_one =
            json!([{"type": CLEAR_THINKING, "keep": {"type": "thinking_turns", "value": 1}}]);
        assert_eq!(
            spliced(&turn(true, keep_one)),
            None,
            "older thinking to clear"
        );
        let tools = json!([{"type": CLEAR_TOOL_USES}]);
        assert_eq!(spliced(&turn(false, tools)), None);
        let twice = r#"{"context_management":{"edits":[]},"context_management":{"edits":[{"type":"clear_thinking_20251015"}]}}"#;
        assert_eq!(without_inert(twice.as_bytes()), None);
        assert_eq!(without_inert(b"{\"model\":"), None);
    }

    #[test]
    fn edits_named_only_in_the_conversation_change_nothing() {
        let body = json!({"model": "m", "messages": [{"role": "user",
            "content": "what does clear_thinking_20251015 do?"}]});
        assert_eq!(spliced(&body), Some(Spliced::Unchanged));
        assert_eq!(parsed(&body), None);
    }
}
