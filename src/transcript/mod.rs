//! The conversation as text: the one place that knows how transcripts are written and read.
//!
//! compactd writes pi's form (`[User]: …`, spec §6.1) for the prompts it renders itself. Agents
//! send their own: pi's form, and since oh-my-pi v15.13.3 the active model's chat markup —
//! `Human:`/`Assistant:` with `<function_calls>` (Claude, and the fallback for other models),
//! harmony `<|start|>…<|end|>` (OpenAI), ChatML `<|im_start|>…<|im_end|>` (Qwen) and Gemma
//! `<start_of_turn>…<end_of_turn>` (Gemini). [`read`] turns any of them into the same
//! [`Message`]s, so that everything that reads a conversation (the extractive summarizer, the
//! fidelity anchors, prompt folding) sees one shape. [`prompt`] owns the tags around the
//! conversation (`<conversation>`, `<previous-summary>`) and the instructions after them.
//!
//! Pure and synchronous. Readers never fail: text they cannot place is kept as the text of the
//! message it appears in.

mod calls;
mod chatml;
mod claude;
mod gemma;
mod harmony;
pub mod pi;
pub mod prompt;

use serde_json::Value;

/// The markup a transcript is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    /// pi's `[User]: …` parts (also oh-my-pi's `[Tool Call]`/`[Tool Result]` variant).
    Pi,
    /// `Human:` / `Assistant:` turns with `<function_calls><invoke …>` or bare `<invoke>` blocks.
    Claude,
    /// OpenAI harmony: `<|start|>role<|channel|>…<|message|>…<|end|>`.
    Harmony,
    /// `<|im_start|>role … <|im_end|>` with `<tool_call>{…}</tool_call>`.
    ChatMl,
    /// `<start_of_turn>role … <end_of_turn>` with ```` ```tool_code ```` blocks.
    Gemma,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Pi => "pi",
            Dialect::Claude => "claude",
            Dialect::Harmony => "harmony",
            Dialect::ChatMl => "chatml",
            Dialect::Gemma => "gemma",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
}

/// One message of a transcript, whatever the dialect.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    /// What the user wrote, what the assistant said, or what a tool returned, without markup.
    pub text: String,
    /// The assistant's reasoning, when the transcript carries it.
    pub thinking: String,
    /// The assistant's tool calls, in order.
    pub calls: Vec<ToolCall>,
    /// For tool results: the tool that produced it (named by the dialect, or by the call it
    /// answers).
    pub tool: Option<String>,
    /// For tool results: the dialect marked it as an error.
    pub is_error: bool,
}

impl Message {
    fn new(role: Role) -> Message {
        Message {
            role,
            text: String::new(),
            thinking: String::new(),
            calls: Vec::new(),
            tool: None,
            is_error: false,
        }
    }

    fn user(text: &str) -> Message {
        Message {
            text: text.trim().to_owned(),
            ..Message::new(Role::User)
        }
    }

    fn tool_result(text: &str, tool: Option<String>, is_error: bool) -> Message {
        Message {
            text: text.to_owned(),
            tool,
            is_error,
            ..Message::new(Role::ToolResult)
        }
    }

    /// A shell command the user ran with `!cmd` (pi renders it as `Ran \`cmd\``).
    pub fn user_command(&self) -> Option<&str> {
        if self.role != Role::User {
            return None;
        }
        self.text.strip_prefix("Ran `")?.split('`').next()
    }

    fn is_empty(&self) -> bool {
        self.text.trim().is_empty() && self.thinking.is_empty() && self.calls.is_empty()
    }
}

/// A tool call with its arguments in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Vec<(String, Value)>,
}

impl ToolCall {
    /// A non-empty string argument.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.arguments
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_str())
            .filter(|s| !s.is_empty())
    }

    fn from_object(name: &str, arguments: &Value) -> ToolCall {
        let arguments = match arguments {
            Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            _ => Vec::new(),
        };
        ToolCall {
            name: name.to_owned(),
            arguments,
        }
    }
}

/// A transcript read back into messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Transcript {
    pub dialect: Dialect,
    pub messages: Vec<Message>,
    /// Byte offsets in the conversation where a turn starts: where it may be cut without
    /// splitting a message (the first is 0 when the transcript is not empty).
    pub boundaries: Vec<usize>,
}

impl Transcript {
    /// The conversation cut into consecutive pieces of at most about `max_bytes` each, at turn
    /// boundaries (a single turn longer than that is a piece of its own).
    pub fn windows<'a>(&self, conversation: &'a str, max_bytes: usize) -> Vec<&'a str> {
        let mut pieces = Vec::new();
        let mut start = 0;
        let mut last_fit = 0;
        for &boundary in self
            .boundaries
            .iter()
            .chain(std::iter::once(&conversation.len()))
        {
            if boundary <= start {
                continue;
            }
            if boundary - start > max_bytes && last_fit > start {
                pieces.push(&conversation[start..last_fit]);
                start = last_fit;
            }
            last_fit = boundary;
        }
        if start < conversation.len() {
            pieces.push(&conversation[start..]);
        }
        pieces
            .into_iter()
            .map(|p| p.trim_matches('\n'))
            .filter(|p| !p.trim().is_empty())
            .collect()
    }
}

/// Which dialect `conversation` is written in.
pub fn detect(conversation: &str) -> Dialect {
    let head = conversation.trim_start();
    if pi::starts_with_marker(head) {
        return Dialect::Pi;
    }
    // Markup tokens are distinctive wherever they appear; look at the opening first, which
    // settles every real transcript, then at the whole text.
    let opening = &head[..floor_boundary(head, 4096)];
    for text in [opening, head] {
        if text.contains("<|im_start|>") || text.contains("<\\|im_start\\|>") {
            return Dialect::ChatMl;
        }
        if text.contains("<start_of_turn>") {
            return Dialect::Gemma;
        }
        if text.contains("<|start|>") || text.contains("<\\|start\\|>") {
            return Dialect::Harmony;
        }
        if text.starts_with("Human: ") || text.contains("\n\nHuman: ") {
            return Dialect::Claude;
        }
    }
    Dialect::Pi
}

/// Reads a conversation in any dialect.
pub fn read(conversation: &str) -> Transcript {
    let dialect = detect(conversation);
    let mut reader = Reader::default();
    match dialect {
        Dialect::Pi => pi::read(conversation, &mut reader),
        Dialect::Claude => claude::read(conversation, &mut reader),
        Dialect::Harmony => harmony::read(conversation, &mut reader),
        Dialect::ChatMl => chatml::read(conversation, &mut reader),
        Dialect::Gemma => gemma::read(conversation, &mut reader),
    }
    let mut messages = reader.messages;
    messages.retain(|m| !m.is_empty() || m.role == Role::ToolResult);
    name_results(&mut messages);
    Transcript {
        dialect,
        messages,
        boundaries: reader.boundaries,
    }
}

/// What the dialect readers build.
#[derive(Default)]
struct Reader {
    messages: Vec<Message>,
    boundaries: Vec<usize>,
}

impl Reader {
    /// A turn starts at byte `at` of the conversation.
    fn turn(&mut self, at: usize) {
        if self.boundaries.last() != Some(&at) {
            self.boundaries.push(at);
        }
    }

    fn push(&mut self, message: Message) {
        self.messages.push(message);
    }

    /// The assistant message being built: the last one when it is an assistant's, else a new one.
    fn assistant(&mut self) -> &mut Message {
        if self.messages.last().map(|m| m.role) != Some(Role::Assistant) {
            self.messages.push(Message::new(Role::Assistant));
        }
        self.messages.last_mut().expect("just ensured")
    }
}

/// Results follow their calls in order: a result the dialect does not name gets the name of the
/// call it answers.
fn name_results(messages: &mut [Message]) {
    let mut pending: std::collections::VecDeque<String> = Default::default();
    for message in messages {
        match message.role {
            Role::Assistant if !message.calls.is_empty() => {
                pending = message.calls.iter().map(|c| c.name.clone()).collect();
            }
            Role::ToolResult => {
                let answered = pending.pop_front();
                if message.tool.is_none() {
                    message.tool = answered;
                }
            }
            _ => {}
        }
    }
}

/// Appends `piece` (trimmed of surrounding newlines) to `text`, separated by a newline.
fn append_text(text: &mut String, piece: &str) {
    let piece = piece.trim_matches(['\n', '\r']);
    if piece.trim().is_empty() {
        return;
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str(piece);
}

/// `index` rounded down to a character boundary of `text`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The text between `open` and the next `close` after it, and the offset just past `close`.
fn between<'a>(text: &'a str, open: &str, close: &str) -> Option<(&'a str, usize)> {
    let start = text.find(open)? + open.len();
    let end = start + text[start..].find(close)?;
    Some((&text[start..end], end + close.len()))
}

#[cfg(test)]
mod tests;
