//! Configuration of `compactd serve`: flags, each also read from an environment variable, checked
//! once at start-up. README.md has the same table.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use crate::summarizer::{ModelSpec, RetryPolicy};

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on.
    #[arg(long, env = "COMPACTD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Summarizer chain, tried in order: comma-separated `openai:MODEL`, `anthropic:MODEL`,
    /// `extractive`. Default: the providers that have a key, then `extractive`.
    #[arg(long, env = "COMPACTD_MODELS", value_delimiter = ',')]
    pub models: Vec<ModelSpec>,

    /// Append the built-in `extractive` summarizer to the chain when it is not in it, so that
    /// every request gets a summary.
    #[arg(long, env = "COMPACTD_EXTRACTIVE_FALLBACK", default_value_t = true, action = clap::ArgAction::Set)]
    pub extractive_fallback: bool,

    /// API key of the OpenAI-compatible provider (optional for local servers).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub openai_api_key: Option<String>,

    /// Base URL of the OpenAI-compatible API, including the version path
    /// (Ollama: `http://127.0.0.1:11434/v1`).
    #[arg(
        long,
        env = "COMPACTD_OPENAI_BASE_URL",
        default_value = "https://api.openai.com/v1"
    )]
    pub openai_base_url: String,

    /// Model used when the chain is left to its default and an OpenAI key is set.
    #[arg(long, env = "COMPACTD_OPENAI_MODEL", default_value = "gpt-4.1-mini")]
    pub openai_model: String,

    /// API key of Anthropic.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true)]
    pub anthropic_api_key: Option<String>,

    /// Base URL of the Anthropic API (without `/v1`).
    #[arg(
        long,
        env = "COMPACTD_ANTHROPIC_BASE_URL",
        default_value = "https://api.anthropic.com"
    )]
    pub anthropic_base_url: String,

    /// `anthropic-version` header sent to the Anthropic API.
    #[arg(long, env = "COMPACTD_ANTHROPIC_VERSION", default_value = "2023-06-01")]
    pub anthropic_version: String,

    /// Model used when the chain is left to its default and an Anthropic key is set.
    #[arg(
        long,
        env = "COMPACTD_ANTHROPIC_MODEL",
        default_value = "claude-haiku-4-5"
    )]
    pub anthropic_model: String,

    /// Time limit of one upstream call, in seconds.
    #[arg(long, env = "COMPACTD_ATTEMPT_TIMEOUT_SECS", default_value_t = 60.0)]
    pub attempt_timeout_secs: f64,

    /// Time limit of a whole summarization (queueing, retries and fallbacks), in seconds. Keep it
    /// below the agent's 180 s.
    #[arg(long, env = "COMPACTD_DEADLINE_SECS", default_value_t = 150.0)]
    pub deadline_secs: f64,

    /// Retries of the same model after a retryable failure (429, 5xx, timeout, reset, garbage,
    /// empty summary).
    #[arg(long, env = "COMPACTD_MAX_RETRIES", default_value_t = 2)]
    pub max_retries: u32,

    /// First retry backoff in milliseconds; doubles with each retry, with full jitter.
    #[arg(long, env = "COMPACTD_BACKOFF_MS", default_value_t = 500)]
    pub backoff_ms: u64,

    /// Longest wait before a retry, in seconds; a longer `Retry-After` moves on to the next model.
    #[arg(long, env = "COMPACTD_MAX_BACKOFF_SECS", default_value_t = 20.0)]
    pub max_backoff_secs: f64,

    /// Summarizations running at once.
    #[arg(long, env = "COMPACTD_MAX_CONCURRENT", default_value_t = 16)]
    pub max_concurrent: usize,

    /// Summarizations waiting for a slot; past this, requests get 429 with `Retry-After`.
    #[arg(long, env = "COMPACTD_MAX_QUEUE", default_value_t = 64)]
    pub max_queue: usize,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "COMPACTD_MAX_BODY_BYTES", default_value_t = 32 * 1024 * 1024)]
    pub max_body_bytes: usize,

    /// Longest JSONL line accepted in uploads and appends, in bytes.
    #[arg(long, env = "COMPACTD_MAX_LINE_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_line_bytes: usize,

    /// Most entries a stored session may have.
    #[arg(long, env = "COMPACTD_MAX_ENTRIES", default_value_t = 500_000)]
    pub max_entries: usize,

    /// Largest prompt (system prompt plus prompt) of a summarization request, in bytes.
    #[arg(long, env = "COMPACTD_MAX_PROMPT_BYTES", default_value_t = 16 * 1024 * 1024)]
    pub max_prompt_bytes: usize,

    /// Output cap when a request gives none (13107 = 0.8 × pi's default reserve).
    #[arg(long, env = "COMPACTD_DEFAULT_MAX_TOKENS", default_value_t = 13_107)]
    pub default_max_tokens: u64,

    /// Highest output cap a request may ask for; larger values are lowered to it.
    #[arg(long, env = "COMPACTD_MAX_OUTPUT_TOKENS", default_value_t = 32_000)]
    pub max_output_tokens: u64,

    /// PostgreSQL URL (`postgres://user@host/db`) for deployments; unset: SQLite in the data
    /// directory. `sqlite:PATH` names another SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Directory of the embedded SQLite database (`compactd.db`).
    #[arg(long, env = "COMPACTD_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,

    /// Connections in the database pool.
    #[arg(long, env = "COMPACTD_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,

    /// How long a request waits for a database connection before answering 503, in seconds.
    #[arg(long, env = "COMPACTD_DB_ACQUIRE_TIMEOUT_SECS", default_value_t = 3.0)]
    pub db_acquire_timeout_secs: f64,

    /// Keep prompt and summary texts in the call log (off: only sizes, models and timings).
    #[arg(long, env = "COMPACTD_STORE_TEXT", default_value_t = false, action = clap::ArgAction::Set)]
    pub store_text: bool,

    /// Context window assumed for branch summaries (the branch may fill it less the reserve).
    #[arg(long, env = "COMPACTD_CONTEXT_WINDOW", default_value_t = 128_000)]
    pub context_window: u64,

    /// Serve callers without an API key even when listening beyond loopback (on loopback they are
    /// always served, as the anonymous tenant).
    #[arg(long, env = "COMPACTD_ALLOW_ANONYMOUS", default_value_t = false, action = clap::ArgAction::Set)]
    pub allow_anonymous: bool,

    /// Requests per minute per API key (and for all anonymous callers together); 0: no limit.
    #[arg(long, env = "COMPACTD_RATE_LIMIT_PER_MINUTE", default_value_t = 600)]
    pub rate_limit_per_minute: u32,

    /// Summarizations running at once per API key; 0: only the global cap.
    #[arg(long, env = "COMPACTD_MAX_CONCURRENT_PER_KEY", default_value_t = 8)]
    pub max_concurrent_per_key: usize,

    /// Time limit of any HTTP request, in seconds (above the summarization deadline).
    #[arg(long, env = "COMPACTD_REQUEST_TIMEOUT_SECS", default_value_t = 170.0)]
    pub request_timeout_secs: f64,

    /// On SIGTERM or Ctrl-C, how long requests in flight may take to finish, in seconds.
    #[arg(long, env = "COMPACTD_SHUTDOWN_GRACE_SECS", default_value_t = 30.0)]
    pub shutdown_grace_secs: f64,

    /// Directory whose `*.md` files replace the built-in prompt templates of the same name.
    #[arg(long, env = "COMPACTD_PROMPTS_DIR")]
    pub prompts_dir: Option<PathBuf>,

    /// Log filter (`tracing` syntax), e.g. `info` or `compactd=debug`.
    #[arg(long, env = "COMPACTD_LOG", default_value = "info")]
    pub log: String,

    /// Log format.
    #[arg(long, env = "COMPACTD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

impl ServeConfig {
    /// Checks the values clap cannot check alone. The message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        let positive = |name: &str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(format!(
                    "{name} must be a positive number of seconds, not {value}"
                ))
            }
        };
        positive("COMPACTD_ATTEMPT_TIMEOUT_SECS", self.attempt_timeout_secs)?;
        positive("COMPACTD_DEADLINE_SECS", self.deadline_secs)?;
        positive("COMPACTD_MAX_BACKOFF_SECS", self.max_backoff_secs)?;
        positive(
            "COMPACTD_DB_ACQUIRE_TIMEOUT_SECS",
            self.db_acquire_timeout_secs,
        )?;
        if self.db_max_connections == 0 {
            return Err("COMPACTD_DB_MAX_CONNECTIONS must be at least 1".into());
        }
        if let Some(url) = &self.database_url {
            let known = ["postgres://", "postgresql://", "sqlite:"];
            if !known.iter().any(|p| url.starts_with(p)) {
                return Err(
                    "DATABASE_URL must start with postgres://, postgresql:// or sqlite:".into(),
                );
            }
        }
        if self.deadline_secs >= 180.0 {
            return Err(format!(
                "COMPACTD_DEADLINE_SECS is {}: pi-family agents give up after 180 s, so keep it below",
                self.deadline_secs
            ));
        }
        if self.max_concurrent == 0 {
            return Err("COMPACTD_MAX_CONCURRENT must be at least 1".into());
        }
        if self.max_body_bytes < 1024 {
            return Err("COMPACTD_MAX_BODY_BYTES must be at least 1024".into());
        }
        if self.default_max_tokens == 0 || self.max_output_tokens == 0 {
            return Err(
                "COMPACTD_DEFAULT_MAX_TOKENS and COMPACTD_MAX_OUTPUT_TOKENS must be at least 1"
                    .into(),
            );
        }
        for (name, url) in [
            ("COMPACTD_OPENAI_BASE_URL", &self.openai_base_url),
            ("COMPACTD_ANTHROPIC_BASE_URL", &self.anthropic_base_url),
        ] {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(format!(
                    "{name} must be an http:// or https:// URL, not {url:?}"
                ));
            }
        }
        let chain = self.chain();
        if chain.iter().any(|m| matches!(m, ModelSpec::Anthropic(_)))
            && self.anthropic_key().is_none()
        {
            return Err(
                "the summarizer chain names an anthropic: model but ANTHROPIC_API_KEY is not set"
                    .into(),
            );
        }
        Ok(())
    }

    /// The chain to build: as configured, or the providers with a key; then `extractive` unless
    /// it is there already or the fallback is turned off.
    pub fn chain(&self) -> Vec<ModelSpec> {
        let mut chain = self.models.clone();
        if chain.is_empty() {
            if self.anthropic_key().is_some() {
                chain.push(ModelSpec::Anthropic(self.anthropic_model.clone()));
            }
            if self.openai_key().is_some() {
                chain.push(ModelSpec::OpenAi(self.openai_model.clone()));
            }
        }
        if (self.extractive_fallback || chain.is_empty()) && !chain.contains(&ModelSpec::Extractive)
        {
            chain.push(ModelSpec::Extractive);
        }
        chain
    }

    pub fn openai_key(&self) -> Option<&str> {
        self.openai_api_key
            .as_deref()
            .filter(|k| !k.trim().is_empty())
    }

    pub fn anthropic_key(&self) -> Option<&str> {
        self.anthropic_api_key
            .as_deref()
            .filter(|k| !k.trim().is_empty())
    }

    /// Whether callers without a key are served.
    pub fn anonymous_allowed(&self) -> bool {
        self.listen.ip().is_loopback() || self.allow_anonymous
    }

    pub fn access(&self) -> crate::access::AccessConfig {
        crate::access::AccessConfig {
            anonymous_allowed: self.anonymous_allowed(),
            rate_per_minute: self.rate_limit_per_minute,
            max_concurrent_per_key: self.max_concurrent_per_key,
        }
    }

    pub fn store(&self) -> crate::store::StoreConfig {
        crate::store::StoreConfig {
            database_url: self.database_url.clone().filter(|u| !u.trim().is_empty()),
            data_dir: self.data_dir.clone(),
            max_connections: self.db_max_connections,
            acquire_timeout: Duration::from_secs_f64(self.db_acquire_timeout_secs),
        }
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            attempt_timeout: Duration::from_secs_f64(self.attempt_timeout_secs),
            max_retries: self.max_retries,
            base_backoff: Duration::from_millis(self.backoff_ms),
            max_backoff: Duration::from_secs_f64(self.max_backoff_secs),
            deadline: Duration::from_secs_f64(self.deadline_secs),
        }
    }

    /// A configuration with every default and no keys, for tests and embedding.
    pub fn defaults() -> ServeConfig {
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            config: ServeConfig,
        }
        // Parsed from no arguments and without the environment, so the defaults are the ones
        // declared above whatever the process environment holds.
        let mut command = <Wrapper as clap::CommandFactory>::command();
        command = command.mut_args(|arg| arg.env(None::<&str>));
        let matches = command.get_matches_from(["compactd"]);
        <Wrapper as clap::FromArgMatches>::from_arg_matches(&matches)
            .expect("the defaults parse")
            .config
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_chain_is_the_keyed_providers_then_extractive() {
        let mut config = ServeConfig::defaults();
        assert_eq!(config.chain(), [ModelSpec::Extractive]);
        config.anthropic_api_key = Some("k".into());
        config.openai_api_key = Some("k".into());
        assert_eq!(
            config.chain(),
            [
                ModelSpec::Anthropic("claude-haiku-4-5".into()),
                ModelSpec::OpenAi("gpt-4.1-mini".into()),
                ModelSpec::Extractive
            ]
        );
        config.models = vec![ModelSpec::OpenAi("m".into())];
        config.extractive_fallback = false;
        assert_eq!(config.chain(), [ModelSpec::OpenAi("m".into())]);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn bad_values_are_refused_with_the_setting_named() {
        let mut config = ServeConfig::defaults();
        config.deadline_secs = 200.0;
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("COMPACTD_DEADLINE_SECS")
        );
        let mut config = ServeConfig::defaults();
        config.models = vec![ModelSpec::Anthropic("x".into())];
        assert!(config.validate().unwrap_err().contains("ANTHROPIC_API_KEY"));
        let mut config = ServeConfig::defaults();
        config.openai_base_url = "ftp://x".into();
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("COMPACTD_OPENAI_BASE_URL")
        );
    }
}
