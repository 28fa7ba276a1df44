//! Conversations played through the gateway as Claude Code plays them: the long real pi
//! sessions (turned into Anthropic's form) and real Claude Code sessions from public
//! repositories (`tests/fixtures/real-transcripts/`, as recorded), which the replay was not
//! written against.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{LOCAL_MODEL, WINDOW_BYTES, Waited, kept, root, send};

/// A conversation to play, in Anthropic's form.
pub(crate) struct Conversation {
    pub(crate) name: String,
    pub(crate) messages: Vec<Value>,
    /// The first lines of the texts the agent wrote into user messages (a skill's, a task's
    /// notification), as the recording marks them: not the person's words.
    pub(crate) injected: Vec<String>,
}

/// The real Claude Code sessions of `REPLAY_TRANSCRIPTS` (a `cases.jsonl.gz` as
/// `scripts/corpus/real_transcripts.py` writes it), or of `tests/fixtures/real-transcripts/`:
/// each session's spans between its own compactions joined back into one conversation (the
/// continuation summary that opens a later span and the compaction instruction that ends each
/// left out), by name.
pub(crate) fn transcripts() -> Vec<Conversation> {
    let file = std::env::var("REPLAY_TRANSCRIPTS").map_or_else(
        |_| root().join("tests/fixtures/real-transcripts/cases.jsonl.gz"),
        Into::into,
    );
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&file).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    let mut sessions: Vec<Conversation> = Vec::new();
    for line in text.lines() {
        let case: Value = serde_json::from_str(line).unwrap();
        let name = case["name"].as_str().unwrap_or_default();
        let Some((session, span)) = name
            .strip_prefix("claude-code/")
            .and_then(|rest| rest.split_once('#'))
        else {
            continue;
        };
        let messages = case["body"]["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some((_instruction, span_messages)) = messages.split_last() else {
            continue;
        };
        let carried = usize::from(span != "0");
        let part = span_messages.get(carried..).unwrap_or_default().to_vec();
        let injected = (case["injected"].as_array().into_iter().flatten())
            .filter_map(|line| line.as_str().map(str::to_owned));
        match sessions.iter_mut().find(|known| known.name == session) {
            Some(known) => {
                known.messages.extend(part);
                known.injected.extend(injected);
            }
            None => sessions.push(Conversation {
                name: session.to_owned(),
                messages: part,
                injected: injected.collect(),
            }),
        }
    }
    sessions
}

/// A pi session's messages in Anthropic's form.
pub(crate) fn anthropic_messages(file: &Path) -> Conversation {
    let text = std::fs::read_to_string(file).unwrap();
    let messages = (text.lines())
        .filter_map(|line| anthropic_message(&serde_json::from_str(line).unwrap()))
        .collect();
    Conversation {
        name: crate::name(file),
        messages,
        injected: Vec::new(),
    }
}

/// A pi session entry's message in Anthropic's form, if it is one.
fn anthropic_message(entry: &Value) -> Option<Value> {
    if entry["type"] != "message" {
        return None;
    }
    let message = &entry["message"];
    let blocks = message["content"].as_array().cloned().unwrap_or_default();
    let text_of = |blocks: &[Value]| -> String {
        blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    };
    match message["role"].as_str()? {
        "user" => {
            let text = match &message["content"] {
                Value::String(s) => s.clone(),
                _ => text_of(&blocks),
            };
            Some(json!({"role": "user", "content": text}))
        }
        "assistant" => {
            let content: Vec<Value> = blocks
                .iter()
                .filter_map(|b| match b["type"].as_str() {
                    Some("text") => Some(json!({"type": "text", "text": b["text"]})),
                    Some("toolCall") => Some(json!({"type": "tool_use", "id": b["id"],
                        "name": b["name"], "input": b["arguments"]})),
                    _ => None,
                })
                .collect();
            (!content.is_empty()).then(|| json!({"role": "assistant", "content": content}))
        }
        "toolResult" => Some(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": message["toolCallId"],
             "content": text_of(&blocks)}]})),
        _ => None,
    }
}

/// Claude Code's compaction instruction, as recorded.
fn claude_instruction() -> Value {
    let file = root().join("tests/fixtures/agent-requests/claude-code-2.1.330.jsonl");
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["compaction"] == true)
        .map(|r| {
            r["body"]["messages"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone()
        })
        .unwrap()
}

/// Plays `conversation` as Claude Code plays it, under a session header of its name (none when
/// `bare`): a request at each user turn with everything so far, a turn every
/// `turn`, a compaction once the conversation reaches 80 % of the window, the summary carried on
/// as Claude Code carries it.
pub(crate) async fn play(
    client: &reqwest::Client,
    url: &str,
    conversation: &Conversation,
    turn: Duration,
    bare: bool,
) -> Vec<Waited> {
    let mut headers = vec![(
        "x-claude-code-session-id".to_owned(),
        format!("long-{}", conversation.name),
    )];
    if bare {
        headers.clear();
    }
    let instruction = claude_instruction();
    let mut waited = Vec::new();
    let mut history: Vec<Value> = Vec::new();
    let mut size = 0;
    for message in conversation.messages.iter().cloned() {
        size += message.to_string().len();
        let is_user = message["role"] == "user";
        history.push(message);
        if !is_user {
            continue;
        }
        if size >= WINDOW_BYTES * 8 / 10 {
            let mut messages = history.clone();
            messages.push(instruction.clone());
            let body = json!({"model": LOCAL_MODEL, "max_tokens": 20000, "messages": messages});
            let expected = kept::Expected::of(&history, &conversation.injected);
            let answer = send(client, url, "/v1/messages", &headers, &body, true).await;
            waited.extend(answer.map(|waited| Waited {
                kept: Some(expected.kept_by(&kept::answer_text(&waited.answer))),
                ..waited
            }));
            // Carried on as Claude Code carries a summary: one user message, then the work.
            history = vec![json!({"role": "user", "content":
                "This session is being continued from a previous conversation that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary:\n(the summary)"})];
            size = 0;
            continue;
        }
        let body = json!({"model": LOCAL_MODEL, "max_tokens": 4096, "messages": history});
        send(client, url, "/v1/messages", &headers, &body, false).await;
        tokio::time::sleep(turn).await;
    }
    waited
}
