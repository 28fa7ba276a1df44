//! An agent's ordinary turn stays the agent's (issue 52): turns that mention every marker
//! compactd looks for, on every wire, reach the provider byte for byte and compactd's model is
//! never asked; compactions are still recognized, in a compressed body too; a compressed Codex
//! request holding compactd's item goes upstream with the item expanded.

use std::io::Write;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::FakeProvider;
use crate::support::TestApp;
use crate::support::gateway::{
    Recorded, codex_trigger_and_next, compaction_item, gateway_config, recorded, summarizer_model,
    with_item,
};

/// What users write that holds compactd's markers, none of them a compaction: tags in a schema,
/// the agents' own instruction sentences quoted or discussed, a pasted transcript.
pub const MARKER_TEXTS: [&str; 12] = [
    "Add a <conversation> element to the XML schema, with <summary> and </conversation> children.",
    "<conversation>\n[User]: this is a transcript I pasted from the bug report\n</conversation>\nWhy did the assistant loop here?",
    "Please summarize the conversation so far in TEXT ONLY, then compact the notes into README.md.",
    "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools. (That line is from our style guide for the bot; does it parse?)",
    "Claude Code's prompt says \"Your task is to create a detailed summary of the conversation so far\" — where is that string built?",
    "What does 'You are performing a CONTEXT CHECKPOINT COMPACTION.' mean in the Codex logs?",
    "Continue the conversation from where we left off, and write the handoff note.",
    "The handoff text reads: Another language model started to solve this problem and produced a summary of its thinking process. Is that ours?",
    "Why does the Responses API have a compaction_trigger item type, and what is compactd.v2. in the logs?",
    "You are a context summarization agent. <- this string appears in opencode's source; find it.",
    "This session is being continued from a previous conversation that ran out of context. Summary: none, just a test string in our fixtures.",
    "<summary>\nThe user wants a summary tag parser.\n</summary>\nWrite a parser for these tags.",
];

/// `body` with its last user message's text replaced by `text`, on each wire's shape.
fn with_user_text(mut body: Value, text: &str) -> Value {
    let list = if body.get("messages").is_some() {
        "messages"
    } else {
        "input"
    };
    let items = body[list].as_array_mut().unwrap();
    let last_user = items
        .iter()
        .rposition(|m| m["role"] == "user")
        .expect("the turn has a user message");
    items[last_user]["content"] = json!(text);
    // Nothing after it: the user's message is the turn's last, where agents put instructions.
    items.truncate(last_user + 1);
    body
}

fn ordinary_turns() -> Vec<Recorded> {
    [
        "claude-code-2.1.330",
        "codex-0.169.0-custom-provider",
        "opencode-1.18.33",
    ]
    .into_iter()
    .map(|fixture| {
        recorded(fixture)
            .into_iter()
            .find(|r| !r.compaction && r.method == "POST" && r.body.is_some())
            .unwrap()
    })
    .collect()
}

/// A tool-less chat request, as a plain OpenAI client sends it.
fn plain_chat(system: &str, user: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"model": "gpt-5", "stream": false, "messages": [
        {"role": "system", "content": system},
        {"role": "user", "content": user},
    ]}))
    .unwrap()
}

#[tokio::test]
async fn ordinary_turns_that_mention_every_marker_reach_the_provider_byte_for_byte() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let mut sent = 0;
    for turn in ordinary_turns() {
        for text in MARKER_TEXTS {
            let body =
                serde_json::to_vec(&with_user_text(turn.body.clone().unwrap(), text)).unwrap();
            let response = turn
                .request_with_body(&app.client, &app.url, body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(
                response.status(),
                StatusCode::OK,
                "{}: {text}",
                turn.fixture
            );
            let answer = response.text().await.unwrap();
            assert!(
                answer.contains("PROVIDER SAYS OK"),
                "{}: {text}",
                turn.fixture
            );
            let seen = provider.received().pop().unwrap();
            assert!(
                seen.bytes == body,
                "{}: changed on the way: {text}",
                turn.fixture
            );
            sent += 1;
        }
    }
    // Tool-less chat, the wire compactd also answers pi-family prompts on.
    let chat = ordinary_turns().pop().unwrap();
    for system in [
        "You are a helpful assistant.",
        "You are a coding assistant. Summarize your changes at the end of each answer.",
    ] {
        for text in MARKER_TEXTS {
            let body = plain_chat(system, text);
            let response = chat
                .request_with_body(&app.client, &app.url, body.clone())
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{text}");
            response.bytes().await.unwrap();
            let seen = provider.received().pop().unwrap();
            assert!(seen.bytes == body, "{system} / {text}");
            sent += 1;
        }
    }
    assert_eq!(provider.received().len(), sent);
    assert!(
        model.received().is_empty(),
        "compactd's model was never asked"
    );

    // A pi-family agent's rendered prompt is still compactd's to answer (spec §6.2).
    let rendered = plain_chat(
        "You are a context summarization assistant. Read the conversation and produce a structured summary.",
        "<conversation>\n[User]: fix src/lib.rs\n\n[Assistant]: done\n</conversation>\n\n## Goal\nWrite the summary in this format.",
    );
    let response = chat
        .request_with_body(&app.client, &app.url, rendered)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("SUMMARY BY COMPACTD")
    );
    assert_eq!(provider.received().len(), sent, "not forwarded");
}

/// A `Content-Encoding` as a test applies it.
type Encode = fn(&[u8]) -> Vec<u8>;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(bytes, ruzstd::encoding::CompressionLevel::Fastest)
}

fn brotli(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliCompress(&mut &bytes[..], &mut out, &Default::default()).unwrap();
    out
}

#[tokio::test]
async fn compressed_compactions_are_recognized_and_compressed_turns_pass_as_they_came() {
    let model = summarizer_model().await;
    let provider = FakeProvider::wires().await;
    let app = TestApp::spawn(gateway_config(&model, &provider)).await;
    let encodings: [(&str, Encode); 3] = [("gzip", gzip), ("zstd", zstd), ("br", brotli)];
    for fixture in [
        "claude-code-2.1.330",
        "codex-0.169.0-custom-provider",
        "opencode-1.18.33",
    ] {
        let requests = recorded(fixture);
        let compaction = requests.iter().find(|r| r.compaction).unwrap();
        let turn = requests
            .iter()
            .find(|r| !r.compaction && r.method == "POST")
            .unwrap();
        for (name, encode) in encodings {
            let forwarded = provider.received().len();
            let response = compaction
                .request_with_body(&app.client, &app.url, encode(&compaction.body_bytes()))
                .header("content-encoding", name)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK, "{fixture} {name}");
            let body = response.text().await.unwrap();
            assert!(
                body.contains("SUMMARY BY COMPACTD"),
                "{fixture} {name}: {body}"
            );
            assert_eq!(provider.received().len(), forwarded, "{fixture} {name}");

            let compressed = encode(&turn.body_bytes());
            let response = turn
                .request_with_body(&app.client, &app.url, compressed.clone())
                .header("content-encoding", name)
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            response.bytes().await.unwrap();
            let seen = provider.received().pop().unwrap();
            assert!(
                seen.bytes == compressed,
                "{fixture} {name}: forwarded as it came"
            );
            assert_eq!(seen.header("content-encoding"), Some(name));
        }
    }

    // Codex's next turn, compressed, holding compactd's item: expanded, sent plain.
    let (trigger, after) = codex_trigger_and_next();
    let answer = trigger
        .request_with_body(&app.client, &app.url, zstd(&trigger.body_bytes()))
        .header("content-encoding", "zstd")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let next = with_item(&after, &compaction_item(&answer));
    let response = after
        .request_with_body(&app.client, &app.url, zstd(&next))
        .header("content-encoding", "zstd")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.bytes().await.unwrap();
    let seen = provider.received().pop().unwrap();
    assert!(seen.header("content-encoding").is_none());
    let seen: Value = serde_json::from_slice(&seen.bytes).expect("sent plain");
    assert!(seen.to_string().contains("SUMMARY BY COMPACTD"));
    assert!(!seen.to_string().contains("compactd.v2."));

    // A body that inflates past the limit is refused, not held.
    let bomb = gzip(&vec![b' '; 64 << 20]);
    let response = app
        .send(
            turn_of(&recorded("codex-0.169.0-custom-provider"))
                .request_with_body(&app.client, &app.url, bomb)
                .header("content-encoding", "gzip"),
        )
        .await;
    assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
}

fn turn_of(requests: &[Recorded]) -> &Recorded {
    requests
        .iter()
        .find(|r| !r.compaction && r.method == "POST")
        .unwrap()
}
