//! A link of the fallback chain: one model with the client that reaches it, its context window
//! and its request options — or the built-in extractive summarizer.

use serde_json::{Map, Value};

use super::anthropic::AnthropicClient;
use super::extractive;
use super::openai::OpenAiClient;
use super::stream::Timing;
use super::{AttemptError, Summary, SummaryRequest};

/// Prompts below this size are summarized extractively on the request's own task.
const INLINE_EXTRACTIVE_BYTES: usize = 64 * 1024;

/// A model with the client that reaches it, its context window and its request options.
#[derive(Debug, Clone)]
pub enum Link {
    OpenAi {
        client: OpenAiClient,
        model: String,
        window: Option<u64>,
        options: Map<String, Value>,
    },
    Anthropic {
        client: AnthropicClient,
        model: String,
        window: Option<u64>,
        options: Map<String, Value>,
    },
    Extractive,
}

impl Link {
    pub(crate) fn name(&self) -> String {
        match self {
            Link::OpenAi { model, .. } => format!("openai:{model}"),
            Link::Anthropic { model, .. } => format!("anthropic:{model}"),
            Link::Extractive => "extractive".to_owned(),
        }
    }

    /// The window configured or published for this model.
    pub(super) fn window(&self) -> Option<u64> {
        match self {
            Link::OpenAi { window, .. } | Link::Anthropic { window, .. } => *window,
            Link::Extractive => None,
        }
    }

    pub(super) async fn attempt(
        &self,
        request: &SummaryRequest,
        timing: &Timing,
    ) -> Result<Summary, AttemptError> {
        match self {
            Link::OpenAi {
                client,
                model,
                options,
                ..
            } => client.complete(model, options, request, timing).await,
            Link::Anthropic {
                client,
                model,
                options,
                ..
            } => client.complete(model, options, request, timing).await,
            // Small prompts take microseconds: a hand-off to the blocking pool would cost more
            // than the work. Large ones (up to megabytes) stay off the async workers.
            Link::Extractive if request.prompt.len() < INLINE_EXTRACTIVE_BYTES => {
                Ok(extractive::summarize(request))
            }
            Link::Extractive => {
                let request = request.clone();
                crate::cpu::off_runtime(move || extractive::summarize(&request))
                    .await
                    .map_err(|_| AttemptError::Malformed("the extractive summarizer failed".into()))
            }
        }
    }
}
