//! The pieces dialects are written with: JSON as `JSON.stringify` prints it, XML escapes, and the
//! two escapes oh-my-pi applies to a whole transcript (`<conversation>` tags inside it, harmony's
//! tokens); Python and Gemma literals are in [`super::literals`]. Each writer has its reader, and
//! the pair round-trips what the writer wrote.

pub(super) use super::literals::{
    gemma_entries, parse_gemma, parse_gemma_object, parse_python, write_gemma, write_python,
};

use serde_json::{Map, Number, Value};

use super::{Message, Role};
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

// ---- Writers' turns ----------------------------------------------------------------------------
/// A conversation's messages as a writer takes them: a message a turn, and consecutive tool
/// results together (most markups write them as one turn).
pub(super) enum Turn<'a> {
    User(&'a Message),
    Developer(&'a Message),
    Assistant(&'a Message),
    Results(&'a [Message]),
}

/// The turns of `messages`, in order (peekable: a markup may write an assistant's results inside
/// its turn).
pub(super) fn turns(messages: &[Message]) -> std::iter::Peekable<impl Iterator<Item = Turn<'_>>> {
    let mut rest = messages;
    std::iter::from_fn(move || {
        let message = rest.first()?;
        let taken = match message.role {
            Role::ToolResult => rest
                .iter()
                .take_while(|m| m.role == Role::ToolResult)
                .count(),
            _ => 1,
        };
        let (turn, after) = rest.split_at(taken);
        rest = after;
        Some(match message.role {
            Role::User => Turn::User(message),
            Role::Developer => Turn::Developer(message),
            Role::Assistant => Turn::Assistant(message),
            Role::ToolResult => Turn::Results(turn),
        })
    })
    .peekable()
}

/// The opening and closing of an assistant's reasoning in the ChatML-like markups.
pub(super) const THINK_OPEN: &str = "<think>\n";
pub(super) const THINK_CLOSE: &str = "\n</think>";

/// A tool result in the ChatML-like markups (Qwen3, Hermes, GLM).
pub(super) const RESPONSE_OPEN: &str = "<tool_response>\n";
pub(super) const RESPONSE_CLOSE: &str = "\n</tool_response>";

/// `text` between `open` and `close` on `out`, when there is any (an assistant's reasoning).
pub(super) fn push_wrapped(out: &mut String, open: &str, text: &str, close: &str) {
    if !text.is_empty() {
        out.push_str(open);
        out.push_str(text);
        out.push_str(close);
    }
}

/// Each result's text between `open` and `close`, one after another on lines of their own.
pub(super) fn results_joined(results: &[Message], open: &str, close: &str) -> String {
    results
        .iter()
        .map(|r| format!("{open}{}{close}", r.text))
        .collect::<Vec<_>>()
        .join("\n")
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
