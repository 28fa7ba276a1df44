//! Fold: a prompt too long for a model's context window is not cut. Its conversation is split at
//! message boundaries into windows that fit, and the windows are summarized in order, each with
//! the running summary as its previous summary (the update prompt); the last window is asked in
//! the request's own terms, so the answer has the format the caller asked for. Nothing of the
//! history is dropped, and the fidelity gate then checks the final summary against the anchors of
//! the whole conversation.

use crate::prompts::Prompts;
use crate::transcript::{
    self,
    prompt::{Asks, Parts},
};

use super::{SummaryRequest, estimate_tokens};

/// The instructions fold uses for the windows before the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldPrompts {
    /// For a first window with no previous summary.
    pub summary: String,
    /// For every window after that.
    pub update: String,
}

impl FoldPrompts {
    pub fn of(prompts: &Prompts) -> FoldPrompts {
        FoldPrompts {
            summary: prompts.summary.clone(),
            update: prompts.update.clone(),
        }
    }
}

impl Default for FoldPrompts {
    fn default() -> Self {
        FoldPrompts::of(&Prompts::builtin())
    }
}

/// Tokens kept free in each window prompt for the tags around the parts.
const TAG_SLACK: u64 = 64;

/// A window narrower than this (in tokens of conversation) is not worth folding into.
const MIN_WINDOW_TOKENS: u64 = 256;

/// A request split into windows: build each prompt with [`Fold::prompt`].
#[derive(Debug)]
pub struct Fold<'r> {
    parts: Parts<'r>,
    windows: Vec<&'r str>,
}

impl<'r> Fold<'r> {
    /// Splits `request` so that every window prompt fits `budget` tokens (the prompt's share of
    /// the model's window) with a previous summary of up to `summary_tokens`. `None` when it
    /// cannot: no conversation to split, or too little room for one.
    pub fn plan(
        request: &'r SummaryRequest,
        budget: u64,
        summary_tokens: u64,
        prompts: &FoldPrompts,
    ) -> Option<Fold<'r>> {
        let parts = Parts::parse(&request.prompt);
        if parts.conversation.trim().is_empty() {
            return None;
        }
        let instructions = estimate_tokens(parts.instructions)
            .max(estimate_tokens(&prompts.update))
            .max(estimate_tokens(&prompts.summary));
        let previous = parts
            .previous_summary
            .map_or(0, estimate_tokens)
            .max(summary_tokens);
        let room = budget
            .checked_sub(estimate_tokens(parts.before) + instructions + previous + TAG_SLACK)
            .filter(|&room| room >= MIN_WINDOW_TOKENS)?;
        // Four UTF-16 units a token; a byte is at most one unit, so a window of `4 × room` bytes
        // never estimates above `room` tokens.
        let max_bytes = (room * 4) as usize;
        let transcript = transcript::read(parts.conversation);
        let windows: Vec<&str> = transcript
            .windows(parts.conversation, max_bytes)
            .into_iter()
            .flat_map(|window| split_long(window, max_bytes))
            .collect();
        (windows.len() > 1).then_some(Fold { parts, windows })
    }

    pub fn len(&self) -> usize {
        self.windows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// The prompt of window `index`, after `running` (the summary of the windows before it).
    pub fn prompt(&self, index: usize, running: Option<&str>, prompts: &FoldPrompts) -> String {
        let last = index + 1 == self.windows.len();
        let previous = running.or(if index == 0 {
            self.parts.previous_summary
        } else {
            None
        });
        let instructions = if last {
            // The last window answers in the request's own terms; a first-summary request has
            // a previous summary now, so it becomes an update.
            let checkpoint = matches!(self.parts.asks(), Asks::Checkpoint { .. });
            if checkpoint && self.parts.previous_summary.is_none() {
                prompts.update.as_str()
            } else {
                self.parts.instructions
            }
        } else if previous.is_some() {
            prompts.update.as_str()
        } else {
            prompts.summary.as_str()
        };
        self.parts
            .rebuild(self.windows[index], previous, instructions)
    }
}

/// `window` cut at line ends (or, for a single line, at character boundaries) into pieces of at
/// most `max_bytes`: a single message larger than a window still fits.
fn split_long(window: &str, max_bytes: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = window;
    while rest.len() > max_bytes {
        let mut cut = max_bytes;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(line_end) = rest[..cut].rfind('\n').filter(|&at| at > max_bytes / 2) {
            cut = line_end + 1;
        }
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.trim().is_empty() {
        pieces.push(rest);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::prompt::history_prompt;

    fn conversation(turns: usize) -> String {
        (0..turns)
            .map(|i| {
                format!(
                    "[User]: request {i} {}\n\n[Assistant]: answer {i} {}",
                    "x".repeat(400),
                    "y".repeat(400)
                )
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    #[test]
    fn every_window_prompt_fits_and_the_windows_hold_the_whole_conversation() {
        let prompts = FoldPrompts::default();
        let whole = conversation(200);
        let request = SummaryRequest {
            system_prompt: String::new(),
            prompt: history_prompt(&Prompts::builtin(), &whole, None, Some("the parser")),
            max_tokens: 1000,
        };
        let fold = Fold::plan(&request, 6000, 1000, &prompts).unwrap();
        assert!(fold.len() >= 10, "{}", fold.len());
        let mut running: Option<String> = None;
        let mut seen = String::new();
        for index in 0..fold.len() {
            let prompt = fold.prompt(index, running.as_deref(), &prompts);
            // A previous summary as long as allowed still fits.
            let with_summary =
                estimate_tokens(&prompt) + 1000 - running.as_deref().map_or(0, estimate_tokens);
            assert!(with_summary <= 6000, "window {index}: {with_summary}");
            let parts = Parts::parse(&prompt);
            seen.push_str(parts.conversation);
            seen.push_str("\n\n");
            if index == 0 {
                assert!(parts.previous_summary.is_none());
                assert_eq!(parts.instructions, prompts.summary);
            } else {
                assert_eq!(parts.previous_summary, Some("S"));
                assert_eq!(
                    parts.instructions, prompts.update,
                    "a first summary ends as an update"
                );
            }
            running = Some("S".into());
        }
        assert_eq!(seen.trim_end(), whole, "nothing left out, nothing repeated");
    }

    #[test]
    fn the_last_window_keeps_the_requests_own_instructions() {
        let prompts = FoldPrompts::default();
        let request = SummaryRequest {
            system_prompt: String::new(),
            prompt: format!(
                "<conversation>\n{}\n</conversation>\n\n<previous-summary>\nOLD\n</previous-summary>\n\nIn 2-3 sentences, describe the changes.",
                conversation(100)
            ),
            max_tokens: 512,
        };
        let fold = Fold::plan(&request, 8000, 512, &prompts).unwrap();
        let first = fold.prompt(0, None, &prompts);
        assert_eq!(Parts::parse(&first).previous_summary, Some("OLD"));
        let last = fold.prompt(fold.len() - 1, Some("RUNNING"), &prompts);
        let parts = Parts::parse(&last);
        assert_eq!(parts.previous_summary, Some("RUNNING"));
        assert_eq!(
            parts.instructions,
            "In 2-3 sentences, describe the changes."
        );
    }

    #[test]
    fn a_single_huge_message_is_cut_to_fit_and_a_tiny_window_is_refused() {
        let huge = format!("[User]: {}", "line of log output\n".repeat(5000));
        let request = SummaryRequest {
            system_prompt: String::new(),
            prompt: history_prompt(&Prompts::builtin(), &huge, None, None),
            max_tokens: 500,
        };
        let prompts = FoldPrompts::default();
        let fold = Fold::plan(&request, 5000, 500, &prompts).unwrap();
        for index in 0..fold.len() {
            assert!(estimate_tokens(&fold.prompt(index, Some("S"), &prompts)) + 500 <= 5000);
        }
        assert!(Fold::plan(&request, 1000, 500, &prompts).is_none());
    }
}
