//! pi 1.5.2's messages as its planner sees them, on the entries' JSON: what an entry puts in the
//! model's context (`sessionEntryToContextMessages`), the token estimate (`estimateTokens`:
//! system messages counted, images 4800 characters), the conversion for the summarizer
//! (`convertToLlm`) and its serialization (`serializeConversation`: thinking left out).

use serde_json::{Value, json};

use crate::js_json::{stringified_utf16_len, stringify, utf16_len, utf16_prefix_byte_len};

const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";
const ESTIMATED_IMAGE_CHARS: usize = 4800;
const TOOL_RESULT_MAX_CHARS: usize = 2000;

pub(super) fn role(message: &Value) -> &str {
    message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn str_field<'a>(value: &'a Value, name: &str) -> &'a str {
    value.get(name).and_then(Value::as_str).unwrap_or_default()
}

/// `new Date(entry.timestamp).getTime()`: milliseconds, or `null` (JavaScript's NaN) when the
/// entry has no readable time.
fn entry_ms(entry: &Value) -> Value {
    crate::session::time::iso_to_epoch_ms(str_field(entry, "timestamp"))
        .map_or(Value::Null, crate::js_json::number_value)
}

/// The messages an entry contributes to the model's context.
pub(super) fn context_messages(entry: &Value) -> Vec<Value> {
    match str_field(entry, "type") {
        "message" => {
            let mut message = entry.get("message").cloned().unwrap_or(Value::Null);
            let missing = message.get("content").is_none_or(Value::is_null);
            match role(&message) {
                "system" if missing => message["content"] = json!(""),
                "user" | "assistant" | "toolResult" if missing => message["content"] = json!([]),
                _ => {}
            }
            vec![message]
        }
        "custom_message" => vec![json!({
            "role": "custom",
            "customType": entry.get("customType"),
            "content": entry.get("content").filter(|c| !c.is_null()).cloned().unwrap_or(json!([])),
            "timestamp": entry_ms(entry),
        })],
        "branch_summary" if !str_field(entry, "summary").is_empty() => {
            vec![
                json!({"role": "branchSummary", "summary": str_field(entry, "summary"),
                "fromId": entry.get("fromId"), "timestamp": entry_ms(entry)}),
            ]
        }
        "compaction" => {
            let summary = json!({"role": "compactionSummary", "summary": str_field(entry, "summary"),
                "tokensBefore": entry.get("tokensBefore"), "timestamp": entry_ms(entry)});
            match entry
                .get("systemMessage")
                .filter(|m| !m.is_null() && *m != &json!(false))
            {
                Some(system) => vec![system.clone(), summary],
                None => vec![summary],
            }
        }
        _ => Vec::new(),
    }
}

/// `contentText(content, separator)`: a string, or its text blocks joined.
pub(super) fn content_text(content: &Value, separator: &str) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| str_field(b, "type") == "text")
            .map(|b| str_field(b, "text"))
            .collect::<Vec<_>>()
            .join(separator),
        _ => String::new(),
    }
}

fn text_and_image_chars(content: Option<&Value>) -> usize {
    match content {
        Some(Value::String(text)) => utf16_len(text),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .map(|b| match str_field(b, "type") {
                "text" => utf16_len(str_field(b, "text")),
                "image" => ESTIMATED_IMAGE_CHARS,
                _ => 0,
            })
            .sum(),
        _ => 0,
    }
}

/// pi 1.5.2's `estimateTokens`: characters / 4, rounded up.
pub fn estimate_tokens(message: &Value) -> u64 {
    let chars = match role(message) {
        "system" => {
            let mut chars = text_and_image_chars(message.get("content"));
            if let Some(Value::Object(sections)) = message.get("sections") {
                chars += sections
                    .values()
                    .filter_map(Value::as_str)
                    .map(utf16_len)
                    .sum::<usize>();
            }
            if let Some(tools) = message.get("toolsAdded").filter(|t| !t.is_null()) {
                chars += stringified_utf16_len(tools);
            }
            chars
        }
        "user" | "custom" | "toolResult" => text_and_image_chars(message.get("content")),
        "assistant" => message
            .get("content")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|b| match str_field(b, "type") {
                "text" => utf16_len(str_field(b, "text")),
                "thinking" => utf16_len(str_field(b, "thinking")),
                "toolCall" => {
                    utf16_len(str_field(b, "name"))
                        + b.get("arguments").map_or(9, stringified_utf16_len)
                }
                _ => 0,
            })
            .sum(),
        "bashExecution" => {
            utf16_len(str_field(message, "command")) + utf16_len(str_field(message, "output"))
        }
        "branchSummary" | "compactionSummary" => utf16_len(str_field(message, "summary")),
        _ => 0,
    };
    (chars as u64).div_ceil(4)
}

pub(super) fn is_cut_point(message: &Value) -> bool {
    matches!(
        role(message),
        "user" | "assistant" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

pub(super) fn is_turn_start(message: &Value) -> bool {
    matches!(
        role(message),
        "user" | "bashExecution" | "custom" | "branchSummary" | "compactionSummary"
    )
}

fn bash_execution_text(message: &Value) -> String {
    let mut text = format!("Ran `{}`\n", str_field(message, "command"));
    let output = str_field(message, "output");
    if output.is_empty() {
        text.push_str("(no output)");
    } else {
        text.push_str(&format!("```\n{output}\n```"));
    }
    if message
        .get("cancelled")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = message
        .get("exitCode")
        .and_then(Value::as_f64)
        .filter(|c| *c != 0.0)
    {
        text.push_str(&format!(
            "\n\nCommand exited with code {}",
            crate::js_json::f64_to_js_string(code)
        ));
    }
    let full = str_field(message, "fullOutputPath");
    if message
        .get("truncated")
        .and_then(Value::as_bool)
        .unwrap_or(false)
        && !full.is_empty()
    {
        text.push_str(&format!("\n\n[Output truncated. Full output: {full}]"));
    }
    text
}

/// `convertToLlm`: the message as the model gets it (`None`: left out); a converted message
/// keeps the original's `timestamp`.
pub(super) fn to_llm(message: &Value) -> Option<Value> {
    let mut llm = converted(message)?;
    if !matches!(
        role(message),
        "system" | "user" | "assistant" | "toolResult"
    ) && let Some(timestamp) = message.get("timestamp")
    {
        llm["timestamp"] = timestamp.clone();
    }
    Some(llm)
}

fn converted(message: &Value) -> Option<Value> {
    let text = |text: String| json!([{"type": "text", "text": text}]);
    match role(message) {
        "bashExecution"
            if message
                .get("excludeFromContext")
                .and_then(Value::as_bool)
                .unwrap_or(false) =>
        {
            None
        }
        "bashExecution" => {
            Some(json!({"role": "user", "content": text(bash_execution_text(message))}))
        }
        "custom" => {
            let content = match message.get("content") {
                Some(Value::String(s)) => text(s.clone()),
                Some(other) => other.clone(),
                None => json!([]),
            };
            Some(json!({"role": "user", "content": content}))
        }
        "branchSummary" => Some(json!({"role": "user", "content": text(format!(
            "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}", str_field(message, "summary")))})),
        "compactionSummary" => Some(json!({"role": "user", "content": text(format!(
            "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}", str_field(message, "summary")))})),
        "system" | "user" | "assistant" | "toolResult" => Some(message.clone()),
        _ => None,
    }
}

fn truncate_for_summary(text: &str) -> String {
    let units = utf16_len(text);
    if units <= TOOL_RESULT_MAX_CHARS {
        return text.to_owned();
    }
    // sliceHead: a surrogate pair across the cut stays out whole.
    let end = utf16_prefix_byte_len(text, TOOL_RESULT_MAX_CHARS);
    format!(
        "{}\n\n[... {} more characters truncated]",
        &text[..end],
        units - TOOL_RESULT_MAX_CHARS
    )
}

/// `serializeConversation(convertToLlm(messages))`, thinking left out.
pub fn serialize(messages: &[&Value]) -> String {
    let mut parts = Vec::new();
    for message in messages.iter().filter_map(|m| to_llm(m)) {
        let content = message.get("content").unwrap_or(&Value::Null);
        match role(&message) {
            "user" => {
                let text = content_text(content, "");
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            "assistant" => {
                let blocks = content.as_array().map(Vec::as_slice).unwrap_or_default();
                let calls: Vec<String> = blocks
                    .iter()
                    .filter(|b| str_field(b, "type") == "toolCall")
                    .map(|b| {
                        let args = match b.get("arguments") {
                            Some(Value::Object(map)) => map
                                .iter()
                                .map(|(k, v)| format!("{k}={}", stringify(v)))
                                .collect::<Vec<_>>()
                                .join(", "),
                            _ => String::new(),
                        };
                        format!("{}({args})", str_field(b, "name"))
                    })
                    .collect();
                if blocks.iter().any(|b| str_field(b, "type") == "text") {
                    parts.push(format!("[Assistant]: {}", content_text(content, "\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            "toolResult" => {
                let text = content_text(content, "");
                if !text.is_empty() {
                    parts.push(format!("[Tool result]: {}", truncate_for_summary(&text)));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}
