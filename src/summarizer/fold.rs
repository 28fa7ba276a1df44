//! Fold: a prompt too long for a model's context window is not cut. Its conversation is split at
//! message boundaries into windows that fit, and the windows are summarized in order, each with
//! the running summary as its previous summary (the update prompt); the last window is asked in
//! the request's own terms, so the answer has the format the caller asked for. Nothing of the
//! history is dropped, and the fidelity gate then checks the final summary against the anchors of
//! the whole conversation.

use compactd_core::prompts::Prompts;
use compactd_core::transcript::Conversation;
use compactd_core::transcript::prompt::Asks;

use super::SummaryRequest;
use compactd_core::transcript::{Shape, estimate_tokens};

/// The instructions fold uses for the windows before the last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FoldPrompts {
    /// For a first window with no previous summary.
    pub(crate) summary: String,
    /// For every window after that.
    pub(crate) update: String,
}

impl FoldPrompts {
    pub(crate) fn of(prompts: &Prompts) -> FoldPrompts {
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

/// A request split into windows: build each window's request with [`Fold::window`].
#[derive(Debug)]
pub(crate) struct Fold<'r> {
    shape: &'r Shape,
    windows: Vec<Conversation>,
}

impl<'r> Fold<'r> {
    /// Splits `request`'s conversation (typed, see [`SummaryRequest::shape`]) so that every
    /// window prompt fits `budget` tokens (the prompt's share of the model's window) with a
    /// previous summary of up to `summary_tokens`. `None` when it cannot: no conversation to
    /// split, or too little room for one.
    pub(crate) fn plan(
        request: &'r SummaryRequest,
        budget: u64,
        summary_tokens: u64,
        prompts: &FoldPrompts,
    ) -> Option<Fold<'r>> {
        let shape = request.shape();
        if shape.conversation.messages.is_empty() {
            return None;
        }
        let instructions = estimate_tokens(&shape.instructions)
            .max(estimate_tokens(&prompts.update))
            .max(estimate_tokens(&prompts.summary));
        let previous = shape
            .previous_summary
            .as_deref()
            .map_or(0, estimate_tokens)
            .max(summary_tokens);
        let room = budget
            .checked_sub(estimate_tokens(&shape.before) + instructions + previous + TAG_SLACK)
            .filter(|&room| room >= MIN_WINDOW_TOKENS)?;
        // Four UTF-16 units a token; a byte is at most one unit, so a window of `4 × room` bytes
        // never estimates above `room` tokens.
        let max_bytes = (room * 4) as usize;
        let windows = shape.conversation.windows(max_bytes);
        (windows.len() > 1).then_some(Fold { shape, windows })
    }

    pub(crate) fn len(&self) -> usize {
        self.windows.len()
    }

    /// The summary when the model finished only the windows before `from` in time: the
    /// extractive summarizer carries the model's summary of them (as each next window's previous
    /// summary) through the rest, in milliseconds. Nothing the model wrote is thrown away; the
    /// summary's model names both, and its flags say how many windows were the model's.
    pub(crate) fn finish_extractively(
        &self,
        from: usize,
        model_summary: super::Summary,
        prompts: &FoldPrompts,
        system_prompt: &str,
        max_tokens: u64,
    ) -> super::Summary {
        let mut text = model_summary.text;
        let mut usage = model_summary.usage;
        for index in from..self.windows.len() {
            let window = self.window(index, Some(&text), prompts, system_prompt, max_tokens);
            let summary = super::extractive::summarize(&window);
            usage = usage.plus(summary.usage);
            text = summary.text;
        }
        super::Summary {
            text,
            model: format!("{}+extractive", model_summary.model),
            usage,
            fidelity: None,
            flags: super::Flags {
                model_windows: Some((from as u32, self.windows.len() as u32)),
                ..model_summary.flags
            },
        }
    }

    /// The request of window `index`, after `running` (the summary of the windows before it):
    /// its conversation written in the request's dialect, its typed shape carried along.
    pub(crate) fn window(
        &self,
        index: usize,
        running: Option<&str>,
        prompts: &FoldPrompts,
        system_prompt: &str,
        max_tokens: u64,
    ) -> SummaryRequest {
        let shape = self.shape;
        let last = index + 1 == self.windows.len();
        let previous = running.or(if index == 0 {
            shape.previous_summary.as_deref()
        } else {
            None
        });
        let checkpoint = matches!(shape.asks, Asks::Checkpoint { .. });
        let (instructions, asks) = if last {
            // The last window answers in the request's own terms; a first-summary request has
            // a previous summary now, so it becomes an update.
            if checkpoint && shape.previous_summary.is_none() {
                (prompts.update.as_str(), shape.asks)
            } else {
                (shape.instructions.as_str(), shape.asks)
            }
        } else if previous.is_some() {
            (
                prompts.update.as_str(),
                Asks::Checkpoint {
                    critical_context: true,
                },
            )
        } else {
            (
                prompts.summary.as_str(),
                Asks::Checkpoint {
                    critical_context: true,
                },
            )
        };
        let window = &self.windows[index];
        let text = window.write();
        SummaryRequest::with_shape(
            system_prompt.to_owned(),
            shape.prompt(&text, previous, instructions),
            max_tokens,
            Shape {
                conversation: window.clone(),
                conversation_tokens: estimate_tokens(&text),
                previous_summary: previous.map(str::to_owned),
                asks,
                instructions: instructions.to_owned(),
                before: shape.before.clone(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use compactd_core::transcript::prompt::{Parts, history_prompt};

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

    fn window_prompt(fold: &Fold<'_>, index: usize, running: Option<&str>) -> SummaryRequest {
        fold.window(index, running, &FoldPrompts::default(), "", 1000)
    }

    #[test]
    fn every_window_prompt_fits_and_the_windows_hold_the_whole_conversation() {
        let prompts = FoldPrompts::default();
        let whole = conversation(200);
        let request = SummaryRequest::from_prompt(
            String::new(),
            history_prompt(&Prompts::builtin(), &whole, None, Some("the parser")),
            1000,
        );
        let fold = Fold::plan(&request, 6000, 1000, &prompts).unwrap();
        assert!(fold.len() >= 10, "{}", fold.len());
        let mut running: Option<String> = None;
        let mut seen = String::new();
        for index in 0..fold.len() {
            let window = window_prompt(&fold, index, running.as_deref());
            let prompt = &window.prompt;
            // A previous summary as long as allowed still fits.
            let with_summary =
                estimate_tokens(prompt) + 1000 - running.as_deref().map_or(0, estimate_tokens);
            assert!(with_summary <= 6000, "window {index}: {with_summary}");
            let parts = Parts::parse(prompt);
            // The window's typed conversation is what its prompt holds.
            assert_eq!(window.shape().conversation.write(), parts.conversation);
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
        let request = SummaryRequest::from_prompt(
            String::new(),
            format!(
                "<conversation>\n{}\n</conversation>\n\n<previous-summary>\nOLD\n</previous-summary>\n\nIn 2-3 sentences, describe the changes.",
                conversation(100)
            ),
            512,
        );
        let fold = Fold::plan(&request, 8000, 512, &prompts).unwrap();
        let first = window_prompt(&fold, 0, None);
        assert_eq!(Parts::parse(&first.prompt).previous_summary, Some("OLD"));
        let last = window_prompt(&fold, fold.len() - 1, Some("RUNNING"));
        let parts = Parts::parse(&last.prompt);
        assert_eq!(parts.previous_summary, Some("RUNNING"));
        assert_eq!(
            parts.instructions,
            "In 2-3 sentences, describe the changes."
        );
        assert_eq!(last.shape().asks, Asks::Short);
    }

    #[test]
    fn a_single_huge_message_is_cut_to_fit_and_a_tiny_window_is_refused() {
        let huge = format!("[User]: {}", "line of log output\n".repeat(5000));
        let request = SummaryRequest::from_prompt(
            String::new(),
            history_prompt(&Prompts::builtin(), &huge, None, None),
            500,
        );
        let prompts = FoldPrompts::default();
        let fold = Fold::plan(&request, 5000, 500, &prompts).unwrap();
        for index in 0..fold.len() {
            let window = fold.window(index, Some("S"), &prompts, "", 500);
            assert!(estimate_tokens(&window.prompt) + 500 <= 5000);
        }
        assert!(Fold::plan(&request, 1000, 500, &prompts).is_none());
    }
}
