//! Request bodies: read as bytes under the body limit and decoded as JSON, with errors that say
//! what and where. A body must say what it is: JSON bodies `application/json`, session files
//! NDJSON (`application/x-ndjson`; `application/jsonl` and `application/json` are taken too), else
//! 415. That is what every agent sends, and it is what a web page cannot send to another site
//! without the browser asking first (a CORS preflight compactd never grants): `text/plain`,
//! forms and bodies without a type are what a page can send blindly.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, FailedToBufferBody};
use axum::extract::{FromRef, FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::encoding::{self, Content};
use super::error::ApiError;
use compactd_core::ids::{BadId, Id};

/// The configured body limit, read from the router state.
#[derive(Debug, Clone, Copy)]
pub(super) struct BodyLimit(pub usize);

/// A JSON request body (`application/json`), a JSON object; rejections are [`ApiError`]s.
pub(super) struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_type(request.headers(), Media::Json)?;
        let bytes = read_plain(request, state).await?;
        decode_object(&bytes).map(JsonBody)
    }
}

/// A JSON object body that may also be empty (`T::default()`), as for a compaction whose every
/// field is optional. A non-empty body must be `application/json`; an empty one may have no type.
pub(super) struct OptionalJsonBody<T>(pub T);

impl<S, T> FromRequest<S> for OptionalJsonBody<T>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
    T: DeserializeOwned + Default,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let typed = request.headers().contains_key(header::CONTENT_TYPE);
        if typed {
            require_type(request.headers(), Media::Json)?;
        }
        let bytes = read_plain(request, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJsonBody(T::default()));
        }
        if !typed {
            require_type(&HeaderMap::new(), Media::Json)?;
        }
        decode_object(&bytes).map(OptionalJsonBody)
    }
}

/// A request's headers and body bytes under the body limit, whatever the body is: the gateway
/// passes what it does not answer through as it came, and reads it with its `Content-Encoding`
/// undone.
pub(super) struct RawBody {
    pub method: axum::http::Method,
    pub uri: axum::http::Uri,
    pub headers: HeaderMap,
    /// The body as it came: what is forwarded.
    pub bytes: Bytes,
    /// The body with its `Content-Encoding` undone (the same bytes when it has none); `None` in a
    /// coding compactd does not read, which is then only ever forwarded.
    pub plain: Option<Bytes>,
}

/// A gateway request whose body was refused (over the limit, a corrupt coding): the error, and
/// the request's headers, which name the agent session whose older request is now stale.
pub(super) struct RawBodyRejected {
    pub error: ApiError,
    pub headers: HeaderMap,
}

impl From<RawBodyRejected> for ApiError {
    fn from(rejected: RawBodyRejected) -> Self {
        rejected.error
    }
}

impl axum::response::IntoResponse for RawBodyRejected {
    fn into_response(self) -> axum::response::Response {
        self.error.into_response()
    }
}

impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = RawBodyRejected;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let headers = request.headers().clone();
        let method = request.method().clone();
        let uri = request.uri().clone();
        let BodyLimit(limit) = BodyLimit::from_ref(state);
        let decoded = match read(request, state).await {
            Ok(bytes) => encoding::decode(&headers, bytes.clone(), limit)
                .await
                .map(|content| (bytes, content)),
            Err(error) => Err(error),
        };
        let (bytes, content) = match decoded {
            Ok(decoded) => decoded,
            Err(error) => return Err(RawBodyRejected { error, headers }),
        };
        let plain = match content {
            Content::Plain(plain) => Some(plain),
            Content::Unknown(_) => None,
        };
        Ok(RawBody {
            method,
            uri,
            headers,
            bytes,
            plain,
        })
    }
}

impl RawBody {
    /// The body as [`JsonBody`] reads it: `application/json`, a JSON object.
    pub(super) fn json<T: DeserializeOwned>(&self) -> Result<T, ApiError> {
        require_type(&self.headers, Media::Json)?;
        decode_object(self.plain()?)
    }

    /// The decoded body; 415 in a coding compactd does not read.
    pub(super) fn plain(&self) -> Result<&Bytes, ApiError> {
        self.plain.as_ref().ok_or_else(|| {
            let coding = self
                .headers
                .get(header::CONTENT_ENCODING)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            encoding::unsupported(&coding)
        })
    }

    /// The request for the agents' layer, as it came.
    pub(super) fn into_request(self) -> crate::agents::Request {
        crate::agents::Request {
            declares_json: require_type(&self.headers, Media::Json).is_ok(),
            usage: None,
            method: self.method,
            uri: self.uri,
            headers: self.headers,
            bytes: self.bytes,
            plain: self.plain,
        }
    }
}

/// The 415 of a body whose `Content-Type` (`declared`) does not say it is JSON.
pub(super) fn not_json(declared: Option<axum::http::HeaderValue>) -> ApiError {
    let mut headers = HeaderMap::new();
    if let Some(value) = declared {
        headers.insert(header::CONTENT_TYPE, value);
    }
    match require_type(&headers, Media::Json) {
        Err(error) => error,
        Ok(()) => ApiError::bad_request("invalid_json", "the body must be JSON"),
    }
}

/// A session file or lines of one (NDJSON) under the body limit.
pub(super) struct JsonlBody(pub Bytes);

impl<S> FromRequest<S> for JsonlBody
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        require_type(request.headers(), Media::Jsonl)?;
        read_plain(request, state).await.map(JsonlBody)
    }
}

/// What a body is declared to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Media {
    Json,
    Jsonl,
}

/// 415 unless the `Content-Type` says `media` (parameters such as `charset` are ignored).
fn require_type(headers: &HeaderMap, media: Media) -> Result<(), ApiError> {
    let declared = headers
        .get(header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let essence = declared.as_deref().map(|v| {
        v.split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase()
    });
    let json = |t: &str| {
        t == "application/json" || (t.starts_with("application/") && t.ends_with("+json"))
    };
    let accepted = match (&essence, media) {
        (Some(t), Media::Json) => json(t),
        (Some(t), Media::Jsonl) => {
            json(t)
                || matches!(
                    t.as_str(),
                    "application/x-ndjson"
                        | "application/ndjson"
                        | "application/jsonl"
                        | "application/x-jsonl"
                        | "application/jsonlines"
                        | "application/x-jsonlines"
                        | "application/json-lines"
                )
        }
        (None, _) => false,
    };
    if accepted {
        return Ok(());
    }
    let (wanted, example) = match media {
        Media::Json => ("JSON", "application/json"),
        Media::Jsonl => ("a session file (JSON lines)", "application/x-ndjson"),
    };
    let got = match &declared {
        Some(value) => format!("Content-Type {value:?}"),
        None => "no Content-Type".to_owned(),
    };
    Err(ApiError::Invalid {
        status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
        code: "unsupported_media_type",
        message: format!(
            "the body must be {wanted}, sent with Content-Type: {example}; this request has {got}"
        ),
        param: Some("Content-Type".into()),
    })
}

/// The body's bytes under the body limit.
async fn read<S>(request: Request, state: &S) -> Result<Bytes, ApiError>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    let BodyLimit(limit) = BodyLimit::from_ref(state);
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| match rejection {
            BytesRejection::FailedToBufferBody(FailedToBufferBody::LengthLimitError(_)) => {
                ApiError::PayloadTooLarge { limit }
            }
            other => ApiError::bad_request("unreadable_body", other.body_text()),
        })
}

/// The body's bytes with its `Content-Encoding` undone, under the body limit (415 in a coding
/// compactd does not read).
async fn read_plain<S>(request: Request, state: &S) -> Result<Bytes, ApiError>
where
    S: Send + Sync,
    BodyLimit: FromRef<S>,
{
    let BodyLimit(limit) = BodyLimit::from_ref(state);
    if !request.headers().contains_key(header::CONTENT_ENCODING) {
        return read(request, state).await;
    }
    let headers = request.headers().clone();
    let bytes = read(request, state).await?;
    match encoding::decode(&headers, bytes, limit).await? {
        Content::Plain(plain) => Ok(plain),
        Content::Unknown(coding) => Err(encoding::unsupported(&coding)),
    }
}

/// [`decode`] of a body that must be a JSON object: an array or a bare value is a 400 (serde would
/// read an array of the fields' values as the object).
pub(super) fn decode_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    match first {
        Some(b'{') | None => decode(bytes),
        Some(b'[') => Err(ApiError::bad_request(
            "invalid_json",
            "the body must be a JSON object ({…}), not an array",
        )),
        Some(_) => {
            // Not JSON at all, or a bare value: say which.
            decode::<serde_json::Value>(bytes)?;
            Err(ApiError::bad_request(
                "invalid_json",
                "the body must be a JSON object ({…}), not a bare value",
            ))
        }
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
    if compactd_core::session::nesting_exceeds(bytes, compactd_core::session::JSON_DEPTH_LIMIT) {
        return Err(ApiError::unprocessable(
            "body",
            format!(
                "the JSON is nested deeper than {} levels",
                compactd_core::session::JSON_DEPTH_LIMIT
            ),
        ));
    }
    // JavaScript clients write lone surrogates as escapes that serde_json refuses.
    let bytes = compactd_core::js_json::replace_lone_surrogates(bytes);
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
                    compactd_core::session::JSON_DEPTH_LIMIT
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
                // An id no resource could have: the same 400 wherever the id came in.
                if message.starts_with(BadId::PREFIX) {
                    return ApiError::Invalid {
                        status: StatusCode::BAD_REQUEST,
                        code: "invalid_id",
                        message: format!("{param}: {message}"),
                        param: Some(param),
                    };
                }
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

/// Query parameters decoded into `T`; a bad one is a 422 naming it.
pub(super) struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        // NUL is in no id, cursor or setting, and PostgreSQL text cannot hold it.
        if let Some((name, _)) = form_urlencoded_parse(query).find(|(_, v)| v.contains('\0')) {
            return Err(ApiError::Invalid {
                status: axum::http::StatusCode::BAD_REQUEST,
                code: "invalid_query",
                message: format!("query parameter {name}: holds a NUL character"),
                param: Some(name.into_owned()),
            });
        }
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
pub(super) struct SessionId(pub Id);

/// The `{pin_id}` of a pin route, read as [`SessionId`] is.
pub(super) struct PinId(pub Id);

/// The path parameter `name`, decoded; `what` names it in errors.
async fn path_param<S: Send + Sync>(
    parts: &mut axum::http::request::Parts,
    state: &S,
    name: &str,
    what: &str,
) -> Result<Id, ApiError> {
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
    // An id no resource could have names none: a 404 without asking the store.
    Id::parse(value)
        .map_err(|bad| ApiError::NotFoundWhat(format!("no {what} with this id ({bad})")))
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
