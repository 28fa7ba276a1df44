//! Which dialect a conversation is written in, from the text alone (never from a header: the
//! same agent writes several).

use super::opencode;
use crate::transcript::{Dialect, floor_boundary};

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

/// Which of [`NEEDLES`] a text holds: what a dialect's detector asks.
pub struct Found<'a> {
    pub text: &'a str,
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

    /// Whether the text holds `needle` (found in the one pass when it is one of [`NEEDLES`]).
    pub fn has(&self, needle: &str) -> bool {
        match NEEDLES.iter().position(|n| *n == needle) {
            Some(at) => self.bits & (1 << at) != 0,
            // Not one of the needles (a check added without one): searched for alone.
            None => self.text.contains(needle),
        }
    }
}

fn detect_in(text: &str) -> Option<Dialect> {
    let found = Found::in_text(text);
    super::DIALECTS
        .iter()
        .find(|row| row.detect.is_some_and(|detect| detect(&found)))
        .map(|row| row.dialect)
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
