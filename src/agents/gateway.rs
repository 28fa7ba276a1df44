//! The gateway's settings and clients: the upstreams of each wire, the proxy, the seal of Codex
//! items, and `agent` mode's summarizing models (the agent's own, with its credentials).

use std::sync::Arc;

use tokio::sync::OnceCell;

use axum::http::HeaderMap;

use super::{Wire, codex, proxy};
use crate::config::{ContextEdits, GatewayConfig, GatewaySummarizer};
use crate::summarizer::anthropic::AnthropicClient;
use crate::summarizer::chain::{Chain, Link};
use crate::summarizer::openai::OpenAiClient;

/// The name of the shared secret Codex items are authenticated with.
const SEAL_SECRET: &str = "gateway.codex-items";

/// The gateway's settings and clients; cheap to share.
#[derive(Debug)]
pub(crate) struct Gateway {
    pub(crate) anthropic_upstream: reqwest::Url,
    pub(crate) openai_upstream: reqwest::Url,
    /// The ChatGPT backend, for the Codex paths (`/codex/…`).
    pub(crate) codex_upstream: reqwest::Url,
    pub(crate) summarizer: GatewaySummarizer,
    /// Whether compactd applies the clearing edits of Messages requests itself.
    pub(crate) applies_context_edits: bool,
    pub(crate) proxy: proxy::Proxy,
    /// Tenants whose calls to the providers' own compaction APIs pass through untouched.
    native_tenants: std::collections::HashSet<String>,
    /// Summaries prepared ahead of the sessions' compactions.
    pub(crate) preparer: std::sync::Arc<super::prepare::Preparer>,
    seal: OnceCell<codex::Seal>,
    anthropic_version: String,
    /// The client of `agent` mode's summarization calls (no redirects: they carry the agent's
    /// credentials).
    summarizer_http: reqwest::Client,
}

impl Gateway {
    /// The gateway of `config`; `anthropic_version` is what `agent` mode's calls to the
    /// Anthropic upstream send when the agent sent none (2023-06-01), and
    /// `default_window` the window of a model compactd does not know (`COMPACTD_CONTEXT_WINDOW`).
    pub(crate) fn new(
        config: &GatewayConfig,
        anthropic_version: &str,
        default_window: u64,
    ) -> anyhow::Result<Gateway> {
        Ok(Gateway {
            anthropic_upstream: config.anthropic_upstream.clone(),
            openai_upstream: config.openai_upstream.clone(),
            codex_upstream: config.codex_upstream.clone(),
            summarizer: config.summarizer,
            applies_context_edits: applies_context_edits(
                config.context_edits,
                &config.anthropic_upstream,
            ),
            proxy: proxy::Proxy::new(config.idle_timeout, config.max_response_bytes)?,
            preparer: std::sync::Arc::new(super::prepare::Preparer::new(config, default_window)),
            native_tenants: tenants(&config.native_tenants),
            seal: OnceCell::new(),
            anthropic_version: anthropic_version.to_owned(),
            summarizer_http: crate::tls::client()
                .connect_timeout(std::time::Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
        })
    }

    /// In `agent` mode, the models that summarize a compaction on `wire` asking for `model`: the
    /// agent's own model through the upstream of its wire, with the credentials it sent (then the
    /// extractive summarizer when compactd's chain ends in it). `None` in `compactd` mode:
    /// compactd's chain.
    pub(crate) fn agent_chain(
        &self,
        wire: Wire,
        model: &str,
        headers: &HeaderMap,
        configured: &Chain,
    ) -> Option<Arc<Chain>> {
        if self.summarizer != GatewaySummarizer::Agent || model.is_empty() {
            return None;
        }
        let http = self.summarizer_http.clone();
        let model = model.to_owned();
        let options = serde_json::Map::new();
        let link = match wire {
            Wire::AnthropicMessages => {
                let credentials = pick(headers, &ANTHROPIC_CREDENTIALS);
                let client = AnthropicClient::new(
                    http,
                    self.anthropic_upstream.as_str(),
                    String::new(),
                    self.anthropic_version.clone(),
                );
                Link::Anthropic {
                    client: client.with_credentials(credentials),
                    model,
                    window: None,
                    options,
                }
            }
            Wire::ChatCompletions | Wire::Responses => {
                let credentials = pick(headers, &OPENAI_CREDENTIALS);
                let client = OpenAiClient::new(http, &self.openai_upstream, None);
                Link::OpenAi {
                    client: client.with_credentials(credentials),
                    model,
                    window: None,
                    options,
                }
            }
        };
        let mut links = vec![link];
        if configured
            .links
            .iter()
            .any(|l| matches!(l, Link::Extractive))
        {
            links.push(Link::Extractive);
        }
        Some(Arc::new(Chain::new(links, configured.policy)))
    }

    /// Whether `who` chose the providers' own compaction APIs over compactd's
    /// (`COMPACTD_GATEWAY_NATIVE_TENANTS`): its calls to them pass through byte for byte.
    pub(crate) fn native_for(&self, who: &crate::access::Identity) -> bool {
        self.native_tenants.contains(&who.tenant)
    }

    /// The seal of Codex items: a secret every replica shares, made from the OS's CSPRNG by the
    /// first one to need it and kept in the store.
    pub(crate) async fn seal(
        &self,
        app: &crate::app::App,
    ) -> Result<&codex::Seal, compactd_store::StoreError> {
        self.seal
            .get_or_try_init(|| async {
                let mut candidate = [0u8; 32];
                getrandom::fill(&mut candidate).expect("the OS random source works");
                let hex = hex::encode(candidate);
                let secret = app.shared_secret(SEAL_SECRET, &hex).await?;
                Ok(codex::Seal::new(secret.as_bytes()))
            })
            .await
    }
}

/// Tenant names as a setting lists them (`-` is the anonymous tenant, `""`).
pub(crate) fn tenants(listed: &[String]) -> std::collections::HashSet<String> {
    listed
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty())
        .map(|t| {
            if t == "-" {
                String::new()
            } else {
                t.to_owned()
            }
        })
        .collect()
}

/// Whether compactd applies the clearing edits itself, behind `upstream`: Anthropic's own API
/// applies them; an upstream that is not would refuse them or take them for an unknown field.
fn applies_context_edits(setting: ContextEdits, upstream: &reqwest::Url) -> bool {
    match setting {
        ContextEdits::Compactd => true,
        ContextEdits::Upstream => false,
        ContextEdits::Auto => upstream.host_str() != Some("api.anthropic.com"),
    }
}

/// The headers an Anthropic client's credentials travel in (an API key, or a subscription's
/// OAuth token and the betas that go with it).
const ANTHROPIC_CREDENTIALS: [&str; 4] = [
    "x-api-key",
    "authorization",
    "anthropic-version",
    "anthropic-beta",
];

/// The headers an OpenAI client's credentials travel in.
const OPENAI_CREDENTIALS: [&str; 3] = ["authorization", "openai-organization", "openai-project"];

/// The headers of `headers` named in `names`, but none that holds a compactd key.
fn pick(headers: &HeaderMap, names: &[&str]) -> HeaderMap {
    let mut out = HeaderMap::new();
    for name in names {
        for value in headers.get_all(*name) {
            if crate::access::holds_key(value.as_bytes()) {
                continue;
            }
            if let Ok(name) = axum::http::HeaderName::from_bytes(name.as_bytes()) {
                out.append(name, value.clone());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compactd_applies_the_clearing_edits_unless_anthropic_does() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        let anthropic = url("https://api.anthropic.com");
        let local = url("http://127.0.0.1:11434");
        assert!(!applies_context_edits(ContextEdits::Auto, &anthropic));
        assert!(applies_context_edits(ContextEdits::Auto, &local));
        assert!(applies_context_edits(ContextEdits::Compactd, &anthropic));
        assert!(!applies_context_edits(ContextEdits::Upstream, &local));
    }
}
