//! The gateway: compactd at an agent's model base URL (Claude Code's `ANTHROPIC_BASE_URL`, a
//! Codex model provider's `base_url`, an OpenCode provider's `baseURL`). Requests that are
//! compactions ([`detect`]) are answered by compactd's pipeline in the agent's own wire
//! ([`answer`]); every other request is passed to the configured upstream of its wire untouched
//! ([`proxy`]). Codex's remote compaction items are compactd's own, authenticated, and expanded
//! when they come back ([`codex`]).
//!
//! Off unless `COMPACTD_GATEWAY=on`. Never an open proxy: the upstreams are settings, never taken
//! from a request.

pub mod answer;
pub mod codex;
pub mod detect;
pub mod proxy;

use std::sync::Arc;

use tokio::sync::OnceCell;

use crate::config::{GatewayConfig, GatewaySummarizer};
use crate::store::Store;

/// The name of the shared secret Codex items are authenticated with.
const SEAL_SECRET: &str = "gateway.codex-items";

/// The gateway's settings and clients; cheap to share.
#[derive(Debug)]
pub struct Gateway {
    pub anthropic_upstream: reqwest::Url,
    pub openai_upstream: reqwest::Url,
    pub summarizer: GatewaySummarizer,
    pub proxy: proxy::Proxy,
    seal: OnceCell<codex::Seal>,
}

impl Gateway {
    pub fn new(config: &GatewayConfig) -> anyhow::Result<Gateway> {
        Ok(Gateway {
            anthropic_upstream: config.anthropic_upstream.clone(),
            openai_upstream: config.openai_upstream.clone(),
            summarizer: config.summarizer,
            proxy: proxy::Proxy::new(config.idle_timeout, config.max_response_bytes)?,
            seal: OnceCell::new(),
        })
    }

    /// The seal of Codex items: a secret every replica shares, made from the OS's CSPRNG by the
    /// first one to need it and kept in the store.
    pub async fn seal(
        &self,
        store: &Arc<dyn Store>,
    ) -> Result<&codex::Seal, crate::store::StoreError> {
        self.seal
            .get_or_try_init(|| async {
                let mut candidate = [0u8; 32];
                getrandom::fill(&mut candidate).expect("the OS random source works");
                let hex: String = candidate.iter().map(|b| format!("{b:02x}")).collect();
                let secret = store
                    .shared_secret(SEAL_SECRET, &hex, crate::store::now_ms())
                    .await?;
                Ok(codex::Seal::new(secret.into_bytes()))
            })
            .await
    }
}
