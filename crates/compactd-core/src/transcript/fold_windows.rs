//! A conversation cut into windows that each fit a model (the fold summarizes them in turn).

use super::{Conversation, Message};

impl Conversation {
    /// The messages cut into consecutive windows whose written text is at most about
    /// `max_bytes` each, between messages; a single message longer than that is split into
    /// several of the same kind (at line ends, else at character boundaries). Each window is a
    /// conversation of its own, written in this one's dialect.
    pub fn windows(&self, max_bytes: usize) -> Vec<Conversation> {
        let whole = self.messages.len() - self.cut.messages;
        let mut windows = Vec::new();
        let mut current: Vec<Message> = Vec::new();
        let mut size = 0;
        for message in &self.messages[..whole] {
            for piece in split_long(message, max_bytes) {
                let len = super::write(self.dialect, std::slice::from_ref(&piece)).len();
                if size + len > max_bytes && !current.is_empty() {
                    windows.push(Conversation::new(
                        self.dialect,
                        std::mem::take(&mut current),
                    ));
                    size = 0;
                }
                size += len;
                current.push(piece);
            }
        }
        // The fragment a client cut stays whole, with the last window.
        if self.cut != super::Cut::default() {
            current.extend_from_slice(&self.messages[whole..]);
        }
        if !current.is_empty() || !self.cut.text.is_empty() {
            windows.push(Conversation::new(self.dialect, current));
        }
        if let Some(last) = windows.last_mut() {
            last.cut = self.cut.clone();
        }
        windows
    }
}

/// `message` as pieces of at most about `max_bytes` of text each (only long texts are split).
fn split_long(message: &Message, max_bytes: usize) -> Vec<Message> {
    let longest = message.text.len().max(message.thinking.len());
    if longest <= max_bytes || max_bytes == 0 {
        return vec![message.clone()];
    }
    let mut pieces = Vec::new();
    let mut thinking = split_text(&message.thinking, max_bytes).into_iter();
    let mut text = split_text(&message.text, max_bytes).into_iter().peekable();
    for part in thinking.by_ref() {
        pieces.push(Message {
            thinking: part,
            text: String::new(),
            calls: Vec::new(),
            ..message.clone()
        });
    }
    while let Some(part) = text.next() {
        let last = text.peek().is_none();
        pieces.push(Message {
            thinking: String::new(),
            text: part,
            calls: if last {
                message.calls.clone()
            } else {
                Vec::new()
            },
            ..message.clone()
        });
    }
    if pieces.is_empty() {
        pieces.push(message.clone());
    }
    pieces
}

fn split_text(text: &str, max_bytes: usize) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > max_bytes {
        let mut cut = max_bytes;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(line_end) = rest[..cut].rfind('\n').filter(|&at| at > max_bytes / 2) {
            cut = line_end + 1;
        }
        pieces.push(rest[..cut].to_owned());
        rest = &rest[cut..];
    }
    if !rest.is_empty() {
        pieces.push(rest.to_owned());
    }
    pieces
}
