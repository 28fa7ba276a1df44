//! The members of a JSON object's text, found without decoding it: what lets the gateway take one
//! small member out of an agent's 50 KB turn by splicing bytes, where parsing the turn and writing
//! it again cost three times what forwarding it does.

use std::ops::Range;

use super::string_end;

/// One member of an object's text: where its key (quotes included) and its value lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub key: Range<usize>,
    pub value: Range<usize>,
}

/// The members of the object `bytes` holds, in order: strings skipped a vector at a time, nested
/// values by their brackets. `None` when the text is not one object as JSON writes it; inside a
/// value only the brackets and strings are checked (a caller that needs a value read parses it).
pub fn members(bytes: &[u8]) -> Option<Vec<Member>> {
    let mut at = skip_space(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_space(bytes, at + 1);
    let mut out = Vec::new();
    if bytes.get(at) == Some(&b'}') {
        return (skip_space(bytes, at + 1) == bytes.len()).then_some(out);
    }
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key = at..string_end(bytes, at + 1)?;
        at = skip_space(bytes, key.end);
        if bytes.get(at) != Some(&b':') {
            return None;
        }
        let start = skip_space(bytes, at + 1);
        let value = start..value_end(bytes, start)?;
        at = skip_space(bytes, value.end);
        out.push(Member { key, value });
        match bytes.get(at)? {
            b',' => at = skip_space(bytes, at + 1),
            b'}' => return (skip_space(bytes, at + 1) == bytes.len()).then_some(out),
            _ => return None,
        }
    }
}

/// The member of an object's text that ends just before `end` (the `,` or `}` after it, spaces
/// allowed between), read backwards, and where the `,` or `{` before it is. Reading from the end
/// finds a member an agent writes last (Claude Code's `context_management`) without walking the
/// whole body; inside a string a quote is always escaped, so a quote after an even run of
/// backslashes is a string's boundary from either side. `None` when the text there is not a
/// member as JSON writes one.
pub fn member_before(bytes: &[u8], end: usize) -> Option<(Member, usize)> {
    let value_end = skip_space_back(bytes, end);
    let value = value_start_back(bytes, value_end)?..value_end;
    let colon = skip_space_back(bytes, value.start);
    if colon == 0 || bytes[colon - 1] != b':' {
        return None;
    }
    let key_end = skip_space_back(bytes, colon - 1);
    if key_end == 0 || bytes[key_end - 1] != b'"' {
        return None;
    }
    let key = string_start_back(bytes, key_end - 1)?..key_end;
    let delimiter = skip_space_back(bytes, key.start).checked_sub(1)?;
    matches!(bytes[delimiter], b',' | b'{').then_some((Member { key, value }, delimiter))
}

/// Just past the last byte before `at` that is not a space.
fn skip_space_back(bytes: &[u8], mut at: usize) -> usize {
    while at > 0 && matches!(bytes[at - 1], b' ' | b'\t' | b'\n' | b'\r') {
        at -= 1;
    }
    at
}

/// Whether the quote at `at` is escaped: after an odd run of backslashes.
fn escaped(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
        % 2
        == 1
}

/// Where the string whose closing quote is at `close` opens (its opening quote).
fn string_start_back(bytes: &[u8], close: usize) -> Option<usize> {
    let mut before = close;
    loop {
        let at = memchr::memrchr(b'"', &bytes[..before])?;
        if !escaped(bytes, at) {
            return Some(at);
        }
        before = at;
    }
}

/// Where the value that ends just before `end` starts.
fn value_start_back(bytes: &[u8], end: usize) -> Option<usize> {
    let last = end.checked_sub(1)?;
    match bytes[last] {
        b'"' => string_start_back(bytes, last),
        b'}' | b']' => {
            // The opening brackets expected, innermost last.
            let mut open = Vec::new();
            let mut i = end;
            while i > 0 {
                i -= 1;
                match bytes[i] {
                    b'"' => i = string_start_back(bytes, i)?,
                    b'}' => open.push(b'{'),
                    b']' => open.push(b'['),
                    b @ (b'{' | b'[') => {
                        if open.pop() != Some(b) {
                            return None;
                        }
                        if open.is_empty() {
                            return Some(i);
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        _ => {
            let start = bytes[..end]
                .iter()
                .rposition(|b| {
                    matches!(b, b':' | b',' | b'[' | b'{' | b' ' | b'\t' | b'\n' | b'\r')
                })
                .map_or(0, |at| at + 1);
            (start < end).then_some(start)
        }
    }
}

fn skip_space(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Just past the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> Option<usize> {
    match bytes.get(at)? {
        b'"' => string_end(bytes, at + 1),
        b'{' | b'[' => {
            // The closing brackets expected, innermost last: `{]` is not JSON.
            let mut open = Vec::new();
            let mut i = at;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = string_end(bytes, i + 1)?;
                        continue;
                    }
                    b'{' => open.push(b'}'),
                    b'[' => open.push(b']'),
                    b'}' | b']' => {
                        if open.pop() != Some(b) {
                            return None;
                        }
                        if open.is_empty() {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            None
        }
        _ => {
            let end = bytes[at..]
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .map_or(bytes.len(), |n| at + n);
            // A bare value is a number or a literal; what else it is, the caller's parse says.
            (end > at).then_some(end)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn split(text: &str) -> Option<Vec<(String, String)>> {
        members(text.as_bytes()).map(|found| {
            found
                .into_iter()
                .map(|m| (text[m.key].to_owned(), text[m.value].to_owned()))
                .collect()
        })
    }

    #[test]
    fn members_are_found_with_their_spacing_left_out() {
        let text = r#" { "a" : 1 ,"b":{"c":["}",{"d":"\"]"}]}, "e":"x\\" ,"f":null}  "#;
        assert_eq!(
            split(text).unwrap(),
            [
                ("\"a\"", "1"),
                ("\"b\"", r#"{"c":["}",{"d":"\"]"}]}"#),
                ("\"e\"", r#""x\\""#),
                ("\"f\"", "null")
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(split("{}").unwrap(), []);
    }

    #[test]
    fn what_is_not_one_object_is_refused() {
        for text in [
            "[1]",
            "{\"a\":1",
            "{\"a\":1}{",
            "{\"a\" 1}",
            "{a:1}",
            "{\"a\":[1}}",
            "{\"a\":\"open}",
            "{\"a\":1,}",
            "{\"a\":}",
        ] {
            assert_eq!(members(text.as_bytes()), None, "{text}");
        }
    }

    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            "[ -~\\\\\"{}\\[\\]é😀]{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
                prop::collection::vec(("[a-z{}\\[\\]\"\\\\:,]{0,6}", inner), 0..6)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Every member, keys and values as serde_json reads them, written compact or pretty.
        #[test]
        fn members_agree_with_serde_json(
            object in prop::collection::vec(("[a-z_\"\\\\{]{0,8}", json()), 0..8),
            pretty in any::<bool>(),
        ) {
            let object: serde_json::Map<String, Value> = object.into_iter().collect();
            let value = Value::Object(object.clone());
            let text = if pretty {
                serde_json::to_string_pretty(&value).unwrap()
            } else {
                value.to_string()
            };
            let found = members(text.as_bytes()).expect("an object");
            // Read backwards from the closing brace, member by member, the same members.
            let bytes = text.as_bytes();
            let mut end = bytes.iter().rposition(|&b| b == b'}').unwrap();
            for member in found.iter().rev() {
                let (back, delimiter) = member_before(bytes, end).expect("a member");
                prop_assert_eq!(&back, member);
                end = delimiter;
            }
            if !found.is_empty() {
                prop_assert_eq!(bytes[end], b'{');
            }
            prop_assert_eq!(found.len(), object.len());
            for (member, (key, value)) in found.iter().zip(&object) {
                let read: String = serde_json::from_str(&text[member.key.clone()]).unwrap();
                prop_assert_eq!(&read, key);
                let read: Value = serde_json::from_str(&text[member.value.clone()]).unwrap();
                prop_assert_eq!(&read, value);
            }
        }
    }
}
