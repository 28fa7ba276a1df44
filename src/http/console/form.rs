//! Form bodies of the console's actions: a field that is missing or malformed is a page saying
//! which, not axum's plain-text rejection.

use axum::extract::{FromRequest, Request};

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
