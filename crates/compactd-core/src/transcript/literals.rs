//! Python literals (the Gemini dialect's `tool_code`) and Gemma 4's `<|"|>`-quoted values, as
//! oh-my-pi writes them, with a reader for each that round-trips what the writer wrote.

use serde_json::{Number, Value};

use super::markup::js_number;
use crate::js_json;

// ---- Python literals (Gemini's tool_code) -----------------------------------------------------

/// A value as oh-my-pi writes it in a `tool_code` call: `None`, `True`, numbers as JavaScript
/// prints them, double-quoted strings with `\\ \" \n \r \t` escaped, `[a, b]`, `{"k": v}`.
pub(super) fn write_python(value: &Value) -> String {
    let mut out = String::new();
    python_value(&mut out, value);
    out
}

fn python_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&js_number(n)),
        Value::String(s) => python_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in js_json::js_key_order(map).into_iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_string(out, k);
                out.push_str(": ");
                python_value(out, v);
            }
            out.push('}');
        }
    }
}

fn python_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            other => out.push(other),
        }
    }
    out.push('"');
}

/// The Python literal at the start of `text` and its length; also reads JSON (`null`, `true`,
/// `false`) and single-quoted strings, as models write them.
pub(super) fn parse_python(text: &str) -> Option<(Value, usize)> {
    let mut reader = Literal { text, at: 0 };
    let value = reader.value(Syntax::Python)?;
    Some((value, reader.at))
}

// ---- Gemma 4 values ---------------------------------------------------------------------------

/// The `<|"|>` token Gemma 4 quotes strings with.
pub(super) const GEMMA_QUOTE: &str = "<|\"|>";

/// A value as oh-my-pi writes it for Gemma 4: strings between `<|"|>` tokens, unescaped; bare
/// numbers, `true`, `false`, `null`; `[a,b]`; `{key:value,…}` with bare keys.
pub(super) fn write_gemma(value: &Value) -> String {
    let mut out = String::new();
    gemma_value(&mut out, value);
    out
}

fn gemma_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&js_number(n)),
        Value::String(s) => {
            out.push_str(GEMMA_QUOTE);
            out.push_str(s);
            out.push_str(GEMMA_QUOTE);
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                gemma_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            gemma_entries(out, js_json::js_key_order(map).into_iter());
            out.push('}');
        }
    }
}

/// `key:value` pairs joined by commas.
pub(super) fn gemma_entries<'a>(
    out: &mut String,
    entries: impl Iterator<Item = (&'a String, &'a Value)>,
) {
    for (i, (k, v)) in entries.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(k);
        out.push(':');
        gemma_value(out, v);
    }
}

/// The Gemma 4 value at the start of `text` and its length.
pub(super) fn parse_gemma(text: &str) -> Option<(Value, usize)> {
    let mut reader = Literal { text, at: 0 };
    let value = reader.value(Syntax::Gemma)?;
    Some((value, reader.at))
}

/// `{key:value,…}` at the start of `text`: its entries in order and its length.
pub(super) fn parse_gemma_object(text: &str) -> Option<(Vec<(String, Value)>, usize)> {
    let mut reader = Literal { text, at: 0 };
    let entries = reader.object(Syntax::Gemma)?;
    Some((entries, reader.at))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    Python,
    Gemma,
}

/// A small reader of the two literal syntaxes.
struct Literal<'a> {
    text: &'a str,
    at: usize,
}

impl Literal<'_> {
    fn rest(&self) -> &str {
        &self.text[self.at..]
    }

    fn skip_spaces(&mut self, syntax: Syntax) {
        if syntax == Syntax::Python {
            let trimmed = self.rest().trim_start_matches([' ', '\n', '\t', '\r']);
            self.at = self.text.len() - trimmed.len();
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        if self.rest().starts_with(token) {
            self.at += token.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, syntax: Syntax) -> Option<Value> {
        self.skip_spaces(syntax);
        let text = self.text;
        let rest = &text[self.at..];
        if syntax == Syntax::Gemma && rest.starts_with(GEMMA_QUOTE) {
            let body = &rest[GEMMA_QUOTE.len()..];
            let end = body.find(GEMMA_QUOTE)?;
            let value = Value::String(body[..end].to_owned());
            self.at += GEMMA_QUOTE.len() * 2 + end;
            return Some(value);
        }
        match rest.as_bytes().first()? {
            b'"' | b'\'' if syntax == Syntax::Python => self.python_string().map(Value::String),
            b'[' => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_spaces(syntax);
                    if self.eat("]") {
                        return Some(Value::Array(items));
                    }
                    if !items.is_empty() && !self.eat(",") {
                        return None;
                    }
                    self.skip_spaces(syntax);
                    if self.eat("]") {
                        return Some(Value::Array(items));
                    }
                    items.push(self.value(syntax)?);
                }
            }
            b'{' => self
                .object(syntax)
                .map(|entries| Value::Object(entries.into_iter().collect())),
            _ => self.bare(syntax),
        }
    }

    /// `{…}` with quoted (Python) or bare (Gemma) keys.
    fn object(&mut self, syntax: Syntax) -> Option<Vec<(String, Value)>> {
        if !self.eat("{") {
            return None;
        }
        let mut entries = Vec::new();
        loop {
            self.skip_spaces(syntax);
            if self.eat("}") {
                return Some(entries);
            }
            if !entries.is_empty() && !self.eat(",") {
                return None;
            }
            self.skip_spaces(syntax);
            if self.eat("}") {
                return Some(entries);
            }
            let key = match syntax {
                Syntax::Python => self.python_string()?,
                Syntax::Gemma => {
                    let text = self.text;
                    let end = text[self.at..].find(':')?;
                    let key = text[self.at..self.at + end].to_owned();
                    self.at += end;
                    key
                }
            };
            self.skip_spaces(syntax);
            if !self.eat(":") {
                return None;
            }
            let value = self.value(syntax)?;
            entries.push((key, value));
        }
    }

    fn python_string(&mut self) -> Option<String> {
        let text = self.text;
        let rest = &text[self.at..];
        let quote = rest.chars().next()?;
        // A triple-quoted string holds its text as written.
        let triple: String = std::iter::repeat_n(quote, 3).collect();
        if let Some(body) = rest.strip_prefix(triple.as_str()) {
            let end = body.find(triple.as_str())?;
            self.at += 6 + end;
            return Some(body[..end].to_owned());
        }
        let mut out = String::new();
        let mut chars = rest.char_indices().skip(1);
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, escaped) = chars.next()?;
                    match escaped {
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => {
                            let hex: String = (0..4)
                                .filter_map(|_| chars.next())
                                .map(|(_, c)| c)
                                .collect();
                            let unit = u32::from_str_radix(&hex, 16).ok()?;
                            out.push(char::from_u32(unit).unwrap_or('\u{FFFD}'));
                        }
                        other => out.push(other),
                    }
                }
                c if c == quote => {
                    self.at += i + 1;
                    return Some(out);
                }
                other => out.push(other),
            }
        }
        None
    }

    /// A number or a literal word, up to the next delimiter.
    fn bare(&mut self, syntax: Syntax) -> Option<Value> {
        let text = self.text;
        let rest = &text[self.at..];
        let end = rest
            .find([',', ']', '}', ')', ' ', '\n', '<'])
            .unwrap_or(rest.len());
        let word = &rest[..end];
        let value = match (word, syntax) {
            ("None" | "null", _) => Value::Null,
            ("True" | "true", _) => Value::Bool(true),
            ("False" | "false", _) => Value::Bool(false),
            _ => serde_json::from_str::<Number>(word)
                .ok()
                .map(Value::Number)?,
        };
        self.at += end;
        Some(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_literals_round_trip_nested_values() {
        let value = json!({"nested": [1, true, null, {"k": "v \"q\"\n\\"}], "n": 1.5, "s": "x"});
        let text = write_python(&value);
        assert_eq!(
            text,
            r#"{"nested": [1, True, None, {"k": "v \"q\"\n\\"}], "n": 1.5, "s": "x"}"#
        );
        let (read, used) = parse_python(&text).unwrap();
        assert_eq!(read, value);
        assert_eq!(used, text.len());
    }

    #[test]
    fn gemma_values_round_trip() {
        let value =
            json!({"path": "a \"b\" c", "n": 2, "list": ["x", 1, false, null], "o": {"k": "v"}});
        let text = write_gemma(&value);
        assert_eq!(
            text,
            r#"{path:<|"|>a "b" c<|"|>,n:2,list:[<|"|>x<|"|>,1,false,null],o:{k:<|"|>v<|"|>}}"#
        );
        let (read, used) = parse_gemma(&text).unwrap();
        assert_eq!(read, value);
        assert_eq!(used, text.len());
    }
}
