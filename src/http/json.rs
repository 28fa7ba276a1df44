//! Request bodies: read as bytes under the body limit and decoded as JSON whatever the
//! `Content-Type` (pi-family agents always send JSON), with errors that say what and where.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{FromRef, FromRequest, Request};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// The configured body limit, read from the router state.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimit(pub usize);

/// A JSON request body; rejections are [`ApiError`]s.
pub(super) struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let BodyLimit(limit) = BodyLimit::from_ref(state);
        let bytes =
            Bytes::from_request(request, state)
                .await
                .map_err(|rejection| match rejection {
                    BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
                        ApiError::PayloadTooLarge { limit }
                    }
                    other => ApiError::bad_request("unreadable_body", other.body_text()),
                })?;
        decode(&bytes).map(JsonBody)
    }
}

/// Decodes a JSON document: a syntax error is a 400 naming line and column; a well-formed
/// document of the wrong shape is a 422 naming the field (`prompt`, `messages[1].content`).
pub(super) fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let syntax = |e: &serde_json::Error, message: &str| {
        ApiError::bad_request(
            "invalid_json",
            format!(
                "the body is not valid JSON: {message} (line {}, column {})",
                e.line(),
                e.column()
            ),
        )
    };
    // Fields serde skips are not depth-checked by it: bound the nesting of the whole body first.
    if crate::session::nesting_exceeds(bytes, crate::session::JSON_DEPTH_LIMIT) {
        return Err(ApiError::unprocessable(
            "body",
            format!(
                "the JSON is nested deeper than {} levels",
                crate::session::JSON_DEPTH_LIMIT
            ),
        ));
    }
    // JavaScript clients write lone surrogates as escapes that serde_json refuses.
    let bytes = crate::js_json::replace_lone_surrogates(bytes);
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        let text = inner.to_string();
        let message = text
            .rsplit_once(" at line ")
            .map_or(text.as_str(), |(m, _)| m)
            .to_owned();
        let place = format!("line {}, column {}", inner.line(), inner.column());
        if message.starts_with("recursion limit exceeded") {
            return ApiError::unprocessable(
                "body",
                format!(
                    "the JSON is nested deeper than {} levels ({place})",
                    crate::session::JSON_DEPTH_LIMIT
                ),
            );
        }
        match inner.classify() {
            serde_json::error::Category::Data => {
                // A missing field is reported at its parent; name the field itself.
                let field = message
                    .strip_prefix("missing field `")
                    .and_then(|rest| rest.split('`').next())
                    .map(|name| {
                        if path == "." {
                            name.to_owned()
                        } else {
                            format!("{path}.{name}")
                        }
                    });
                let param = field.unwrap_or_else(|| {
                    if path == "." {
                        "body".to_owned()
                    } else {
                        path.clone()
                    }
                });
                ApiError::unprocessable(&param, format!("{param}: {message} ({place})"))
            }
            _ => syntax(&inner, &message),
        }
    })?;
    deserializer
        .end()
        .map_err(|e| syntax(&e, "trailing characters after the JSON document"))?;
    Ok(value)
}

/// A raw request body (JSONL uploads) under the body limit.
pub(super) struct RawBody(pub Bytes);

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let BodyLimit(limit) = BodyLimit::from_ref(state);
        Bytes::from_request(request, state)
            .await
            .map(RawBody)
            .map_err(|rejection| match rejection {
                BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
                    ApiError::PayloadTooLarge { limit }
                }
                other => ApiError::bad_request("unreadable_body", other.body_text()),
            })
    }
}

/// Query parameters decoded into `T`; a bad one is a 422 naming it.
pub(super) struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let deserializer = serde_urlencoded::Deserializer::new(form_urlencoded_parse(query));
        serde_path_to_error::deserialize(deserializer)
            .map(QueryParams)
            .map_err(|error| {
                let path = error.path().to_string();
                let message = error.into_inner().to_string();
                let param = message
                    .strip_prefix("missing field `")
                    .and_then(|rest| rest.split('`').next())
                    .map_or(path, str::to_owned);
                ApiError::unprocessable(&param, format!("query parameter {param}: {message}"))
            })
    }
}

fn form_urlencoded_parse(query: &str) -> form_urlencoded::Parse<'_> {
    form_urlencoded::parse(query.as_bytes())
}

/// The `{id}` of a session route. Rejections are JSON like every error: a path whose decoded id is
/// not UTF-8 is a 400 naming the problem; an id holding NUL cannot name a stored session (ids
/// cannot hold it) and is a 404 without asking the database.
pub(super) struct SessionId(pub String);

/// The `{pin_id}` of a pin route, read as [`SessionId`] is.
pub(super) struct PinId(pub String);

/// The path parameter `name`, decoded; `what` names it in errors.
async fn path_param<S: Send + Sync>(
    parts: &mut axum::http::request::Parts,
    state: &S,
    name: &str,
    what: &str,
) -> Result<String, ApiError> {
    use axum::extract::FromRequestParts;
    let axum::extract::Path(mut params) = axum::extract::Path::<
        std::collections::HashMap<String, String>,
    >::from_request_parts(parts, state)
    .await
    .map_err(|rejection| {
        ApiError::bad_request(
            "invalid_path",
            format!(
                "the {what} in the path cannot be read: {}",
                rejection.body_text()
            ),
        )
    })?;
    let value = params.remove(name).unwrap_or_default();
    if value.contains('\0') {
        return Err(ApiError::NotFoundWhat(format!(
            "no {what} with this id (ids cannot hold NUL)"
        )));
    }
    Ok(value)
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for SessionId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        path_param(parts, state, "id", "session id")
            .await
            .map(SessionId)
    }
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PinId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        path_param(parts, state, "pin_id", "pin").await.map(PinId)
    }
}
