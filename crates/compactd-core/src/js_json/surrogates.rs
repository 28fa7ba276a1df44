//! Lone surrogates: JavaScript strings may hold half of a surrogate pair, and `JSON.stringify`
//! writes it as an escape that `serde_json` refuses. Read them as U+FFFD, or keep them through a
//! parse and print (the v1/v2 migration).

/// JavaScript strings are UTF-16 and may hold an unpaired surrogate: pi truncates tool output at
/// 2000 UTF-16 units and so cuts emoji in half. `JSON.stringify` writes such a unit as an escape
/// (`"\ud83d"`), which is valid JSON but has no Unicode scalar value, so `serde_json` refuses it.
///
/// Returns `bytes` with every lone-surrogate escape replaced by `\ufffd`: the same length (error
/// columns stay right), and U+FFFD is one UTF-16 unit like the lone surrogate, so token estimates
/// and truncation counts do not move. Paired escapes (`\ud83d\ude00`) are left alone. Borrows when
/// there is nothing to replace, which is nearly always.
pub fn replace_lone_surrogates(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let lone = lone_surrogate_escapes(bytes);
    if lone.is_empty() {
        return std::borrow::Cow::Borrowed(bytes);
    }
    let mut fixed = bytes.to_vec();
    overwrite(&mut fixed, lone);
    std::borrow::Cow::Owned(fixed)
}

/// [`replace_lone_surrogates`] on a buffer of its own: each lone surrogate's escape overwritten
/// where it stands (the same length).
pub fn replace_lone_surrogates_in_place(bytes: &mut [u8]) {
    let lone = lone_surrogate_escapes(bytes);
    overwrite(bytes, lone);
}

/// Each escape at `lone` made `\ufffd`.
fn overwrite(bytes: &mut [u8], lone: Vec<usize>) {
    for at in lone {
        bytes[at + 2..at + 6].copy_from_slice(b"fffd");
    }
}

/// [`replace_lone_surrogates`] for text.
pub fn replace_lone_surrogates_str(text: &str) -> std::borrow::Cow<'_, str> {
    match replace_lone_surrogates(text.as_bytes()) {
        std::borrow::Cow::Borrowed(_) => std::borrow::Cow::Borrowed(text),
        // Only ASCII hex digits were overwritten, inside an ASCII escape.
        std::borrow::Cow::Owned(bytes) => {
            std::borrow::Cow::Owned(String::from_utf8(bytes).expect("still UTF-8"))
        }
    }
}

/// `serde_json::from_slice` that accepts JSON as JavaScript writes it (lone surrogates decode to
/// U+FFFD).
pub fn from_slice<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    serde_json::from_slice(&replace_lone_surrogates(bytes))
}

/// `serde_json::from_str` that accepts JSON as JavaScript writes it.
pub fn from_str<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    serde_json::from_slice(&replace_lone_surrogates(text.as_bytes()))
}

/// Where lone-surrogate escapes start (the index of their backslash), in order.
fn lone_surrogate_escapes(bytes: &[u8]) -> Vec<usize> {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;

    // JavaScript writes valid pairs as raw UTF-8 and escapes only control characters otherwise,
    // so `\u` escapes are rare: one vectorised search settles nearly every input (it was two,
    // for `\ud` and `\uD`: 3 % of planning's instructions). The searcher is built once: building
    // one costs as much as searching a few KB, and every wire request is searched.
    static ESCAPE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\\u"));
    let candidates = ESCAPE
        .find_iter(bytes)
        .filter(|&at| bytes.get(at + 2).is_some_and(|&b| b | 0x20 == b'd'));
    let mut lone = Vec::new();
    let mut paired_low = None;
    for at in candidates {
        if Some(at) == paired_low || !starts_escape(bytes, at) {
            continue;
        }
        let Some(unit) = escaped_unit(bytes, at) else {
            continue;
        };
        match unit {
            0xD800..=0xDBFF => {
                let next = at + 6;
                if escaped_unit(bytes, next).is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) {
                    paired_low = Some(next);
                } else {
                    lone.push(at);
                }
            }
            0xDC00..=0xDFFF => lone.push(at),
            _ => {}
        }
    }
    lone
}

/// Whether the backslash at `at` begins an escape: it is not itself escaped by an odd run of
/// backslashes before it.
fn starts_escape(bytes: &[u8], at: usize) -> bool {
    bytes[..at]
        .iter()
        .rev()
        .take_while(|&&b| b == b'\\')
        .count()
        % 2
        == 0
}

/// The UTF-16 unit of a `\uXXXX` escape at `at`.
fn escaped_unit(bytes: &[u8], at: usize) -> Option<u16> {
    let escape = bytes.get(at..at + 6)?;
    if &escape[..2] != b"\\u" {
        return None;
    }
    let hex = std::str::from_utf8(&escape[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

/// Reading and rewriting a line whose strings may hold lone surrogates, keeping them: the v1/v2
/// migration re-prints lines as `JSON.stringify` would, and JavaScript prints a lone surrogate as
/// its escape again. Each lone escape is carried through `serde_json` as a noncharacter
/// (U+FDD0, reserved for internal use) followed by its four hex digits, and turned back into the
/// escape when the line is printed.
pub mod preserving {
    use serde_json::Value;

    const MARK: char = '\u{FDD0}';

    /// Parses `text`, marking lone surrogates. A text that already holds the mark (vanishingly
    /// rare) has its lone surrogates decoded as U+FFFD instead.
    pub fn parse(text: &str) -> serde_json::Result<Value> {
        let lone = super::lone_surrogate_escapes(text.as_bytes());
        if lone.is_empty() {
            // Nothing to mark or replace (not searched for a second time by `from_str`: every
            // argument of every call a prompt's conversation holds is parsed here).
            return serde_json::from_str(text);
        }
        if text.contains(MARK) || text.contains("\\ufdd0") {
            return super::from_str(text);
        }
        let mut marked = String::with_capacity(text.len() + lone.len() * 4);
        let mut start = 0;
        for at in lone {
            marked.push_str(&text[start..at]);
            marked.push_str("\\ufdd0");
            marked.push_str(&text[at + 2..at + 6].to_ascii_lowercase());
            start = at + 6;
        }
        marked.push_str(&text[start..]);
        serde_json::from_str(&marked)
    }

    /// `JSON.stringify(value)` with marked lone surrogates printed as escapes again.
    pub fn stringify(value: &Value) -> String {
        let text = crate::js_json::stringify(value);
        if !text.contains(MARK) {
            return text;
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(MARK) {
            out.push_str(&rest[..at]);
            let after = &rest[at + MARK.len_utf8()..];
            match after.get(..4) {
                Some(hex) if hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                    out.push_str("\\u");
                    out.push_str(hex);
                    rest = &after[4..];
                }
                _ => {
                    out.push(MARK);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::js_json::utf16_len;
    use serde_json::Value;

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters_of_the_same_length() {
        let cases = [
            // Written by JSON.stringify for "x".slice(0,2) of "x😀": a lone high surrogate.
            (r#"{"t":"x\ud83d"}"#, r#"{"t":"x\ufffd"}"#),
            (r#"{"t":"\ude00 low first"}"#, r#"{"t":"\ufffd low first"}"#),
            (r#"{"t":"\uD83D"}"#, r#"{"t":"\ufffd"}"#),
            // A high surrogate followed by something that is not a low one.
            (r#"["\ud83d\u0041"]"#, r#"["\ufffd\u0041"]"#),
            (r#"["\ud83d\ud83d\ude00"]"#, r#"["\ufffd\ud83d\ude00"]"#),
        ];
        for (input, expected) in cases {
            let fixed = replace_lone_surrogates(input.as_bytes());
            assert_eq!(std::str::from_utf8(&fixed).unwrap(), expected, "{input}");
            assert_eq!(fixed.len(), input.len());
        }
        for untouched in [
            r#"{"t":"\ud83d\ude00 pair"}"#,
            r#"{"t":"an escaped backslash: \\ud83d"}"#,
            r#"{"t":"\\\ud83d\ude00"}"#,
            r#"{"t":"plain"}"#,
        ] {
            assert!(
                matches!(
                    replace_lone_surrogates(untouched.as_bytes()),
                    std::borrow::Cow::Borrowed(_)
                ),
                "{untouched}"
            );
        }
        let v: Value = from_str(r#"{"t":"ab\ud83d"}"#).unwrap();
        assert_eq!(v["t"], "ab\u{FFFD}");
        assert_eq!(
            utf16_len(v["t"].as_str().unwrap()),
            3,
            "one unit, like the surrogate"
        );
        assert!(serde_json::from_str::<Value>(r#"{"t":"ab\ud83d"}"#).is_err());
    }

    #[test]
    fn lone_surrogates_survive_a_parse_and_print_as_javascript_prints_them() {
        let line = r#"{"a":"cut \ud83d","b":"pair \ud83d\ude00 and low \uDE00","n":0.0009562500000000001}"#;
        let value = preserving::parse(line).unwrap();
        assert_eq!(
            preserving::stringify(&value),
            r#"{"a":"cut \ud83d","b":"pair 😀 and low \ude00","n":0.0009562500000000001}"#
        );
        // A line without lone surrogates prints as plain stringify.
        let plain = preserving::parse(r#"{"a":"\ufdd0x"}"#).unwrap();
        assert_eq!(preserving::stringify(&plain), "{\"a\":\"\u{FDD0}x\"}");
    }
}
