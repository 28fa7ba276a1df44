//! Which dialect a conversation is written in, from the text alone (never from a header: the
//! same agent writes several).

use super::{Dialect, floor_boundary, opencode, pi};

/// Which dialect `conversation` is written in, from the text alone.
pub fn detect(conversation: &str) -> Dialect {
    let head = conversation.trim_start();
    // Markup tokens are distinctive wherever they appear; the opening settles every real
    // transcript, the whole text the rest.
    let opening = &head[..floor_boundary(head, 4096)];
    if let Some(dialect) = detect_in(opening) {
        return dialect;
    }
    // A conversation no longer than its opening (most wire requests) is not searched twice.
    if opening.len() < head.len()
        && let Some(dialect) = detect_in(head)
    {
        return dialect;
    }
    Dialect::Generic
}

/// Every string `detect_in` looks for. A conversation is read on every wire request, and these
/// are looked for in one pass instead of one search each (with a searcher built for each).
const NEEDLES: [&str; 29] = [
    "<|observation|>",
    "<|assistant|>",
    "<|im_user|>",
    "<|im_assistant|>",
    "<|im_middle|>",
    "<｜User｜>",
    "<｜Assistant｜>",
    "<｜begin▁of▁sentence｜>",
    "<|turn>",
    "<start_of_turn>",
    "<\\|start\\|>",
    "<|start|>",
    "<|im_start|>",
    "<\\|im_start\\|>",
    "<|im_start|>tool\n",
    "\n\nHuman: ",
    "\n\nAssistant: ",
    "<minimax:tool_call>",
    "<function_calls>",
    "<function_results>",
    "<invoke name=",
    "<tool_response>",
    "<thinking>",
    opencode::CALL,
    opencode::LINE_MARKERS[0],
    opencode::LINE_MARKERS[1],
    opencode::LINE_MARKERS[2],
    "\n\n[Assistant]: ",
    "\n\n[User]: ",
];

// One bit each in `Found`.
const _: () = assert!(NEEDLES.len() <= u32::BITS as usize);

static SEARCH: std::sync::LazyLock<aho_corasick::AhoCorasick> = std::sync::LazyLock::new(|| {
    aho_corasick::AhoCorasick::new(NEEDLES).expect("the needles build an automaton")
});

/// Which of [`NEEDLES`] a text holds.
struct Found<'a> {
    text: &'a str,
    bits: u32,
}

impl Found<'_> {
    fn in_text(text: &str) -> Found<'_> {
        let mut bits = 0u32;
        // Overlapping: one needle can begin inside another (`<|im_start|>tool` and `<|im_start|>`).
        for found in SEARCH.find_overlapping_iter(text) {
            bits |= 1 << found.pattern().as_u32();
        }
        Found { text, bits }
    }

    fn has(&self, needle: &str) -> bool {
        match NEEDLES.iter().position(|n| *n == needle) {
            Some(at) => self.bits & (1 << at) != 0,
            // Not one of the needles (a check added without one): searched for alone.
            None => self.text.contains(needle),
        }
    }
}

fn detect_in(text: &str) -> Option<Dialect> {
    let found = Found::in_text(text);
    let has = |needle: &str| found.has(needle);
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
    if has(opencode::CALL) || opencode::is_opencode(text, has) {
        return Some(Dialect::OpenCode);
    }
    if pi::starts_with_marker(text) || has("\n\n[Assistant]: ") || has("\n\n[User]: ") {
        return Some(Dialect::Pi);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{Found, NEEDLES};

    /// The one pass finds what a search for each needle finds, overlapping needles included.
    #[test]
    fn one_pass_finds_each_needle_a_search_would() {
        let texts = [
            "<|im_start|>tool\n<tool_response>\n</tool_response><|im_end|>",
            "[User]: hi\n\n[Assistant]: hello\n[Assistant tool call]: read({})",
            "\n\nHuman: x\n\nAssistant: <thinking>y</thinking><invoke name=\"z\">",
            "<｜begin▁of▁sentence｜><｜User｜>a<｜Assistant｜>b",
            "nothing at all",
        ];
        for text in texts {
            let found = Found::in_text(text);
            for needle in NEEDLES {
                assert_eq!(
                    found.has(needle),
                    text.contains(needle),
                    "{needle:?} in {text:?}"
                );
            }
        }
        assert!(Found::in_text("<|im_start|>tool\n").has("<|im_start|>"));
    }
}
