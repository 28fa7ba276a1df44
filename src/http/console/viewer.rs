//! Who is looking at the console. The rules are the API's: anonymous on a loopback listener
//! (unless anonymous access is off), otherwise an API key. A browser cannot add an
//! `Authorization` header to a link it follows, so the key is entered once on the login page,
//! sent in a form body, and kept in a cookie that lives as long as the browser session: no
//! expiry, `HttpOnly` (no script reads it), `SameSite=Strict` (no other site's page sends it),
//! `Path=/ui`, and `Secure` behind TLS. It never appears in a URL, so it never reaches a log,
//! a history or a `Referer`.

use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum_extra::extract::CookieJar;
use axum_extra::extract::cookie::{Cookie, SameSite};

use super::error::PageError;
use super::extract::Form;
use super::views::{self, LoginPage};
use crate::access::{Identity, KEY_PREFIX, KeyError};
use crate::http::AppState;

/// The cookie that holds the key.
const COOKIE: &str = "compactd_key";

/// The identity the console shows data for.
#[derive(Debug, Clone)]
pub(super) struct Viewer {
    pub identity: Identity,
    /// Signed in with a key (the page offers to sign out).
    pub signed_in: bool,
}

/// Where an unauthenticated browser goes.
pub(super) enum ViewerRejection {
    Login { reason: Option<&'static str> },
    Page(PageError),
}

impl IntoResponse for ViewerRejection {
    fn into_response(self) -> Response {
        match self {
            // A key that stopped working is dropped so that the login page starts clean.
            ViewerRejection::Login { reason } => {
                let target = match reason {
                    Some(reason) => format!("/ui/login?reason={reason}"),
                    None => "/ui/login".to_owned(),
                };
                (forget_key(), Redirect::to(&target)).into_response()
            }
            ViewerRejection::Page(error) => error.into_response(),
        }
    }
}

impl FromRequestParts<AppState> for Viewer {
    type Rejection = ViewerRejection;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let jar = CookieJar::from_headers(&parts.headers);
        let (identity, signed_in) = match jar.get(COOKIE).map(Cookie::value) {
            Some(key) => match state.app.identify(&state.access, key).await {
                Ok(identity) => (identity, true),
                Err(KeyError::Invalid) => {
                    return Err(ViewerRejection::Login {
                        reason: Some("revoked"),
                    });
                }
                Err(KeyError::Store(error)) => {
                    return Err(ViewerRejection::Page(PageError::from(
                        crate::app::AppError::from(error),
                    )));
                }
            },
            None if state.access.config.anonymous_allowed => (Identity::anonymous(), false),
            None => return Err(ViewerRejection::Login { reason: None }),
        };
        state
            .access
            .check_rate(&identity)
            .map_err(|retry_after| ViewerRejection::Page(PageError::rate_limited(retry_after)))?;
        Ok(Viewer {
            identity,
            signed_in,
        })
    }
}

/// `GET /ui/login`: the key form.
pub(super) async fn login_page(
    State(state): State<AppState>,
    super::extract::Query(query): super::extract::Query<LoginQuery>,
) -> Response {
    let message = match query.reason.as_deref() {
        Some("revoked") => Some("That key is no longer valid: enter another."),
        _ => None,
    };
    views::render(
        axum::http::StatusCode::OK,
        &LoginPage {
            message,
            anonymous: state.access.config.anonymous_allowed,
        },
    )
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct LoginQuery {
    reason: Option<String>,
}

#[derive(Debug, serde::Deserialize)]
pub(super) struct LoginForm {
    key: String,
}

/// `POST /ui/login`: checks the key and keeps it in the browser session.
pub(super) async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let key = form.key.trim();
    let refused = |message| {
        views::render(
            axum::http::StatusCode::UNAUTHORIZED,
            &LoginPage {
                message: Some(message),
                anonymous: state.access.config.anonymous_allowed,
            },
        )
    };
    if !key.starts_with(KEY_PREFIX) {
        return refused("A compactd key starts with cmpd_.");
    }
    match state.app.identify(&state.access, key).await {
        Ok(_) => {
            let mut cookie = cookie_named(key);
            cookie.set_secure(behind_tls(&headers));
            (CookieJar::new().add(cookie), Redirect::to("/ui")).into_response()
        }
        Err(KeyError::Invalid) => refused("That key is unknown or revoked."),
        Err(KeyError::Store(error)) => {
            PageError::from(crate::app::AppError::from(error)).into_response()
        }
    }
}

/// `POST /ui/logout`: forgets the key.
pub(super) async fn logout() -> Response {
    (forget_key(), Redirect::to("/ui/login")).into_response()
}

/// A jar that tells the browser to drop the key cookie. (`CookieJar::remove` only removes a
/// cookie the jar was built with, so the removal is added explicitly.)
fn forget_key() -> CookieJar {
    let mut removal = cookie_named("");
    removal.make_removal();
    CookieJar::new().add(removal)
}

/// The key cookie with its attributes (removal needs the same name and path).
fn cookie_named(value: &str) -> Cookie<'static> {
    Cookie::build((COOKIE, value.to_owned()))
        .path("/ui")
        .http_only(true)
        .same_site(SameSite::Strict)
        .build()
}

/// Whether the browser reached compactd over TLS (through a proxy that says so).
fn behind_tls(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|proto| proto.eq_ignore_ascii_case("https"))
        || headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|origin| origin.starts_with("https://"))
}
