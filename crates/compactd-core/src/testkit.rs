//! Builders for sessions in unit and property tests.

use serde_json::{Value, json};

use crate::session::{ParseOptions, Session};

/// Builds a v3 session file entry by entry. Each append is a child of the current leaf, as pi
/// appends; [`SessionBuilder::branch_from`] moves the leaf without writing anything.
pub(crate) struct SessionBuilder {
    lines: Vec<String>,
    next: usize,
    leaf: Option<String>,
}

impl SessionBuilder {
    pub(crate) fn new() -> Self {
        SessionBuilder {
            lines: vec![json!({"type":"session","version":3,"id":"test-session","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/work"}).to_string()],
            next: 0,
            leaf: None,
        }
    }

    /// Appends an entry of `entry_type` with the given extra fields; returns its id.
    pub(crate) fn entry(&mut self, entry_type: &str, fields: Value) -> String {
        self.next += 1;
        let id = format!("e{:07}", self.next);
        let mut object = json!({
            "type": entry_type,
            "id": id,
            "parentId": self.leaf,
            "timestamp": format!("2026-01-01T00:{:02}:{:02}.000Z", (self.next / 60) % 60, self.next % 60),
        });
        if let Value::Object(extra) = fields {
            object.as_object_mut().unwrap().extend(extra);
        }
        self.lines.push(object.to_string());
        self.leaf = Some(id.clone());
        id
    }

    pub(crate) fn message(&mut self, message: Value) -> String {
        self.entry("message", json!({ "message": message }))
    }

    pub(crate) fn user(&mut self, text: &str) -> String {
        self.message(json!({"role":"user","content":[{"type":"text","text":text}],"timestamp":1}))
    }

    pub(crate) fn assistant(&mut self, text: &str) -> String {
        self.message(
            json!({"role":"assistant","content":[{"type":"text","text":text}],
            "provider":"anthropic","model":"claude","stopReason":"stop","timestamp":2}),
        )
    }

    pub(crate) fn assistant_with_usage(&mut self, text: &str, input: u64) -> String {
        self.message(
            json!({"role":"assistant","content":[{"type":"text","text":text}],
            "provider":"anthropic","model":"claude","stopReason":"stop","timestamp":2,
            "usage":{"input":input,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":input}}),
        )
    }

    pub(crate) fn tool_call(&mut self, name: &str, arguments: Value) -> String {
        self.message(json!({"role":"assistant","content":[{"type":"toolCall","id":"call","name":name,"arguments":arguments}],
            "provider":"anthropic","model":"claude","stopReason":"toolUse","timestamp":2}))
    }

    pub(crate) fn tool_result(&mut self, text: &str) -> String {
        self.message(
            json!({"role":"toolResult","toolCallId":"call","toolName":"read",
            "content":[{"type":"text","text":text}],"isError":false,"timestamp":3}),
        )
    }

    pub(crate) fn bash(&mut self, command: &str, output: &str) -> String {
        self.message(
            json!({"role":"bashExecution","command":command,"output":output,"exitCode":0,
            "cancelled":false,"truncated":false,"timestamp":4}),
        )
    }

    pub(crate) fn thinking_level(&mut self, level: &str) -> String {
        self.entry("thinking_level_change", json!({ "thinkingLevel": level }))
    }

    pub(crate) fn model_change(&mut self, provider: &str, model_id: &str) -> String {
        self.entry(
            "model_change",
            json!({ "provider": provider, "modelId": model_id }),
        )
    }

    pub(crate) fn custom_message(&mut self, text: &str) -> String {
        self.entry(
            "custom_message",
            json!({ "customType": "ext", "content": text, "display": true }),
        )
    }

    pub(crate) fn branch_summary(&mut self, summary: &str) -> String {
        let from = self.leaf.clone().unwrap_or_else(|| "root".into());
        self.entry(
            "branch_summary",
            json!({ "fromId": from, "summary": summary }),
        )
    }

    pub(crate) fn compaction(
        &mut self,
        summary: &str,
        first_kept: &str,
        tokens_before: u64,
    ) -> String {
        self.entry(
            "compaction",
            json!({ "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": tokens_before }),
        )
    }

    /// Moves the leaf to `id` (or to no entry), as `/tree` navigation does.
    pub(crate) fn branch_from(&mut self, id: Option<&str>) {
        self.leaf = id.map(str::to_owned);
    }

    pub(crate) fn jsonl(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }

    pub(crate) fn session(&self) -> Session {
        Session::parse(self.jsonl().as_bytes(), ParseOptions::default())
            .expect("a valid test session")
    }
}

/// `n` characters of text.
pub(crate) fn chars(n: usize) -> String {
    "x".repeat(n)
}
