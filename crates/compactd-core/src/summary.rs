//! A summarization as every stage sees it, whoever writes it: the request (a system prompt, one
//! user prompt, an output cap, and the prompt's parts typed) and the finished summary with what
//! the stages did to it.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::fidelity::facts::Facts;
use crate::transcript::Shape;

/// One summarization call: a system prompt, one user prompt, an output cap — and the prompt's
/// parts typed ([`Shape`], see [`SummaryRequest::shape`]), which every stage reads instead of the
/// text.
#[derive(Debug, Clone)]
pub struct SummaryRequest {
    pub system_prompt: String,
    pub prompt: String,
    pub max_tokens: u64,
    /// Given, or read from `prompt` at its first use: a request the summary cache answers is
    /// never read (reading an agent's conversation was a sixth of a cache hit's work). Shared by
    /// clones, so that it is read at most once per request; a request whose prompt is rewritten
    /// (redaction) gets its shape set with it.
    shape: Arc<OnceLock<Shape>>,
    /// The facts of the conversation, extracted at the first stage that needs them (the
    /// extractive summarizer, the fidelity gate) and then shared, as the shape is.
    facts: Arc<OnceLock<Facts>>,
}

impl PartialEq for SummaryRequest {
    fn eq(&self, other: &SummaryRequest) -> bool {
        self.system_prompt == other.system_prompt
            && self.prompt == other.prompt
            && self.max_tokens == other.max_tokens
            && self.shape() == other.shape()
    }
}

impl SummaryRequest {
    /// A request for an agent's prompt: its conversation is read at the first stage that needs
    /// it, once.
    pub fn from_prompt(system_prompt: String, prompt: String, max_tokens: u64) -> SummaryRequest {
        SummaryRequest {
            system_prompt,
            prompt,
            max_tokens,
            shape: Arc::default(),
            facts: Arc::default(),
        }
    }

    /// A request whose prompt was rendered from `shape` (nothing is read back).
    pub fn with_shape(
        system_prompt: String,
        prompt: String,
        max_tokens: u64,
        shape: Shape,
    ) -> SummaryRequest {
        SummaryRequest {
            system_prompt,
            prompt,
            max_tokens,
            shape: Arc::new(OnceLock::from(shape)),
            facts: Arc::default(),
        }
    }

    /// The prompt's parts, typed: read from the prompt here the first time it is asked for.
    pub fn shape(&self) -> &Shape {
        self.shape.get_or_init(|| Shape::of_prompt(&self.prompt))
    }

    /// Whether the shape was given or read yet (tests of the stages that must not read it).
    #[doc(hidden)]
    pub fn shape_is_read(&self) -> bool {
        self.shape.get().is_some()
    }

    /// Replaces the shape (of a prompt that was rewritten).
    pub fn set_shape(&mut self, shape: Shape) {
        self.shape = Arc::new(OnceLock::from(shape));
        self.facts = Arc::default();
    }

    /// The facts of the conversation: extracted here the first time they are asked for, once
    /// per request however many stages read them.
    pub fn facts(&self) -> &Facts {
        self.facts
            .get_or_init(|| Facts::extract(&self.shape().conversation.messages))
    }

    /// A request for a prompt compactd rendered from `conversation`: its layout is taken from
    /// the prompt, its conversation is the typed one it was written from.
    pub fn rendered(
        system_prompt: String,
        prompt: String,
        max_tokens: u64,
        conversation: crate::transcript::Conversation,
    ) -> SummaryRequest {
        let shape = Shape::of_rendered(&prompt, conversation);
        SummaryRequest::with_shape(system_prompt, prompt, max_tokens, shape)
    }

    /// The same request with another output cap (its shape and facts shared, not read again).
    pub fn with_max_tokens(&self, max_tokens: u64) -> SummaryRequest {
        SummaryRequest {
            max_tokens,
            ..self.clone()
        }
    }

    /// A request that carries no conversation (a repair request).
    pub fn plain(system_prompt: String, prompt: String, max_tokens: u64) -> SummaryRequest {
        SummaryRequest::with_shape(system_prompt, prompt, max_tokens, Shape::none())
    }
}

/// Token counts reported by the model (estimated for the extractive summarizer).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of the input tokens, those the provider read from its prompt cache (Anthropic's
    /// `cache_read_input_tokens`, OpenAI's `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl TokenUsage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> TokenUsage {
        TokenUsage {
            input_tokens,
            output_tokens,
            cached_input_tokens: 0,
        }
    }

    /// The usage of two calls together.
    pub fn plus(self, other: TokenUsage) -> TokenUsage {
        TokenUsage {
            input_tokens: self.input_tokens + other.input_tokens,
            output_tokens: self.output_tokens + other.output_tokens,
            cached_input_tokens: self.cached_input_tokens + other.cached_input_tokens,
        }
    }
}

/// How the line that ends a summary whose conversation recall kept starts (`app::recall`).
pub const RECALL_LINE_START: &str = "Earlier detail is searchable:";

/// What the pipeline's stages did to a summary besides writing it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// Answered from the summary cache: no model was asked.
    pub cached: bool,
    /// The tenant's daily token budget is spent: the extractive summarizer wrote it.
    pub budget_exhausted: bool,
    /// The request looks like a compaction loop.
    pub loop_detected: bool,
    /// Secrets replaced by placeholders in what was sent and what came back.
    pub redactions: u64,
    /// A conversation folded over windows whose model finished only some before the deadline:
    /// (windows the model summarized, windows); the extractive summarizer carried its summary
    /// through the rest.
    pub model_windows: Option<(u32, u32)>,
    /// The recall id its conversation was kept under (wire requests; see `app::recall`).
    pub recall_id: Option<String>,
    /// The summary cache's key of the request (when the cache is on), on a hit and a miss alike:
    /// the same key is the same prompt, so recall finds the conversation it kept for it by this
    /// key without reading the prompt again.
    pub cache_key: Option<String>,
}

/// A finished summary and who wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    pub text: String,
    /// `provider:model`, e.g. `openai:gpt-4.1-mini` or `extractive`.
    pub model: String,
    pub usage: TokenUsage,
    /// What the fidelity gate found and did; `None` until the summary has been through it.
    pub fidelity: Option<crate::fidelity::Report>,
    pub flags: Flags,
}

/// Whether a summary says nothing: empty once whitespace and zero-width characters (which models
/// sometimes emit alone) are removed. Such an answer is a failed attempt, never a summary.
pub use crate::fidelity::gate::is_blank;

/// A model's text made safe to store and return: NUL characters (which no database text column
/// holds and no agent wants) removed.
pub fn clean(mut text: String) -> String {
    if text.contains('\0') {
        text.retain(|c| c != '\0');
    }
    text
}

impl crate::redact::Screen for SummaryRequest {
    fn screen(&mut self, screening: &mut crate::redact::Screening<'_>) {
        let before = screening.found();
        screening.text(&mut self.system_prompt);
        screening.text(&mut self.prompt);
        if screening.found() == before {
            return;
        }
        // The typed conversation is what the gate, the extractive summarizer and a fold read: it
        // is redacted with the same placeholders. Its texts are pieces of the prompt's (escapes
        // undone, which the rules also look through), so a prompt with nothing found has nothing
        // here, and the same secrets again are counted once, in the prompt.
        let mut shape = self.shape().clone();
        screening.uncounted(|screening| crate::redact::Screen::screen(&mut shape, screening));
        self.set_shape(shape);
    }
}

impl crate::redact::Screen for Summary {
    fn screen(&mut self, screening: &mut crate::redact::Screening<'_>) {
        screening.text(&mut self.text);
        if let Some(report) = &mut self.fidelity {
            for missing in &mut report.missing {
                screening.text(&mut missing.text);
            }
            for rule in &mut report.rules {
                screening.text(rule);
            }
        }
    }
}
