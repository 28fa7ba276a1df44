//! The conversation a summarization is about, typed — and every form it is written in.
//!
//! A [`Conversation`] is a list of [`Message`]s (user, developer, assistant with its thinking,
//! text and tool calls, tool results with the call they answer), built once from whatever came
//! in: a pi session's planned messages (`compaction::serialize`), an agent's prompt in any
//! dialect ([`read`]), or a structured request (chat, Anthropic Messages, Responses input,
//! [`structured`]). Every stage — anchors, the gate, redaction, fold, the extractive summarizer,
//! loop detection — works on it. Text is written only when it leaves for a model or a client
//! ([`write()`]), in the dialect it came in.
//!
//! A dialect is one module with a reader and a writer: pi's `[User]:` form, OpenCode's, and the
//! ten model-native markups oh-my-pi 18.3 writes (anthropic, xml, minimax, harmony, qwen3,
//! hermes, glm, kimi, deepseek, gemini, gemma). The writers print what oh-my-pi prints, byte for
//! byte, and the readers undo them: `write(read(text)) == text` on every recorded request. Text
//! in no known dialect is read by a generic reader that still finds the turns it can, and says
//! so. Readers never fail.
//!
//! Pure and synchronous. [`watch_reads`] counts the reads of a text, so a test can prove each
//! request's conversation is read once.

pub mod agent_text;
mod calls;
pub mod continuation;
mod cut;
pub mod dialects;
pub mod files;
mod fold_windows;
mod literals;
mod markup;
pub mod prompt;
mod shape;
mod shell_files;
pub mod structured;
pub mod windowed;

use serde_json::Value;

pub use cut::Cut;
pub use dialects::detect::detect;
pub use dialects::{opencode, pi};
pub use shape::Shape;

/// The markup a conversation is written in.
/// Each has its row in [`dialects::DIALECTS`]: its name, reader, writer and detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// pi's `[User]: …` parts (also oh-my-pi's older `[Tool Call]`/`[Tool Result]` variant).
    Pi,
    /// OpenCode's `[User]:` / `[Assistant tool call]: name({json})` form.
    OpenCode,
    /// `Human:` / `Assistant:` with `<function_calls><invoke …>` and `<function_results>`.
    Anthropic,
    /// `Human:` / `Assistant:` with bare `<invoke>` blocks and `<tool_response>` results.
    Xml,
    /// `Human:` / `Assistant:` with `<minimax:tool_call>` blocks.
    Minimax,
    /// OpenAI harmony: `<|start|>role<|channel|>…<|message|>…<|end|>`, tokens escaped.
    Harmony,
    /// ChatML with `<tool_call>{json}</tool_call>`, results as user turns.
    Qwen3,
    /// ChatML with results in `tool` turns.
    Hermes,
    /// GLM: `[gMASK]<sop><|user|>`, `<arg_key>`/`<arg_value>` arguments.
    Glm,
    /// Kimi: `<|im_user|>`, `functions.NAME:0` call ids, `## Return of …` results.
    Kimi,
    /// DeepSeek: full-width `<｜User｜>` markers.
    DeepSeek,
    /// Gemini (Gemma 2/3 markup): `<start_of_turn>`, ```` ```tool_code ```` Python calls.
    Gemini,
    /// Gemma 4: `<|turn>user`, `<|tool_call>call:NAME{k:<|"|>v<|"|>}`.
    Gemma,
    /// No known dialect: the generic reader's best guess.
    Generic,
}

impl Dialect {
    pub fn name(self) -> &'static str {
        dialects::row(self).name
    }

    /// Every dialect with a writer that round-trips its reader.
    pub fn written() -> impl Iterator<Item = Dialect> {
        dialects::DIALECTS
            .iter()
            .filter(|r| r.written)
            .map(|r| r.dialect)
    }
}

impl serde::Serialize for Dialect {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    /// System or developer text inside the conversation (not the request's system prompt).
    Developer,
    Assistant,
    ToolResult,
}

/// One message of a conversation, whatever it was written in.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    /// What the user wrote, what the assistant said, or what a tool returned, without markup.
    pub text: String,
    /// The assistant's reasoning, when the conversation carries it.
    pub thinking: String,
    /// The assistant's tool calls, in order.
    pub calls: Vec<ToolCall>,
    /// For tool results: the tool that produced it (named by the dialect, or by its call).
    pub tool: Option<String>,
    /// For tool results: the id of the call it answers, when the form carries one.
    pub call_id: Option<String>,
    /// For tool results: marked as an error.
    pub is_error: bool,
    /// Written as part of the message before it, on the next line (OpenCode writes the parts of
    /// one of its messages — text, reasoning, calls, results — that way).
    pub continues: bool,
}

impl Message {
    pub fn new(role: Role) -> Message {
        Message {
            role,
            text: String::new(),
            thinking: String::new(),
            calls: Vec::new(),
            tool: None,
            call_id: None,
            is_error: false,
            continues: false,
        }
    }

    /// A message of `role` with this text.
    pub fn with_text(role: Role, text: impl Into<String>) -> Message {
        Message {
            text: text.into(),
            ..Message::new(role)
        }
    }

    pub fn tool_result(text: impl Into<String>, tool: Option<String>, is_error: bool) -> Message {
        Message {
            text: text.into(),
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
        self.text
            .trim_start()
            .strip_prefix("Ran `")?
            .split('`')
            .next()
    }

    fn is_empty(&self) -> bool {
        self.text.trim().is_empty() && self.thinking.is_empty() && self.calls.is_empty()
    }
}

/// A tool call with its arguments in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// The call's id, when the form carries one of its own (results name it).
    pub id: Option<String>,
    pub name: String,
    pub arguments: Vec<(String, Value)>,
    /// The string arguments the markup wrote as they are, not as JSON: oh-my-pi writes a string
    /// argument of a tool whose schema it knows that way in its `<invoke>` dialects. Written back
    /// the same way.
    pub raw_strings: Vec<String>,
}

impl ToolCall {
    pub fn new(name: impl Into<String>, arguments: Vec<(String, Value)>) -> ToolCall {
        ToolCall {
            id: None,
            name: name.into(),
            arguments,
            raw_strings: Vec::new(),
        }
    }

    /// A non-empty string argument.
    pub fn arg(&self, key: &str) -> Option<&str> {
        self.arguments
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| v.as_str())
            .filter(|s| !s.is_empty())
    }

    /// A call from a JSON object of arguments (anything else has none).
    pub fn from_object(name: &str, arguments: &Value) -> ToolCall {
        ToolCall::new(name, markup::object_entries(arguments.clone()))
    }

    /// The arguments as the JSON object `JSON.stringify` prints.
    pub fn arguments_json(&self) -> String {
        markup::stringify(&markup::arguments_object(&self.arguments))
    }
}

/// A conversation: its messages and the dialect they came in (and are written back in).
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub dialect: Dialect,
    pub messages: Vec<Message>,
    /// Where the client cut the conversation short, if it did: the last `cut.messages`
    /// messages are the reading of the fragment `cut.text`, which is written as it came.
    pub cut: Cut,
}

impl Conversation {
    pub fn new(dialect: Dialect, messages: Vec<Message>) -> Conversation {
        Conversation {
            dialect,
            messages,
            cut: Cut::default(),
        }
    }

    /// The conversation as text, in its dialect.
    pub fn write(&self) -> String {
        let whole = self.messages.len() - self.cut.messages;
        let mut text = write(self.dialect, &self.messages[..whole]);
        text.push_str(&self.cut.text);
        text
    }

    /// The last message of the user that is the user's own words (not a tool's output).
    pub fn latest_user_text(&self) -> Option<&str> {
        self.messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User && !m.text.trim().is_empty())
            .map(|m| m.text.as_str())
    }
}

/// The reads of conversations, counted for the tests that watch them (the `probe` feature, on
/// only in test builds).
#[cfg(feature = "probe")]
static READS: crate::probe::Probe = crate::probe::Probe::new();

/// Counts the reads of conversations that start with `opening` from now on (see [`reads_of`]):
/// a test's proof that every stage works on the one reading of a request, whatever else the
/// process reads meanwhile.
#[cfg(feature = "probe")]
pub fn watch_reads(opening: &str) {
    READS.watch(opening);
}

/// How many conversations starting with `opening` were read since [`watch_reads`].
#[cfg(feature = "probe")]
pub fn reads_of(opening: &str) -> u64 {
    READS.count_of(opening)
}

/// Reads a conversation in any dialect (counted when watched, see `watch_reads`).
pub fn read(conversation: &str) -> Conversation {
    #[cfg(feature = "probe")]
    READS.count(conversation);
    read_as(detect(conversation), conversation)
}

/// Reads `conversation` as written in `dialect`.
pub fn read_as(dialect: Dialect, conversation: &str) -> Conversation {
    match cut::body(conversation) {
        Some(body) => cut::read(dialect, conversation, body),
        None => read_whole(dialect, conversation),
    }
}

fn read_whole(dialect: Dialect, conversation: &str) -> Conversation {
    let row = dialects::row(dialect);
    let mut messages = if row.escaped {
        (row.read)(&markup::unescape_frame_tags(conversation))
    } else {
        (row.read)(conversation)
    };
    name_results(&mut messages);
    Conversation::new(dialect, messages)
}

/// `messages` written in `dialect`, as the agent that uses it writes them (oh-my-pi escapes the
/// frame tags and, for harmony, its tokens, inside the whole transcript).
pub fn write(dialect: Dialect, messages: &[Message]) -> String {
    let row = dialects::row(dialect);
    let text = (row.write)(messages);
    if row.escaped {
        markup::escape_frame_tags(&text).into_owned()
    } else {
        text
    }
}

/// Results follow their calls in order: a result the form does not name gets the name (and id)
/// of the call it answers.
pub fn name_results(messages: &mut [Message]) {
    let mut pending: std::collections::VecDeque<(String, Option<String>)> = Default::default();
    for message in messages {
        match message.role {
            Role::Assistant if !message.calls.is_empty() => {
                pending = message
                    .calls
                    .iter()
                    .map(|c| (c.name.clone(), c.id.clone()))
                    .collect();
            }
            Role::ToolResult => {
                let answered = pending.pop_front();
                if message.tool.is_none() {
                    message.tool = answered.map(|(name, _)| name);
                }
            }
            _ => {}
        }
    }
}

/// `<tool_response>\n…\n</tool_response>` blocks joined by newlines, the whole of `body` (the
/// results of several dialects); `None` when `body` is not only that. An output may hold the
/// closing tag itself: a block ends at the first one after which the list goes on or ends.
fn tool_responses(body: &str) -> Option<Vec<Message>> {
    const OPEN: &str = "<tool_response>\n";
    const CLOSE: &str = "\n</tool_response>";
    let mut rest = body.strip_prefix(OPEN)?;
    let mut results = Vec::new();
    loop {
        let at = memchr::memmem::find_iter(rest.as_bytes(), CLOSE.as_bytes()).find(|&at| {
            let after = &rest[at + CLOSE.len()..];
            after.is_empty() || after.starts_with("\n<tool_response>\n")
        })?;
        results.push(Message::tool_result(&rest[..at], None, false));
        let after = &rest[at + CLOSE.len()..];
        if after.is_empty() {
            return Some(results);
        }
        rest = &after[1 + OPEN.len()..];
    }
}

/// `index` rounded down to a character boundary of `text`.
fn floor_boundary(text: &str, index: usize) -> usize {
    let mut index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// Splits `text` at each occurrence of any of `tokens`: `(token index, start of the token, the
/// text after it up to the next token)`; text before the first token comes with `None`.
fn split_tokens<'a>(text: &'a str, tokens: &[&str]) -> Vec<(Option<usize>, &'a str)> {
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (index, token) in tokens.iter().enumerate() {
        for at in memchr::memmem::find_iter(text.as_bytes(), token.as_bytes()) {
            found.push((at, index));
        }
    }
    found.sort_unstable();
    // A token that starts inside another (longer one at the same place) is not a second one.
    let mut pieces = Vec::new();
    let mut last_end = 0;
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for (at, index) in found {
        if at < last_end {
            continue;
        }
        last_end = at + tokens[index].len();
        kept.push((at, index));
    }
    let first = kept.first().map_or(text.len(), |&(at, _)| at);
    if first > 0 {
        pieces.push((None, &text[..first]));
    }
    for (i, &(at, index)) in kept.iter().enumerate() {
        let end = kept.get(i + 1).map_or(text.len(), |&(next, _)| next);
        pieces.push((Some(index), &text[at + tokens[index].len()..end]));
    }
    pieces
}

/// Finds where a tail of `text` that `parse` reads whole begins: the first occurrence of `opener`
/// from which the rest parses. Returns the text before it and the parsed tail.
fn trailing<T>(
    text: &str,
    opener: &str,
    mut parse: impl FnMut(&str) -> Option<T>,
) -> Option<(usize, T)> {
    for at in memchr::memmem::find_iter(text.as_bytes(), opener.as_bytes()) {
        if let Some(parsed) = parse(&text[at..]) {
            return Some((at, parsed));
        }
    }
    None
}

/// Estimated tokens of a text: `ceil(chars / 4)` in UTF-16 units, the reference's heuristic.
pub fn estimate_tokens(text: &str) -> u64 {
    (crate::js_json::utf16_len(text) as u64).div_ceil(4)
}

#[cfg(test)]
mod tests;
