//! Errors of the console as pages: the API's error (its status, `Retry-After` and the cause kept
//! for the log), with an HTML body a person reads instead of JSON.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::views::{self, ErrorPage};
use crate::app::AppError;
use crate::http::error::ApiError;

#[derive(Debug)]
pub(super) struct PageError(pub ApiError);

impl PageError {
    pub(super) fn rate_limited(retry_after: Duration) -> PageError {
        PageError(ApiError::RateLimited { retry_after })
    }

    pub(super) fn bad_request(message: impl Into<String>) -> PageError {
        PageError(ApiError::Invalid {
            status: StatusCode::BAD_REQUEST,
            code: "invalid_request",
            param: None,
            message: message.into(),
        })
    }
}

impl From<AppError> for PageError {
    fn from(error: AppError) -> Self {
        PageError(ApiError::from(error))
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let message = match &self.0 {
            ApiError::Invalid {
                param: Some(param),
                message,
                ..
            } if !message.starts_with(param.as_str()) => format!("{param}: {message}"),
            other => other.to_string(),
        };
        let (mut parts, _) = self.0.into_response().into_parts();
        let page = views::render(
            parts.status,
            &ErrorPage {
                status: parts.status.as_u16(),
                reason: parts.status.canonical_reason().unwrap_or("Error"),
                message,
            },
        );
        let (page_parts, body) = page.into_parts();
        parts.headers.insert(
            header::CONTENT_TYPE,
            page_parts
                .headers
                .get(header::CONTENT_TYPE)
                .cloned()
                .unwrap_or(HeaderValue::from_static("text/html; charset=utf-8")),
        );
        parts.headers.remove(header::CONTENT_LENGTH);
        Response::from_parts(parts, Body::new(body))
    }
}
