//! Which dialect a conversation is written in, from the text alone (never from a header: the
//! same agent writes several).

use super::{Dialect, floor_boundary, opencode, pi};

/// Which dialect `conversation` is written in, from the text alone.
pub fn detect(conversation: &str) -> Dialect {
    let head = conversation.trim_start();
    // Markup tokens are distinctive wherever they appear; the opening settles every real
    // transcript, the whole text the rest.
    let opening = &head[..floor_boundary(head, 4096)];
    for text in [opening, head] {
        if let Some(dialect) = detect_in(text) {
            return dialect;
        }
    }
    Dialect::Generic
}

fn detect_in(text: &str) -> Option<Dialect> {
    let has = |needle: &str| text.contains(needle);
    if text.starts_with("[gMASK]<sop>") || has("<|observation|>") && has("<|assistant|>") {
        return Some(Dialect::Glm);
    }
    if has("<|im_user|>") || has("<|im_assistant|>") || has("<|im_middle|>") {
        return Some(Dialect::Kimi);
    }
    if has("<｜User｜>") || has("<｜Assistant｜>") || has("<｜begin▁of▁sentence｜>") {
        return Some(Dialect::DeepSeek);
    }
    if has("<|turn>") {
        return Some(Dialect::Gemma);
    }
    if has("<start_of_turn>") {
        return Some(Dialect::Gemini);
    }
    if has("<\\|start\\|>") || has("<|start|>") {
        return Some(Dialect::Harmony);
    }
    if has("<|im_start|>") || has("<\\|im_start\\|>") {
        return Some(if has("<|im_start|>tool\n") {
            Dialect::Hermes
        } else {
            Dialect::Qwen3
        });
    }
    if text.starts_with("Human: ")
        || text.starts_with("Assistant: ")
        || has("\n\nHuman: ")
        || has("\n\nAssistant: ")
    {
        return Some(if has("<minimax:tool_call>") {
            Dialect::Minimax
        } else if has("<function_calls>") || has("<function_results>") {
            Dialect::Anthropic
        } else if has("<invoke name=") || has("<tool_response>") || has("<thinking>") {
            Dialect::Xml
        } else {
            Dialect::Anthropic
        });
    }
    if has("[Assistant tool call]: ") || opencode::is_opencode(text) {
        return Some(Dialect::OpenCode);
    }
    if pi::starts_with_marker(text) || has("\n\n[Assistant]: ") || has("\n\n[User]: ") {
        return Some(Dialect::Pi);
    }
    None
}
