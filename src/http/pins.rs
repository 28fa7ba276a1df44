//! Pins: text a user pins to a stored session, carried verbatim by every later compaction.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ErrorBody};
use super::json::{JsonBody, PinId, SessionId};
use compactd_core::session::time;
use compactd_store::PinRecord;

pub(super) fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add, list))
        .routes(routes!(delete))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PinBody {
    /// The text every later summary carries verbatim (at most 2000 characters).
    text: String,
}

/// A pin.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct PinView {
    id: String,
    text: String,
    created_at: String,
}

impl From<PinRecord> for PinView {
    fn from(pin: PinRecord) -> Self {
        PinView {
            id: pin.pin_id,
            text: pin.text,
            created_at: time::epoch_ms_to_iso(pin.created_at_ms),
        }
    }
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub(super) struct PinList {
    pins: Vec<PinView>,
}

/// `POST /v1/sessions/{id}/pins`: pins text to the session. Pinning the same text again answers
/// 200 with the pin it already has.
#[utoipa::path(post, path = "/v1/sessions/{id}/pins", tag = "sessions",
    params(("id" = String, Path, description = "Session id")), request_body = PinBody,
    responses(
        (status = 201, description = "Pinned", body = PinView),
        (status = 200, description = "This text was pinned already: that pin", body = PinView),
        (status = 404, body = ErrorBody),
        (status = 409, description = "The session has the most pins it may have (`too_many_pins`)", body = ErrorBody),
        (status = 422, description = "Empty or too long", body = ErrorBody),
    ))]
pub(super) async fn add(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    JsonBody(body): JsonBody<PinBody>,
) -> Result<(StatusCode, Json<PinView>), ApiError> {
    let (pin, created) = state.app.add_pin(&who, &id, &body.text).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(pin.into())))
}

/// `GET /v1/sessions/{id}/pins`: the session's pins, oldest first.
#[utoipa::path(get, path = "/v1/sessions/{id}/pins", tag = "sessions",
    params(("id" = String, Path, description = "Session id")),
    responses((status = 200, body = PinList), (status = 404, body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
) -> Result<Json<PinList>, ApiError> {
    let pins = state.app.pins(&who, &id).await?;
    Ok(Json(PinList {
        pins: pins.into_iter().map(PinView::from).collect(),
    }))
}

/// `DELETE /v1/sessions/{id}/pins/{pin_id}`: unpins; later compactions no longer carry it.
#[utoipa::path(delete, path = "/v1/sessions/{id}/pins/{pin_id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id"), ("pin_id" = String, Path, description = "Pin id")),
    responses((status = 204, description = "Removed"), (status = 404, body = ErrorBody)))]
pub(super) async fn delete(
    State(state): State<AppState>,
    Caller(who): Caller,
    SessionId(id): SessionId,
    PinId(pin_id): PinId,
) -> Result<StatusCode, ApiError> {
    state.app.delete_pin(&who, &id, &pin_id).await?;
    Ok(StatusCode::NO_CONTENT)
}
