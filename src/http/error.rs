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
            ApiError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Busy { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable { .. } => StatusCode::SERVICE_UNAVAILABLE,
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
        let body = json!({"error": {"message": self.to_string(), "type": kind, "code": code, "param": param}});
        let mut response = (self.status(), axum::Json(body)).into_response();
        if let ApiError::Busy { retry_after } | ApiError::Unavailable { retry_after, .. } = &self {
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
