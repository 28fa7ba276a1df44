//! Summarizing what an agent sent: a rendered prompt (the `compaction.remoteEndpoint` wire, a
//! chat completion with one user message, spec §10), or a structured conversation (chat messages
//! with tool calls, as agents that compact by appending an instruction to their history send it).
//! compactd does not re-plan: the prompt is read once into its typed shape and forwarded as the
//! agent wrote it; a structured conversation is written in pi's form for the model.

use crate::access::Identity;
use crate::app::{App, AppError};
use compactd_core::redact::Redacted;
use std::sync::Arc;

use crate::pipeline::{Endpoint, Job, Purpose};
use crate::summarizer::chain::Chain;
use serde::Serialize;
use serde_json::Value;

use crate::summarizer::{Flags, Summary, SummaryRequest};
use compactd_core::transcript::prompt::{Asks, is_short_summary_request};
use compactd_core::transcript::{Conversation, Shape};

/// What the pipeline's stages did to a summary, as the responses show it.
#[derive(Debug, Clone, Copy, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct StagesView {
    /// Answered from the summary cache: no model was asked.
    pub(crate) cached: bool,
    /// Flagged as a compaction loop: compacted again soon with little new content, or the
    /// summary is not much smaller than what it replaces.
    #[serde(rename = "loop")]
    pub(crate) loop_detected: bool,
    /// The tenant's daily token budget is spent: the extractive summarizer wrote it.
    pub(crate) budget_exhausted: bool,
    /// Secrets replaced by placeholders in what was sent to the model and what came back.
    pub(crate) redactions: u64,
    /// A prompt folded over windows whose model finished only some of them before the deadline:
    /// how many it wrote; the extractive summarizer carried its summary through the rest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model_windows: Option<ModelWindows>,
}

/// Which part of a folded summary the model wrote.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModelWindows {
    /// Windows the model summarized, from the first.
    pub(crate) by_model: u32,
    /// Windows of the fold.
    pub(crate) windows: u32,
}

impl From<&Flags> for StagesView {
    fn from(flags: &Flags) -> StagesView {
        StagesView {
            cached: flags.cached,
            loop_detected: flags.loop_detected,
            budget_exhausted: flags.budget_exhausted,
            redactions: flags.redactions,
            model_windows: flags
                .model_windows
                .map(|(by_model, windows)| ModelWindows { by_model, windows }),
        }
    }
}

impl StagesView {
    /// The same as a header value (chat completions, whose body has no place for it).
    pub(crate) fn header_value(&self) -> String {
        format!(
            "cached={}; loop={}; budget-exhausted={}; redactions={}",
            self.cached, self.loop_detected, self.budget_exhausted, self.redactions
        )
    }
}

/// What an agent sent.
#[derive(Debug, Clone)]
pub(crate) struct WireRequest {
    /// The agent's system prompt; compactd's own when absent or blank.
    pub(crate) system_prompt: Option<String>,
    /// The rendered prompt; or, with `conversation`, the instructions that follow it (compactd's
    /// own history prompt when empty).
    pub(crate) prompt: String,
    /// A conversation that came structured (typed already): summarized with `prompt` as its
    /// instructions.
    pub(crate) conversation: Option<Conversation>,
    /// With `conversation`: the summary the agent carried from its previous compaction, given
    /// to the model (and to the anchors) as pi's `<previous-summary>`.
    pub(crate) previous_summary: Option<String>,
    /// The output cap asked for.
    pub(crate) max_tokens: Option<u64>,
    /// The request field the prompt came from, for errors (`prompt`, `messages`).
    pub(crate) prompt_field: &'static str,
}

/// Reads a positive integer token count; `param` names the field in the error.
pub(crate) fn token_count(value: Option<&Value>, param: &str) -> Result<Option<u64>, AppError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(0) | None => Err(AppError::invalid(
                param,
                format!("{param} must be a positive integer, not {n}"),
            )),
            Some(count) => Ok(Some(count)),
        },
        Some(other) => Err(AppError::invalid(
            param,
            format!("{param} must be a positive integer, not {other}"),
        )),
    }
}

/// How a caller's summarization runs, decided before it starts: its models (the configured
/// chain unless the gateway's `agent` mode gives the agent's own) and what a spent budget means.
#[derive(Debug, Default)]
pub(crate) struct Policy {
    pub(crate) chain: Option<Arc<Chain>>,
    pub(crate) when_spent: crate::pipeline::WhenSpent,
}

impl App {
    /// The output cap of a request: the one it asks for (lowered to the configured maximum), or
    /// the default, or a small cap for oh-my-pi's short-summary call (spec §10.4).
    pub(crate) fn max_tokens(&self, requested: Option<u64>, prompt: &str) -> u64 {
        let asks = if is_short_summary_request(prompt) {
            Asks::Short
        } else {
            Asks::Checkpoint {
                critical_context: true,
            }
        };
        self.cap(requested, asks)
    }

    /// The output cap of a request that `asks` for this: the one it asked for within
    /// `COMPACTD_MAX_OUTPUT_TOKENS`, else the default (a short summary's is 512).
    fn cap(&self, requested: Option<u64>, asks: Asks) -> u64 {
        let limits = &self.limits;
        match requested {
            Some(n) => n.min(limits.max_output_tokens),
            None if asks == Asks::Short => 512.min(limits.max_output_tokens),
            None => limits.default_max_tokens.min(limits.max_output_tokens),
        }
    }

    /// A summary of an agent's prompt, through the pipeline.
    pub(crate) async fn summarize_prompt(
        &self,
        who: &Identity,
        endpoint: Endpoint,
        request: WireRequest,
    ) -> Result<Redacted<Summary>, AppError> {
        self.summarize_prompt_with(who, endpoint, request, Policy::default())
            .await
    }

    /// [`App::summarize_prompt`] by `chain` instead of the configured models, when given.
    pub(crate) async fn summarize_prompt_with(
        &self,
        who: &Identity,
        endpoint: Endpoint,
        request: WireRequest,
        policy: Policy,
    ) -> Result<Redacted<Summary>, AppError> {
        let system = request.system_prompt.unwrap_or_default();
        let size = system.len() + request.prompt.len();
        let limit = self.limits.max_prompt_bytes;
        if size > limit {
            return Err(AppError::TooLarge(format!(
                "the prompt is {size} bytes, over the limit of {limit} bytes (COMPACTD_MAX_PROMPT_BYTES)"
            )));
        }
        let empty = match &request.conversation {
            Some(conversation) => conversation.messages.is_empty(),
            None => request.prompt.trim().is_empty(),
        };
        if empty {
            return Err(AppError::invalid(
                request.prompt_field,
                format!("{}: there is nothing to summarize", request.prompt_field),
            ));
        }
        let system_prompt = Some(system)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or_else(|| self.prompts.system.clone());
        let summary_request = match request.conversation {
            // Typed once: the prompt is written from the conversation and its shape taken from
            // the same parts, never read back from the text.
            Some(conversation) => {
                let written = conversation.write();
                // compactd's history prompt when the agent sent no instructions.
                let instructions = if request.prompt.trim().is_empty() {
                    self.prompts.summary.as_str()
                } else {
                    request.prompt.as_str()
                };
                let (prompt, shape) = Shape::render(
                    conversation,
                    &written,
                    request.previous_summary.as_deref(),
                    instructions,
                );
                let max_tokens = self.cap(request.max_tokens, shape.asks);
                SummaryRequest::with_shape(system_prompt, prompt, max_tokens, shape)
            }
            None => {
                let max_tokens = self.max_tokens(request.max_tokens, &request.prompt);
                // The one place an agent's prompt is read.
                SummaryRequest::from_prompt(system_prompt, request.prompt, max_tokens)
            }
        };
        let context = self.pipeline_context(who, endpoint);
        // Shares the conversation the pipeline reads (read once, and not at all on a cache hit
        // whose conversation recall already keeps).
        let request = summary_request.clone();
        let mut job = Job::new(Purpose::Prompt, summary_request).with_chain(policy.chain);
        job.when_spent = policy.when_spent;
        let summary = self.pipeline.summarize_job(&context, job).await?;
        // Kept only once summarized: a failed summarization leaves nothing behind.
        let Some(id) = self.keep_recall(who, endpoint, &request, &summary.flags) else {
            return Ok(summary);
        };
        let footer = self.limits.recall_footer;
        Ok(summary.map(|mut summary| {
            if footer {
                summary.text = crate::app::recall::with_footer(&summary.text, &id);
            }
            summary.flags.recall_id = Some(id);
            summary
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::config::{StorageConfig, SummarizerConfig, defaults};

    async fn app() -> App {
        let store =
            compactd_store::SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(1))
                .await
                .unwrap();
        App::build(
            &defaults::<SummarizerConfig>(),
            &defaults::<StorageConfig>(),
            Arc::new(store),
        )
        .unwrap()
    }

    #[tokio::test]
    async fn short_summary_prompts_get_the_small_default_cap() {
        let app = app().await;
        let short = "<conversation>\nx\n</conversation>\n\n<previous-summary>\n## Goal\n</previous-summary>\n\nIn 2-3 sentences, describe the changes";
        assert_eq!(app.max_tokens(None, short), 512);
        assert_eq!(
            app.max_tokens(None, "<conversation>\nx\n</conversation>\n\n## Goal ..."),
            13_107
        );
        assert_eq!(app.max_tokens(Some(100), short), 100);
        assert_eq!(app.max_tokens(Some(1_000_000), "x"), 32_000);
    }

    /// A cache hit answers without reading the agent's conversation, in the pipeline and in
    /// recall: the id its miss kept the conversation under is found by the request's cache key.
    #[tokio::test]
    async fn a_cache_hit_names_the_kept_conversation_without_reading_the_prompt() {
        let app = app().await;
        let who = Identity::anonymous();
        // oh-my-pi's own request, as it sent it.
        let line = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/omp-requests/before.jsonl"
        ))
        .unwrap();
        let body: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
        let body = &body["request"];
        let request = || {
            SummaryRequest::from_prompt(
                body["systemPrompt"].as_str().unwrap().to_owned(),
                body["prompt"].as_str().unwrap().to_owned(),
                2_000,
            )
        };
        let context = app.pipeline_context(&who, Endpoint::Compact);
        let summarize = |request: SummaryRequest| {
            let job = Job::new(Purpose::Prompt, request);
            let context = &context;
            let app = &app;
            async move { app.pipeline.summarize_job(context, job).await.unwrap() }
        };

        let missed = request();
        let first = summarize(missed.clone()).await;
        assert!(!first.flags.cached);
        assert!(missed.shape_is_read(), "a miss reads the conversation");
        let kept = app
            .keep_recall(&who, Endpoint::Compact, &missed, &first.flags)
            .expect("recall keeps the conversation");

        let hit = request();
        let second = summarize(hit.clone()).await;
        assert!(second.flags.cached);
        assert_eq!(second.flags.cache_key, first.flags.cache_key);
        assert_eq!(
            app.keep_recall(&who, Endpoint::Compact, &hit, &second.flags),
            Some(kept.clone())
        );
        assert!(
            !hit.shape_is_read(),
            "the hit read the agent's conversation"
        );

        // Without the key (an older entry, another replica's), the conversation is read and
        // named by the same id.
        let unkeyed = request();
        let flags = Flags {
            cache_key: None,
            ..second.flags.clone()
        };
        assert_eq!(
            app.keep_recall(&who, Endpoint::Compact, &unkeyed, &flags),
            Some(kept)
        );
        assert!(unkeyed.shape_is_read());
    }
}
