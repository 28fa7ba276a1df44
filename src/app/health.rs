//! What operating the service asks of it: whether it may serve (its exposure), whether it is
//! ready, the gauges `/metrics` reads, and who a presented key is.

use std::time::Duration;

use anyhow::Context as _;

use crate::access::{Access, Identity, KeyError};
use crate::app::App;
use crate::config::ServeConfig;

/// Readiness: storage reachable with its migrations applied, and a summarizer to answer.
#[derive(Debug)]
pub struct Readiness {
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// Why storage is not ready, if it is not.
    pub storage: Result<(), String>,
    /// The summarizer chain's links, in order (empty: nothing can answer).
    pub chain: Vec<String>,
}

impl Readiness {
    pub fn ready(&self) -> bool {
        self.storage.is_ok() && !self.chain.is_empty()
    }
}

impl App {
    /// Readiness, waiting at most `timeout` for the database. Upstream models are not probed
    /// (that would spend tokens): a chain can answer when it has a link at all.
    pub async fn readiness(&self, timeout: Duration) -> Readiness {
        let storage = match tokio::time::timeout(timeout, self.store.ready()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(error.to_string()),
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
        };
        Readiness {
            backend: self.store.backend(),
            storage,
            chain: self.pipeline.chain.names(),
        }
    }

    /// The Prometheus text of every metric, with the gauges read now.
    pub async fn metrics_text(&self) -> String {
        let limiter = &self.pipeline.admission.limiter;
        self.metrics.queue_depth.set(limiter.queue_depth() as i64);
        self.metrics.in_flight.set(limiter.in_flight() as i64);
        self.metrics
            .session_index_bytes
            .set(self.index_cache.weighted_bytes().await as i64);
        self.metrics.render()
    }

    /// The identity of a presented compactd key.
    pub async fn identify(&self, access: &Access, key: &str) -> Result<Identity, KeyError> {
        access.verify(&*self.store, key).await
    }

    /// Refuses to serve beyond loopback with no API key at all, unless anonymous access was
    /// allowed explicitly: the summarization endpoints spend the operator's LLM budget. With
    /// `COMPACTD_CREATE_FIRST_KEY` (the container image's default) a first key is created
    /// instead, for the tenant `default`, and returned: its text, to be shown once.
    pub async fn check_exposure(&self, config: &ServeConfig) -> anyhow::Result<Option<String>> {
        if config.anonymous_allowed() {
            return Ok(None);
        }
        let keys = self
            .store
            .active_key_count()
            .await
            .context("counting API keys")?;
        if keys == 0 && config.access.create_first_key {
            let (text, record) =
                crate::access::new_key("default", Some("first key"), compactd_store::now_ms());
            self.store
                .create_key(&record)
                .await
                .context("creating the first API key")?;
            return Ok(Some(text));
        }
        if keys == 0 {
            anyhow::bail!(
                "listening on {} (not loopback) with no API key: create one with `compactd keys create --tenant NAME`, \
                 or set COMPACTD_ALLOW_ANONYMOUS=true to serve callers without a key",
                config.http.listen
            );
        }
        Ok(None)
    }

    /// Where sessions and everything else are kept: `sqlite` or `postgres`.
    pub fn storage_backend(&self) -> &'static str {
        self.store.backend()
    }

    /// The summarizer chain's links, in the order they are tried.
    pub fn chain_names(&self) -> Vec<String> {
        self.pipeline.chain.names()
    }
}
