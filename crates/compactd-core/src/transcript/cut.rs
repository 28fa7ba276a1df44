//! Conversations the client cut short.
//!
//! oh-my-pi cuts a history window that is still over the model's budget at a character count
//! and ends it with `\n\n[... N more characters truncated]`, often inside a tool call. The
//! messages before the cut read as usual; the cut one is kept as written (so the conversation
//! writes back to the same text) and read as well as a fragment can be: a tool call it opened
//! still names its tool and the arguments written before the cut — the path of a `write` whose
//! content was cut off is the one thing the summary must not lose.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Dialect, Message, Role, ToolCall};

/// The end of a conversation the client cut: the fragment as written and how many of the
/// conversation's last messages were read from it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cut {
    /// The cut message's text as written, the truncation note included.
    pub text: String,
    /// The last `messages` of the conversation are the reading of `text`.
    pub messages: usize,
}

const NOTE_END: &str = " more characters truncated]";

/// The text before oh-my-pi's truncation note, when `conversation` ends with one.
pub(super) fn body(conversation: &str) -> Option<&str> {
    let note = conversation.strip_suffix(NOTE_END)?;
    let digits = note.trim_end_matches(|c: char| c.is_ascii_digit());
    (digits.len() < note.len()).then_some(())?;
    digits.strip_suffix("\n\n[... ")
}

/// `conversation` (which ends in a cut) read in `dialect`: the messages read whole are those
/// before the last whose writing the text starts with; the rest is the fragment.
pub(super) fn read(dialect: Dialect, conversation: &str, body: &str) -> super::Conversation {
    let mut whole = super::read_whole(dialect, body);
    // The last message is the one cut, even when the reader took its broken markup for text.
    let mut fragment: Vec<Message> = whole.messages.pop().into_iter().collect();
    loop {
        let written = super::write(dialect, &whole.messages);
        if conversation.starts_with(&written) {
            fragment.reverse();
            let text = &conversation[written.len()..];
            salvage(text, &mut fragment);
            whole.cut = Cut {
                text: text.to_owned(),
                messages: fragment.len(),
            };
            whole.messages.extend(fragment);
            return whole;
        }
        fragment.extend(whole.messages.pop());
    }
}

/// Where a tool call opens, in any dialect, and the tool's name.
static OPENER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?:call:(?<gemma>[\w.-]+)\{"#,
        r#"|<invoke name="(?<xml>[\w.-]+)">"#,
        r#"|commentary to=functions\.(?<harmony>[\w.-]+)"#,
        r#"|"name":\s*"(?<json>[\w.-]+)""#,
        r#"|<tool_call>(?<glm>[\w.-]+)\n"#,
        r#"|functions\.(?<kimi>[\w.-]+):\d+"#,
        r#"|<｜tool▁call▁begin｜>(?<deepseek>[\w.-]+)<｜tool▁sep｜>"#,
        r#"|(?:\[Assistant tool calls?\]: |\[Tool Call\]: |```tool_code\n\[?)(?:default_api\.)?(?<call>[\w.-]+)\()"#,
    ))
    .expect("the opener pattern compiles")
});

/// A string argument written whole, in any dialect's syntax.
static ARGUMENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r#"(?:(?<gemma>\w+):<\|"\|>(?<gemma_value>[^<]*)<\|"\|>"#,
        r#"|<parameter name="(?<xml>\w+)">(?<xml_value>[^<]*)</parameter>"#,
        r#"|<arg_key>(?<glm>\w+)</arg_key>\s*<arg_value>(?<glm_value>[^<]*)</arg_value>"#,
        r#"|"(?<json>\w+)":\s*(?<json_value>"(?:[^"\\]|\\.)*")"#,
        r#"|\b(?<python>\w+)=(?<python_value>"(?:[^"\\]|\\.)*"))"#,
    ))
    .expect("the argument pattern compiles")
});

/// The tool call the client cut in half, added to the fragment's reading (`fragment`): the
/// opener after those of the calls the reader could read, in the fragment as written (`text`).
/// Its markup is taken out of the message's text, where a reader that could not read it left it.
/// A reader may also have read the cut call with its arguments as one broken string: the call
/// read from its opener replaces it when only that one names a path.
fn salvage(text: &str, fragment: &mut Vec<Message>) {
    let read: usize = fragment.iter().map(|m| m.calls.len()).sum();
    if let Some((opener, call)) = call_at(text, read) {
        if fragment.last().is_none_or(|m| m.role != Role::Assistant) {
            fragment.push(Message::new(Role::Assistant));
        }
        let message = fragment.last_mut().expect("pushed above");
        if let Some(at) = message.text.find(opener) {
            message.text.truncate(at);
            strip_openers(&mut message.text);
        }
        message.calls.push(call);
        return;
    }
    let Some(last) = fragment.iter_mut().rev().find_map(|m| m.calls.last_mut()) else {
        return;
    };
    if last.arg("path").is_none()
        && let Some((_, call)) = call_at(text, read - 1).filter(|(_, c)| c.arg("path").is_some())
    {
        *last = call;
    }
}

/// The `index`th call opened in `text`, with the arguments written whole after its opener; and
/// the opener as written.
fn call_at(text: &str, index: usize) -> Option<(&str, ToolCall)> {
    let opener = OPENER.captures_iter(text).nth(index)?;
    let name = [
        "gemma", "xml", "harmony", "json", "glm", "kimi", "deepseek", "call",
    ]
    .iter()
    .find_map(|group| opener.name(group))
    .map(|m| m.as_str().to_owned())
    .unwrap_or_default();
    let whole = opener.get(0).expect("a match has a whole");
    let arguments = ARGUMENT
        .captures_iter(&text[whole.end()..])
        .filter_map(|argument| {
            let [key, value] = [
                ("gemma", "gemma_value"),
                ("xml", "xml_value"),
                ("glm", "glm_value"),
                ("json", "json_value"),
                ("python", "python_value"),
            ]
            .into_iter()
            .find_map(|(k, v)| Some([argument.name(k)?, argument.name(v)?]))?;
            let value = if value.as_str().starts_with('"') {
                serde_json::from_str::<String>(value.as_str()).ok()?
            } else {
                value.as_str().to_owned()
            };
            Some((key.as_str().to_owned(), Value::String(value)))
        })
        .collect();
    Some((whole.as_str(), ToolCall::new(name, arguments)))
}

/// What opens a block of calls before the first call, at the end of a text cut there.
fn strip_openers(text: &mut String) {
    const OPENERS: [&str; 9] = [
        "<function_calls>",
        "<minimax:tool_call>",
        "<tool_call>",
        "<|tool_call>",
        "<|tool_calls_section_begin|>",
        "<|tool_call_begin|>",
        "<｜tool▁calls▁begin｜>",
        "```tool_code",
        "{",
    ];
    loop {
        let trimmed = text.trim_end().len();
        text.truncate(trimmed);
        let Some(opener) = OPENERS.iter().find(|o| text.ends_with(*o)) else {
            return;
        };
        text.truncate(text.len() - opener.len());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{Dialect, Message, Role, ToolCall, read, write};

    /// Every dialect, cut inside a file's content as oh-my-pi cuts: the call still names its
    /// tool and path, the text before it reads as usual, and the whole writes back as it came.
    #[test]
    fn a_call_cut_in_half_keeps_its_tool_and_path() {
        let messages = vec![
            Message::with_text(Role::User, "write the guide"),
            Message {
                text: "Now the guide:".into(),
                calls: vec![ToolCall::new(
                    "write",
                    vec![
                        ("path".into(), json!("docs/DEVELOPMENT.md")),
                        (
                            "content".into(),
                            json!("# Guide\n\nCall `f(x)`, then \"g\".\n".repeat(40)),
                        ),
                    ],
                )],
                ..Message::new(Role::Assistant)
            },
        ];
        for dialect in Dialect::written() {
            let whole = write(dialect, &messages);
            let at = whole.find("then").expect("the content is written") + 200;
            let sent = format!(
                "{}\n\n[... {} more characters truncated]",
                &whole[..at],
                whole.len() - at
            );
            let conversation = read(&sent);
            // Without a tool turn, hermes is qwen3 (they differ in how results are written).
            if dialect != Dialect::Hermes {
                assert_eq!(conversation.dialect, dialect);
            }
            assert_eq!(conversation.write(), sent, "{dialect:?}");
            let last = conversation.messages.last().expect("a message");
            assert_eq!(last.role, Role::Assistant, "{dialect:?}");
            let call = last
                .calls
                .last()
                .unwrap_or_else(|| panic!("{dialect:?}: no call"));
            assert_eq!(call.name, "write", "{dialect:?}");
            assert_eq!(call.arg("path"), Some("docs/DEVELOPMENT.md"), "{dialect:?}");
            // The text before the call reads as usual (pi's form writes it as a part of its
            // own, before the cut); the call's markup is no one's text.
            let texts: Vec<&str> = conversation
                .messages
                .iter()
                .map(|m| m.text.trim())
                .collect();
            assert!(texts.contains(&"Now the guide:"), "{dialect:?}: {texts:?}");
            assert!(
                !texts.iter().any(|t| t.contains("DEVELOPMENT")),
                "{dialect:?}: {texts:?}"
            );
            assert_eq!(conversation.latest_user_text(), Some("write the guide"));
        }
    }

    #[test]
    fn only_the_clients_own_note_marks_a_cut() {
        for text in [
            "[User]: see [... 12 more characters truncated]",
            "[User]: a\n\n[... many more characters truncated]",
        ] {
            assert!(super::body(text).is_none(), "{text}");
            assert_eq!(read(text).cut, super::Cut::default());
        }
    }
}
