//! The groups of settings.

use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::AGENT_TIMEOUT;
use super::values::{self, ModelOptions, Secret};
use crate::summarizer::{ModelSpec, RetryPolicy};

/// The HTTP server.
#[derive(Debug, Clone, Args)]
pub struct HttpConfig {
    /// Address to listen on.
    #[arg(long, env = "COMPACTD_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// Largest request body accepted, in bytes.
    #[arg(long, env = "COMPACTD_MAX_BODY_BYTES", default_value = "33554432")]
    pub max_body_bytes: usize,

    /// Time limit of any HTTP request: above every summarization's deadline, under the five
    /// minutes oh-my-pi waits. Not a setting (tests shorten it).
    #[arg(skip = super::REQUEST_TIMEOUT)]
    pub request_timeout: Duration,

    /// Connections open at once; unset: derived from the open-file limit (raised to its hard
    /// limit at start), half of it less 512 for the database, files and upstreams, at most
    /// 65536. Past the cap the connections that have been idle longest are closed for new ones.
    #[arg(long, env = "COMPACTD_MAX_CONNECTIONS")]
    pub max_connections: Option<NonZeroUsize>,

    /// Threads of the async runtime; unset: one per CPU. CPU-heavy work (parsing, planning,
    /// redacting, rendering) runs on separate blocking threads whatever this says.
    #[arg(long, env = "COMPACTD_WORKER_THREADS")]
    pub worker_threads: Option<NonZeroUsize>,

    /// Time a client has to send a request's line and headers; a slower connection is closed.
    /// Not a setting (tests change it).
    #[arg(skip = Duration::from_secs(10))]
    pub header_timeout: Duration,

    /// On SIGTERM or Ctrl-C, how long requests in flight may take to finish, in seconds.
    #[arg(long = "shutdown-grace-secs", env = "COMPACTD_SHUTDOWN_GRACE_SECS", default_value = "30", value_parser = values::seconds)]
    pub shutdown_grace: Duration,
}

impl HttpConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_body_bytes < 1024 {
            return Err("COMPACTD_MAX_BODY_BYTES must be at least 1024".into());
        }
        Ok(())
    }
}

/// Who may call, and how often.
#[derive(Debug, Clone, Args)]
pub struct AccessConfig {
    /// Serve callers without an API key even when listening beyond loopback (on loopback they are
    /// always served, as the anonymous tenant).
    #[arg(long, env = "COMPACTD_ALLOW_ANONYMOUS", default_value = "false", action = clap::ArgAction::Set)]
    pub allow_anonymous: bool,

    /// Beyond loopback with no API key at all: create one (tenant `default`) and print it once,
    /// instead of refusing to start (the container image's default).
    #[arg(long, env = "COMPACTD_CREATE_FIRST_KEY", default_value = "false", action = clap::ArgAction::Set)]
    pub create_first_key: bool,

    /// Requests per minute per API key (and for all anonymous callers together); 0: no limit.
    #[arg(long, env = "COMPACTD_RATE_LIMIT_PER_MINUTE", default_value = "600")]
    pub rate_limit_per_minute: u32,

    /// Host names besides localhost and IP addresses that requests may be sent to
    /// (comma-separated, e.g. `compactd.internal`): a Host not served is 421, so that a web page
    /// whose name re-resolves to this compactd (DNS rebinding) cannot use it.
    #[arg(long, env = "COMPACTD_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Web origins (`https://tool.example`, comma-separated) whose pages may call the API
    /// through a browser; requests from any other site are refused.
    #[arg(long, env = "COMPACTD_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
}

/// The database, and the limits of what is stored in it.
#[derive(Debug, Clone, Args)]
pub struct StorageConfig {
    /// PostgreSQL URL (`postgres://user@host/db`) for deployments; unset: SQLite in the data
    /// directory. `sqlite:PATH` names another SQLite file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_parser = values::secret)]
    pub database_url: Option<Secret>,

    /// Directory of the embedded SQLite database (`compactd.db`).
    #[arg(long, env = "COMPACTD_DATA_DIR", default_value = "data")]
    pub data_dir: PathBuf,

    /// Connections in the database pool.
    #[arg(long, env = "COMPACTD_DB_MAX_CONNECTIONS", default_value = "10")]
    pub db_max_connections: NonZeroU32,

    /// How long a request waits for a database connection (SQLite: for a lock) before answering
    /// 503, in seconds.
    #[arg(long = "db-acquire-timeout-secs", env = "COMPACTD_DB_ACQUIRE_TIMEOUT_SECS", default_value = "3", value_parser = values::seconds)]
    pub db_acquire_timeout: Duration,

    /// Longest a database statement may run before the request answers 503, in seconds
    /// (PostgreSQL's `statement_timeout`; every storage call is also bounded by it plus the
    /// acquire timeout).
    #[arg(long = "db-statement-timeout-secs", env = "COMPACTD_DB_STATEMENT_TIMEOUT_SECS", default_value = "10", value_parser = values::seconds)]
    pub db_statement_timeout: Duration,

    /// Longest a statement may wait for a lock held elsewhere (PostgreSQL's `lock_timeout`: a
    /// table locked by a migration or by hand) before the request answers 503. Not a setting.
    #[arg(skip = Duration::from_secs(1))]
    pub db_lock_timeout: Duration,

    /// Longest JSONL line accepted in uploads and appends, in bytes.
    #[arg(long, env = "COMPACTD_MAX_LINE_BYTES", default_value = "8388608")]
    pub max_line_bytes: usize,

    /// Most entries a stored session may have.
    #[arg(long, env = "COMPACTD_MAX_ENTRIES", default_value = "500000")]
    pub max_entries: usize,

    /// Memory for the indexes of stored sessions (the per-entry facts that appends and plans
    /// read instead of the session), in bytes; least-used sessions are dropped beyond it.
    #[arg(long, env = "COMPACTD_INDEX_CACHE_BYTES", default_value = "134217728")]
    pub index_cache_bytes: u64,

    /// Keep prompt and summary texts in the call log (off: only sizes, models and timings).
    #[arg(long, env = "COMPACTD_STORE_TEXT", default_value = "false", action = clap::ArgAction::Set)]
    pub store_text: bool,
}

impl StorageConfig {
    pub fn validate(&self) -> Result<(), String> {
        if let Some(url) = self.url() {
            let known = ["postgres://", "postgresql://", "sqlite:"];
            if !known.iter().any(|p| url.starts_with(p)) {
                return Err(
                    "DATABASE_URL must start with postgres://, postgresql:// or sqlite:".into(),
                );
            }
        }
        Ok(())
    }

    /// `DATABASE_URL`, when set and not empty.
    pub fn url(&self) -> Option<&str> {
        self.database_url
            .as_ref()
            .map(Secret::expose)
            .filter(|u| !u.is_empty())
    }
}

/// The models and how they are asked.
#[derive(Debug, Clone, Args)]
pub struct SummarizerConfig {
    /// Summarizer chain, tried in order: comma-separated `openai:MODEL`, `anthropic:MODEL`,
    /// `extractive`; a model may end in `@TOKENS`, its context window. Default: the providers
    /// that have a key, then `extractive`.
    #[arg(long, env = "COMPACTD_MODELS", value_delimiter = ',')]
    pub models: Vec<ModelSpec>,

    /// Append the built-in `extractive` summarizer to the chain when it is not in it, so that
    /// every request gets a summary.
    #[arg(long, env = "COMPACTD_EXTRACTIVE_FALLBACK", default_value = "true", action = clap::ArgAction::Set)]
    pub extractive_fallback: bool,

    /// API key of the OpenAI-compatible provider (optional for local servers).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true, value_parser = values::secret)]
    pub openai_api_key: Option<Secret>,

    /// Base URL of the OpenAI-compatible API, including the version path
    /// (Ollama: `http://127.0.0.1:11434/v1`).
    #[arg(long, env = "COMPACTD_OPENAI_BASE_URL", default_value = "https://api.openai.com/v1", value_parser = values::http_url)]
    pub openai_base_url: reqwest::Url,

    /// Model used when the chain is left to its default and an OpenAI key is set.
    #[arg(long, env = "COMPACTD_OPENAI_MODEL", default_value = "gpt-4.1-mini")]
    pub openai_model: String,

    /// API key of Anthropic.
    #[arg(long, env = "ANTHROPIC_API_KEY", hide_env_values = true, value_parser = values::secret)]
    pub anthropic_api_key: Option<Secret>,

    /// Base URL of the Anthropic API (without `/v1`).
    #[arg(long, env = "COMPACTD_ANTHROPIC_BASE_URL", default_value = "https://api.anthropic.com", value_parser = values::http_url)]
    pub anthropic_base_url: reqwest::Url,

    /// `anthropic-version` header sent to the Anthropic API (the one version of its Messages
    /// API). Not a setting (tests change it).
    #[arg(skip = String::from("2023-06-01"))]
    pub anthropic_version: String,

    /// Model used when the chain is left to its default and an Anthropic key is set.
    #[arg(
        long,
        env = "COMPACTD_ANTHROPIC_MODEL",
        default_value = "claude-haiku-4-5"
    )]
    pub anthropic_model: String,

    /// Time a model has to send the first token of its answer, in seconds (it reads the prompt
    /// meanwhile: raise it for a slow local model on long prompts).
    #[arg(long = "first-token-timeout-secs", env = "COMPACTD_FIRST_TOKEN_TIMEOUT_SECS", default_value = "90", value_parser = values::seconds)]
    pub first_token_timeout: Duration,

    /// Longest pause between two tokens of an answer, in seconds. A model that is still writing
    /// is never cut off before the deadline.
    #[arg(long = "idle-timeout-secs", env = "COMPACTD_IDLE_TIMEOUT_SECS", default_value = "30", value_parser = values::seconds)]
    pub idle_timeout: Duration,

    /// Request options per model, as JSON: `{"openai:MODEL": {"temperature": 0.7, …}, "*": {…}}`.
    /// Merged into the body of every request to that model ("*": to every model), e.g. the
    /// sampling that keeps small local models from looping.
    #[arg(long, env = "COMPACTD_MODEL_OPTIONS", default_value = "{}", value_parser = values::model_options)]
    pub model_options: ModelOptions,

    /// Time limit of a whole summarization (queueing, retries and fallbacks), in seconds. Below
    /// the agent's: oh-my-pi waits 5 minutes since 18.1.17 (set 150 for older versions' 180 s).
    #[arg(long = "deadline-secs", env = "COMPACTD_DEADLINE_SECS", default_value = "280", value_parser = values::seconds)]
    pub deadline: Duration,

    /// Retries of the same model after a retryable failure (429, 5xx, timeout, reset, garbage,
    /// empty summary).
    #[arg(long, env = "COMPACTD_MAX_RETRIES", default_value = "2")]
    pub max_retries: u32,

    /// First retry backoff; doubles with each retry, with full jitter. Not a setting (tests
    /// shorten it).
    #[arg(skip = Duration::from_millis(500))]
    pub backoff: Duration,

    /// Longest wait before a retry; a longer `Retry-After` moves on to the next model. Not a
    /// setting.
    #[arg(skip = Duration::from_secs(20))]
    pub max_backoff: Duration,

    /// Summarizations running at once: what the upstream serves at once (a local server's
    /// parallel slots, a provider's concurrency), since every one is a call to it.
    #[arg(long, env = "COMPACTD_MAX_CONCURRENT", default_value = "16")]
    pub max_concurrent: NonZeroUsize,

    /// Summarizations waiting for a slot; past this, requests get 429 with `Retry-After`.
    #[arg(long, env = "COMPACTD_MAX_QUEUE", default_value = "64")]
    pub max_queue: usize,

    /// Summarizations running at once per API key; 0 (the default): only the global cap, which
    /// is the upstream's limit. Set it to share that limit fairly between several tenants.
    #[arg(long, env = "COMPACTD_MAX_CONCURRENT_PER_KEY", default_value = "0")]
    pub max_concurrent_per_key: usize,

    /// Largest prompt (system prompt plus prompt) of a summarization request, in bytes.
    #[arg(long, env = "COMPACTD_MAX_PROMPT_BYTES", default_value = "16777216")]
    pub max_prompt_bytes: usize,

    /// Output cap when a request gives none (13107 = 0.8 × pi's default reserve).
    #[arg(long, env = "COMPACTD_DEFAULT_MAX_TOKENS", default_value = "13107")]
    pub default_max_tokens: NonZeroU64,

    /// Highest output cap a request may ask for; larger values are lowered to it.
    #[arg(long, env = "COMPACTD_MAX_OUTPUT_TOKENS", default_value = "32000")]
    pub max_output_tokens: NonZeroU64,

    /// Context window assumed for a model compactd does not know: a branch summary's model (the
    /// branch may fill it less the reserve), and a gateway session's, when preparing ahead.
    #[arg(long, env = "COMPACTD_CONTEXT_WINDOW", default_value = "128000")]
    pub context_window: NonZeroU64,

    /// Directory whose `*.md` files replace the built-in prompt templates of the same name.
    #[arg(long, env = "COMPACTD_PROMPTS_DIR")]
    pub prompts_dir: Option<PathBuf>,

    #[command(flatten)]
    pub stages: super::StagesConfig,
}

impl SummarizerConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.deadline >= AGENT_TIMEOUT {
            return Err(format!(
                "COMPACTD_DEADLINE_SECS is {}: oh-my-pi gives up after 300 s, so keep it below",
                self.deadline.as_secs_f64()
            ));
        }
        if self
            .chain()
            .iter()
            .any(|m| matches!(m, ModelSpec::Anthropic { .. }))
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
                chain.push(ModelSpec::anthropic(&self.anthropic_model));
            }
            if self.openai_key().is_some() {
                chain.push(ModelSpec::openai(&self.openai_model));
            }
        }
        if (self.extractive_fallback || chain.is_empty()) && !chain.contains(&ModelSpec::Extractive)
        {
            chain.push(ModelSpec::Extractive);
        }
        chain
    }

    pub fn openai_key(&self) -> Option<&Secret> {
        self.openai_api_key
            .as_ref()
            .filter(|k| !k.expose().is_empty())
    }

    pub fn anthropic_key(&self) -> Option<&Secret> {
        self.anthropic_api_key
            .as_ref()
            .filter(|k| !k.expose().is_empty())
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            first_token_timeout: self.first_token_timeout,
            idle_timeout: self.idle_timeout,
            max_retries: self.max_retries,
            base_backoff: self.backoff,
            max_backoff: self.max_backoff,
            deadline: self.deadline,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// What is logged, and how.
#[derive(Debug, Clone, Args)]
pub struct LoggingConfig {
    /// Log filter (`tracing` syntax), e.g. `info` or `compactd=debug`.
    #[arg(long, env = "COMPACTD_LOG", default_value = "info")]
    pub log: String,

    /// Log format.
    #[arg(long, env = "COMPACTD_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}
