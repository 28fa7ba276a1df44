//! Every dialect, one row each: its name, reader, writer and detector, in the order detection
//! tries them. Adding a dialect is its module, its [`Dialect`] variant and one row here (plus its
//! samples and tests, which read every row).

mod deepseek;
pub mod detect;
mod gemini;
mod gemma;
mod generic;
mod glm;
mod harmony;
mod kimi;
pub mod opencode;
pub mod pi;
mod qwen;
mod reasoning;
mod xmlish;

use crate::transcript::{Dialect, Message};
use detect::Found;

/// One dialect.
pub struct Row {
    pub dialect: Dialect,
    /// The name compactd reports (and oh-my-pi's, where it has one).
    pub name: &'static str,
    /// The messages of a whole conversation written in it (frame tags unescaped first when
    /// `escaped`).
    pub read: fn(&str) -> Vec<Message>,
    /// The messages written as the agent that uses the dialect writes them (frame tags escaped
    /// after when `escaped`).
    pub write: fn(&[Message]) -> String,
    /// Whether oh-my-pi escapes the frame tags inside the transcript (the model-native markups).
    pub escaped: bool,
    /// Whether a text is written in it, knowing the rows before did not claim it; `None`: never
    /// detected (only the fallback).
    pub detect: Option<fn(&Found) -> bool>,
    /// Whether its writer round-trips its reader (every dialect but the generic guess).
    pub written: bool,
}

/// Every dialect, in the order detection tries them: the distinctive markup tokens first, the
/// `Human:`/`Assistant:` family by its tool markup, then the bracketed forms, then the guess.
pub const DIALECTS: &[Row] = &[
    Row {
        dialect: Dialect::Glm,
        name: "glm",
        read: glm::read,
        write: glm::write,
        escaped: true,
        detect: Some(|f| {
            f.text.starts_with("[gMASK]<sop>") || f.has("<|observation|>") && f.has("<|assistant|>")
        }),
        written: true,
    },
    Row {
        dialect: Dialect::Kimi,
        name: "kimi",
        read: kimi::read,
        write: kimi::write,
        escaped: true,
        detect: Some(|f| {
            f.has("<|im_user|>") || f.has("<|im_assistant|>") || f.has("<|im_middle|>")
        }),
        written: true,
    },
    Row {
        dialect: Dialect::DeepSeek,
        name: "deepseek",
        read: deepseek::read,
        write: deepseek::write,
        escaped: true,
        detect: Some(|f| {
            f.has("<｜User｜>") || f.has("<｜Assistant｜>") || f.has("<｜begin▁of▁sentence｜>")
        }),
        written: true,
    },
    Row {
        dialect: Dialect::Gemma,
        name: "gemma",
        read: gemma::read,
        write: gemma::write,
        escaped: true,
        detect: Some(|f| f.has("<|turn>")),
        written: true,
    },
    Row {
        dialect: Dialect::Gemini,
        name: "gemini",
        read: gemini::read,
        write: gemini::write,
        escaped: true,
        detect: Some(|f| f.has("<start_of_turn>")),
        written: true,
    },
    Row {
        dialect: Dialect::Harmony,
        name: "harmony",
        read: harmony::read,
        // Harmony's own tokens are escaped by its writer; the frame tags after, as for all.
        write: harmony::write,
        escaped: true,
        detect: Some(|f| f.has("<\\|start\\|>") || f.has("<|start|>")),
        written: true,
    },
    Row {
        dialect: Dialect::Hermes,
        name: "hermes",
        read: |t| qwen::read(Dialect::Hermes, t),
        write: |m| qwen::write(Dialect::Hermes, m),
        escaped: true,
        // ChatML whose tool results have turns of their own.
        detect: Some(|f| chatml(f) && f.has("<|im_start|>tool\n")),
        written: true,
    },
    Row {
        dialect: Dialect::Qwen3,
        name: "qwen3",
        read: |t| qwen::read(Dialect::Qwen3, t),
        write: |m| qwen::write(Dialect::Qwen3, m),
        escaped: true,
        detect: Some(chatml),
        written: true,
    },
    Row {
        dialect: Dialect::Minimax,
        name: "minimax",
        read: |t| xmlish::read(Dialect::Minimax, t),
        write: |m| xmlish::write(Dialect::Minimax, m),
        escaped: true,
        detect: Some(|f| human(f) && f.has("<minimax:tool_call>")),
        written: true,
    },
    Row {
        dialect: Dialect::Anthropic,
        name: "anthropic",
        read: |t| xmlish::read(Dialect::Anthropic, t),
        write: |m| xmlish::write(Dialect::Anthropic, m),
        escaped: true,
        // Its own tool markup, or none of the bare XML form's: the family's default.
        detect: Some(|f| {
            human(f)
                && (f.has("<function_calls>")
                    || f.has("<function_results>")
                    || !(f.has("<invoke name=") || f.has("<tool_response>") || f.has("<thinking>")))
        }),
        written: true,
    },
    Row {
        dialect: Dialect::Xml,
        name: "xml",
        read: |t| xmlish::read(Dialect::Xml, t),
        write: |m| xmlish::write(Dialect::Xml, m),
        escaped: true,
        detect: Some(human),
        written: true,
    },
    Row {
        dialect: Dialect::OpenCode,
        name: "opencode",
        read: opencode::read,
        write: opencode::write,
        escaped: false,
        detect: Some(|f| f.has(opencode::CALL) || opencode::is_opencode(f.text, |n| f.has(n))),
        written: true,
    },
    Row {
        dialect: Dialect::Pi,
        name: "pi",
        read: pi::read,
        write: pi::write,
        escaped: false,
        detect: Some(|f| {
            pi::starts_with_marker(f.text) || f.has("\n\n[Assistant]: ") || f.has("\n\n[User]: ")
        }),
        written: true,
    },
    Row {
        dialect: Dialect::Generic,
        name: "generic",
        read: generic::read,
        // What the guess found is written in pi's form.
        write: pi::write,
        escaped: false,
        detect: None,
        written: false,
    },
];

/// ChatML, as Qwen3 and Hermes write it (the start token escaped or not).
fn chatml(f: &Found) -> bool {
    f.has("<|im_start|>") || f.has("<\\|im_start\\|>")
}

/// The `Human:` / `Assistant:` family (Anthropic, XML, MiniMax).
fn human(f: &Found) -> bool {
    f.text.starts_with("Human: ")
        || f.text.starts_with("Assistant: ")
        || f.has("\n\nHuman: ")
        || f.has("\n\nAssistant: ")
}

/// The row of `dialect`.
pub fn row(dialect: Dialect) -> &'static Row {
    DIALECTS
        .iter()
        .find(|r| r.dialect == dialect)
        .expect("every dialect has a row")
}
