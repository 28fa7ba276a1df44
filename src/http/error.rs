//! One JSON error shape for every endpoint, OpenAI's:
//! `{"error": {"message", "type", "code", "param"}}`, so that agents and OpenAI clients that read
//! `error.code` (for example `context_length_exceeded`) understand it. 5xx bodies never carry
//! internals; the cause goes to the log.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
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
    InvalidSession(crate::session::ParseError),
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
    /// The caller's key is over its request rate.
    #[error("this API key is over its request rate; retry later")]
    RateLimited { retry_after: Duration },
    /// The database cannot be reached.
    #[error("storage is unavailable; retry later")]
    StorageUnavailable,
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
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            status: StatusCode::BAD_REQUEST,
            code,
            message: message.into(),
            param: None,
        }
    }

    /// 422: well-formed JSON whose content is not acceptable; `param` names the field.
    pub fn unprocessable(param: &str, message: impl Into<String>) -> Self {
        ApiError::Invalid {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_value",
            message: message.into(),
            param: Some(param.to_owned()),
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Invalid { status, .. } => *status,
            ApiError::ContextLengthExceeded(_) => StatusCode::BAD_REQUEST,
            ApiError::InvalidSession(e) if is_limit(e.kind) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::InvalidSession(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::NotFoundWhat(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::StorageUnavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The machine-readable code of the error body.
    pub fn code(&self) -> &'static str {
        self.kind_and_code().1
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
            ApiError::StorageUnavailable => ("server_error", "storage_unavailable"),
            ApiError::Unauthorized { code, .. } => ("invalid_request_error", code),
            ApiError::RateLimited { .. } => ("rate_limit_error", "rate_limit_exceeded"),
            ApiError::PayloadTooLarge { .. } => ("invalid_request_error", "request_too_large"),
            ApiError::Busy { .. } => ("rate_limit_error", "rate_limit_exceeded"),
            ApiError::Unavailable { .. } => ("server_error", "upstream_unavailable"),
            ApiError::NotFound => ("invalid_request_error", "not_found"),
            ApiError::MethodNotAllowed => ("invalid_request_error", "method_not_allowed"),
            ApiError::Internal(_) => ("server_error", "internal_error"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let ApiError::Internal(cause) = &self {
            tracing::error!(error = ?cause, "internal error");
        }
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
            ApiError::StorageUnavailable => Some(Duration::from_secs(5)),
            _ => None,
        };
        if let Some(retry_after) = retry_after {
            let seconds = retry_after.as_secs_f64().ceil().max(1.0) as u64;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Unknown routes answer JSON too.
pub async fn not_found() -> ApiError {
    ApiError::NotFound
}

impl From<crate::store::StoreError> for ApiError {
    fn from(error: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match error {
            StoreError::Unavailable(cause) => {
                tracing::warn!(error = %cause, "storage unavailable");
                ApiError::StorageUnavailable
            }
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

fn is_limit(kind: crate::session::ParseErrorKind) -> bool {
    use crate::session::ParseErrorKind::{LineTooLong, TooManyEntries};
    matches!(kind, LineTooLong | TooManyEntries)
}

fn limit_setting(kind: crate::session::ParseErrorKind) -> &'static str {
    use crate::session::ParseErrorKind::{LineTooLong, TooManyEntries};
    match kind {
        LineTooLong => " (COMPACTD_MAX_LINE_BYTES)",
        TooManyEntries => " (COMPACTD_MAX_ENTRIES)",
        _ => "",
    }
}
