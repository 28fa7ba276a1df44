//! JSON printed the way JavaScript's `JSON.stringify` prints it, and string lengths counted the way
//! JavaScript's `string.length` counts them.
//!
//! The reference implementation measures tool-call arguments with `JSON.stringify(args).length` and
//! renders them with `JSON.stringify(value)`, and it rewrites migrated session files with
//! `JSON.stringify(entry)`. Exact parity therefore needs three JavaScript behaviours that
//! `serde_json` does not have (spec §0.2):
//!
//! * numbers: `1.0` prints as `1`, `1e21` as `1e+21`, `-0` as `0`, integers above 2^53 lose
//!   precision exactly as an IEEE double does;
//! * key order: integer-like keys ("array indices") come first in ascending numeric order, all other
//!   keys follow in insertion order (`serde_json` with `preserve_order` keeps plain insertion order);
//! * lengths in UTF-16 code units rather than bytes or chars.

pub mod escape;
mod members;
mod surrogates;

pub use members::{Member, member_before, members};

pub use surrogates::{
    from_slice, from_str, preserving, replace_lone_surrogates, replace_lone_surrogates_in_place,
    replace_lone_surrogates_str,
};

use serde_json::{Map, Number, Value};

/// Where the JSON string whose text starts at `from` (just after its opening quote) ends: just
/// past its closing quote, the first one no backslash escapes; `None` when the input ends first.
/// Found a vector at a time: the strings of a session line, a call's arguments or a tool's JSON
/// are long, and walking them a byte at a time was a visible part of reading them.
pub fn string_end(bytes: &[u8], mut from: usize) -> Option<usize> {
    loop {
        let at = from + memchr::memchr2(b'"', b'\\', bytes.get(from..)?)?;
        if bytes[at] == b'"' {
            return Some(at + 1);
        }
        // A backslash and the byte it escapes.
        from = at + 2;
    }
}

/// Length of `s` in UTF-16 code units, i.e. JavaScript's `s.length`.
///
/// Every UTF-8 sequence yields one unit except 4-byte sequences (characters above U+FFFF), which
/// yield a surrogate pair. Counting lead bytes this way is branch-free and vectorises, which
/// matters because the planner measures every message of a session.
pub fn utf16_len(s: &str) -> usize {
    // Most text is ASCII; `is_ascii` checks a word at a time.
    if s.is_ascii() {
        return s.len();
    }
    // Each byte that starts a character is a unit, and the lead byte of a four-byte character
    // (0xF0 and up) one more: counted into bytes over blocks too short to overflow one (at most
    // two a byte), which the compiler turns into vector compares — summed into a `usize` a byte at
    // a time, this was 3 % of planning a 21 MB session (tool results and texts with an accent or
    // an emoji are measured for every token estimate).
    const BLOCK: usize = 127;
    s.as_bytes()
        .chunks(BLOCK)
        .map(|block| {
            let units = block.iter().fold(0u8, |units, &b| {
                units + u8::from((b as i8) >= -0x40) + u8::from(b >= 0xF0)
            });
            usize::from(units)
        })
        .sum()
}

/// Byte offset in `s` of the UTF-16 offset `units`, rounded down to a character boundary.
///
/// When `units` falls between the two halves of a surrogate pair, the whole character is left out
/// (compactd's documented choice for a cut that would split a pair: drop the broken half).
/// Returns `s.len()` when `s` is shorter than `units`.
pub fn utf16_prefix_byte_len(s: &str, units: usize) -> usize {
    // Fast path: ASCII-only prefixes map units to bytes one to one (`is_ascii` checks a word at
    // a time; every tool result over 2,000 units is cut here).
    let bytes = s.as_bytes();
    let prefix = &bytes[..units.min(bytes.len())];
    let ascii_run = if prefix.is_ascii() {
        prefix.len()
    } else {
        prefix.iter().take_while(|b| b.is_ascii()).count()
    };
    if ascii_run == units || ascii_run == bytes.len() {
        return ascii_run;
    }
    let mut seen = ascii_run;
    for (offset, ch) in s[ascii_run..].char_indices() {
        let width = ch.len_utf16();
        if seen + width > units {
            return ascii_run + offset;
        }
        seen += width;
    }
    s.len()
}

/// Compares two strings by UTF-16 code units, as JavaScript's default `Array.prototype.sort` does.
pub fn cmp_utf16(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// `JSON.stringify(value)` as a new string.
pub fn stringify(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// `JSON.stringify(value).length` without building the string. Key order does not change the
/// length, so objects are measured in stored order.
pub fn stringified_utf16_len(value: &Value) -> usize {
    stringified_size(value, utf16_len)
}

/// The bytes of `JSON.stringify(value)` in UTF-8, without building the string: what a buffer the
/// text is written into needs.
pub fn stringified_len(value: &Value) -> usize {
    stringified_size(value, str::len)
}

/// The size of `JSON.stringify(value)`, its texts measured by `text`.
fn stringified_size(value: &Value, text: impl Fn(&str) -> usize + Copy) -> usize {
    let literal = |s: &str| 2 + text(s) + escape::added_len(s);
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let mut text = String::new();
            write_number(&mut text, n);
            text.len()
        }
        Value::String(s) => literal(s),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1)
                + items
                    .iter()
                    .map(|v| stringified_size(v, text))
                    .sum::<usize>()
        }
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| literal(k) + 1 + stringified_size(v, text))
                    .sum::<usize>()
        }
    }
}

/// Appends `JSON.stringify(value)` to `out`.
pub fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => escape::push_quoted(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (key, item)) in js_key_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                escape::push_quoted(out, key);
                out.push(':');
                write_value(out, item);
            }
            out.push('}');
        }
    }
}

/// The entries of `map` in the order JavaScript enumerates an object's own keys: array-index keys
/// ascending, then the rest in insertion order. `Object.entries` uses the same order, so the
/// conversation serializer calls this too.
pub fn js_key_order(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    if entries.iter().any(|(k, _)| array_index(k).is_some()) {
        // Stable sort: non-index keys keep their relative (insertion) order.
        entries.sort_by_key(|(k, _)| match array_index(k) {
            Some(i) => (0u8, i),
            None => (1u8, 0),
        });
    }
    entries
}

/// `Some(n)` when `key` is a canonical array index: "0" or digits without a leading zero, below
/// 2^32 − 1 (ECMAScript's definition of an array index).
fn array_index(key: &str) -> Option<u32> {
    let bytes = key.as_bytes();
    if bytes.is_empty() || bytes.len() > 10 || !bytes.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if bytes.len() > 1 && bytes[0] == b'0' {
        return None;
    }
    let n: u64 = key.parse().ok()?;
    (n < u64::from(u32::MAX)).then_some(n as u32)
}

/// Appends a JSON number formatted as JavaScript's `Number.prototype.toString` would.
pub fn write_number(out: &mut String, n: &Number) {
    const MAX_SAFE: u64 = 1 << 53;
    // Integers a double holds exactly print as themselves.
    if let Some(u) = n.as_u64().filter(|&u| u <= MAX_SAFE) {
        out.push_str(&u.to_string());
        return;
    }
    if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= MAX_SAFE) {
        out.push_str(&i.to_string());
        return;
    }
    // Everything else is what JSON.parse would have produced: the nearest double.
    write_f64(out, n.as_f64().unwrap_or(0.0));
}

/// Appends a double formatted as JavaScript's `Number.prototype.toString` would. JSON has no NaN or
/// infinity; `JSON.stringify` prints them as `null`.
pub fn write_f64(out: &mut String, f: f64) {
    if f.is_finite() {
        out.push_str(ryu_js::Buffer::new().format_finite(f));
    } else {
        out.push_str("null");
    }
}

/// Serializes a double as JavaScript prints it: integral values without a fraction (`180820`, not
/// `180820.0`), for token counts that are doubles in the reference.
pub fn serialize_f64<S: serde::Serializer>(f: f64, serializer: S) -> Result<S::Ok, S::Error> {
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;
    if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE {
        serializer.serialize_i64(f as i64)
    } else {
        serializer.serialize_f64(f)
    }
}

/// A double as a JSON number the way JavaScript prints it: integral values as integers
/// (`1733696465306`, not `1733696465306.0`), so epoch-millisecond timestamps and token counts read
/// back as pi's do.
pub fn number_value(f: f64) -> Value {
    const MAX_SAFE: f64 = 9_007_199_254_740_992.0;
    if f.is_finite() && f.fract() == 0.0 && f.abs() <= MAX_SAFE {
        Value::from(f as i64)
    } else {
        serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

/// `serialize_with` form of [`serialize_f64`], for `f64` fields.
pub fn serialize_number<S: serde::Serializer>(
    value: &f64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serialize_f64(*value, serializer)
}

/// A double formatted as JavaScript's `String(f)`.
pub fn f64_to_js_string(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    ryu_js::Buffer::new().format_finite(f).to_owned()
}

// ---------------------------------------------------------------------------------------------
// Lone surrogates

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn js(text: &str) -> String {
        stringify(&serde_json::from_str(text).unwrap())
    }

    #[test]
    fn numbers_print_as_javascript_prints_them() {
        assert_eq!(js("1.0"), "1");
        assert_eq!(js("-0"), "0");
        assert_eq!(js("-0.0"), "0");
        assert_eq!(js("1e21"), "1e+21");
        assert_eq!(js("1e20"), "100000000000000000000");
        assert_eq!(js("0.000001"), "0.000001");
        assert_eq!(js("0.0000001"), "1e-7");
        assert_eq!(js("1.5e-7"), "1.5e-7");
        assert_eq!(js("12345678901234567890"), "12345678901234567000");
        assert_eq!(js("9007199254740993"), "9007199254740992");
        assert_eq!(js("-42"), "-42");
        assert_eq!(js("0.1"), "0.1");
        assert_eq!(js("123.456"), "123.456");
    }

    #[test]
    fn integer_like_keys_come_first_as_in_javascript() {
        assert_eq!(
            js(r#"{"b":1,"1":2,"a":3,"0":4}"#),
            r#"{"0":4,"1":2,"b":1,"a":3}"#
        );
        // Not array indices: leading zero, negative, too large.
        assert_eq!(
            js(r#"{"b":1,"01":2,"-1":3,"4294967295":4,"4294967294":5}"#),
            r#"{"4294967294":5,"b":1,"01":2,"-1":3,"4294967295":4}"#
        );
    }

    #[test]
    fn duplicate_keys_keep_first_position_and_last_value() {
        assert_eq!(js(r#"{"a":1,"b":2,"a":3}"#), r#"{"a":3,"b":2}"#);
    }

    #[test]
    fn strings_escape_as_javascript_does() {
        let v = json!("q\"b\\n\nt\tc\u{1}\u{1f}\u{7f}é😀\u{8}\u{c}\r");
        assert_eq!(
            stringify(&v),
            "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001f\u{7f}é😀\\b\\f\\r\""
        );
    }

    #[test]
    fn stringified_length_matches_the_printed_string() {
        for text in [
            r#"{"path":"src/a.rs","n":1.0,"big":1e21,"neg":-0,"s":"q\"\\\n\u0001é😀","a":[1,true,null,{}],"1":false}"#,
            r#"[]"#,
            r#""""#,
            r#"12345678901234567890"#,
            r#"{"a":{"b":{"c":[0.1,2.5e-8,"x"]}}}"#,
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                stringified_utf16_len(&v),
                utf16_len(&stringify(&v)),
                "{text}"
            );
            assert_eq!(stringified_len(&v), stringify(&v).len(), "{text}");
        }
    }

    #[test]
    fn utf16_length_counts_surrogate_pairs_twice() {
        assert_eq!(utf16_len(""), 0);
        assert_eq!(utf16_len("abc"), 3);
        assert_eq!(utf16_len("é"), 1);
        assert_eq!(utf16_len("€"), 1);
        assert_eq!(utf16_len("😀"), 2);
        assert_eq!(utf16_len("a😀b"), 4);
        let s = "x😀é€\u{10FFFF}";
        assert_eq!(utf16_len(s), s.encode_utf16().count());
    }

    proptest::proptest! {
        #[test]
        fn a_utf16_prefix_ends_at_the_last_whole_character_within_it(
            s in "(\\PC|[é€😀]){0,60}",
            units in 0usize..80,
        ) {
            // Characters are taken while their units fit.
            let mut expected = 0;
            let mut seen = 0;
            for c in s.chars() {
                seen += c.len_utf16();
                if seen > units {
                    break;
                }
                expected += c.len_utf8();
            }
            proptest::prop_assert_eq!(utf16_prefix_byte_len(&s, units), expected);
        }

        #[test]
        fn utf16_length_is_javascripts_length(s in "(\\PC|[é€😀\u{10FFFF}]){0,400}") {
            proptest::prop_assert_eq!(utf16_len(&s), s.encode_utf16().count());
        }
    }

    #[test]
    fn utf16_prefix_drops_a_split_surrogate_pair() {
        assert_eq!(utf16_prefix_byte_len("abcdef", 3), 3);
        assert_eq!(utf16_prefix_byte_len("ab", 3), 2);
        assert_eq!(utf16_prefix_byte_len("aé", 2), 3);
        // "a😀": units a=1, 😀=2. A cut at 2 would split the pair: drop it.
        assert_eq!(utf16_prefix_byte_len("a😀", 2), 1);
        assert_eq!(utf16_prefix_byte_len("a😀", 3), 5);
    }

    #[test]
    fn sorting_by_utf16_differs_from_code_point_order_above_the_bmp() {
        // U+FF5E (one unit 0xFF5E) sorts after U+1F600 (units 0xD83D 0xDE00) in JavaScript.
        assert_eq!(cmp_utf16("\u{FF5E}", "😀"), std::cmp::Ordering::Greater);
        assert!("\u{FF5E}" < "😀");
    }
}
