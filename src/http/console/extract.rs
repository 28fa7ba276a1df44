//! What the console's handlers extract — form bodies, path segments, queries, uploads — with
//! every rejection a console page saying what is wrong (status, message, the console's headers),
//! never axum's plain-text rejection.

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;

use super::error::PageError;
use crate::http::AppState;

/// An `application/x-www-form-urlencoded` body.
pub(super) struct Form<T>(pub T);

impl<T> FromRequest<AppState> for Form<T>
where
    T: serde::de::DeserializeOwned,
{
    type Rejection = PageError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        axum::Form::<T>::from_request(request, state)
            .await
            .map(|axum::Form(value)| Form(value))
            .map_err(|rejection| PageError::bad_request(rejection.body_text()))
    }
}

/// Path segments (a session id, an entry id): one that is not UTF-8 once decoded is a 400 page.
pub(super) struct Path<T>(pub T);

impl<T> FromRequestParts<AppState> for Path<T>
where
    T: serde::de::DeserializeOwned + Send,
{
    type Rejection = PageError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Path(value))
            .map_err(|rejection| {
                PageError::bad_request(format!(
                    "the address cannot be read: {}",
                    rejection.body_text()
                ))
            })
    }
}

/// The query string.
pub(super) struct Query<T>(pub T);

impl<T> FromRequestParts<AppState> for Query<T>
where
    T: serde::de::DeserializeOwned + Send,
{
    type Rejection = PageError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| Query(value))
            .map_err(|rejection| PageError::bad_request(rejection.body_text()))
    }
}

/// A `multipart/form-data` upload: anything else is a 400 page asking for the form.
pub(super) struct Multipart(pub axum::extract::Multipart);

impl FromRequest<AppState> for Multipart {
    type Rejection = PageError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        axum::extract::Multipart::from_request(request, state)
            .await
            .map(Multipart)
            .map_err(|rejection| {
                PageError::bad_request(format!(
                    "upload a session file with the form (multipart/form-data): {}",
                    rejection.body_text()
                ))
            })
    }
}
