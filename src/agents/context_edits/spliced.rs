//! The clearing edits of a turn that would clear nothing, taken out of its bytes: Claude Code asks
//! for `clear_thinking_20251015` with `keep: "all"` on every turn, and parsing each 50 KB turn to
//! take that one member out, then writing it again, cost three times the CPU of forwarding it
//! (BENCHMARKS.md). Whatever may clear something is left to [`super::apply`] on the parsed body.

use memchr::memmem;
use serde_json::{Value, json};

use super::{CLEAR_THINKING, CLEAR_TOOL_USES, apply};
use compactd_core::js_json::{Member, member_before, members};

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
/// (then the parsed body is edited). Claude Code writes `context_management` near the end and its
/// edit keeps all thinking: that member is found reading back from the end, and only a body whose
/// messages must be searched for thinking is walked whole.
pub(crate) fn without_inert(plain: &[u8]) -> Option<Spliced> {
    match from_the_end(plain)? {
        Tail::Spliced(spliced) => Some(spliced),
        Tail::Whole => whole(plain),
    }
}

/// What reading back from the end settled.
enum Tail {
    Spliced(Spliced),
    /// An edit asks whether the messages hold thinking: the body is walked whole.
    Whole,
}

/// The clearing edits found reading members back from the end of the body.
fn from_the_end(plain: &[u8]) -> Option<Tail> {
    let mut end = plain.iter().rposition(|b| !b.is_ascii_whitespace())?;
    if plain[end] != b'}' {
        return None;
    }
    let mut after: Option<Member> = None;
    let (member, delimiter) = loop {
        let (member, delimiter) = member_before(plain, end)?;
        let key = &plain[member.key.clone()];
        // A key spelled with escapes would not be matched by its bytes: left to the parse.
        if key.contains(&b'\\') {
            return None;
        }
        if key == MANAGEMENT {
            break (member, delimiter);
        }
        if plain[delimiter] == b'{' {
            // Every member read, none of them the edits: they were named in the text only.
            return Some(Tail::Spliced(Spliced::Unchanged));
        }
        after = Some(member);
        end = delimiter;
    };
    // The same key earlier in the body (written twice, read as its last): left to the parse.
    if memmem::find(&plain[..member.key.start], MANAGEMENT).is_some() {
        return None;
    }
    let management: Value = serde_json::from_slice(&plain[member.value.clone()]).ok()?;
    if inert(&management, || None)?.is_none() {
        return Some(Tail::Whole);
    }
    let before = match plain[delimiter] {
        b',' => Some(member_before(plain, delimiter)?.0),
        _ => None,
    };
    let neighbours = [before, Some(member), after];
    Some(Tail::Spliced(splice(plain, &management, &neighbours)))
}

/// [`without_inert`] on the whole body's members, when the messages must be searched.
fn whole(plain: &[u8]) -> Option<Spliced> {
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
    let messages = named(MESSAGES)?;
    let no_thinking = || {
        Some(match messages {
            Some(m) => memmem::find(&plain[members[m].value.clone()], b"thinking").is_none(),
            None => true,
        })
    };
    inert(&management, no_thinking)??;
    let neighbours = [
        at.checked_sub(1).map(|b| members[b].clone()),
        Some(members[at].clone()),
        members.get(at + 1).cloned(),
    ];
    Some(splice(plain, &management, &neighbours))
}

/// Whether the edits of `management` would clear nothing: `Some(Some(()))` yes, `Some(None)`
/// when that depends on whether the messages hold thinking and `no_thinking` could not say
/// (answers `None`), `None` when an edit may clear something.
fn inert(management: &Value, no_thinking: impl Fn() -> Option<bool>) -> Option<Option<()>> {
    let edits = management.get("edits")?.as_array()?;
    let mut unknown = false;
    for edit in edits {
        match edit.get("type").and_then(Value::as_str) {
            Some(CLEAR_THINKING) if !keeps_all(edit) => match no_thinking() {
                Some(true) => {}
                Some(false) => return None,
                None => unknown = true,
            },
            Some(CLEAR_TOOL_USES) => return None,
            _ => {}
        }
    }
    Some((!unknown).then_some(()))
}

/// The body with the clearing edits out of its `context_management` member (the middle of
/// `neighbours`, between the members before and after it, if any): the member rewritten with
/// what edits remain, or taken out with the comma that parted it from a neighbour.
fn splice(plain: &[u8], management: &Value, neighbours: &[Option<Member>; 3]) -> Spliced {
    let [before, Some(member), after] = neighbours else {
        unreachable!("the member is always given");
    };
    let mut left = json!({ "context_management": management });
    if apply(&mut left).is_none() {
        return Spliced::Unchanged;
    }
    let cut = match left.get("context_management") {
        Some(rest) => {
            let mut out = Vec::with_capacity(plain.len());
            out.extend_from_slice(&plain[..member.value.start]);
            out.extend_from_slice(rest.to_string().as_bytes());
            out.extend_from_slice(&plain[member.value.end..]);
            return Spliced::Rewritten(out);
        }
        None => match (before, after) {
            (Some(before), _) => before.value.end..member.value.end,
            (None, Some(after)) => member.key.start..after.key.start,
            (None, None) => member.key.start..member.value.end,
        },
    };
    let mut out = Vec::with_capacity(plain.len());
    out.extend_from_slice(&plain[..cut.start]);
    out.extend_from_slice(&plain[cut.end..]);
    Spliced::Rewritten(out)
}

/// Whether a `clear_thinking` edit keeps every turn's thinking.
fn keeps_all(edit: &Value) -> bool {
    match edit.get("keep") {
        Some(Value::String(all)) => all == "all",
        Some(keep) => keep.get("type").and_then(Value::as_str) == Some("all"),
        None => false,
    }
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
