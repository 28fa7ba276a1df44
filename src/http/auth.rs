//! Who is calling: an API key from a `/k/{key}/` path, an `X-Compactd-Key` header or
//! `Authorization: Bearer KEY`, or nobody (served as the anonymous tenant while anonymous access
//! is allowed). Keys never reach logs, metrics or error bodies, and never leave compactd: the
//! gateway drops every header that holds one before it forwards a request
//! ([`crate::agents::proxy`]).

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::header;
use axum::http::request::Parts;

use super::AppState;
use super::error::ApiError;
use crate::access::{Identity, KEY_HEADER, KEY_PREFIX, KeyError};

/// The authenticated caller of a `/v1` endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Caller(pub Identity);

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
        let summarization = is_agent_wire(parts.uri.path());
        // A header of compactd's own, for agents whose `Authorization` carries their provider key.
        let dedicated = parts
            .headers
            .get(KEY_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_owned());
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
        let identity = match path_key.or(dedicated).or(bearer) {
            Some(key) => match state.app.identify(&state.access, &key).await {
                Ok(identity) => identity,
                Err(KeyError::Invalid) => {
                    tracing::info!("request with an invalid or revoked API key refused");
                    return Err(if summarization {
                        ApiError::NoSuchKey {
                            code: "invalid_api_key",
                            message: "no such endpoint: the compactd key in this URL is unknown or revoked",
                        }
                    } else {
                        ApiError::Unauthorized {
                            code: "invalid_api_key",
                            message: "invalid or revoked API key",
                        }
                    });
                }
                Err(KeyError::Store(error)) => return Err(error.into()),
            },
            None if state.access.config.anonymous_allowed => Identity::anonymous(),
            None if summarization => {
                return Err(ApiError::NoSuchKey {
                    code: "missing_api_key",
                    message: "no such endpoint without a compactd key: use /k/KEY/ before the path, or an X-Compactd-Key header (compactd keys create --tenant NAME)",
                });
            }
            None => {
                return Err(ApiError::Unauthorized {
                    code: "missing_api_key",
                    message: "an API key is required: `Authorization: Bearer KEY`, `X-Compactd-Key: KEY`, or /k/KEY/ before the path",
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

/// The summarization routes agents and SDKs call (`/v1/compact`, the gateway's wires, also under
/// `/k/{key}/`): they never answer 401 or 403.
pub(super) fn is_agent_wire(path: &str) -> bool {
    let path = path.trim_end_matches('/');
    [
        "/v1/compact",
        "/v1/chat/completions",
        "/v1/messages",
        "/v1/messages/count_tokens",
        "/v1/responses",
        "/v1/responses/compact",
        "/codex/responses",
        "/codex/responses/compact",
    ]
    .iter()
    .any(|wire| path.ends_with(wire))
}
