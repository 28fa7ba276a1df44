//! The pieces dialects are written with: JSON as `JSON.stringify` prints it, XML escapes, and the
//! two escapes oh-my-pi applies to a whole transcript (`<conversation>` tags inside it, harmony's
//! tokens); Python and Gemma literals are in [`super::literals`]. Each writer has its reader, and
//! the pair round-trips what the writer wrote.

pub(super) use super::literals::{
    gemma_entries, parse_gemma, parse_gemma_object, parse_python, write_gemma, write_python,
};

use serde_json::{Map, Number, Value};

use crate::js_json;

// ---- JSON ------------------------------------------------------------------------------------

/// Length in bytes of the JSON value at the start of `text` (a string, an object or array, or a
/// bare number or literal), without parsing it.
pub(super) fn json_extent(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    match bytes.first()? {
        b'"' => js_json::string_end(bytes, 1),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = 0;
            while i < bytes.len() {
                match bytes[i] {
                    b'"' => {
                        i = js_json::string_end(bytes, i + 1)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
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
            let end = bytes
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b'<' | b')' | b' ' | b'\n'))
                .unwrap_or(bytes.len());
            (end > 0).then_some(end)
        }
    }
}

/// A JSON value read as JavaScript reads it, lone surrogates kept for writing back.
pub(super) fn parse_json(text: &str) -> Option<Value> {
    js_json::preserving::parse(text).ok()
}

/// `JSON.stringify(value)` (lone surrogates printed as their escapes again).
pub(super) fn stringify(value: &Value) -> String {
    js_json::preserving::stringify(value)
}

/// Arguments as the object `JSON.stringify` prints.
pub(super) fn arguments_object(arguments: &[(String, Value)]) -> Value {
    Value::Object(
        arguments
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Map<String, Value>>(),
    )
}

/// The entries of a JSON object (anything else has none).
pub(super) fn object_entries(value: Value) -> Vec<(String, Value)> {
    match value {
        Value::Object(map) => map.into_iter().collect(),
        _ => Vec::new(),
    }
}

/// A number as JavaScript's `String(n)` prints it.
pub(super) fn js_number(n: &Number) -> String {
    let mut out = String::new();
    js_json::write_number(&mut out, n);
    out
}

// ---- XML -----------------------------------------------------------------------------------

/// An attribute value: `&`, `"`, `<`, `>` escaped.
pub(super) fn escape_attribute(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Element text: `&`, `<`, `>` escaped.
pub(super) fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The inverse of both escapes.
pub(super) fn unescape(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

// ---- whole-transcript escapes -----------------------------------------------------------------

/// oh-my-pi escapes the tags that frame a prompt's parts wherever they appear inside it
/// (`<conversation>`, `</previous-summary >`, any case, spaces allowed): `<` becomes `&lt;`.
pub(super) fn escape_frame_tags(text: &str) -> std::borrow::Cow<'_, str> {
    frame_tags().replace_all(text, |c: &regex::Captures<'_>| {
        format!("&lt;{}", &c[0][1..])
    })
}

/// The inverse of [`escape_frame_tags`].
pub(super) fn unescape_frame_tags(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.contains("&lt;") {
        return std::borrow::Cow::Borrowed(text);
    }
    escaped_frame_tags().replace_all(text, |c: &regex::Captures<'_>| format!("<{}", &c[0][4..]))
}

fn frame_tags() -> &'static regex::Regex {
    static TAGS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)<\s*/?\s*(?:conversation|previous-summary)\s*>").expect("valid")
    });
    &TAGS
}

fn escaped_frame_tags() -> &'static regex::Regex {
    static TAGS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?i)&lt;\s*/?\s*(?:conversation|previous-summary)\s*>").expect("valid")
    });
    &TAGS
}

/// Harmony's control tokens, which oh-my-pi escapes in a transcript (`<|end|>` → `<\|end\|>`).
const HARMONY_TOKENS: [&str; 7] = [
    "start",
    "end",
    "message",
    "channel",
    "constrain",
    "return",
    "call",
];

pub(super) fn escape_harmony(text: &str) -> String {
    let mut out = text.to_owned();
    for token in HARMONY_TOKENS {
        out = out.replace(&format!("<|{token}|>"), &format!("<\\|{token}\\|>"));
    }
    out
}

pub(super) fn unescape_harmony(text: &str) -> String {
    let mut out = text.to_owned();
    for token in HARMONY_TOKENS {
        out = out.replace(&format!("<\\|{token}\\|>"), &format!("<|{token}|>"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_tags_are_escaped_and_unescaped() {
        let text = "see <conversation> and </Previous-Summary > and <other>";
        let escaped = escape_frame_tags(text);
        assert_eq!(
            escaped,
            "see &lt;conversation> and &lt;/Previous-Summary > and <other>"
        );
        assert_eq!(unescape_frame_tags(&escaped), text);
        assert_eq!(
            unescape_harmony(&escape_harmony("<|start|>user<|message|>x<|end|>")),
            "<|start|>user<|message|>x<|end|>"
        );
    }

    #[test]
    fn json_extents_end_where_the_value_does() {
        assert_eq!(json_extent(r#""a\"b</p>"</p>"#), Some(10));
        assert_eq!(json_extent(r#"{"a":[1,"]}"]}x"#), Some(14));
        assert_eq!(json_extent("12</p>"), Some(2));
        assert_eq!(json_extent("\"open"), None);
    }
}
