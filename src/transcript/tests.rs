//! Each dialect read on excerpts shaped exactly as oh-my-pi 18 writes them (taken from the
//! recorded requests in `tests/fixtures/omp-requests/`), and pi's form written and read back.

use serde_json::{Value, json};

use super::*;

fn roles(t: &Transcript) -> Vec<Role> {
    t.messages.iter().map(|m| m.role).collect()
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall::from_object(name, &arguments)
}

/// The same exchange in every dialect: a request, thinking, text with a call, its result, an
/// edit, an error result, and the final answer.
fn expect_exchange(t: &Transcript, dialect: Dialect, with_thinking: bool) {
    assert_eq!(t.dialect, dialect);
    assert_eq!(
        roles(t),
        [
            Role::User,
            Role::Assistant,
            Role::ToolResult,
            Role::Assistant,
            Role::ToolResult,
            Role::Assistant,
            Role::User,
        ],
        "{t:#?}"
    );
    let m = &t.messages;
    assert_eq!(m[0].text, "alright, where were we?");
    if with_thinking {
        assert_eq!(m[1].thinking, "The user asks where we are.");
    }
    assert_eq!(m[1].text, "Let me verify these fixes work:");
    assert_eq!(
        m[1].calls,
        [call(
            "bash",
            json!({"command": "npx tsx src/cli.ts --help 2>&1 | head -5"})
        )]
    );
    assert_eq!(m[2].tool.as_deref(), Some("bash"));
    assert_eq!(
        m[2].text,
        "pi - AI coding assistant\n\nUsage:\n  pi [options]\n"
    );
    assert_eq!(
        m[3].calls,
        [call(
            "edit",
            json!({"path": "src/config.ts", "oldText": "a \"q\"\n", "newText": "b"})
        )]
    );
    assert_eq!(m[4].tool.as_deref(), Some("edit"));
    assert!(
        m[4].text.contains("Could not find the exact text"),
        "{:?}",
        m[4].text
    );
    assert_eq!(m[5].text, "Both work.");
    assert_eq!(m[6].text, "are we all committed?");
    assert_eq!(t.boundaries.len(), 7, "{:?}", t.boundaries);
}

#[test]
fn claude_turns_read_into_messages() {
    let conversation = "\n\nHuman: alright, where were we?\n\n\
        Assistant: Let me verify these fixes work:<function_calls>\n\
        <invoke name=\"bash\"><parameter name=\"command\">\"npx tsx src/cli.ts --help 2>&1 | head -5\"</parameter></invoke>\n\
        </function_calls>\n\n\
        Human: <function_results>\n<result>\n<tool_name>bash</tool_name>\n<stdout>pi - AI coding assistant\n\nUsage:\n  pi [options]\n</stdout>\n</result>\n</function_results>\n\n\
        Assistant: <function_calls>\n\
        <invoke name=\"edit\"><parameter name=\"path\">\"src/config.ts\"</parameter><parameter name=\"oldText\">\"a \\\"q\\\"\\n\"</parameter><parameter name=\"newText\">\"b\"</parameter></invoke>\n\
        </function_calls>\n\n\
        Human: <function_results>\n<error>\n<tool_name>edit</tool_name>\n<stderr>Could not find the exact text in src/config.ts</stderr>\n</error>\n</function_results>\n\n\
        Assistant: Both work.\n\n\
        Human: are we all committed?";
    let t = read(conversation);
    expect_exchange(&t, Dialect::Claude, false);
    assert!(t.messages[4].is_error);
    assert!(!t.messages[2].is_error);
}

#[test]
fn the_fallback_form_with_bare_invokes_and_tool_responses_reads_the_same() {
    let conversation = "\n\nHuman: alright, where were we?\n\n\
        Assistant: <thinking>\nThe user asks where we are.\n</thinking>Let me verify these fixes work:<invoke name=\"bash\"><parameter name=\"command\">\"npx tsx src/cli.ts --help 2>&1 | head -5\"</parameter></invoke>\n\n\
        Human: <tool_response>\npi - AI coding assistant\n\nUsage:\n  pi [options]\n\n</tool_response>\n\n\
        Assistant: <invoke name=\"edit\"><parameter name=\"path\">\"src/config.ts\"</parameter><parameter name=\"oldText\">\"a \\\"q\\\"\\n\"</parameter><parameter name=\"newText\">\"b\"</parameter></invoke>\n\n\
        Human: <tool_response>\nCould not find the exact text in src/config.ts\n</tool_response>\n\n\
        Assistant: Both work.\n\n\
        Human: are we all committed?";
    expect_exchange(&read(conversation), Dialect::Claude, true);
}

#[test]
fn harmony_with_escaped_tokens_reads_into_messages() {
    let conversation = r#"<\|start\|>user<\|message\|>alright, where were we?<\|end\|><\|start\|>assistant<\|channel\|>analysis<\|message\|>The user asks where we are.<\|end\|><\|start\|>assistant<\|channel\|>final<\|message\|>Let me verify these fixes work:<\|end\|><\|start\|>assistant<\|channel\|>commentary to=functions.bash<\|message\|>{"command":"npx tsx src/cli.ts --help 2>&1 | head -5"}<\|call\|><\|start\|>functions.bash to=assistant<\|channel\|>commentary<\|message\|>pi - AI coding assistant

Usage:
  pi [options]
<\|end\|><\|start\|>assistant<\|channel\|>commentary to=functions.edit<\|message\|>{"path":"src/config.ts","oldText":"a \"q\"\n","newText":"b"}<\|call\|><\|start\|>functions.edit to=assistant<\|channel\|>commentary<\|message\|>Could not find the exact text in src/config.ts<\|end\|><\|start\|>assistant<\|channel\|>final<\|message\|>Both work.<\|end\|><\|start\|>user<\|message\|>are we all committed?<\|end\|>"#;
    let t = read(conversation);
    // Harmony writes each channel as its own segment: the boundaries count segments.
    assert_eq!(t.dialect, Dialect::Harmony);
    let m = &t.messages;
    assert_eq!(roles(&t).len(), 7, "{t:#?}");
    assert_eq!(m[1].thinking, "The user asks where we are.");
    assert_eq!(m[1].text, "Let me verify these fixes work:");
    assert_eq!(
        m[1].calls[0].arg("command"),
        Some("npx tsx src/cli.ts --help 2>&1 | head -5")
    );
    assert_eq!(m[2].tool.as_deref(), Some("bash"));
    assert_eq!(
        m[2].text,
        "pi - AI coding assistant\n\nUsage:\n  pi [options]\n"
    );
    assert_eq!(m[3].calls[0].arg("oldText"), Some("a \"q\"\n"));
    assert_eq!(m[4].tool.as_deref(), Some("edit"));
    assert_eq!(m[6].text, "are we all committed?");
    // Plain tokens read the same.
    let plain = read(&conversation.replace("\\|", "|"));
    assert_eq!(plain.messages, t.messages);
}

#[test]
fn chatml_reads_into_messages() {
    let conversation = "<|im_start|>user\nalright, where were we?<|im_end|>\n\
        <|im_start|>assistant\n<think>\nThe user asks where we are.\n</think>Let me verify these fixes work:<tool_call>\n\
        {\"name\":\"bash\",\"arguments\":{\"command\":\"npx tsx src/cli.ts --help 2>&1 | head -5\"}}\n</tool_call><|im_end|>\n\
        <|im_start|>user\n<tool_response>\npi - AI coding assistant\n\nUsage:\n  pi [options]\n\n</tool_response><|im_end|>\n\
        <|im_start|>assistant\n<tool_call>\n{\"name\":\"edit\",\"arguments\":{\"path\":\"src/config.ts\",\"oldText\":\"a \\\"q\\\"\\n\",\"newText\":\"b\"}}\n</tool_call><|im_end|>\n\
        <|im_start|>user\n<tool_response>\nCould not find the exact text in src/config.ts\n</tool_response><|im_end|>\n\
        <|im_start|>assistant\nBoth work.<|im_end|>\n\
        <|im_start|>user\nare we all committed?<|im_end|>\n";
    expect_exchange(&read(conversation), Dialect::ChatMl, true);
}

#[test]
fn gemma_reads_into_messages_with_fences_inside_outputs() {
    let conversation = "<bos><start_of_turn>user\nalright, where were we?<end_of_turn>\n\
        <start_of_turn>model\n```thinking\nThe user asks where we are.\n```\nLet me verify these fixes work:```tool_code\n\
        default_api.bash(command=\"npx tsx src/cli.ts --help 2>&1 | head -5\")\n```<end_of_turn>\n\
        <start_of_turn>user\n```tool_outputs\npi - AI coding assistant\n\nUsage:\n  pi [options]\n\n```<end_of_turn>\n\
        <start_of_turn>model\n```tool_code\n[default_api.edit(path=\"src/config.ts\", oldText=\"a \\\"q\\\"\\n\", newText=\"b\")]\n```<end_of_turn>\n\
        <start_of_turn>user\n```tool_outputs\nCould not find the exact text in src/config.ts\n```<end_of_turn>\n\
        <start_of_turn>model\nBoth work.```tool_code\n[]\n```<end_of_turn>\n\
        <start_of_turn>user\nare we all committed?<end_of_turn>\n";
    expect_exchange(&read(conversation), Dialect::Gemma, true);

    // Several outputs in one turn, one of them holding a fence of its own.
    let outputs = "<start_of_turn>model\n```tool_code\n[default_api.read(path=\"a.md\"), default_api.read(path=\"b.ts\")]\n```<end_of_turn>\n\
        <start_of_turn>user\n```tool_outputs\n| fences | (```) |\n```\n```tool_outputs\nconst b = 1;\n```<end_of_turn>\n";
    let t = read(outputs);
    assert_eq!(
        roles(&t),
        [Role::Assistant, Role::ToolResult, Role::ToolResult]
    );
    assert_eq!(t.messages[1].text, "| fences | (```) |");
    assert_eq!(t.messages[1].tool.as_deref(), Some("read"));
    assert_eq!(t.messages[2].text, "const b = 1;");
}

#[test]
fn pi_form_written_by_the_serializer_reads_back() {
    let mut out = String::new();
    pi::begin_part(&mut out, pi::USER).push_str("alright, where were we?");
    pi::begin_part(&mut out, pi::THINKING).push_str("The user asks where we are.");
    pi::begin_part(&mut out, pi::ASSISTANT).push_str("Let me verify these fixes work:");
    pi::begin_part(&mut out, pi::TOOL_CALLS);
    pi::write_call(
        &mut out,
        "bash",
        Some(&json!({"command": "npx tsx src/cli.ts --help 2>&1 | head -5"})),
    );
    pi::write_tool_result(
        &mut out,
        "pi - AI coding assistant\n\nUsage:\n  pi [options]\n",
    );
    pi::begin_part(&mut out, pi::TOOL_CALLS);
    pi::write_call(
        &mut out,
        "edit",
        Some(&json!({"path": "src/config.ts", "oldText": "a \"q\"\n", "newText": "b"})),
    );
    pi::write_tool_result(&mut out, "Could not find the exact text in src/config.ts");
    pi::begin_part(&mut out, pi::ASSISTANT).push_str("Both work.");
    pi::begin_part(&mut out, pi::USER).push_str("are we all committed?");
    expect_exchange(&read(&out), Dialect::Pi, true);
    // And what the reader builds renders back to the same calls.
    let t = read(&out);
    assert_eq!(
        pi::render_call(&t.messages[3].calls[0]),
        r#"edit(path="src/config.ts", oldText="a \"q\"\n", newText="b")"#
    );
}

#[test]
fn free_text_is_one_user_message_and_detection_needs_no_tags() {
    let t = read("please summarize: we fixed the parser");
    assert_eq!(t.dialect, Dialect::Pi);
    assert_eq!(roles(&t), [Role::User]);
    assert!(read("").messages.is_empty());
    assert_eq!(detect("[Tool result]: x"), Dialect::Pi);
}

#[test]
fn windows_cut_at_turn_boundaries() {
    let conversation: String = (0..20)
        .map(|i| format!("[User]: message {i} {}", "x".repeat(50)))
        .collect::<Vec<_>>()
        .join("\n\n");
    let t = read(&conversation);
    let windows = t.windows(&conversation, 200);
    assert!(windows.len() >= 6, "{}", windows.len());
    assert!(
        windows
            .iter()
            .all(|w| w.len() <= 200 && w.starts_with("[User]: message "))
    );
    assert_eq!(windows.concat().matches("[User]:").count(), 20);
    // A turn larger than the window is a window of its own.
    let big = format!("[User]: {}\n\n[User]: small", "y".repeat(500));
    let t = read(&big);
    assert_eq!(t.windows(&big, 100).len(), 2);
}
