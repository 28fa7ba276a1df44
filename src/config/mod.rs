//! Configuration, in groups: each command takes only the groups it needs (`keys` and `migrate`
//! only storage, `compact` storage and summarizers, `serve` all of them). Every setting is a flag
//! that is also read from the environment, parsed once into a typed value (durations, URLs,
//! non-zero counts, secrets that never print); what a single value cannot say is checked by the
//! group's `validate`. README.md has the same table.

mod gateway;
mod groups;
mod stages;
mod values;

use std::time::Duration;

use clap::Args;

pub use gateway::{ContextEdits, GatewayConfig, GatewaySummarizer};
pub use groups::{
    AccessConfig, HttpConfig, LogFormat, LoggingConfig, StorageConfig, SummarizerConfig,
};
pub use stages::{StagesConfig, WhenStoreDown};
pub use values::{ModelOptions, Secret};

/// Everything `compactd serve` reads.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    #[command(flatten)]
    pub http: HttpConfig,
    #[command(flatten)]
    pub access: AccessConfig,
    #[command(flatten)]
    pub storage: StorageConfig,
    #[command(flatten)]
    pub summarizers: SummarizerConfig,
    #[command(flatten)]
    pub logging: LoggingConfig,
    #[command(flatten)]
    pub gateway: GatewayConfig,
}

impl ServeConfig {
    /// Checks what no single value can say. The message names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.storage.validate()?;
        self.summarizers.validate()?;
        self.http.validate()?;
        if self.http.request_timeout <= self.summarizers.deadline {
            return Err(format!(
                "COMPACTD_DEADLINE_SECS ({} s) must be under the request time limit ({} s): a request must outlast its summarization",
                self.summarizers.deadline.as_secs_f64(),
                self.http.request_timeout.as_secs_f64(),
            ));
        }
        Ok(())
    }

    /// Whether callers without a key are served: always on loopback, elsewhere only when allowed.
    pub fn anonymous_allowed(&self) -> bool {
        self.http.listen.ip().is_loopback() || self.access.allow_anonymous
    }

    /// A configuration with every default and no keys, for tests and embedding.
    pub fn defaults() -> ServeConfig {
        defaults::<ServeConfig>()
    }
}

/// The settings of `T` as declared, ignoring the process environment.
pub fn defaults<T: Args + clap::FromArgMatches>() -> T {
    #[derive(clap::Parser)]
    struct Wrapper<T: Args> {
        #[command(flatten)]
        inner: T,
    }
    let mut command = <Wrapper<T> as clap::CommandFactory>::command();
    command = command.mut_args(|arg| arg.env(None::<&str>));
    let matches = command.get_matches_from(["compactd"]);
    <Wrapper<T> as clap::FromArgMatches>::from_arg_matches(&matches)
        .expect("the defaults parse")
        .inner
}

/// The time limit of an HTTP request: above every summarization's deadline (under
/// [`AGENT_TIMEOUT`]), under the agent's own wait.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(295);

/// Settings compactd no longer reads, each with what took its place: a deployment that still
/// sets one is told so at start (`compactd serve` logs a warning), not silently ignored.
pub const REMOVED: &[(&str, &str)] = &[
    (
        "COMPACTD_ANTHROPIC_VERSION",
        "compactd sends anthropic-version 2023-06-01",
    ),
    (
        "COMPACTD_BACKOFF_MS",
        "retries back off from 500 ms, doubling, with jitter",
    ),
    ("COMPACTD_MAX_BACKOFF_SECS", "a retry waits at most 20 s"),
    (
        "COMPACTD_LOOP_WINDOW_SECS",
        "a loop is a compaction within 300 s of the last",
    ),
    ("COMPACTD_LOOP_NEW_TOKENS", "a loop adds under 8,000 tokens"),
    (
        "COMPACTD_REQUEST_TIMEOUT_SECS",
        "a request may take 295 s; COMPACTD_DEADLINE_SECS bounds a summarization",
    ),
    (
        "COMPACTD_HEADER_TIMEOUT_SECS",
        "a client has 10 s to send a request's head",
    ),
    (
        "COMPACTD_DB_LOCK_TIMEOUT_SECS",
        "a statement waits at most 1 s for a lock",
    ),
];

/// The removed settings the environment still sets, each with what took its place.
pub fn removed_settings_set() -> Vec<(&'static str, &'static str)> {
    (REMOVED.iter().copied())
        .filter(|(name, _)| std::env::var_os(name).is_some())
        .collect()
}

/// Longest a summarization may take: oh-my-pi gives up on its remote endpoint after 5 minutes
/// since 18.1.17 (180 s before; operators of older agents set `COMPACTD_DEADLINE_SECS=150`).
pub const AGENT_TIMEOUT: Duration = Duration::from_secs(300);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summarizer::ModelSpec;

    #[test]
    fn the_default_chain_is_the_keyed_providers_then_extractive() {
        let mut config = ServeConfig::defaults();
        assert_eq!(config.summarizers.chain(), [ModelSpec::Extractive]);
        config.summarizers.anthropic_api_key = Some(Secret::new("k"));
        config.summarizers.openai_api_key = Some(Secret::new("k"));
        assert_eq!(
            config.summarizers.chain(),
            [
                ModelSpec::anthropic("claude-haiku-4-5"),
                ModelSpec::openai("gpt-4.1-mini"),
                ModelSpec::Extractive
            ]
        );
        config.summarizers.models = vec![ModelSpec::openai("m")];
        config.summarizers.extractive_fallback = false;
        assert_eq!(config.summarizers.chain(), [ModelSpec::openai("m")]);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn cross_checks_name_their_settings() {
        let mut config = ServeConfig::defaults();
        config.summarizers.deadline = Duration::from_secs(300);
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("COMPACTD_DEADLINE_SECS")
        );
        let mut config = ServeConfig::defaults();
        config.summarizers.models = vec![ModelSpec::anthropic("x")];
        assert!(config.validate().unwrap_err().contains("ANTHROPIC_API_KEY"));
        let mut config = ServeConfig::defaults();
        config.summarizers.deadline = Duration::from_secs(296);
        assert!(
            config
                .validate()
                .unwrap_err()
                .contains("under the request time limit (295 s)")
        );
        // An Anthropic model without a key does not stop what needs no model.
        let mut storage_only = defaults::<StorageConfig>();
        storage_only.max_entries = 10;
        assert!(storage_only.validate().is_ok());
    }

    #[test]
    fn secrets_never_print() {
        let mut config = ServeConfig::defaults();
        config.summarizers.openai_api_key = Some(Secret::new("sk-very-secret"));
        config.storage.database_url = Some(Secret::new("postgres://u:pw-secret@h/db"));
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("sk-very-secret") && !printed.contains("pw-secret"),
            "{printed}"
        );
    }
}
