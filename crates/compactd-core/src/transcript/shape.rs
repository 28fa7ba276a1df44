//! What a summarization prompt holds, typed: its conversation, previous summary and
//! instructions. Built once — from an agent's prompt, reading its conversation in whatever
//! dialect it is written, or from a prompt compactd rendered itself from typed messages — and
//! read by every stage instead of the text.

use super::prompt::{self, Asks, Parts};
use super::{Conversation, Dialect, estimate_tokens};

#[derive(Debug, Clone, PartialEq)]
pub struct Shape {
    pub conversation: Conversation,
    /// The conversation's estimated tokens as the prompt carries it.
    pub conversation_tokens: u64,
    pub previous_summary: Option<String>,
    /// What the instructions ask for.
    pub asks: Asks,
    /// The instructions: what follows the tags.
    pub instructions: String,
    /// What comes before the conversation (normally nothing).
    pub before: String,
}

impl Shape {
    /// A prompt that is no summarization prompt (a repair request): no conversation.
    pub fn none() -> Shape {
        Shape {
            conversation: Conversation::new(Dialect::Generic, Vec::new()),
            conversation_tokens: 0,
            previous_summary: None,
            asks: Asks::Checkpoint {
                critical_context: true,
            },
            instructions: String::new(),
            before: String::new(),
        }
    }

    /// The parts of an agent's prompt: its conversation read (once) in whatever dialect it is.
    pub fn of_prompt(prompt: &str) -> Shape {
        let parts = Parts::parse(prompt);
        Shape::of_parts(&parts, super::read(parts.conversation))
    }

    /// The parts of a prompt compactd wrote from `conversation`: nothing is read back.
    pub fn of_rendered(prompt: &str, conversation: Conversation) -> Shape {
        Shape::of_parts(&Parts::parse(prompt), conversation)
    }

    /// The prompt compactd renders for a typed `conversation` (written as `written`, the summary
    /// it continues, the instructions), and its shape, made from those parts: nothing is read
    /// back from the text.
    pub fn render(
        conversation: Conversation,
        written: &str,
        previous_summary: Option<&str>,
        instructions: &str,
    ) -> (String, Shape) {
        let parts = Parts {
            before: "",
            conversation: written,
            previous_summary,
            instructions,
        };
        let mut prompt = prompt::conversation_block(written);
        if let Some(previous) = previous_summary {
            prompt.push_str(&prompt::previous_block(previous));
        }
        prompt.push_str(instructions);
        (prompt, Shape::of_parts(&parts, conversation))
    }

    fn of_parts(parts: &Parts<'_>, conversation: Conversation) -> Shape {
        Shape {
            conversation,
            conversation_tokens: estimate_tokens(parts.conversation),
            previous_summary: parts.previous_summary.map(str::to_owned),
            asks: parts.asks(),
            instructions: parts.instructions.to_owned(),
            before: parts.before.to_owned(),
        }
    }

    /// A prompt of this one's layout around another conversation (as written), previous summary
    /// and instructions.
    pub fn prompt(&self, conversation: &str, previous: Option<&str>, instructions: &str) -> String {
        let mut text = self.before.clone();
        text.push_str(&prompt::conversation_block(conversation));
        if let Some(previous) = previous {
            text.push_str(&prompt::previous_block(previous));
        }
        text.push_str(instructions);
        text
    }

    /// The summary this one continues: the previous summary in its tags, or one the agent put in
    /// its instructions instead (OpenCode 1.18's `<prior-summary>`), or the one Claude Code's
    /// continuation carries in the conversation's first user turn (a Claude Code session in a
    /// text dialect). Anchors and the extractive summarizer carry it on; the prompt is left as
    /// the agent wrote it.
    pub fn earlier_summary(&self) -> Option<&str> {
        self.previous_summary
            .as_deref()
            .or_else(|| {
                let (_, rest) = self.instructions.split_once("<prior-summary>\n")?;
                let (summary, _) = rest.split_once("\n</prior-summary>")?;
                Some(summary)
            })
            .or_else(|| {
                let first = self
                    .conversation
                    .messages
                    .iter()
                    .find(|m| m.role == super::Role::User)?;
                super::continuation::claude_summary(&first.text)
            })
    }

    /// The `##` headings the instructions ask for, lower-cased (none for a short summary).
    pub fn headings(&self) -> Vec<String> {
        if self.asks == Asks::Short {
            return Vec::new();
        }
        (self.instructions.lines())
            .filter_map(|l| l.trim().strip_prefix("## "))
            .map(|h| h.trim().to_lowercase())
            .filter(|h| !h.is_empty())
            .collect()
    }
}

/// Every text of the typed conversation and its prompt's other parts: a tool call's arguments
/// each by its name (an `env` map's `SECRET_VALUE` by its key).
impl crate::redact::Screen for Shape {
    fn screen(&mut self, screening: &mut crate::redact::Screening<'_>) {
        for message in &mut self.conversation.messages {
            screening.text(&mut message.text);
            screening.text(&mut message.thinking);
            for call in &mut message.calls {
                for (name, value) in &mut call.arguments {
                    match value {
                        serde_json::Value::String(text) => screening.keyed(name, text),
                        other => screening.json(other),
                    }
                }
                for raw in &mut call.raw_strings {
                    screening.text(raw);
                }
            }
        }
        screening.text(&mut self.conversation.cut.text);
        if let Some(previous) = &mut self.previous_summary {
            screening.text(previous);
        }
        screening.text(&mut self.instructions);
        screening.text(&mut self.before);
    }
}
