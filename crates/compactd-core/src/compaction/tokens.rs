//! Token accounting and the trigger rule (spec §3): the chars/4 heuristic, context tokens from
//! provider usage, and `shouldCompact`.

use serde::{Deserialize, Serialize};

use crate::js_json::{self, utf16_len};
use crate::session::{Block, Content, Entry, Message, Usage};

/// What an image block counts, in characters (1200 tokens), for tool results and custom messages.
const IMAGE_CHARS: usize = 4800;

/// Compaction settings (`settings.json` → `compaction`), with pi's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CompactionSettings {
    pub enabled: bool,
    /// Tokens kept free for the model's answer; also sets the summary's output budget.
    pub reserve_tokens: u64,
    /// Roughly how many tokens of recent conversation stay verbatim.
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

/// `estimateTokens`: `ceil(chars / 4)` with chars counted in UTF-16 units (spec §3.1).
pub fn estimate_tokens(message: &Message) -> u64 {
    let chars = match message {
        Message::User { content } => content_chars(content, 0),
        Message::Assistant { content, .. } => content.iter().map(assistant_block_chars).sum(),
        Message::ToolResult { content } | Message::Custom { content, .. } => {
            content_chars(content, IMAGE_CHARS)
        }
        Message::BashExecution(bash) => utf16_len(&bash.command) + utf16_len(&bash.output),
        Message::BranchSummary { summary, .. } | Message::CompactionSummary { summary, .. } => {
            utf16_len(summary)
        }
        Message::Unknown { .. } => 0,
    };
    (chars as u64).div_ceil(4)
}

fn content_chars(content: &Content, image_chars: usize) -> usize {
    match content {
        Content::Text(text) => utf16_len(text),
        Content::Blocks(blocks) => blocks
            .iter()
            .map(|block| match block {
                Block::Text(text) => utf16_len(text),
                Block::Image => image_chars,
                _ => 0,
            })
            .sum(),
    }
}

fn assistant_block_chars(block: &Block) -> usize {
    match block {
        Block::Text(text) => utf16_len(text),
        Block::Thinking(thinking) => utf16_len(thinking),
        // `JSON.stringify(undefined)` has no length (the reference would throw); count 0.
        Block::ToolCall { name, arguments } => {
            utf16_len(name) + arguments.as_ref().map_or(0, js_json::stringified_utf16_len)
        }
        Block::Image | Block::Other => 0,
    }
}

/// `calculateContextTokens`: `totalTokens` when it is non-zero, else the sum of the parts.
pub fn calculate_context_tokens(usage: &Usage) -> f64 {
    match usage.total_tokens {
        Some(total) if total != 0.0 && !total.is_nan() => total,
        _ => usage.input + usage.output + usage.cache_read + usage.cache_write,
    }
}

/// `getLastAssistantUsage`: the last valid usage among the `message` entries.
pub fn last_assistant_usage<'a>(entries: &[&'a Entry]) -> Option<&'a Usage> {
    entries
        .iter()
        .rev()
        .find_map(|entry| entry.stored_message().and_then(Message::valid_usage))
}

/// The result of [`estimate_context_tokens`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEstimate {
    pub tokens: f64,
    pub usage_tokens: f64,
    pub trailing_tokens: u64,
    pub last_usage_index: Option<usize>,
}

/// `estimateContextTokens`: the last valid usage plus the estimate of every message after it, or
/// the estimate of all messages when none has usage.
pub fn estimate_context_tokens(messages: &[&Message]) -> ContextEstimate {
    let last = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| m.valid_usage().map(|u| (i, u)));
    match last {
        None => {
            let estimated: u64 = messages.iter().map(|m| estimate_tokens(m)).sum();
            ContextEstimate {
                tokens: estimated as f64,
                usage_tokens: 0.0,
                trailing_tokens: estimated,
                last_usage_index: None,
            }
        }
        Some((index, usage)) => {
            let usage_tokens = calculate_context_tokens(usage);
            let trailing: u64 = messages[index + 1..]
                .iter()
                .map(|m| estimate_tokens(m))
                .sum();
            ContextEstimate {
                tokens: usage_tokens + trailing as f64,
                usage_tokens,
                trailing_tokens: trailing,
                last_usage_index: Some(index),
            }
        }
    }
}

/// `shouldCompact`: enabled, and the context is strictly above `window − reserveTokens`.
pub fn should_compact(
    context_tokens: f64,
    context_window: u64,
    settings: &CompactionSettings,
) -> bool {
    settings.enabled && context_tokens > context_window as f64 - settings.reserve_tokens as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(json: &str) -> Message {
        serde_json::from_str(json).unwrap()
    }

    fn usage(
        input: f64,
        output: f64,
        cache_read: f64,
        cache_write: f64,
        total: Option<f64>,
    ) -> Usage {
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: total,
        }
    }

    #[test]
    fn context_tokens_prefer_total_and_fall_back_to_the_sum() {
        // Reference tests 1 and 2.
        assert_eq!(
            calculate_context_tokens(&usage(1000.0, 500.0, 200.0, 100.0, Some(1800.0))),
            1800.0
        );
        assert_eq!(
            calculate_context_tokens(&usage(1000.0, 500.0, 200.0, 100.0, None)),
            1800.0
        );
        assert_eq!(
            calculate_context_tokens(&usage(1000.0, 500.0, 200.0, 100.0, Some(0.0))),
            1800.0
        );
        assert_eq!(
            calculate_context_tokens(&usage(0.0, 0.0, 0.0, 0.0, Some(0.0))),
            0.0
        );
    }

    #[test]
    fn should_compact_is_strictly_above_window_minus_reserve() {
        // Reference tests 6 and 7.
        let s = CompactionSettings {
            enabled: true,
            reserve_tokens: 10_000,
            keep_recent_tokens: 20_000,
        };
        assert!(should_compact(95_000.0, 100_000, &s));
        assert!(!should_compact(89_000.0, 100_000, &s));
        assert!(!should_compact(90_000.0, 100_000, &s));
        let disabled = CompactionSettings {
            enabled: false,
            ..s
        };
        assert!(!should_compact(95_000.0, 100_000, &disabled));
    }

    #[test]
    fn estimates_follow_the_reference_table() {
        assert_eq!(
            estimate_tokens(&msg(r#"{"role":"user","content":"12345"}"#)),
            2
        );
        // Images count nothing in user messages but 4800 chars in tool results and custom ones.
        let image = r#"{"type":"image","data":"AAAA","mimeType":"image/png"}"#;
        assert_eq!(
            estimate_tokens(&msg(&format!(
                r#"{{"role":"user","content":[{{"type":"text","text":"abcd"}},{image}]}}"#
            ))),
            1
        );
        assert_eq!(
            estimate_tokens(&msg(&format!(
                r#"{{"role":"toolResult","content":[{{"type":"text","text":"abcd"}},{image}]}}"#
            ))),
            1201
        );
        assert_eq!(
            estimate_tokens(&msg(&format!(r#"{{"role":"custom","content":[{image}]}}"#))),
            1200
        );
        // Tool calls: name + JSON.stringify(arguments), with JavaScript number formatting:
        // "read" (4) + {"path":"a","n":1} (18) = 22 chars → 6 tokens.
        assert_eq!(
            estimate_tokens(&msg(
                r#"{"role":"assistant","content":[{"type":"toolCall","name":"read","arguments":{"path":"a","n":1.0}}]}"#
            )),
            6
        );
        // Emoji count two UTF-16 units each: 😀😀😀 is 6 units → 2 tokens.
        assert_eq!(
            estimate_tokens(&msg(r#"{"role":"user","content":"😀😀😀"}"#)),
            2
        );
        assert_eq!(
            estimate_tokens(&msg(
                r#"{"role":"bashExecution","command":"ls","output":"abc","excludeFromContext":true}"#
            )),
            2
        );
        assert_eq!(
            estimate_tokens(&msg(r#"{"role":"fileMention","files":["a"]}"#)),
            0
        );
    }

    #[test]
    fn context_estimate_uses_last_valid_usage_plus_trailing() {
        let a1 = msg(
            r#"{"role":"assistant","content":[],"usage":{"input":100,"output":0,"cacheRead":0,"cacheWrite":0},"stopReason":"stop"}"#,
        );
        let a2 = msg(
            r#"{"role":"assistant","content":[],"usage":{"input":200,"output":0,"cacheRead":0,"cacheWrite":0},"stopReason":"aborted"}"#,
        );
        let u = msg(r#"{"role":"user","content":"12345678"}"#);
        let est = estimate_context_tokens(&[&a1, &a2, &u]);
        assert_eq!(est.usage_tokens, 100.0);
        assert_eq!(est.last_usage_index, Some(0));
        assert_eq!(est.trailing_tokens, 2);
        assert_eq!(est.tokens, 102.0);
        let none = estimate_context_tokens(&[&u, &u]);
        assert_eq!((none.tokens, none.last_usage_index), (4.0, None));
    }
}
