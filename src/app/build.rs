//! The composition root: the application built from its settings — the store, the model chain
//! (one HTTP client per provider, built once) behind the pipeline and its observers, the prompts.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::access::AccessConfig;
use crate::app::{App, Limits};
use crate::config::{ServeConfig, StagesConfig, StorageConfig, SummarizerConfig};
use crate::metrics::Metrics;
use crate::pipeline::calllog::CallLog;
use crate::pipeline::events::MetricsObserver;
use crate::pipeline::{
    Admission, Budgets, Limiter, Loops, Observer, Pipeline, Stages, SummaryCache,
};
use crate::summarizer::anthropic::AnthropicClient;
use crate::summarizer::fold::FoldPrompts;
use crate::summarizer::openai::OpenAiClient;
use crate::summarizer::{Chain, Link, ModelSpec};
use compactd_core::prompts::Prompts;
use compactd_core::redact::Redactor;
use compactd_store::{Store, StoreConfig};

impl App {
    /// The application around a connected store.
    pub fn build(
        summarizers: &SummarizerConfig,
        storage: &StorageConfig,
        store: Arc<dyn Store>,
    ) -> anyhow::Result<App> {
        let prompts = match &summarizers.prompts_dir {
            Some(dir) => prompts_from(dir)?,
            None => Prompts::builtin(),
        };
        let metrics = Arc::new(Metrics::new());
        let calls = CallLog::spawn(store.clone(), storage.store_text, metrics.clone());
        let pipeline = build_pipeline(summarizers, &prompts, metrics.clone(), calls.clone())?
            .with_stages(build_stages(
                &summarizers.stages,
                store.clone(),
                calls.clone(),
                metrics.clone(),
            )?);
        Ok(App::new(
            store,
            Arc::new(pipeline),
            prompts,
            metrics,
            calls,
            Limits {
                max_line_bytes: storage.max_line_bytes,
                max_entries: storage.max_entries,
                max_prompt_bytes: summarizers.max_prompt_bytes,
                default_max_tokens: summarizers.default_max_tokens.get(),
                max_output_tokens: summarizers.max_output_tokens.get(),
                context_window: summarizers.context_window.get(),
                index_cache_bytes: storage.index_cache_bytes,
                recall_retention: summarizers.stages.recall_retention,
                recall_footer: summarizers.stages.recall_footer,
            },
        ))
    }
}

/// What the store is opened with, from the storage settings.
pub fn store_config(storage: &StorageConfig) -> StoreConfig {
    StoreConfig {
        database_url: storage.url().map(str::to_owned),
        data_dir: storage.data_dir.clone(),
        max_connections: storage.db_max_connections.get(),
        acquire_timeout: storage.db_acquire_timeout,
        statement_timeout: storage.db_statement_timeout,
        lock_timeout: storage.db_lock_timeout,
    }
}

/// Who is served and how often, from the settings.
pub fn access_config(config: &ServeConfig) -> AccessConfig {
    AccessConfig {
        anonymous_allowed: config.anonymous_allowed(),
        rate_per_minute: config.access.rate_limit_per_minute,
    }
}

/// The pipeline: the chain, admission, and the observers (metrics and the call log).
pub fn build_pipeline(
    config: &SummarizerConfig,
    prompts: &Prompts,
    metrics: Arc<Metrics>,
    calls: CallLog,
) -> anyhow::Result<Pipeline> {
    let observers: Vec<Arc<dyn Observer>> =
        vec![Arc::new(MetricsObserver(metrics)), Arc::new(calls)];
    Ok(Pipeline::new(
        build_chain(config, prompts)?,
        Admission::new(
            Limiter::new(config.max_concurrent.get(), config.max_queue),
            config.max_concurrent_per_key,
        ),
        observers,
    ))
}

/// The stages around the chain: redaction, the summary cache, budgets, loop detection.
pub fn build_stages(
    config: &StagesConfig,
    store: Arc<dyn Store>,
    calls: CallLog,
    metrics: Arc<Metrics>,
) -> anyhow::Result<Stages> {
    let redactor = if config.redact {
        let extra = config.extra_rules().map_err(anyhow::Error::msg)?;
        Redactor::new(extra.as_deref())
            .map_err(|e| anyhow::anyhow!("COMPACTD_REDACT_RULES: {e}"))?
    } else {
        Redactor::disabled()
    };
    Ok(Stages {
        redactor,
        cache: (config.cache_bytes > 0).then(|| {
            SummaryCache::new(
                store.clone(),
                config.cache_bytes,
                config.cache_ttl,
                metrics.clone(),
            )
        }),
        budgets: Some(Budgets::new(
            store.clone(),
            calls,
            config.budget_when_store_down,
            metrics,
        )),
        loops: Some(Loops::new(
            store,
            config.loop_window,
            config.loop_new_tokens,
        )),
    })
}

/// The model chain: each configured model with the client of its provider and its options, folding
/// with the configured prompt templates.
pub fn build_chain(config: &SummarizerConfig, prompts: &Prompts) -> anyhow::Result<Chain> {
    let options_for = |spec: &ModelSpec| {
        let mut merged = config.model_options.get("*").cloned().unwrap_or_default();
        let name = spec.name();
        let bare = name.split_once(':').map_or(name.as_str(), |(_, m)| m);
        for key in [bare, name.as_str()] {
            if let Some(specific) = config.model_options.get(key) {
                merged.extend(specific.clone());
            }
        }
        merged
    };
    // Answers are streamed and timed by the chain (first token, pauses, deadline), so the client
    // has no total timeout of its own.
    let http = || {
        crate::tls::client()
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(Duration::from_secs(90))
            // A redirect would carry the provider key and the user's prompt to another host.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .context("building the HTTP client")
    };
    let mut openai = None;
    let mut anthropic = None;
    let mut links = Vec::new();
    for spec in config.chain() {
        let window = spec.window();
        let options = options_for(&spec);
        links.push(match spec {
            ModelSpec::OpenAi { model, .. } => {
                if openai.is_none() {
                    openai = Some(OpenAiClient::new(
                        http()?,
                        &config.openai_base_url,
                        config
                            .openai_api_key
                            .as_ref()
                            .map(|k| k.expose().to_owned()),
                    ));
                }
                Link::OpenAi {
                    client: openai.clone().expect("built above"),
                    model,
                    window,
                    options,
                }
            }
            ModelSpec::Anthropic { model, .. } => {
                if anthropic.is_none() {
                    let key = config.anthropic_api_key.as_ref().context(
                        "the chain names an anthropic: model but ANTHROPIC_API_KEY is not set",
                    )?;
                    anthropic = Some(AnthropicClient::new(
                        http()?,
                        config.anthropic_base_url.as_str(),
                        key.expose().to_owned(),
                        config.anthropic_version.clone(),
                    ));
                }
                Link::Anthropic {
                    client: anthropic.clone().expect("built above"),
                    model,
                    window,
                    options,
                }
            }
            ModelSpec::Extractive => Link::Extractive,
        });
    }
    Ok(Chain::new(links, config.retry_policy()).with_fold_prompts(FoldPrompts::of(prompts)))
}

/// The built-in templates, with each file of the same name found in `dir` used instead. A file
/// that exists but cannot be read, or is empty, is an error; so is a directory that is none.
fn prompts_from(dir: &std::path::Path) -> anyhow::Result<Prompts> {
    use anyhow::Context;
    if !dir.is_dir() {
        anyhow::bail!("prompt directory {} does not exist", dir.display());
    }
    let mut files = Vec::new();
    for name in Prompts::file_names() {
        let path = dir.join(name);
        if path.exists() {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading prompt template {}", path.display()))?;
            files.push((name, text));
        }
    }
    Prompts::with_files(files.iter().map(|(name, text)| (*name, text.as_str())))
        .map_err(|e| anyhow::anyhow!("{} ({e})", dir.display()))
}
