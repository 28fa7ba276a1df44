//! The HTTP service: the remote-summarizer endpoints of pi-family agents (`/v1/compact`,
//! `/v1/chat/completions`, spec §10) and the session API (upload, sync, plan, compact, spec §1–§9).

pub mod auth;
mod calls;
mod chat;
mod compact;
mod compactions;
pub mod error;
mod json;
mod middleware;
pub mod openapi;
mod ops;
mod sessions;

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::FromRef;
use axum::routing::{get, post};
use tokio::net::TcpListener;

use crate::config::ServeConfig;
use crate::metrics::Metrics;
use crate::prompts::Prompts;
use crate::store::Store;
use crate::summarizer::anthropic::AnthropicClient;
use crate::summarizer::openai::OpenAiClient;
use crate::summarizer::{
    Chain, ChainError, Limiter, Link, ModelSpec, SummarizeError, Summarizer, Summary,
    SummaryRequest,
};
pub use calls::CallLog;
use error::ApiError;
use json::BodyLimit;

/// Request-independent limits and defaults.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_body_bytes: usize,
    pub max_line_bytes: usize,
    pub max_entries: usize,
    pub max_prompt_bytes: usize,
    pub request_timeout: Duration,
    pub default_max_tokens: u64,
    pub max_output_tokens: u64,
    /// Context window assumed for branch summaries.
    pub context_window: u64,
}

/// Shared by every handler; cheap to clone.
#[derive(Clone)]
pub struct AppState {
    pub summarizer: Arc<Summarizer>,
    pub access: Arc<crate::access::Access>,
    pub metrics: Arc<Metrics>,
    pub prompts: Arc<Prompts>,
    pub store: Arc<dyn Store>,
    pub calls: CallLog,
    pub limits: Limits,
    /// One compaction at a time per (session, leaf) in this process, so that concurrent requests
    /// for the same leaf cost one summarization.
    compaction_locks: Arc<Mutex<HashMap<(String, String), LeafLock>>>,
}

/// Held while one leaf of one session is being compacted.
type LeafLock = Arc<tokio::sync::Mutex<()>>;

impl FromRef<AppState> for BodyLimit {
    fn from_ref(state: &AppState) -> Self {
        BodyLimit(state.limits.max_body_bytes)
    }
}

/// Builds the summarizer chain (one HTTP client per provider, built once) and its limiter.
pub fn build_summarizer(config: &ServeConfig, metrics: Arc<Metrics>) -> anyhow::Result<Summarizer> {
    let policy = config.retry_policy();
    let http = || {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(policy.attempt_timeout)
            .pool_idle_timeout(Duration::from_secs(90))
            .build()
            .context("building the HTTP client")
    };
    let mut openai = None;
    let mut anthropic = None;
    let mut links = Vec::new();
    for spec in config.chain() {
        links.push(match spec {
            ModelSpec::OpenAi(model) => {
                if openai.is_none() {
                    openai = Some(OpenAiClient::new(
                        http()?,
                        &config.openai_base_url,
                        config.openai_key().map(str::to_owned),
                    ));
                }
                Link::OpenAi {
                    client: openai.clone().expect("built above"),
                    model,
                }
            }
            ModelSpec::Anthropic(model) => {
                if anthropic.is_none() {
                    let key = config
                        .anthropic_key()
                        .context("ANTHROPIC_API_KEY is not set")?;
                    anthropic = Some(AnthropicClient::new(
                        http()?,
                        &config.anthropic_base_url,
                        key.to_owned(),
                        config.anthropic_version.clone(),
                    ));
                }
                Link::Anthropic {
                    client: anthropic.clone().expect("built above"),
                    model,
                }
            }
            ModelSpec::Extractive => Link::Extractive,
        });
    }
    Ok(Summarizer::new(
        Chain::new(links, policy),
        Limiter::new(config.max_concurrent, config.max_queue),
        metrics,
    ))
}

impl AppState {
    /// Connects the store (applying migrations), builds the summarizer and loads the prompts.
    pub async fn from_config(config: &ServeConfig) -> anyhow::Result<AppState> {
        let store = crate::store::connect(&config.store()).await?;
        AppState::with_store(config, store)
    }

    /// The state around an already connected store.
    pub fn with_store(config: &ServeConfig, store: Arc<dyn Store>) -> anyhow::Result<AppState> {
        let prompts = match &config.prompts_dir {
            Some(dir) => Prompts::load(dir)?,
            None => Prompts::builtin(),
        };
        let metrics = Arc::new(Metrics::new());
        Ok(AppState {
            summarizer: Arc::new(build_summarizer(config, metrics.clone())?),
            access: Arc::new(crate::access::Access::new(config.access())),
            prompts: Arc::new(prompts),
            calls: CallLog::spawn(store.clone(), config.store_text, metrics.clone()),
            metrics,
            store,
            limits: Limits {
                max_body_bytes: config.max_body_bytes,
                max_line_bytes: config.max_line_bytes,
                max_entries: config.max_entries,
                max_prompt_bytes: config.max_prompt_bytes,
                request_timeout: Duration::from_secs_f64(config.request_timeout_secs),
                default_max_tokens: config.default_max_tokens,
                max_output_tokens: config.max_output_tokens,
                context_window: config.context_window,
            },
            compaction_locks: Arc::default(),
        })
    }

    /// The output cap of a request: the one it asks for (lowered to the configured maximum), or
    /// the default, or a small cap for oh-my-pi's short-summary call (spec §10.4).
    pub fn max_tokens(&self, requested: Option<u64>, prompt: &str) -> u64 {
        match requested {
            Some(n) => n.min(self.limits.max_output_tokens),
            None if asks_for_short_summary(prompt) => 512.min(self.limits.max_output_tokens),
            None => self
                .limits
                .default_max_tokens
                .min(self.limits.max_output_tokens),
        }
    }

    /// How to read uploaded session files: the configured limits, lenient or not.
    pub fn parse_options(&self, lenient: bool) -> crate::session::ParseOptions {
        crate::session::ParseOptions {
            lenient,
            max_line_bytes: Some(self.limits.max_line_bytes),
            max_entries: Some(self.limits.max_entries),
        }
    }

    /// A prompt over the configured size is refused before any model sees it.
    pub fn check_prompt_size(&self, system: &str, prompt: &str) -> Result<(), ApiError> {
        let size = system.len() + prompt.len();
        let limit = self.limits.max_prompt_bytes;
        if size > limit {
            return Err(ApiError::TooLarge(format!(
                "the prompt is {size} bytes, over the limit of {limit} bytes (COMPACTD_MAX_PROMPT_BYTES)"
            )));
        }
        Ok(())
    }

    /// Runs one summarization (queue, chain, fallbacks), records it in the call log under
    /// `endpoint`, and maps a failure to an HTTP error.
    pub async fn summarize(
        &self,
        endpoint: &str,
        request: SummaryRequest,
    ) -> Result<Summary, ApiError> {
        let started = std::time::Instant::now();
        let result = self
            .summarizer
            .summarize(&request)
            .await
            .map_err(ApiError::from);
        let outcome = result.as_ref().map_err(|e| (e.code(), e.status().as_u16()));
        let latency_ms = started.elapsed().as_millis() as u64;
        self.calls
            .record(endpoint, None, &request.prompt, outcome, latency_ms);
        result
    }

    /// The lock serializing compactions of one leaf of one session in this process.
    fn compaction_lock(&self, session_id: &str, leaf_id: &str) -> LeafLock {
        let mut locks = self
            .compaction_locks
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Drop the locks nobody holds any more, so the map stays small.
        locks.retain(|_, lock| Arc::strong_count(lock) > 1);
        locks
            .entry((session_id.to_owned(), leaf_id.to_owned()))
            .or_default()
            .clone()
    }
}

impl From<SummarizeError> for ApiError {
    fn from(error: SummarizeError) -> Self {
        match error {
            SummarizeError::Busy(_) => ApiError::Busy {
                retry_after: Duration::from_secs(2),
            },
            SummarizeError::Chain(ChainError::ContextOverflow) => ApiError::ContextLengthExceeded(
                "the prompt is longer than the context window of every configured model; shorten it and retry".into(),
            ),
            SummarizeError::Chain(ChainError::Exhausted { last, retry_after }) => ApiError::Unavailable {
                message: format!("no configured model could write the summary (last error: {last})"),
                retry_after,
            },
            SummarizeError::Chain(ChainError::DeadlineExceeded) => ApiError::Unavailable {
                message: "no summary within the deadline".into(),
                retry_after: Duration::from_secs(5),
            },
        }
    }
}

/// Whether the instructions at the end of `prompt` ask for oh-my-pi's 2–3 sentence summary.
fn asks_for_short_summary(prompt: &str) -> bool {
    let tail_start = prompt.len().saturating_sub(1500);
    let tail_start = (tail_start..=prompt.len())
        .find(|&i| prompt.is_char_boundary(i))
        .unwrap_or(0);
    let tail = prompt[tail_start..].to_ascii_lowercase();
    let after_tags = tail.rsplit("</previous-summary>").next().unwrap_or(&tail);
    let after_tags = after_tags
        .rsplit("</conversation>")
        .next()
        .unwrap_or(after_tags);
    !after_tags.contains("## goal")
        && (after_tags.contains("2-3 sentence")
            || after_tags.contains("2–3 sentence")
            || after_tags.contains("short summary"))
}

/// The router with every route and layer. Pure: tests drive it without a socket.
pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let routes = Router::new()
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        // The remote-endpoint wire sends no headers: the key can come in the path instead.
        .merge(summarize_routes())
        .nest("/k/{key}", summarize_routes())
        .route("/v1/plan", post(compactions::plan_upload))
        .route("/v1/sessions", post(sessions::upload).get(sessions::list))
        .route(
            "/v1/sessions/{id}",
            get(sessions::show).delete(sessions::delete),
        )
        .route(
            "/v1/sessions/{id}/entries",
            get(sessions::entries).post(sessions::append),
        )
        .route("/v1/sessions/{id}/plan", get(compactions::plan_stored))
        .route("/v1/sessions/{id}/context", get(compactions::context))
        .route(
            "/v1/sessions/{id}/compactions",
            post(compactions::compact).get(compactions::history),
        )
        .route(
            "/v1/sessions/{id}/branch-summaries",
            post(compactions::branch_summary),
        )
        .route("/openapi.json", get(openapi::document))
        .fallback(error::not_found)
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        // Inside routing, so the route pattern is known to the metrics.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ops::track,
        ))
        .with_state(state);
    middleware::around(routes, limits)
}

fn summarize_routes() -> Router<AppState> {
    Router::new()
        .route("/v1/compact", post(compact::compact))
        .route("/v1/chat/completions", post(chat::chat_completions))
}

/// Refuses to serve beyond loopback with no API key at all, unless anonymous access was allowed
/// explicitly: the summarization endpoints spend the operator's LLM budget.
pub async fn check_exposure(config: &ServeConfig, store: &dyn Store) -> anyhow::Result<()> {
    if config.anonymous_allowed() {
        return Ok(());
    }
    let keys = store
        .active_key_count()
        .await
        .context("counting API keys")?;
    if keys == 0 {
        anyhow::bail!(
            "listening on {} (not loopback) with no API key: create one with `compactd keys create --tenant NAME`, \
             or set COMPACTD_ALLOW_ANONYMOUS=true to serve callers without a key",
            config.listen
        );
    }
    Ok(())
}

/// Serves `app(state)` on `listener` until `shutdown` completes; then stops accepting, lets the
/// requests in flight finish for up to `grace`, and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let (stopping_tx, mut stopping) = tokio::sync::watch::channel(false);
    let server = axum::serve(listener, app(state)).with_graceful_shutdown(async move {
        shutdown.await;
        let _ = stopping_tx.send(true);
    });
    let grace_over = async move {
        let _ = stopping.wait_for(|stopping| *stopping).await;
        tokio::time::sleep(grace).await;
    };
    tokio::select! {
        result = server => result,
        () = grace_over => {
            tracing::warn!(grace_secs = grace.as_secs_f64(), "grace period over: exiting with requests still in flight");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn short_summary_prompts_get_the_small_default_cap() {
        let store =
            crate::store::SqliteStore::connect_url("sqlite::memory:", Duration::from_secs(1))
                .await
                .unwrap();
        let state = AppState::with_store(&ServeConfig::defaults(), Arc::new(store)).unwrap();
        let short = "<conversation>\nx\n</conversation>\n\n<previous-summary>\n## Goal\n</previous-summary>\n\nIn 2-3 sentences, describe the changes";
        assert_eq!(state.max_tokens(None, short), 512);
        assert_eq!(
            state.max_tokens(None, "<conversation>\nx\n</conversation>\n\n## Goal ..."),
            13_107
        );
        assert_eq!(state.max_tokens(Some(100), short), 100);
        assert_eq!(state.max_tokens(Some(1_000_000), "x"), 32_000);
    }
}
