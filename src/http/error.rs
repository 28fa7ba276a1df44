//! One JSON error shape for every endpoint, OpenAI's:
//! `{"error": {"message", "type", "code", "param"}}`, so that agents and OpenAI clients that read
//! `error.code` (for example `context_length_exceeded`) understand it. Every error of the layers
//! below is mapped here, once (the `From` impls at the end). 5xx bodies never carry internals:
//! the cause rides along in the response's extensions and `log_failure` logs it.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// Every error: OpenAI's shape.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorBody {
    pub(crate) error: ErrorDetail,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorDetail {
    /// What is wrong, and where.
    pub(crate) message: String,
    /// `invalid_request_error`, `rate_limit_error` or `server_error`.
    #[serde(rename = "type")]
    pub(crate) error_type: String,
    /// Machine-readable: `invalid_json`, `invalid_value`, `invalid_session`, `not_found`,
    /// `context_length_exceeded`, `request_too_large`, `rate_limit_exceeded`, `entry_conflict`,
    /// `nothing_to_compact`, `already_compacted`, `session_changed`, `upstream_unavailable`,
    /// `storage_unavailable`, `internal_error`, …
    pub(crate) code: String,
    /// The field or parameter at fault.
    pub(crate) param: Option<String>,
    /// For `invalid_session`: the 1-based line at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) line: Option<u64>,
    /// For `invalid_session`: what is wrong with the line (`invalid_json`, `dangling_parent`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) kind: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ApiError {
    /// Malformed request: not JSON, wrong types, missing or invalid fields.
    #[error("{message}")]
    Invalid {
        status: StatusCode,
        code: &'static str,
        message: String,
        param: Option<String>,
    },
    /// An uploaded session (or appended lines) that cannot be read: names the line (and the
    /// setting, for a breached limit).
    #[error("{}{}", .0, limit_setting(.0.kind))]
    InvalidSession(compactd_core::session::ParseError),
    /// The session, entry or resource does not exist.
    #[error("{0}")]
    NotFoundWhat(String),
    /// The request conflicts with stored data (an entry id with other content, a session that
    /// changed meanwhile) or asks for something the session's state does not allow.
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// Over a configured size limit (other than the body limit).
    #[error("{0}")]
    TooLarge(String),
    /// No usable API key.
    #[error("{message}")]
    Unauthorized {
        code: &'static str,
        message: &'static str,
    },
    /// No usable API key on an agent-facing summarization route. Agents read a 401 or 403 there as
    /// their own provider credential failing (oh-my-pi refreshes, then rotates the user's login),
    /// so a key in the URL is treated as a capability: an unknown one is a URL that does not exist.
    #[error("{message}")]
    NoSuchKey {
        code: &'static str,
        message: &'static str,
    },
    /// The caller's key is over its request rate.
    #[error("this API key is over its request rate; retry later")]
    RateLimited { retry_after: Duration },
    /// The database cannot be reached (the cause is logged, not answered).
    #[error("storage is unavailable; retry later")]
    StorageUnavailable { cause: String },
    /// The upstream model says the input is too long.
    #[error("{0}")]
    ContextLengthExceeded(String),
    /// The request body is larger than the configured limit.
    #[error("the request body is larger than the limit of {limit} bytes (COMPACTD_MAX_BODY_BYTES)")]
    PayloadTooLarge { limit: usize },
    /// Too many summarizations in progress.
    #[error("too many summarizations in progress; retry later")]
    Busy { retry_after: Duration },
    /// No model produced a summary.
    #[error("{message}")]
    Unavailable {
        message: String,
        retry_after: Duration,
    },
    /// The request URI is longer than compactd serves.
    #[error("the request URI is longer than {limit} bytes")]
    UriTooLong { limit: usize },
    /// The request did not finish within its time limit.
    #[error("the request did not finish within {} s", .limit.as_secs_f64())]
    RequestTimeout { limit: Duration },
    #[error("no such endpoint")]
    NotFound,
    #[error("method not allowed")]
    MethodNotAllowed,
    /// A bug; the body says nothing more.
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl ApiError {
    /// 400 with a code and a message naming what is wrong.
    pub(crate) fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
            param: None,
        }
    }

    /// 422: well-formed JSON whose content is not acceptable; `param` names the field.
    pub(crate) fn unprocessable(param: &str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_value",
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }

    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid { status, .. } => *status,
            ApiError::ContextLengthExceeded(_) => StatusCode::BAD_REQUEST,
            ApiError::InvalidSession(e) if is_limit(e.kind) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::InvalidSession(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotFoundWhat(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::StorageUnavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::NoSuchKey { .. } => StatusCode::NOT_FOUND,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::UriTooLong { .. } => StatusCode::URI_TOO_LONG,
            ApiError::RequestTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn kind_and_code(&self) -> (&'static str, &'static str) {
        match self {
            ApiError::Invalid { code, .. } => ("invalid_request_error", code),
            ApiError::ContextLengthExceeded(_) => {
                ("invalid_request_error", "context_length_exceeded")
            }
            ApiError::InvalidSession(e) if is_limit(e.kind) => {
                ("invalid_request_error", "limit_exceeded")
            }
            ApiError::InvalidSession(_) => ("invalid_request_error", "invalid_session"),
            ApiError::TooLarge(_) => ("invalid_request_error", "limit_exceeded"),
            ApiError::NotFoundWhat(_) => ("invalid_request_error", "not_found"),
            ApiError::Conflict { code, .. } => ("invalid_request_error", code),
            ApiError::StorageUnavailable { .. } => ("server_error", "storage_unavailable"),
            ApiError::Unauthorized { code, .. } | ApiError::NoSuchKey { code, .. } => {
                ("invalid_request_error", code)
            }
            ApiError::RateLimited { .. } => ("rate_limit_error", "rate_limit_exceeded"),
            ApiError::PayloadTooLarge { .. } => ("invalid_request_error", "request_too_large"),
            ApiError::Busy { .. } => ("rate_limit_error", "rate_limit_exceeded"),
            ApiError::Unavailable { .. } => ("server_error", "upstream_unavailable"),
            ApiError::UriTooLong { .. } => ("invalid_request_error", "uri_too_long"),
            ApiError::RequestTimeout { .. } => ("server_error", "request_timeout"),
            ApiError::NotFound => ("invalid_request_error", "not_found"),
            ApiError::MethodNotAllowed => ("invalid_request_error", "method_not_allowed"),
            ApiError::Internal(_) => ("server_error", "internal_error"),
        }
    }
}

/// The cause of a 5xx answer, for the log (never for the body).
#[derive(Debug, Clone)]
pub(crate) struct FailureCause(pub Arc<String>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (kind, code) = self.kind_and_code();
        let param = match &self {
            ApiError::Invalid { param, .. } => param.clone(),
            _ => None,
        };
        let mut body = json!({"error": {"message": self.to_string(), "type": kind, "code": code, "param": param}});
        if let ApiError::InvalidSession(parse) = &self {
            body["error"]["line"] = json!(parse.line);
            body["error"]["kind"] = json!(parse.kind);
        }
        let mut response = (self.status(), axum::Json(body)).into_response();
        let retry_after = match &self {
            ApiError::Busy { retry_after }
            | ApiError::Unavailable { retry_after, .. }
            | ApiError::RateLimited { retry_after } => Some(*retry_after),
            ApiError::StorageUnavailable { .. } => Some(Duration::from_secs(5)),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        let cause = match self {
            ApiError::Internal(cause) => Some(format!("{cause:?}")),
            ApiError::StorageUnavailable { cause } => Some(cause),
            ApiError::Unavailable { message, .. } => Some(message),
            _ => None,
        };
        if let Some(cause) = cause {
            response
                .extensions_mut()
                .insert(FailureCause(Arc::new(cause)));
        }
        response
    }
}

/// Logs the cause of a 5xx answer: errors at `error` (bugs), unavailability at `warn`. Called on
/// every response by the middleware that counts them ([`super::ops::track`]).
pub(crate) fn log_failure(response: &Response) {
    if response.status().is_server_error()
        && let Some(FailureCause(cause)) = response.extensions().get::<FailureCause>()
    {
        let status = response.status().as_u16();
        if response.status() == StatusCode::INTERNAL_SERVER_ERROR {
            tracing::error!(status, cause = %cause, "request failed");
        } else {
            tracing::warn!(status, cause = %cause, "request failed");
        }
    }
}

/// Unknown routes answer JSON too.
pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound
}

impl From<crate::agents::AgentError> for ApiError {
    fn from(error: crate::agents::AgentError) -> Self {
        use crate::agents::AgentError;
        match error {
            AgentError::App(error) => error.into(),
            // The key is never forwarded, so the provider would get none; docs/agents.md says
            // how an agent sends both.
            AgentError::Ambiguous(ambiguous) => ApiError::Invalid {
                status: StatusCode::BAD_REQUEST,
                code: "ambiguous_credentials",
                message: format!(
                    "the {} header carries a compactd key, which compactd never forwards, and the \
                     provider reads its credential from the same header: send compactd's key in \
                     the URL (/k/KEY/…) or in X-Compactd-Key, and the provider's key as the agent \
                     always does",
                    ambiguous.header
                ),
                param: Some(ambiguous.header.into()),
            },
            AgentError::NotJson { declared } => super::json::not_json(declared),
        }
    }
}

impl From<compactd_store::StoreError> for ApiError {
    fn from(error: compactd_store::StoreError) -> Self {
        use compactd_store::StoreError;
        match error {
            StoreError::Unavailable(cause) => ApiError::StorageUnavailable {
                cause: format!("storage unavailable: {cause}"),
            },
            StoreError::TimedOut(deadline) => ApiError::StorageUnavailable {
                cause: format!("storage did not answer within {deadline:?}"),
            },
            StoreError::Changed => ApiError::Conflict {
                code: "session_changed",
                message: "the session changed while this request was handled; retry".into(),
            },
            StoreError::Conflict(constraint) => ApiError::Conflict {
                code: "conflict",
                message: format!("the request conflicts with stored data ({constraint})"),
            },
            StoreError::Other(cause) => {
                ApiError::Internal(anyhow::Error::new(cause).context("storage error"))
            }
        }
    }
}

impl From<crate::pipeline::SummarizeError> for ApiError {
    fn from(error: crate::pipeline::SummarizeError) -> Self {
        use crate::pipeline::SummarizeError;
        use crate::summarizer::ChainError;
        match error {
            SummarizeError::Busy(_) => ApiError::Busy {
                retry_after: Duration::from_secs(2),
            },
            SummarizeError::Chain(ChainError::ContextOverflow) => ApiError::ContextLengthExceeded(
                "the prompt is longer than the context window of every configured model; shorten it and retry".into(),
            ),
            SummarizeError::Chain(ChainError::Exhausted { last, retry_after }) => ApiError::Unavailable {
                message: format!("no configured model could write the summary (last error: {last})"),
                retry_after,
            },
            SummarizeError::BudgetSpent => ApiError::Unavailable {
                message: "the token budget is spent".into(),
                retry_after: Duration::from_secs(60),
            },
            SummarizeError::Chain(ChainError::DeadlineExceeded) => ApiError::Unavailable {
                message: "no summary within the deadline".into(),
                retry_after: Duration::from_secs(5),
            },
        }
    }
}

impl From<crate::app::AppError> for ApiError {
    fn from(error: crate::app::AppError) -> Self {
        use crate::app::AppError;
        use compactd_core::compaction::NothingReason;
        match error {
            AppError::NotFound(message) => ApiError::NotFoundWhat(message),
            AppError::Invalid { param, message } => ApiError::unprocessable(&param, message),
            AppError::Malformed { param, message } => ApiError::Invalid {
                status: StatusCode::BAD_REQUEST,
                code: "invalid_value",
                message,
                param: Some(param),
            },
            AppError::InvalidSession(parse) => ApiError::InvalidSession(parse),
            AppError::Conflict { code, message } => ApiError::Conflict { code, message },
            AppError::Nothing(reason, message) => ApiError::Conflict {
                code: match reason {
                    NothingReason::AlreadyCompacted => "already_compacted",
                    _ => "nothing_to_compact",
                },
                message: format!("nothing to compact: {message}"),
            },
            AppError::TooLarge(message) => ApiError::TooLarge(message),
            AppError::Store(error) => error.into(),
            AppError::Summarize(error) => error.into(),
            AppError::DeadlineExceeded(what) => ApiError::Unavailable {
                message: format!("{what} did not finish within the deadline; retry later"),
                retry_after: Duration::from_secs(5),
            },
            AppError::Internal(cause) => ApiError::Internal(cause),
        }
    }
}

fn is_limit(kind: compactd_core::session::ParseErrorKind) -> bool {
    use compactd_core::session::ParseErrorKind::{LineTooLong, TooManyEntries};
    matches!(kind, LineTooLong | TooManyEntries)
}

fn limit_setting(kind: compactd_core::session::ParseErrorKind) -> &'static str {
    use compactd_core::session::ParseErrorKind::{LineTooLong, TooManyEntries};
    match kind {
        LineTooLong => " (COMPACTD_MAX_LINE_BYTES)",
        TooManyEntries => " (COMPACTD_MAX_ENTRIES)",
        _ => "",
    }
}
