//! The wires agents speak to their models — and compactd with them, at an agent's model base
//! URL. A wire is one type for every layer that needs it (the gateway, handoff, the agent-session
//! record, the call log, `POST /v1/handoff`): its name, the conversation its requests carry, and
//! the header its agents name their session in. Adding a wire is a variant here and a row of
//! [`Wire::ALL`]; what answers on it is the service's (`agents/`).

use serde_json::Value;

use crate::transcript::Conversation;
use crate::transcript::structured::{from_anthropic, from_chat, from_responses};

/// A wire compactd speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Wire {
    /// OpenAI chat completions (OpenCode; any OpenAI client; pi forks' `remoteEndpoint`).
    ChatCompletions,
    /// Anthropic Messages (Claude Code).
    AnthropicMessages,
    /// OpenAI Responses (Codex).
    Responses,
}

impl Wire {
    /// Every wire, in the order `name`s are listed.
    pub const ALL: [Wire; 3] = [
        Wire::AnthropicMessages,
        Wire::Responses,
        Wire::ChatCompletions,
    ];

    /// How the call log, the metrics and the console name it.
    pub fn name(self) -> &'static str {
        match self {
            Wire::ChatCompletions => "chat-completions",
            Wire::AnthropicMessages => "anthropic-messages",
            Wire::Responses => "responses",
        }
    }

    /// The conversation a request `body` of this wire carries: its `messages` (chat,
    /// Anthropic; a system prompt given apart is not part of it), or its `input` (Responses).
    pub fn conversation(self, body: &Value) -> Conversation {
        match self {
            Wire::Responses => from_responses(&body["input"]),
            Wire::ChatCompletions | Wire::AnthropicMessages => {
                let none = Vec::new();
                self.messages(body["messages"].as_array().unwrap_or(&none))
            }
        }
    }

    /// The conversation of a list of this wire's messages.
    pub fn messages(self, messages: &[Value]) -> Conversation {
        match self {
            Wire::AnthropicMessages => from_anthropic(messages),
            Wire::ChatCompletions => from_chat(messages),
            Wire::Responses => from_responses(&Value::Array(messages.to_vec())),
        }
    }

    /// The wire a list of messages is written in, when nothing else says: Anthropic's blocks
    /// (`tool_use`, `tool_result`, thinking) tell its messages from chat's.
    pub fn of_messages(messages: &[Value]) -> Wire {
        let anthropic = messages.iter().any(|m| {
            m["content"].as_array().is_some_and(|blocks| {
                blocks.iter().any(|b| {
                    matches!(
                        b["type"].as_str(),
                        Some("tool_use" | "tool_result" | "thinking" | "redacted_thinking")
                    )
                })
            })
        });
        if anthropic {
            Wire::AnthropicMessages
        } else {
            Wire::ChatCompletions
        }
    }

    /// The agent whose requests on this wire name their session, and the header they name it
    /// in (read from their recorded requests): Claude Code `X-Claude-Code-Session-Id`, Codex
    /// `session-id`, OpenCode `x-session-id`.
    pub fn session_header(self) -> (&'static str, &'static str) {
        match self {
            Wire::AnthropicMessages => ("claude-code", "x-claude-code-session-id"),
            Wire::Responses => ("codex", "session-id"),
            Wire::ChatCompletions => ("opencode", "x-session-id"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_wire_reads_its_own_conversation() {
        let anthropic = json!({"messages": [
            {"role": "user", "content": "fix src/a.rs"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Edit", "input": {"file_path": "src/a.rs"}}]},
        ]});
        let chat = json!({"messages": [{"role": "user", "content": "fix src/b.rs"}]});
        let responses = json!({"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "fix src/c.rs"}]}]});
        let first = |wire: Wire, body: &Value| wire.conversation(body).messages[0].text.clone();
        assert_eq!(first(Wire::AnthropicMessages, &anthropic), "fix src/a.rs");
        assert_eq!(first(Wire::ChatCompletions, &chat), "fix src/b.rs");
        assert_eq!(first(Wire::Responses, &responses), "fix src/c.rs");
        assert_eq!(
            Wire::of_messages(anthropic["messages"].as_array().unwrap()),
            Wire::AnthropicMessages
        );
        assert_eq!(
            Wire::of_messages(chat["messages"].as_array().unwrap()),
            Wire::ChatCompletions
        );
        let names: Vec<&str> = Wire::ALL.iter().map(|w| w.name()).collect();
        assert_eq!(
            names,
            ["anthropic-messages", "responses", "chat-completions"]
        );
    }
}
