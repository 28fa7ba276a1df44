//! Tool calls written as function calls: pi's `read(path="a.ts"); bash(command="ls", timeout=30)`
//! (arguments as `key=JSON`) and Gemma's ```` ```tool_code ```` lines, which are the same with a
//! `default_api.` prefix, Python literals, and a `[call, call]` list for several calls.

use serde_json::Value;

use super::ToolCall;

/// Parses calls separated by `separator` (`"; "` for pi, `", "` inside Gemma's list); stops
/// quietly at anything it cannot read, keeping the calls read so far.
pub(super) fn parse(mut rest: &str, separator: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    while let Some(open) = rest.find('(') {
        let name = rest[..open].trim();
        let name = name.strip_prefix("default_api.").unwrap_or(name).to_owned();
        rest = &rest[open + 1..];
        let mut arguments = Vec::new();
        loop {
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix(')') {
                rest = after;
                break;
            }
            let Some(eq) = rest.find('=') else {
                return calls;
            };
            let key = rest[..eq].trim().to_owned();
            rest = &rest[eq + 1..];
            let Some(end) = json_value_end(rest) else {
                return calls;
            };
            let Some(value) = literal(&rest[..end]) else {
                return calls;
            };
            rest = &rest[end..];
            arguments.push((key, value));
            rest = rest.strip_prefix(", ").unwrap_or(rest);
        }
        calls.push(ToolCall::new(name, arguments));
        match rest.trim_start().strip_prefix(separator.trim()) {
            Some(after) => rest = after,
            None => break,
        }
    }
    calls
}

/// A JSON value, or one of Python's literals for it.
fn literal(text: &str) -> Option<Value> {
    match text.trim() {
        "True" => Some(Value::Bool(true)),
        "False" => Some(Value::Bool(false)),
        "None" => Some(Value::Null),
        other => crate::js_json::preserving::parse(other).ok(),
    }
}

/// Length of the JSON value at the start of `text`: a string, a bracketed value, or a bare
/// number or literal running to the next `,` or `)`.
pub(super) fn json_value_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                i = crate::js_json::string_end(bytes, i + 1)?;
                if depth == 0 {
                    return Some(i);
                }
                continue;
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            b',' | b')' if depth == 0 => return (i > 0).then_some(i),
            _ => {}
        }
        i += 1;
    }
    (depth == 0 && !text.is_empty()).then_some(text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pi_calls_parse_with_json_arguments() {
        let calls = parse(
            r#"edit(path="a; b.rs", old="x)\"", n=1, o={"k":[1,"]"]}); bash(command="ls", timeout=30)"#,
            "; ",
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "edit");
        assert_eq!(
            calls[0].arguments[0],
            ("path".into(), Value::from("a; b.rs"))
        );
        assert_eq!(calls[0].arguments[1].1, "x)\"");
        assert_eq!(calls[0].arguments.len(), 4);
        assert_eq!(calls[1].arguments[1].1, 30);
    }

    #[test]
    fn a_value_ends_after_its_string_or_brackets_whatever_they_escape() {
        let cases: [(&str, Option<usize>); 12] = [
            (r#""a", b=1"#, Some(3)),
            (r#""a\"b", x"#, Some(6)),
            (r#""a\\", x"#, Some(5)),
            (r#""ends in a backslash\"#, None),
            (r#""never closed"#, None),
            (r#"{"k":["]",")"]}, n=2"#, Some(15)),
            (r#"["a", {"b": "}"}])"#, Some(17)),
            ("30, x=1", Some(2)),
            ("30)", Some(2)),
            ("true", Some(4)),
            (", x", None),
            ("]", None),
        ];
        for (text, end) in cases {
            assert_eq!(json_value_end(text), end, "{text}");
        }
    }

    #[test]
    fn gemma_call_lists_parse_with_python_literals() {
        let calls = parse(
            r#"[default_api.read(path="docs/theme.md"), default_api.bash(command="find . -name \"*.ts\"", verbose=True)]"#
                .trim_start_matches('['),
            ", ",
        );
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "read");
        assert_eq!(calls[0].arg("path"), Some("docs/theme.md"));
        assert_eq!(calls[1].arg("command"), Some("find . -name \"*.ts\""));
        assert_eq!(calls[1].arguments[1].1, true);
    }
}
