//! Who is calling: an API key from `Authorization: Bearer KEY` or from a `/k/{key}/` path, or
//! nobody (served as the anonymous tenant while anonymous access is allowed). Keys never reach
//! logs, metrics or error bodies.

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::header;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::access::{Identity, KEY_PREFIX, KeyError};

/// The authenticated caller of a `/v1` endpoint.
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

impl Caller {
    pub fn tenant(&self) -> &str {
        &self.0.tenant
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let path_key = RawPathParams::from_request_parts(parts, state)
            .await
            .ok()
            .and_then(|params| {
                params
                    .iter()
                    .find(|(name, _)| *name == "key")
                    .map(|(_, v)| v.to_owned())
            });
        let summarization = parts.uri.path().ends_with("/v1/compact")
            || parts.uri.path().ends_with("/v1/chat/completions");
        let bearer = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            // Chat-completions clients send their own provider key here: only compactd keys
            // count on the summarization routes.
            .filter(|token| token.starts_with(KEY_PREFIX) || !summarization)
            .map(str::to_owned);
        let identity = match path_key.or(bearer) {
            Some(key) => match state.access.verify(&*state.store, &key).await {
                Ok(identity) => identity,
                Err(KeyError::Invalid) => {
                    tracing::info!("request with an invalid or revoked API key refused");
                    return Err(ApiError::Unauthorized {
                        code: "invalid_api_key",
                        message: "invalid or revoked API key",
                    });
                }
                Err(KeyError::Store(error)) => return Err(error.into()),
            },
            None if state.access.config.anonymous_allowed => Identity::anonymous(),
            None => {
                return Err(ApiError::Unauthorized {
                    code: "missing_api_key",
                    message: "an API key is required: `Authorization: Bearer KEY`, or /k/KEY/ before the path",
                });
            }
        };
        state
            .access
            .check_rate(&identity)
            .map_err(|retry_after| ApiError::RateLimited { retry_after })?;
        Ok(Caller(identity))
    }
}

impl AppState {
    /// One of the caller's summarization slots (held while its summarization runs).
    pub fn summarization_slot(
        &self,
        caller: &Caller,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ApiError> {
        self.access
            .summarization_slot(&caller.0)
            .ok_or(ApiError::Busy {
                retry_after: std::time::Duration::from_secs(2),
            })
    }
}
