//! Messages and content blocks of a pi session (spec §2).
//!
//! Only the fields that compaction reads are decoded; everything else stays in the entry's raw JSON
//! line, which is what the session is written back from. Decoding goes through flat `serde` structs
//! (no internally tagged or untagged enums) because those buffer every value, and the planner reads
//! every message of sessions that run to tens of megabytes.

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// The message of a `message` entry, or the message a `custom_message`, `branch_summary` or
/// `compaction` entry stands for in the LLM context.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    User {
        content: Content,
    },
    Assistant {
        /// A string `content` is kept as no blocks: the reference iterates it as blocks and finds
        /// none.
        content: Vec<Block>,
        usage: Option<Usage>,
        stop_reason: Option<StopReason>,
        provider: Option<String>,
        model: Option<String>,
    },
    ToolResult {
        content: Content,
    },
    /// A shell command the user ran with `!cmd` (or `!!cmd`, excluded from the context).
    BashExecution(BashExecution),
    /// An extension message (`custom_message` entries, and `hookMessage`/`custom` roles of
    /// migrated files).
    Custom {
        content: Content,
        timestamp: Option<f64>,
    },
    BranchSummary {
        summary: String,
        timestamp: Option<f64>,
    },
    CompactionSummary {
        summary: String,
        tokens_before: f64,
        timestamp: Option<f64>,
    },
    /// A role this version does not know (e.g. oh-my-pi's `fileMention`): kept on the path,
    /// estimated at 0 tokens, never a cut point, dropped from LLM input.
    Unknown {
        role: String,
    },
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct BashExecution {
    pub command: String,
    pub output: String,
    pub exit_code: Option<f64>,
    pub cancelled: bool,
    pub truncated: bool,
    pub full_output_path: Option<String>,
    pub exclude_from_context: bool,
    pub timestamp: Option<f64>,
}

/// Why an assistant message ended (spec §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    Stop,
    Length,
    ToolUse,
    Error,
    Aborted,
    #[serde(other)]
    Other,
}

/// Content of user, custom and tool-result messages: a plain string or a list of blocks.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    Blocks(Vec<Block>),
}

/// A content block (spec §2.1). Image data is never decoded: no part of compaction reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Text(String),
    Thinking(String),
    Image,
    ToolCall {
        name: String,
        /// Order-preserving JSON, so that `JSON.stringify` parity holds for its length.
        arguments: Option<Value>,
    },
    /// A block type this version does not know; it counts 0 tokens and serializes to nothing.
    Other,
}

/// Provider-reported token usage of an assistant message (spec §2.3). Missing numbers read as 0.
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Usage {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total_tokens: Option<f64>,
}

impl Message {
    /// The role name as written in session files.
    pub fn role(&self) -> &str {
        match self {
            Message::User { .. } => "user",
            Message::Assistant { .. } => "assistant",
            Message::ToolResult { .. } => "toolResult",
            Message::BashExecution(_) => "bashExecution",
            Message::Custom { .. } => "custom",
            Message::BranchSummary { .. } => "branchSummary",
            Message::CompactionSummary { .. } => "compactionSummary",
            Message::Unknown { role } => role,
        }
    }

    /// The usage of an assistant message that counts as valid: present, and the message did not
    /// stop with `aborted` or `error` (spec §3.2).
    pub fn valid_usage(&self) -> Option<&Usage> {
        match self {
            Message::Assistant {
                usage: Some(usage),
                stop_reason,
                ..
            } if !matches!(stop_reason, Some(StopReason::Aborted | StopReason::Error)) => {
                Some(usage)
            }
            _ => None,
        }
    }
}

impl Content {
    /// The text blocks concatenated with no separator (a string content is its own text).
    pub fn joined_text(&self) -> Cow<'_, str> {
        match self {
            Content::Text(text) => text.as_str().into(),
            Content::Blocks(blocks) => joined_text_blocks(blocks),
        }
    }
}

/// The text blocks of `blocks` concatenated with no separator; images and other blocks dropped.
/// Borrows when there is at most one text block, the common case.
pub fn joined_text_blocks(blocks: &[Block]) -> Cow<'_, str> {
    let mut texts = blocks.iter().filter_map(|b| match b {
        Block::Text(t) => Some(t.as_str()),
        _ => None,
    });
    let Some(first) = texts.next() else {
        return "".into();
    };
    match texts.next() {
        None => first.into(),
        Some(second) => {
            let mut joined = String::with_capacity(first.len() + second.len());
            joined.push_str(first);
            joined.push_str(second);
            texts.for_each(|t| joined.push_str(t));
            joined.into()
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding

/// Every field any role uses, flat, so `serde` decodes a message in one pass without buffering.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireMessage<'a> {
    /// Borrowed: role names have no escapes, so reading one allocates nothing.
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    content: Option<Content>,
    usage: Option<Usage>,
    stop_reason: Option<StopReason>,
    provider: Option<String>,
    model: Option<String>,
    command: Option<String>,
    output: Option<String>,
    exit_code: Option<f64>,
    cancelled: Option<bool>,
    truncated: Option<bool>,
    full_output_path: Option<String>,
    exclude_from_context: Option<bool>,
    summary: Option<String>,
    tokens_before: Option<f64>,
    #[serde(default, deserialize_with = "lenient_number")]
    timestamp: Option<f64>,
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = WireMessage::deserialize(deserializer)?;
        let role = w.role.ok_or_else(|| de::Error::missing_field("role"))?;
        let content = w.content;
        let blocks_or_text = move || content.unwrap_or(Content::Blocks(Vec::new()));
        Ok(match role.as_ref() {
            "user" => Message::User {
                content: blocks_or_text(),
            },
            "assistant" => Message::Assistant {
                content: match blocks_or_text() {
                    Content::Blocks(blocks) => blocks,
                    Content::Text(_) => Vec::new(),
                },
                usage: w.usage,
                stop_reason: w.stop_reason,
                provider: w.provider,
                model: w.model,
            },
            "toolResult" => Message::ToolResult {
                content: blocks_or_text(),
            },
            "bashExecution" => Message::BashExecution(BashExecution {
                command: w.command.unwrap_or_default(),
                output: w.output.unwrap_or_default(),
                exit_code: w.exit_code,
                cancelled: w.cancelled.unwrap_or(false),
                truncated: w.truncated.unwrap_or(false),
                full_output_path: w.full_output_path,
                exclude_from_context: w.exclude_from_context.unwrap_or(false),
                timestamp: w.timestamp,
            }),
            "custom" => Message::Custom {
                content: blocks_or_text(),
                timestamp: w.timestamp,
            },
            "branchSummary" => Message::BranchSummary {
                summary: w.summary.unwrap_or_default(),
                timestamp: w.timestamp,
            },
            "compactionSummary" => Message::CompactionSummary {
                summary: w.summary.unwrap_or_default(),
                tokens_before: w.tokens_before.unwrap_or(0.0),
                timestamp: w.timestamp,
            },
            _ => Message::Unknown {
                role: role.into_owned(),
            },
        })
    }
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ContentVisitor;
        impl<'de> Visitor<'de> for ContentVisitor {
            type Value = Content;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Content, E> {
                Ok(Content::Text(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Content, E> {
                Ok(Content::Text(v))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Content, E> {
                Ok(Content::Blocks(Vec::new()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Content, A::Error> {
                let mut blocks = Vec::with_capacity(seq.size_hint().unwrap_or(2));
                while let Some(block) = seq.next_element::<Block>()? {
                    blocks.push(block);
                }
                Ok(Content::Blocks(blocks))
            }
        }
        deserializer.deserialize_any(ContentVisitor)
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
enum BlockType {
    Text,
    Thinking,
    Image,
    ToolCall,
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct WireBlock {
    #[serde(rename = "type")]
    kind: Option<BlockType>,
    text: Option<String>,
    thinking: Option<String>,
    name: Option<String>,
    arguments: Option<Value>,
}

impl<'de> Deserialize<'de> for Block {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let w = WireBlock::deserialize(deserializer)?;
        Ok(match w.kind {
            Some(BlockType::Text) => Block::Text(w.text.unwrap_or_default()),
            Some(BlockType::Thinking) => Block::Thinking(w.thinking.unwrap_or_default()),
            Some(BlockType::Image) => Block::Image,
            Some(BlockType::ToolCall) => Block::ToolCall {
                name: w.name.unwrap_or_default(),
                arguments: w.arguments,
            },
            Some(BlockType::Other) | None => Block::Other,
        })
    }
}

/// Reads a number and ignores any other JSON value: message timestamps are informational, and an
/// odd one must not make a whole line unreadable.
fn lenient_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    struct NumberOrAnything;
    impl<'de> Visitor<'de> for NumberOrAnything {
        type Value = Option<f64>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok(Some(v))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok(Some(v as f64))
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok(None)
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            Ok(None)
        }
    }
    deserializer.deserialize_any(NumberOrAnything)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_every_role() {
        let user: Message =
            serde_json::from_str(r#"{"role":"user","content":"hi","timestamp":1}"#).unwrap();
        assert_eq!(
            user,
            Message::User {
                content: Content::Text("hi".into())
            }
        );

        let assistant: Message = serde_json::from_str(
            r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"text","text":"x"},
            {"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}},{"type":"weird"}],
            "usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4,"totalTokens":10,"cost":{"total":0}},
            "stopReason":"toolUse","provider":"p","model":"m","api":"x"}"#,
        )
        .unwrap();
        let Message::Assistant { content, usage, .. } = &assistant else {
            panic!()
        };
        assert_eq!(content.len(), 4);
        assert_eq!(content[3], Block::Other);
        assert_eq!(usage.unwrap().total_tokens, Some(10.0));
        assert!(assistant.valid_usage().is_some());

        let bash: Message = serde_json::from_str(
            r#"{"role":"bashExecution","command":"ls","output":"","exitCode":null,"cancelled":false,"truncated":false,"timestamp":5}"#,
        )
        .unwrap();
        let Message::BashExecution(b) = bash else {
            panic!()
        };
        assert_eq!(b.exit_code, None);
        assert_eq!(b.timestamp, Some(5.0));

        let unknown: Message =
            serde_json::from_str(r#"{"role":"fileMention","files":[]}"#).unwrap();
        assert_eq!(unknown.role(), "fileMention");
    }

    #[test]
    fn aborted_and_error_messages_have_no_valid_usage() {
        for reason in ["aborted", "error"] {
            let m: Message = serde_json::from_str(&format!(
                r#"{{"role":"assistant","content":[],"usage":{{"input":5}},"stopReason":"{reason}"}}"#
            ))
            .unwrap();
            assert!(m.valid_usage().is_none());
        }
    }

    #[test]
    fn a_message_without_role_is_an_error() {
        let err = serde_json::from_str::<Message>(r#"{"content":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("role"), "{err}");
    }

    #[test]
    fn joined_text_concatenates_without_separator_and_drops_images() {
        let c: Content = serde_json::from_str(
            r#"[{"type":"text","text":"a"},{"type":"image","data":"xx","mimeType":"image/png"},{"type":"text","text":"b"}]"#,
        )
        .unwrap();
        assert_eq!(c.joined_text(), "ab");
    }
}
