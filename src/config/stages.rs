//! The settings of the pipeline's stages around the model chain: redaction, the summary cache,
//! loop detection (budgets are per tenant, set with `compactd keys budget`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::values;

#[derive(Debug, Clone, Args)]
pub struct StagesConfig {
    /// Replace secrets (gitleaks' rules and compactd's) with placeholders before any text leaves
    /// for a model, and in every summary returned or stored.
    #[arg(long, env = "COMPACTD_REDACT", default_value = "true", action = clap::ArgAction::Set)]
    pub redact: bool,

    /// A file of extra redaction rules in gitleaks' TOML format (`[[rules]]` with `id`, `regex`,
    /// `keywords`, optional `secretGroup`, `entropy`, `[[rules.allowlists]]`).
    #[arg(long, env = "COMPACTD_REDACT_RULES")]
    pub redact_rules: Option<PathBuf>,

    /// Memory for cached summaries, in bytes; 0 turns the summary cache off.
    #[arg(long, env = "COMPACTD_CACHE_BYTES", default_value = "67108864")]
    pub cache_bytes: u64,

    /// How long a cached summary answers identical requests, in seconds (in memory and in the
    /// store, shared by the replicas).
    #[arg(long = "cache-ttl-secs", env = "COMPACTD_CACHE_TTL_SECS", default_value = "3600", value_parser = values::seconds)]
    pub cache_ttl: Duration,

    /// A compaction whose previous summary compactd wrote less than this long ago, with little
    /// new content, is flagged as a loop. Not a setting.
    #[arg(skip = Duration::from_secs(300))]
    pub loop_window: Duration,

    /// What a tenant's daily budget does when the store cannot say what was used: `open` (not
    /// enforced meanwhile) or `closed` (the extractive summarizer answers).
    #[arg(
        long,
        env = "COMPACTD_BUDGET_WHEN_STORE_DOWN",
        default_value = "open",
        value_enum
    )]
    pub budget_when_store_down: WhenStoreDown,

    /// "Little new content": a conversation of fewer estimated tokens than this. Not a setting.
    #[arg(skip = 8000u64)]
    pub loop_new_tokens: u64,

    /// How long the redacted conversations of wire summarizations stay searchable by recall
    /// (`3d`, `12h`, seconds without a unit); `0` turns recall off for wire requests.
    #[arg(long, env = "COMPACTD_RECALL_RETENTION", default_value = "3d", value_parser = values::span)]
    pub recall_retention: Duration,

    /// End each summary of a kept conversation with one line naming its recall id and the
    /// tool that searches it.
    #[arg(long, env = "COMPACTD_RECALL_FOOTER", default_value = "true", action = clap::ArgAction::Set)]
    pub recall_footer: bool,
}

impl StagesConfig {
    /// The operator's extra redaction rules, read.
    pub fn extra_rules(&self) -> Result<Option<String>, String> {
        self.redact_rules
            .as_ref()
            .map(|path| {
                std::fs::read_to_string(path).map_err(|e| {
                    format!("COMPACTD_REDACT_RULES: cannot read {}: {e}", path.display())
                })
            })
            .transpose()
    }
}

/// What a budget check does when the store does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum WhenStoreDown {
    /// Not enforced meanwhile: summaries keep their model.
    #[default]
    Open,
    /// Enforced as spent: the extractive summarizer answers.
    Closed,
}
