//! The preparer's pure parts: prefixes, freshness, windows.

use super::pace::{Pace, Standing};
use super::reading::{loose_hashes, model_in, opening_key, prefix_hashes, window};
use super::*;
use compactd_core::transcript::{Message, Role, Shape};
use serde_json::Value;

fn message(role: Role, text: &str) -> Message {
    let mut conversation = Wire::ChatCompletions.messages(&[serde_json::json!({
        "role": match role { Role::User => "user", _ => "assistant" }, "content": text})]);
    conversation.messages.remove(0)
}

#[test]
fn a_prefix_matches_only_as_it_reads() {
    let a = [
        message(Role::User, "fix the lexer"),
        message(Role::Assistant, "done"),
        message(Role::User, "now the parser"),
    ];
    let mut b = a.to_vec();
    b.push(message(Role::Assistant, "on it"));
    let (ha, hb) = (prefix_hashes(&a), prefix_hashes(&b));
    assert_eq!(ha[..], hb[..3]);
    let mut edited = b.clone();
    edited[1] = message(Role::Assistant, "done!");
    let he = prefix_hashes(&edited);
    assert_eq!(he[0], ha[0]);
    assert!(
        he[1..].iter().zip(&hb[1..]).all(|(x, y)| x != y),
        "an edit changes every later hash"
    );
}

#[test]
fn a_session_is_prepared_again_once_it_grew_or_after_it_shrank() {
    let window = 200_000;
    assert!(fresh(120_000, 130_000, window));
    assert!(
        !fresh(120_000, 140_000, window),
        "grew by a tenth of the window"
    );
    assert!(
        !fresh(160_000, 125_000, window),
        "compacted since, and grown back"
    );
}

#[test]
fn the_window_and_model_are_read_without_parsing() {
    assert_eq!(window("claude-sonnet-4-6", 1), 200_000);
    assert_eq!(window("anthropic/claude-opus-4-6", 1), 200_000);
    assert_eq!(window("gpt-5.2-codex", 1), 400_000);
    assert_eq!(window("qwen3-coder", 32_768), 32_768);
    let body = br#"{"model" : "claude-sonnet-4-6","messages":[{"content":"the \"model\": x"}]}"#;
    assert_eq!(model_in(body), Some("claude-sonnet-4-6"));
    let nested = br#"{"messages":[{"content":"say \"model\":\"x\""}],"model":"gpt-5.2"}"#;
    assert_eq!(model_in(nested), Some("gpt-5.2"));
    assert_eq!(model_in(b"{}"), None);
}

fn standing(tokens: u64, rate: f64, prepared_at: Option<u64>) -> Standing {
    Standing {
        tokens,
        window: 100_000,
        rate,
        takes: 10.0,
        prepared_at,
    }
}

#[test]
fn a_session_is_prepared_earlier_the_faster_it_grows() {
    // Still: the share. 1,000 tokens a second, 10 s a summary: 15,000 before the 80 % point.
    assert_eq!(standing(0, 0.0, None).starts_at(0.6), 60_000.0);
    assert_eq!(standing(0, 1_000.0, None).starts_at(0.6), 60_000.0);
    assert_eq!(standing(0, 2_500.0, None).starts_at(0.6), 42_500.0);
    assert_eq!(
        standing(0, 1e9, None).starts_at(0.6),
        30_000.0,
        "never under half"
    );
    assert!(!standing(40_000, 0.0, None).due(0.6));
    assert!(standing(45_000, 2_500.0, None).due(0.6));
}

#[test]
fn a_refresh_is_made_only_when_it_can_be_ready_in_time() {
    // Prepared at 60 %: at 65 % fresh; at 70 %, refreshed when slow, not when the agent will
    // compact (80 %) before the refresh is ready.
    assert!(!standing(65_000, 100.0, Some(60_000)).due(0.6));
    assert!(standing(70_000, 100.0, Some(60_000)).due(0.6));
    assert!(!standing(70_000, 2_000.0, Some(60_000)).due(0.6));
    // Past the point agents compact at, the pace says nothing: refreshed.
    assert!(standing(85_000, 2_000.0, Some(60_000)).due(0.6));
    // Kept before a compaction since: prepared afresh.
    assert!(standing(62_000, 0.0, Some(90_000)).due(0.6));
}

#[test]
fn the_pace_is_smoothed_and_a_compaction_starts_it_afresh() {
    let pace = Pace::new();
    let session = ("t".to_owned(), "s".to_owned());
    let start = std::time::Instant::now();
    let at = |s: f64| start + std::time::Duration::from_secs_f64(s);
    // Four bytes a token until the provider says otherwise.
    let once = pace.observe(session.clone(), 40_000, at(0.0));
    assert_eq!((once.tokens, once.rate), (10_000, 0.0));
    assert!(!once.seen);
    let second = pace.observe(session.clone(), 80_000, at(10.0));
    assert_eq!((second.tokens, second.rate), (20_000, 1_000.0));
    assert!(second.seen);
    let smoothed = pace.observe(session.clone(), 160_000, at(20.0)).rate;
    assert!(smoothed > 1_000.0 && smoothed < 2_000.0, "{smoothed}");
    assert_eq!(pace.observe(session, 20_000, at(21.0)).rate, 0.0, "shrank");
    let first = pace.takes();
    pace.took(std::time::Duration::from_secs(10));
    assert!(pace.takes() < first && pace.takes() > 10.0);
}

#[test]
fn a_stored_sessions_pace_goes_on_across_its_compaction() {
    let pace = Pace::new();
    let session = ("t".to_owned(), "pi:s".to_owned());
    let start = std::time::Instant::now();
    let at = |s: f64| start + std::time::Duration::from_secs_f64(s);
    assert_eq!(pace.observe_tokens(session.clone(), 10_000, at(0.0)), 0.0);
    assert_eq!(
        pace.observe_tokens(session.clone(), 20_000, at(10.0)),
        1_000.0
    );
    // Compacted: the session holds less, at the same pace.
    assert_eq!(
        pace.observe_tokens(session.clone(), 5_000, at(11.0)),
        1_000.0
    );
    let rate = pace.observe_tokens(session, 6_000, at(12.0));
    assert_eq!(rate, 1_000.0, "smoothed from the pace it kept");
}

#[test]
fn a_conversation_without_a_header_is_known_by_its_opening() {
    let body = |first: &str, more: &[&str]| {
        let mut messages = vec![serde_json::json!({"role": "user", "content": first})];
        messages.extend(
            more.iter()
                .map(|m| serde_json::json!({"role": "user", "content": m})),
        );
        serde_json::json!({"model": "m", "system": "say \"messages\":[1]", "messages": messages})
            .to_string()
    };
    let long = "fix the lexer ".repeat(100);
    let opening = |b: &str| super::reading::opening(b.as_bytes());
    let first = opening(&body(&long, &["go"]));
    assert!(first.is_some());
    assert_eq!(
        first,
        opening(&body(&long, &["go", "and the parser"])),
        "grown"
    );
    assert_ne!(
        first,
        opening(&body(&long.replace("lexer", "parser"), &["go"]))
    );
    let responses =
        r#"{"model":"m","instructions":"x","input" : [{"role":"user","content":"fix"}]}"#;
    assert!(opening(responses).is_some());
    assert_eq!(opening(r#"{"input":"text"}"#), None);
}

#[test]
fn the_providers_report_of_the_size_is_read_where_each_writes_it() {
    use super::usage::reported;
    let anthropic = br#"event: message_start
data: {"type":"message_start","message":{"id":"m","usage":{"input_tokens":5,"cache_creation_input_tokens":1000,"cache_read_input_tokens":100000,"output_tokens":1}}}"#;
    assert_eq!(reported(anthropic), Some(101_005));
    let responses = br#"data: {"type":"response.completed","response":{"usage":{"input_tokens":50000,"input_tokens_details":{"cached_tokens":40000},"output_tokens":9}}}"#;
    assert_eq!(reported(responses), Some(50_000), "cached ones are inside");
    let chat = br#"data: {"choices":[],"usage":{"prompt_tokens":7000,"completion_tokens":3}}"#;
    assert_eq!(reported(chat), Some(7_000));
    let delta = br#"data: {"type":"message_delta","usage":{"output_tokens":3}}"#;
    assert_eq!(reported(delta), None, "output only");
    assert_eq!(reported(&anthropic[..90]), None, "cut by the chunk");
    assert_eq!(
        reported(br#"{"content":"the \"usage\": {\"input_tokens\": 9}"}"#),
        None
    );
}

#[test]
fn a_reported_size_restates_the_session_without_growth() {
    let pace = Pace::new();
    let session = ("t".to_owned(), "s".to_owned());
    let start = std::time::Instant::now();
    pace.observe(session.clone(), 200_000, start);
    assert_eq!(pace.bytes_per_token(&session), None);
    // Its 200,000 bytes are 100,000 tokens: two bytes a token.
    pace.calibrate(&session, 2.0);
    assert_eq!(pace.bytes_per_token(&session), Some(2.0));
    let later = start + std::time::Duration::from_secs(10);
    let restated = pace.observe(session, 200_000, later);
    assert_eq!(
        (restated.tokens, restated.rate),
        (100_000, 0.0),
        "measured by its provider, and no growth"
    );
}

/// oh-my-pi's recorded turn and the remote compaction it then posted (the same conversation in
/// the model's dialect, a long tool output cut): they agree message for message as
/// [`loose_hashes`] reads them, with or without the reasoning a turn carries and whatever a tool
/// wrote past the cut, and an edit breaks the agreement.
#[test]
fn a_pi_family_written_conversation_matches_its_typed_turns_loosely() {
    let read = |name: &str| -> Value {
        let path = format!(
            "{}/tests/fixtures/agent-requests/oh-my-pi-18.3.4-remote/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let turn = read("turn.json");
    let typed = turn_history(
        Wire::AnthropicMessages,
        agent_of(Wire::AnthropicMessages),
        &turn,
    );
    let typed = &typed.request.conversation.unwrap().messages;
    let compact = read("compact.json");
    let written = Shape::of_prompt(compact["prompt"].as_str().unwrap())
        .conversation
        .messages;
    assert!(
        written.len() >= 5 && typed.len() > written.len(),
        "{written:?}"
    );
    let n = written.len();
    assert_eq!(loose_hashes(&typed[..n]), loose_hashes(&written));
    assert_eq!(opening_key(typed), opening_key(&written));
    // An edit within what the agent writes is seen.
    let mut edited = written.clone();
    edited[n - 1].text.push('!');
    assert_ne!(
        loose_hashes(&edited).last(),
        loose_hashes(&typed[..n]).last()
    );
    // The reasoning a turn carries (a thinking model's), which the written form leaves out.
    let mut reasoned = typed[..n].to_vec();
    reasoned[1].thinking = "reasoning the written form leaves out".into();
    assert_eq!(loose_hashes(&reasoned), loose_hashes(&written));
    assert_ne!(
        prefix_hashes(&reasoned).last(),
        prefix_hashes(&written).last()
    );
    // A tool's output past what the agent writes of it.
    let mut longer = typed[..n].to_vec();
    let cut = longer
        .iter()
        .position(|m| m.text.len() > 1_900)
        .expect("the long output");
    longer[cut].text.push_str("\nmore output after the cut");
    assert_eq!(loose_hashes(&longer), loose_hashes(&written));
}
