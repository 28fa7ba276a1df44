//! Generated pi 1.5 sessions (format v3 with what pi 1.5 writes): seeded, so that every run plans
//! the same files. Each holds a mix of every entry and message type pi 1.5's planner treats
//! specially; see `pi15.rs`.

use serde_json::{Value, json};

const WORDS: [&str; 16] = [
    "parser",
    "axum",
    "tokio",
    "retry",
    "naïve",
    "héllo",
    "emoji 😀",
    "Ωμέγα",
    "sqlx",
    "bench",
    "cut",
    "tab\there",
    "quote\"d",
    "back\\slash",
    "nl\nline",
    "日本語",
];
const FILES: [&str; 6] = [
    "/repo/src/lib.rs",
    "/repo/src/db.rs",
    "/repo/src/a b.rs",
    "/repo/src/ünï.rs",
    "/repo/src/main.rs",
    "/repo/README.md",
];

struct Writer {
    rng: fastrand::Rng,
    lines: Vec<String>,
    ids: Vec<String>,
    /// Ids of message entries, for context edits and compactions to name.
    messages: Vec<String>,
    clock: u64,
}

impl Writer {
    fn text(&mut self, words: usize) -> String {
        (0..words)
            .map(|_| WORDS[self.rng.usize(..WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn id(&mut self) -> String {
        format!("{:08x}", self.rng.u32(..))
    }

    fn push(&mut self, mut entry: Value) -> String {
        let id = self.id();
        self.clock += 1000;
        entry["id"] = json!(id);
        entry["parentId"] = self.ids.last().map_or(Value::Null, |p| json!(p));
        entry["timestamp"] = json!(format!(
            "2026-01-01T00:{:02}:{:02}.000Z",
            self.clock / 60000 % 60,
            self.clock / 1000 % 60
        ));
        self.lines.push(entry.to_string());
        self.ids.push(id.clone());
        id
    }

    fn message(&mut self, message: Value) -> String {
        let id = self.push(json!({"type": "message", "message": message}));
        self.messages.push(id.clone());
        id
    }

    fn usage(&mut self) -> Value {
        let input = if self.rng.u8(..4) == 0 {
            0
        } else {
            self.rng.u32(100..90000)
        };
        let output = if input == 0 { 0 } else { self.rng.u32(1..900) };
        json!({"input": input, "output": output, "cacheRead": 0, "cacheWrite": 0,
            "totalTokens": input + output,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}})
    }

    fn system(&mut self, first: bool) -> Value {
        let mut sections = serde_json::Map::new();
        sections.insert("style".into(), json!(self.text(12)));
        if !first && self.rng.bool() {
            sections.insert("rules".into(), Value::Null);
        } else {
            sections.insert("rules".into(), json!(self.text(20)));
        }
        let mut system = json!({"role": "system", "content": if first { self.text(30) } else { String::new() },
            "sections": sections, "timestamp": self.clock});
        if first || self.rng.bool() {
            system["toolsAdded"] = json!([{"name": "read", "description": self.text(6),
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}]);
        } else {
            system["toolsRemoved"] = json!([{"name": "read"}]);
        }
        system
    }

    fn turn(&mut self) {
        let words = self.rng.usize(5..60);
        let mut content = vec![json!({"type": "text", "text": self.text(words)})];
        if self.rng.u8(..5) == 0 {
            content.push(json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}));
        }
        self.message(json!({"role": "user", "content": content, "timestamp": self.clock}));
        for step in 0..self.rng.usize(1..4) {
            let mut blocks = Vec::new();
            if self.rng.bool() {
                blocks.push(json!({"type": "thinking", "thinking": self.text(20), "thinkingSignature": "sig"}));
            }
            let words = self.rng.usize(3..80);
            blocks.push(json!({"type": "text", "text": self.text(words)}));
            let calls = if step < 2 { self.rng.usize(0..3) } else { 0 };
            let mut call_ids = Vec::new();
            for _ in 0..calls {
                let tool = ["read", "edit", "write", "bash"][self.rng.usize(..4)];
                let file = FILES[self.rng.usize(..FILES.len())];
                let call = format!("toolu_{:06x}", self.rng.u32(..0xffffff));
                let arguments = match tool {
                    "bash" => json!({"command": "cargo test", "timeout": 30}),
                    "read" => json!({"path": file, "offset": 1, "limit": 1e21}),
                    _ => json!({"path": file, "oldText": "a", "newText": self.text(3)}),
                };
                blocks.push(
                    json!({"type": "toolCall", "id": call, "name": tool, "arguments": arguments}),
                );
                call_ids.push((call, tool));
            }
            let usage = self.usage();
            let stop = match (self.rng.u8(..12), calls) {
                (0, _) => "error",
                (_, 0) => "stop",
                _ => "toolUse",
            };
            self.message(
                json!({"role": "assistant", "content": blocks, "api": "anthropic-messages",
                "provider": "anthropic", "model": "claude-x", "usage": usage, "stopReason": stop,
                "timestamp": self.clock}),
            );
            for (call, tool) in call_ids {
                let long = self.rng.u8(..4) == 0;
                let text = if long {
                    "x".repeat(2100) + "😀" + &self.text(10)
                } else {
                    self.text(30)
                };
                self.message(json!({"role": "toolResult", "toolCallId": call, "toolName": tool,
                    "content": [{"type": "text", "text": text}], "isError": false, "timestamp": self.clock}));
            }
        }
    }

    fn context_edit(&mut self) {
        if self.messages.is_empty() {
            return;
        }
        let target = self.messages[self.rng.usize(..self.messages.len())].clone();
        let replacement = match self.rng.u8(..3) {
            0 => json!({"content": format!("[edited] {}", self.text(8))}),
            1 => json!({"content": [{"type": "toolCall", "id": "toolu_r", "name": "edit",
                "arguments": {"path": FILES[self.rng.usize(..FILES.len())]}}]}),
            _ => Value::Null,
        };
        self.push(json!({"type": "context_edit", "targetId": target, "replacement": replacement}));
    }

    fn compaction(&mut self) {
        if self.messages.len() < 4 {
            return;
        }
        let kept = self.messages[self.messages.len() - self.rng.usize(1..4)].clone();
        let mut entry = json!({"type": "compaction", "summary": format!("## Goal\n{}", self.text(30)),
            "firstKeptEntryId": kept, "tokensBefore": self.rng.u32(1000..90000),
            "details": {"readFiles": [FILES[0]], "modifiedFiles": [FILES[1]]}});
        if self.rng.bool() {
            entry["systemMessage"] = self.system(false);
        }
        if self.rng.bool() {
            entry["usage"] = self.usage();
        }
        if self.rng.u8(..3) == 0 {
            entry["fromHook"] = json!(true);
        }
        self.push(entry);
    }
}

/// A pi 1.5 session file, from `seed`.
pub fn generate(seed: u64) -> String {
    let mut w = Writer {
        rng: fastrand::Rng::with_seed(seed),
        lines: Vec::new(),
        ids: Vec::new(),
        messages: Vec::new(),
        clock: 1_767_225_600_000,
    };
    let header = json!({"type": "session", "version": 3, "id": format!("0190f0aa-0000-7000-8000-{seed:012x}"),
        "timestamp": "2026-01-01T00:00:00.000Z", "cwd": "/repo"});
    let system = w.system(true);
    w.message(system);
    for _ in 0..w.rng.usize(20..70) {
        match w.rng.u8(..14) {
            0 => {
                let system = w.system(false);
                w.message(system);
            }
            1 => w.context_edit(),
            2 => w.compaction(),
            3 => {
                let text = w.text(15);
                w.push(json!({"type": "custom_message", "customType": "note", "content": text, "display": true}));
            }
            4 => {
                let from = w.ids.first().cloned().unwrap_or_default();
                let summary = w.text(25);
                w.push(json!({"type": "branch_summary", "fromId": from, "summary": summary}));
            }
            5 => {
                let output = w.text(20);
                let exclude = w.rng.u8(..4) == 0;
                let code = if w.rng.bool() { 0 } else { 2 };
                w.message(
                    json!({"role": "bashExecution", "command": "ls -la", "output": output,
                    "exitCode": code, "cancelled": false, "truncated": false,
                    "excludeFromContext": exclude, "timestamp": w.clock}),
                );
            }
            6 => {
                w.push(json!({"type": "custom", "customType": "state", "data": {"n": 1}}));
            }
            7 => {
                w.push(json!({"type": "thinking_level_change", "thinkingLevel": "high"}));
            }
            _ => w.turn(),
        }
        if w.rng.u8(..5) == 0 {
            w.context_edit();
        }
    }
    let mut text = header.to_string();
    text.push('\n');
    for line in &w.lines {
        text.push_str(line);
        text.push('\n');
    }
    text
}
