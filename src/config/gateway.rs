//! The gateway's settings: compactd at an agent's model base URL (see `crate::agents`).

use std::time::Duration;

use clap::{Args, ValueEnum};

use super::values;

/// Who writes the summaries of the compactions the gateway answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GatewaySummarizer {
    /// compactd's own model chain (`COMPACTD_MODELS`).
    Compactd,
    /// The agent's own model, through the same upstream, with the agent's own credentials.
    Agent,
}

/// Who applies Anthropic's clearing edits (`clear_tool_uses_20250919`, `clear_thinking_20251015`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ContextEdits {
    /// compactd, unless the Anthropic upstream is Anthropic's own API (which applies them).
    Auto,
    /// The upstream: the edits pass through as they came.
    Upstream,
    /// compactd, whatever the upstream.
    Compactd,
}

#[derive(Debug, Clone, Args)]
pub struct GatewayConfig {
    /// `on`: serve as the model base URL of Claude Code, Codex and OpenCode — their compaction
    /// requests are answered by compactd, every other request is passed to the upstream untouched.
    #[arg(id = "gateway_enabled", long = "gateway", env = "COMPACTD_GATEWAY", default_value = "off", value_parser = values::on_off)]
    pub enabled: bool,

    /// Where Anthropic Messages requests go: a base URL without `/v1`, like `ANTHROPIC_BASE_URL`.
    #[arg(long = "gateway-anthropic-upstream", env = "COMPACTD_GATEWAY_ANTHROPIC_UPSTREAM", default_value = "https://api.anthropic.com", value_parser = values::http_url)]
    pub anthropic_upstream: reqwest::Url,

    /// Where OpenAI Responses and chat-completions requests go: a base URL with `/v1`.
    #[arg(long = "gateway-openai-upstream", env = "COMPACTD_GATEWAY_OPENAI_UPSTREAM", default_value = "https://api.openai.com/v1", value_parser = values::http_url)]
    pub openai_upstream: reqwest::Url,

    /// Where ChatGPT-backend Codex requests go (`/codex/responses`, what oh-my-pi's `openai-codex`
    /// provider and a ChatGPT login call): the backend's base URL, without `/codex`.
    #[arg(long = "gateway-codex-upstream", env = "COMPACTD_GATEWAY_CODEX_UPSTREAM", default_value = "https://chatgpt.com/backend-api", value_parser = values::http_url)]
    pub codex_upstream: reqwest::Url,

    /// Who writes the gateway's summaries: `compactd` (its model chain) or `agent` (the agent's
    /// own model and credentials, through the upstream); every stage of the pipeline runs either way.
    #[arg(
        id = "gateway_summarizer",
        long = "gateway-summarizer",
        env = "COMPACTD_GATEWAY_SUMMARIZER",
        value_enum,
        default_value = "compactd"
    )]
    pub summarizer: GatewaySummarizer,

    /// Who applies the clearing edits a Messages request asks for: `auto` (compactd, unless the
    /// Anthropic upstream is `api.anthropic.com`), `upstream` or `compactd`.
    #[arg(
        id = "gateway_context_edits",
        long = "gateway-context-edits",
        env = "COMPACTD_GATEWAY_CONTEXT_EDITS",
        value_enum,
        default_value = "auto"
    )]
    pub context_edits: ContextEdits,

    /// Largest upstream response passed through, in bytes.
    #[arg(
        id = "gateway_max_response_bytes",
        long = "gateway-max-response-bytes",
        env = "COMPACTD_GATEWAY_MAX_RESPONSE_BYTES",
        default_value = "268435456"
    )]
    pub max_response_bytes: u64,

    /// Longest an upstream may stay silent, before its answer or in the middle of a stream.
    #[arg(id = "gateway_idle_timeout", long = "gateway-idle-timeout-secs", env = "COMPACTD_GATEWAY_IDLE_TIMEOUT_SECS", default_value = "300", value_parser = values::seconds)]
    pub idle_timeout: Duration,

    /// Tenants whose calls to the providers' own compaction APIs (`/v1/responses/compact`,
    /// OpenAI's `context_management` compaction, Anthropic's `compaction` and
    /// `compact_20260112`, and its clearing edits) pass to the upstream byte for byte, for the
    /// provider to serve (comma-separated; `-` names the anonymous tenant).
    #[arg(
        id = "gateway_native_tenants",
        long = "gateway-native-tenants",
        env = "COMPACTD_GATEWAY_NATIVE_TENANTS",
        value_delimiter = ','
    )]
    pub native_tenants: Vec<String>,

    /// `on`: summarize an agent session ahead of its compaction once it passes
    /// `COMPACTD_PREPARE_AT` of its model's window, and answer the compaction from it at once.
    #[arg(id = "prepare_enabled", long = "prepare", env = "COMPACTD_PREPARE", default_value = "on", value_parser = values::on_off)]
    pub prepare: bool,

    /// The share of its model's window past which a session's summary is prepared ahead.
    #[arg(id = "prepare_at", long = "prepare-at", env = "COMPACTD_PREPARE_AT", default_value = "0.6", value_parser = values::share)]
    pub prepare_at: f64,

    /// Seconds a session past half the share, with no summary kept, may be idle before it is
    /// prepared (the user reading, or away).
    #[arg(id = "prepare_idle", long = "prepare-idle-secs", env = "COMPACTD_PREPARE_IDLE_SECS", default_value = "60", value_parser = values::seconds)]
    pub prepare_idle: Duration,

    /// Tenants whose sessions are never summarized ahead (comma-separated; `""` is the
    /// anonymous tenant's name only when written as `-`).
    #[arg(
        id = "prepare_off_tenants",
        long = "prepare-off-tenants",
        env = "COMPACTD_PREPARE_OFF_TENANTS",
        value_delimiter = ','
    )]
    pub prepare_off_tenants: Vec<String>,
}
