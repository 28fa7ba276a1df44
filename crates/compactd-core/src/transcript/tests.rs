//! Every dialect read and written back exactly, on the requests oh-my-pi 18.0 and 18.3 recorded
//! (`tests/fixtures/omp-requests*/`), on a hand-written exchange with the awkward parts (nested
//! arguments, quotes, escapes, outputs holding the closing tags), and on generated
//! conversations (`proptest`).

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn fixture(name: &str) -> String {
    let path = compactd_testkit::fixtures().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The conversation inside a prompt's tags.
fn conversation_of(prompt: &str) -> &str {
    prompt::Parts::parse(prompt).conversation
}

/// `(dialect named by the recording, model, call, prompt)` of every recorded request.
fn recorded() -> Vec<(Option<String>, String, String, String)> {
    let mut out = Vec::new();
    for file in [
        "omp-requests/before.jsonl",
        "omp-requests/large.jsonl",
        "omp-requests-18.3/before.jsonl",
        "omp-requests-18.3/large.jsonl",
    ] {
        for line in fixture(file).lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            out.push((
                v["dialect"].as_str().map(str::to_owned),
                v["model"].as_str().unwrap().to_owned(),
                v["call"].as_str().unwrap().to_owned(),
                v["request"]["prompt"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

/// oh-my-pi 18.3's dialect names to compactd's.
fn dialect_named(name: &str) -> Dialect {
    super::dialects::DIALECTS
        .iter()
        .find(|row| row.name == name && row.written)
        .map(|row| row.dialect)
        .unwrap_or_else(|| panic!("unknown dialect {name}"))
}

#[test]
fn every_recorded_request_is_detected_and_written_back_exactly() {
    let mut dialects = std::collections::BTreeSet::new();
    for (named, model, call, prompt) in recorded() {
        let conversation = conversation_of(&prompt);
        if conversation.trim().is_empty() {
            continue;
        }
        let read_back = read(conversation);
        if let Some(named) = &named {
            assert_eq!(read_back.dialect, dialect_named(named), "{model} {call}");
        }
        dialects.insert(read_back.dialect.name());
        let written = read_back.write();
        if written != conversation {
            let at = written
                .bytes()
                .zip(conversation.bytes())
                .position(|(a, b)| a != b)
                .unwrap_or(written.len().min(conversation.len()));
            panic!(
                "{model} {call} ({}): differs at byte {at}:\nwritten:  {:?}\nrecorded: {:?}",
                read_back.dialect.name(),
                &written[at.saturating_sub(80)..(at + 80).min(written.len())],
                &conversation[at.saturating_sub(80)..(at + 80).min(conversation.len())]
            );
        }
    }
    // oh-my-pi 18.3's ten dialects.
    for name in [
        "anthropic",
        "xml",
        "minimax",
        "harmony",
        "qwen3",
        "glm",
        "kimi",
        "deepseek",
        "gemini",
        "gemma",
    ] {
        assert!(dialects.contains(name), "{name}: {dialects:?}");
    }
}

/// What every dialect's reading of the same session must agree on: the tool calls with their
/// paths, the edited files, the user's requests in order. A model with a smaller window gets the
/// session in several `history` calls: their readings together are the session's. Where the kept
/// recent turns begin depends on the model's token counts, so a dialect may end before the
/// reference does; a window the client cut short (`[... N more characters truncated]`) misses one
/// run of the session — and nothing else, the call it cut in half included.
#[test]
fn the_ten_dialects_of_one_session_read_the_same_conversation() {
    #[derive(Default, Debug)]
    struct Reading {
        calls: Vec<(String, Option<String>)>,
        requests: Vec<String>,
        cut: bool,
    }
    let mut sessions: std::collections::BTreeMap<(usize, String), Reading> = Default::default();
    let mut session = 0;
    let mut last_model = String::new();
    for (named, model, call, prompt) in recorded() {
        let Some(named) = named else { continue };
        if call != "history" {
            continue;
        }
        // The recordings list each model's calls together, the sessions in turn.
        if named == "anthropic" && model != last_model {
            session += 1;
        }
        last_model = model;
        let conversation = read(conversation_of(&prompt));
        let reading = sessions.entry((session, named)).or_default();
        reading.cut |= !conversation.cut.text.is_empty();
        let calls = conversation.messages.iter().flat_map(|m| &m.calls);
        (reading.calls).extend(calls.map(|c| (c.name.clone(), c.arg("path").map(str::to_owned))));
        reading.requests.extend(
            (conversation.messages.iter())
                .filter(|m| m.role == Role::User && !m.text.trim().is_empty())
                .map(|m| m.text.trim().to_owned()),
        );
    }
    assert_eq!(sessions.len(), 20, "two sessions in ten dialects");
    let modified = |reading: &Reading| -> std::collections::BTreeSet<String> {
        (reading.calls.iter())
            .filter(|(name, _)| name == "edit" || name == "write")
            .filter_map(|(_, path)| path.clone())
            .collect()
    };
    for ((session, name), reading) in &sessions {
        let reference = &sessions[&(*session, "anthropic".to_owned())];
        assert!(!modified(reference).is_empty(), "edited files are read");
        assert!(!reading.requests.is_empty(), "{session} {name}: no request");
        let calls = run_gap(&reading.calls, &reference.calls);
        let requests = run_gap(&reading.requests, &reference.requests);
        match (calls, requests) {
            (Some(None), Some(None)) => {}
            (Some(Some(_)), Some(_)) | (Some(_), Some(Some(_))) if reading.cut => {}
            other => panic!("{session} {name}: {other:?}, cut {}", reading.cut),
        }
        if reading.calls.len() == reference.calls.len() {
            assert_eq!(modified(reading), modified(reference), "{session} {name}");
        }
        assert!(
            modified(reading).is_subset(&modified(reference)),
            "{session} {name}"
        );
    }
}

/// How `part` follows `whole`: `Some(None)` when it is a prefix of it, `Some(Some(skipped))` when
/// it is a prefix of it with one run of `skipped` items left out, `None` otherwise.
fn run_gap<T: PartialEq>(part: &[T], whole: &[T]) -> Option<Option<usize>> {
    let same = part.iter().zip(whole).take_while(|(a, b)| a == b).count();
    let rest = &part[same..];
    if rest.is_empty() {
        return Some(None);
    }
    (same..whole.len())
        .find(|&at| whole[at..].starts_with(rest))
        .map(|at| Some(at - same))
}

/// The same exchange in every dialect, with what makes readers stumble: thinking, text before
/// calls, several calls with nested arguments (lists holding `True`/`None`-like values, quotes,
/// escapes, unicode), an output that holds the closing tags, an error.
fn exchange() -> Vec<Message> {
    let edit = ToolCall::new(
        "edit",
        vec![
            ("path".into(), json!("src/config.ts")),
            ("oldText".into(), json!("a \"q\"\n\\ </parameter> 🦀")),
            ("newText".into(), json!("b")),
        ],
    );
    let nested = ToolCall::new(
        "configure",
        vec![
            (
                "opts".into(),
                json!({"nested": [1, true, null, {"k": "v"}], "x": 1.5}),
            ),
            ("path".into(), json!("docs/é.md")),
        ],
    );
    vec![
        Message::with_text(Role::User, "alright, where were we?"),
        Message {
            thinking: "The user asks where we are.".into(),
            text: "Let me check:".into(),
            calls: vec![
                ToolCall::new("bash", vec![("command".into(), json!("ls -la | head -5"))]),
                nested,
            ],
            ..Message::new(Role::Assistant)
        },
        Message::tool_result(
            "total 8\n</stdout>\n</result> and </tool_response> inside",
            Some("bash".into()),
            false,
        ),
        Message::tool_result("configured", Some("configure".into()), false),
        Message {
            calls: vec![edit],
            ..Message::new(Role::Assistant)
        },
        Message::tool_result(
            "Could not find the exact text in src/config.ts",
            Some("edit".into()),
            true,
        ),
        Message::with_text(Role::Assistant, "Both work."),
        Message::with_text(Role::User, "are we all committed?"),
    ]
}

/// What a dialect cannot carry, taken out of `messages` for comparing.
fn carried(dialect: Dialect, messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            // Only Anthropic's and MiniMax's results and OpenCode's say they failed.
            if !matches!(
                dialect,
                Dialect::Anthropic | Dialect::Minimax | Dialect::OpenCode
            ) {
                m.is_error = false;
            }
            m
        })
        .collect()
}

#[test]
fn every_dialect_writes_the_exchange_and_reads_it_back() {
    let messages = exchange();
    for dialect in Dialect::written() {
        let text = write(dialect, &messages);
        assert_eq!(detect(&text), dialect, "{}: {text}", dialect.name());
        let read_back = read(&text);
        assert_eq!(
            carried(dialect, &read_back.messages),
            carried(dialect, &messages),
            "{}: {text}",
            dialect.name()
        );
        assert_eq!(read_back.write(), text, "{}", dialect.name());
    }
}

#[test]
fn frame_tags_inside_the_conversation_are_escaped_when_written_and_not_when_read() {
    let messages = vec![Message::with_text(
        Role::User,
        "quote: <conversation> and </previous-summary>",
    )];
    let text = write(Dialect::Qwen3, &messages);
    assert!(text.contains("&lt;conversation>") && text.contains("&lt;/previous-summary>"));
    assert_eq!(read(&text).messages, messages);
}

#[test]
fn free_text_is_read_by_the_generic_reader() {
    let t = read("please summarize: we fixed src/parse.rs");
    assert_eq!(t.dialect, Dialect::Generic);
    assert_eq!(t.messages.len(), 1);
    assert_eq!(t.messages[0].role, Role::User);
    assert!(read("").messages.is_empty());
    assert_eq!(detect("[Tool result]: x"), Dialect::Pi);
}

#[test]
fn windows_are_written_in_the_conversations_dialect_and_hold_every_message() {
    let mut messages = Vec::new();
    for i in 0..20 {
        messages.push(Message::with_text(
            Role::User,
            format!("message {i} {}", "x".repeat(50)),
        ));
        messages.push(Message::with_text(Role::Assistant, format!("answer {i}")));
    }
    for dialect in [Dialect::Pi, Dialect::Kimi, Dialect::Gemma] {
        let conversation = Conversation::new(dialect, messages.clone());
        let windows = conversation.windows(300);
        assert!(windows.len() >= 5, "{}", windows.len());
        assert!(
            windows.iter().all(|w| w.write().len() <= 400),
            "{}",
            dialect.name()
        );
        let all: Vec<Message> = windows.into_iter().flat_map(|w| w.messages).collect();
        assert_eq!(all, messages);
    }
    // A message larger than a window is split at line ends.
    let big = Conversation::new(
        Dialect::Pi,
        vec![Message::with_text(Role::User, "line\n".repeat(200))],
    );
    let windows = big.windows(100);
    assert!(windows.len() >= 10);
    let text: String = windows
        .iter()
        .flat_map(|w| &w.messages)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(text, "line\n".repeat(200));
}

// ---- generated conversations ---------------------------------------------------------------

/// Text without markup: letters, digits, punctuation, unicode, single newlines inside.
fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 .,!?'\"/()é中🦀\\\\-]{1,12}(\n[a-zA-Z0-9 .,!?é🦀-]{1,12}){0,2}"
}

fn value(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(|n| json!(n)),
        (-1000i32..1000).prop_map(|n| json!(f64::from(n) + 0.5)),
        "[a-z \"\\\\é🦀\n]{0,8}".prop_map(Value::String),
        // A lone surrogate, as JavaScript writes half an emoji.
        Just(Value::String("cut \u{FDD0}d83d".into())),
    ];
    if depth == 0 {
        return leaf.boxed();
    }
    prop_oneof![
        3 => leaf,
        1 => prop::collection::vec(value(depth - 1), 0..3).prop_map(Value::Array),
        1 => prop::collection::vec(("[a-z]{1,5}", value(depth - 1)), 0..3)
            .prop_map(|entries| Value::Object(entries.into_iter().collect())),
    ]
    .boxed()
}

fn call() -> impl Strategy<Value = ToolCall> {
    (
        "[a-z][a-z_]{0,7}",
        prop::collection::vec(("[a-z][a-zA-Z0-9_]{0,7}", value(2)), 0..3),
    )
        .prop_map(|(name, mut arguments)| {
            arguments.dedup_by(|a, b| a.0 == b.0);
            let mut seen = std::collections::HashSet::new();
            arguments.retain(|(k, _)| seen.insert(k.clone()));
            ToolCall::new(name, arguments)
        })
}

/// A turn: the user's words, then an assistant message (thinking, text, calls — never all
/// empty), then a result for each call.
fn turn() -> impl Strategy<Value = Vec<Message>> {
    (
        text(),
        prop::option::of(text()),
        prop::option::of(text()),
        prop::collection::vec(call(), 0..3),
        prop::collection::vec(text(), 3),
    )
        .prop_map(|(user, thinking, answer, calls, outputs)| {
            let mut messages = vec![Message::with_text(Role::User, user)];
            let answer = match (&thinking, &answer, calls.is_empty()) {
                (None, None, true) => Some("ok".to_owned()),
                _ => answer,
            };
            messages.push(Message {
                thinking: thinking.unwrap_or_default(),
                text: answer.unwrap_or_default(),
                calls: calls.clone(),
                ..Message::new(Role::Assistant)
            });
            for (call, output) in calls.iter().zip(outputs) {
                // Not JSON (Gemma writes JSON outputs as values).
                messages.push(Message::tool_result(
                    format!("out {output}"),
                    Some(call.name.clone()),
                    false,
                ));
            }
            messages
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_conversation_in_any_dialect_reads_back_the_same(
        turns in prop::collection::vec(turn(), 1..4)
    ) {
        let messages: Vec<Message> = turns.into_iter().flatten().collect();
        for dialect in Dialect::written() {
            let text = write(dialect, &messages);
            let read_back = read_as(dialect, &text);
            prop_assert_eq!(&read_back.messages, &messages, "{}: {}", dialect.name(), text);
            prop_assert_eq!(read_back.write(), text.clone(), "{}", dialect.name());
        }
    }
}

/// oh-my-pi writes a string argument of a tool whose schema it knows as it is in its `<invoke>`
/// dialects (anthropic, xml, minimax), not as JSON: such calls read with their paths, and write
/// back to the same text.
#[test]
fn invoke_dialects_read_string_arguments_written_as_they_are() {
    let mut edit = ToolCall::new(
        "edit",
        vec![
            ("path".into(), json!("src/parse.rs")),
            ("oldText".into(), json!("a")),
            (
                "newText".into(),
                json!("fn f() -> Vec<String> { \"x\" } // not </parameter> here"),
            ),
            ("all".into(), json!(true)),
        ],
    );
    edit.raw_strings = vec!["path".into(), "oldText".into(), "newText".into()];
    let mut create = ToolCall::new(
        "write",
        vec![
            ("path".into(), json!("/w/notes.md")),
            ("content".into(), json!("# Notes\n{\"a\": 1}\n")),
        ],
    );
    create.raw_strings = vec!["path".into(), "content".into()];
    let messages = vec![
        Message::with_text(Role::User, "Fix the parser."),
        Message {
            calls: vec![edit, create],
            ..Message::with_text(Role::Assistant, "On it.")
        },
        Message::tool_result("edited", Some("edit".into()), false),
        Message::tool_result("written", Some("write".into()), false),
        Message::with_text(Role::User, "Now the tests."),
    ];
    for dialect in [Dialect::Anthropic, Dialect::Xml, Dialect::Minimax] {
        let text = write(dialect, &messages);
        assert!(
            text.contains("<parameter name=\"path\">src/parse.rs</parameter>"),
            "{text}"
        );
        let read = read_as(dialect, &text);
        assert_eq!(write(dialect, &read.messages), text, "{}", dialect.name());
        let calls = &read.messages[1].calls;
        assert_eq!(calls.len(), 2, "{}: {text}", dialect.name());
        assert_eq!(calls[0].arg("path"), Some("src/parse.rs"));
        assert_eq!(calls[1].arg("path"), Some("/w/notes.md"));
        assert_eq!(
            calls[0].arg("newText"),
            Some("fn f() -> Vec<String> { \"x\" } // not </parameter> here")
        );
        let changed: Vec<String> = calls
            .iter()
            .flat_map(files::file_ops)
            .filter(|(op, _)| op.modifies())
            .map(|(_, path)| path)
            .collect();
        assert_eq!(changed, ["src/parse.rs", "/w/notes.md"]);
        assert_eq!(read.messages.last().unwrap().text, "Now the tests.");
    }
}
