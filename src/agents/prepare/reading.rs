//! What the preparer reads of a request without running it: the model's window, the model a body
//! names, the chained hashes of a conversation's messages, the session it belongs to.

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};

use super::WINDOWS;
use compactd_core::transcript::Message;

/// The window of `model`, in tokens (`unknown` for a model not listed).
pub(crate) fn window(model: &str, unknown: u64) -> u64 {
    let name = model.rsplit('/').next().unwrap_or(model);
    WINDOWS
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map_or(unknown, |(_, window)| *window)
}

/// The top-level `model` of a JSON body, found without parsing it: inside a JSON string a quote
/// is escaped, so the first `"model"` followed by a colon is a key (agents write it first).
pub(super) fn model_in(plain: &[u8]) -> Option<&str> {
    let finder = memchr::memmem::Finder::new(b"\"model\"");
    for at in finder.find_iter(plain) {
        let rest = &plain[at + 7..];
        let rest = rest.trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else {
            continue;
        };
        let rest = rest.trim_ascii_start().strip_prefix(b"\"")?;
        let end = memchr::memchr(b'"', rest)?;
        return std::str::from_utf8(&rest[..end]).ok();
    }
    None
}

/// A cheap name for the conversation of a body without a session header, for its pace only: the
/// hash of the first bytes of its message list (`"messages"` or `"input"`, the first such key
/// that opens a list: outside a JSON string a quote is never escaped), which stay as they are
/// while the conversation grows. Two conversations that open alike share it; their pace is then
/// a mix, never a wrong answer (what is answered is matched message by message).
pub(super) fn opening(plain: &[u8]) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    const OPENING: usize = 1024;
    let list = [&b"\"messages\""[..], &b"\"input\""[..]]
        .into_iter()
        .filter_map(|key| {
            memchr::memmem::find_iter(plain, key).find_map(|at| {
                let rest = plain[at + key.len()..].trim_ascii_start();
                let rest = rest.strip_prefix(b":")?.trim_ascii_start();
                rest.starts_with(b"[").then_some(at)
            })
        })
        .min()?;
    let opening = &plain[list..plain.len().min(list + OPENING)];
    let mut hash = std::collections::hash_map::DefaultHasher::new();
    opening.hash(&mut hash);
    Some(hash.finish())
}

/// The chained hashes of a conversation's messages: the `k`th (from 1) stands for the first `k`
/// messages, so two conversations share a prefix of `k` messages exactly when their `k`th hashes
/// agree. A message is read as compactd reads it (role, text, reasoning, calls, results), so the
/// markup an agent moves between turns (Claude Code's cache markers, a block list written as a
/// string) does not count.
pub(crate) fn prefix_hashes(messages: &[Message]) -> Vec<[u8; 32]> {
    chained(messages, None)
}

/// How much of each text and call argument [`loose_hashes`] reads: under the 2,000 UTF-16 units
/// pi-family agents cut a tool's output at (with a note of how much they cut) when they write
/// the conversation into their summarization prompt.
const LOOSE_CHARS: usize = 1_000;

/// [`prefix_hashes`] as a pi-family agent's written conversation can be matched against the
/// typed turns it sent: each text and call argument read up to [`LOOSE_CHARS`], the reasoning
/// (which the written form leaves out) not at all. Everything else must read the same.
pub(crate) fn loose_hashes(messages: &[Message]) -> Vec<[u8; 32]> {
    chained(messages, Some(LOOSE_CHARS))
}

fn chained(messages: &[Message], cut: Option<usize>) -> Vec<[u8; 32]> {
    let read = |text: &str| -> usize {
        match cut {
            Some(chars) => text
                .char_indices()
                .nth(chars)
                .map_or(text.len(), |(at, _)| at),
            None => text.len(),
        }
    };
    let mut chained = [0u8; 32];
    messages
        .iter()
        .map(|message| {
            let mut hash = Sha256::new();
            hash.update(chained);
            hash.update(format!("{:?}", message.role).as_bytes());
            let thinking = if cut.is_some() { "" } else { &message.thinking };
            for part in [message.text.as_str(), thinking] {
                let part = &part[..read(part)];
                hash.update((part.len() as u64).to_le_bytes());
                hash.update(part.as_bytes());
            }
            for call in &message.calls {
                hash.update(call.name.as_bytes());
                hash.update([0]);
                for (name, value) in &call.arguments {
                    let value = value.to_string();
                    hash.update(name.as_bytes());
                    hash.update([0]);
                    hash.update(&value.as_bytes()[..read(&value)]);
                    hash.update([0]);
                }
            }
            let tool = message.tool.as_deref().unwrap_or_default();
            hash.update(tool.as_bytes());
            hash.update([u8::from(message.is_error)]);
            chained = hash.finalize().into();
            chained
        })
        .collect()
}

/// The session a conversation belongs to: the agent's own session header, or else its
/// [`opening`](opening_key).
pub(super) fn session_key(headers: &HeaderMap, messages: &[Message]) -> Option<String> {
    if let Some((agent, id)) = crate::app::threads::seen::agent_session(headers) {
        return Some(format!("{agent}:{id}"));
    }
    opening_key(messages)
}

/// A conversation known by its first message, read loosely: what finds a session's prepared
/// summary from a compaction that names no session (a pi-family agent's remote endpoint). Two
/// conversations that open alike share it; only a prefix that reads the same is ever used.
pub(super) fn opening_key(messages: &[Message]) -> Option<String> {
    let first = loose_hashes(messages.get(..1)?);
    Some(format!("first:{}", hex::encode(first[0])))
}
