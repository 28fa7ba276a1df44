//! The start of an entry's text, for a one-line preview (the console's tree).

use serde_json::Value;

/// Characters a preview keeps.
const PREVIEW_CHARS: usize = 140;

/// A one-line preview of a stored entry line: the message's first text, a summary, a label or a
/// setting; `""` for a line that does not read. Secrets in it are replaced by `redactor`'s
/// placeholders (before it is shortened, so no part of one shows): the console shows previews,
/// and a page is text that leaves compactd as a prompt does.
pub(crate) fn of_line(line: &str, redactor: &compactd_core::redact::Redactor) -> String {
    let Ok(entry) = compactd_core::js_json::from_str::<Value>(line) else {
        return String::new();
    };
    let text = |key: &str| entry.get(key).and_then(Value::as_str).map(str::to_owned);
    let found = match entry.get("type").and_then(Value::as_str) {
        Some("message") => entry.get("message").map(message_text),
        Some("compaction" | "branch_summary") => text("summary"),
        Some("custom_message") => entry.get("content").map(content_text),
        Some("label") => text("label"),
        Some("session_info") => text("name"),
        Some("model_change") => match (text("provider"), text("modelId")) {
            (Some(provider), Some(model)) => Some(format!("{provider}/{model}")),
            (_, model) => model,
        },
        Some("thinking_level_change") => text("thinkingLevel"),
        Some("custom") => text("customType"),
        _ => None,
    };
    let text = found.unwrap_or_default();
    shorten(&redactor.seal(text).into_inner())
}

/// The text of a message: its content, or what a tool call or bash execution did.
fn message_text(message: &Value) -> String {
    match message.get("role").and_then(Value::as_str) {
        Some("bashExecution") => message
            .get("command")
            .and_then(Value::as_str)
            .map(|c| format!("$ {c}"))
            .unwrap_or_default(),
        _ => message.get("content").map(content_text).unwrap_or_default(),
    }
}

/// The first text part of a content (a string or an array of parts); a tool call's name and
/// arguments when there is no text.
fn content_text(content: &Value) -> String {
    if let Some(text) = content.as_str() {
        return text.to_owned();
    }
    let parts = content.as_array().map(Vec::as_slice).unwrap_or_default();
    let text = parts
        .iter()
        .find_map(|part| match part.get("type")?.as_str()? {
            "text" => part.get("text")?.as_str().map(str::to_owned),
            _ => None,
        });
    text.or_else(|| {
        parts
            .iter()
            .find_map(|part| match part.get("type")?.as_str()? {
                "toolCall" => Some(format!(
                    "{}({})",
                    part.get("name")?.as_str()?,
                    part.get("arguments")
                        .map(Value::to_string)
                        .unwrap_or_default()
                )),
                "thinking" => part.get("thinking")?.as_str().map(str::to_owned),
                "image" => Some("[image]".to_owned()),
                _ => None,
            })
    })
    .unwrap_or_default()
}

/// One line of at most [`PREVIEW_CHARS`] characters, whitespace runs folded.
fn shorten(text: &str) -> String {
    let mut out = String::new();
    for (n, word) in text.split_whitespace().enumerate() {
        if n > 0 {
            out.push(' ');
        }
        out.push_str(word);
        if out.chars().count() > PREVIEW_CHARS {
            let cut: String = out.chars().take(PREVIEW_CHARS).collect();
            return format!("{cut}…");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::of_line;

    #[test]
    fn previews_read_each_kind_of_entry() {
        let cases = [
            (
                r#"{"type":"message","id":"a","message":{"role":"user","content":[{"type":"text","text":"fix\n\n  the   crash"}]}}"#,
                "fix the crash",
            ),
            (
                r#"{"type":"message","id":"b","message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"read","arguments":{"path":"a.rs"}}]}}"#,
                r#"read({"path":"a.rs"})"#,
            ),
            (
                r#"{"type":"message","id":"c","message":{"role":"toolResult","content":"cut \ud83d"}}"#,
                "cut \u{fffd}",
            ),
            (
                r#"{"type":"compaction","id":"d","summary":"Goal:\nship it"}"#,
                "Goal: ship it",
            ),
            (
                r#"{"type":"model_change","id":"e","provider":"anthropic","modelId":"claude"}"#,
                "anthropic/claude",
            ),
            ("not json", ""),
        ];
        for (line, want) in cases {
            assert_eq!(
                of_line(line, &compactd_core::redact::Redactor::disabled()),
                want,
                "{line}"
            );
        }
        let long = format!(
            r#"{{"type":"message","id":"f","message":{{"role":"user","content":"{}"}}}}"#,
            "word ".repeat(100)
        );
        assert_eq!(
            of_line(&long, &compactd_core::redact::Redactor::disabled())
                .chars()
                .count(),
            141
        );
        assert!(of_line(&long, &compactd_core::redact::Redactor::disabled()).ends_with('…'));
    }

    #[test]
    fn previews_never_show_a_secret_or_a_part_of_one() {
        let redactor = compactd_core::redact::Redactor::new(None).unwrap();
        let secret = &compactd_testkit::samples::all(3)[5].secret;
        // The secret straddles the preview's cut.
        let line = serde_json::json!({"type": "message", "id": "s", "message": {"role": "user",
            "content": format!("{} {secret}", "w".repeat(130))}})
        .to_string();
        let preview = of_line(&line, &redactor);
        assert!(!preview.contains(&secret[..8]), "{preview}");
        assert!(
            of_line(&line, &compactd_core::redact::Redactor::disabled()).contains(&secret[..8])
        );
    }
}
