//! The assistant turn most chat templates write: an optional thinking block, the text, then a
//! trailing section of tool calls in the template's own markup. The dialects differ only in how
//! their thinking block opens and how their calls are written.

use crate::transcript::{Message, Role, ToolCall};

const THINK_CLOSE: &str = "\n</think>";

/// Reads `body`: thinking when it opens with `think_open` and closes with `\n</think>`, then
/// text; `calls` finds a trailing call section in that text (where it begins, and the calls).
/// Without one the whole rest is text.
pub(super) fn read_assistant(
    body: &str,
    think_open: &str,
    calls: impl FnOnce(&str) -> Option<(usize, Vec<ToolCall>)>,
) -> Message {
    let mut message = Message::new(Role::Assistant);
    let mut rest = body;
    if let Some(after) = rest.strip_prefix(think_open)
        && let Some(end) = after.find(THINK_CLOSE)
    {
        message.thinking = after[..end].to_owned();
        rest = &after[end + THINK_CLOSE.len()..];
    }
    match calls(rest) {
        Some((at, found)) => {
            message.text = rest[..at].to_owned();
            message.calls = found;
        }
        None => message.text = rest.to_owned(),
    }
    message
}

/// A call section between `begin` and `end` markers that closes `text`, read by `read_calls`
/// (DeepSeek's and Kimi's form).
pub(super) fn delimited(
    text: &str,
    begin: &str,
    end: &str,
    read_calls: impl FnOnce(&str) -> Option<Vec<ToolCall>>,
) -> Option<(usize, Vec<ToolCall>)> {
    let inner = text.strip_suffix(end)?;
    let at = inner.rfind(begin)?;
    read_calls(&inner[at + begin.len()..]).map(|calls| (at, calls))
}
