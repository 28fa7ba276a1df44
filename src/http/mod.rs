//! The HTTP service: the remote-summarizer endpoints of pi-family agents (`/v1/compact`,
//! `/v1/chat/completions`, spec §10) and the session API (upload, sync, plan, compact, spec §1–§9).
//!
//! Handlers are thin: they extract the caller and the request, call one function of the
//! application layer ([`crate::app`]), and map the result to a typed response. Each resource
//! module lists its routes once, with their documentation (utoipa-axum's `routes!`), so the router
//! and `/openapi.json` cannot disagree.

pub(crate) mod auth;
pub(crate) mod browser;
mod calls;
mod chat;
mod compactions;
mod console;
mod document;
mod encoding;
pub(crate) mod error;
mod gateway;
mod handoff;
mod json;
mod middleware;
mod ops;
mod pins;
mod recall;
mod remote_endpoint;
pub mod server;
mod sessions;
mod threads;

use std::future::Future;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::FromRef;
use tokio::net::TcpListener;
use tower::Layer;
use tower_http::normalize_path::NormalizePathLayer;
use utoipa_axum::router::OpenApiRouter;

use crate::access::Access;
use crate::app::App;
use crate::config::{HttpConfig, ServeConfig};
use compactd_store::Store;
pub use document::openapi;
use error::ApiError;
use json::BodyLimit;

/// The limits of the HTTP layer: bodies, time, connections.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    pub max_body_bytes: usize,
    /// Time limit of a whole request.
    pub request_timeout: Duration,
    /// Connections open at once.
    pub max_connections: usize,
    /// Time a client has to send a request's head.
    pub header_timeout: Duration,
}

impl From<&HttpConfig> for HttpLimits {
    fn from(config: &HttpConfig) -> Self {
        HttpLimits {
            max_body_bytes: config.max_body_bytes,
            request_timeout: config.request_timeout,
            max_connections: config.max_connections.map_or_else(
                || server::connection_cap(server::open_file_limit()),
                NonZeroUsize::get,
            ),
            header_timeout: config.header_timeout,
        }
    }
}

/// Shared by every handler and middleware; one reference count to clone (it is cloned several
/// times per request, and each count is a cache line both cores write).
#[derive(Clone)]
pub struct AppState(Arc<StateParts>);

impl std::ops::Deref for AppState {
    type Target = StateParts;

    fn deref(&self) -> &StateParts {
        &self.0
    }
}

/// What an [`AppState`] holds.
pub struct StateParts {
    pub app: App,
    pub access: Arc<Access>,
    pub limits: HttpLimits,
    /// Which Host names and Origins are served (see [`browser`]).
    pub(crate) browser: Arc<browser::BrowserPolicy>,
    /// The gateway at agents' model base URLs, when it is on.
    pub(crate) gateway: Option<Arc<crate::agents::Gateway>>,
    /// What prepares summaries ahead: the gateway's sessions and the stored ones (the gateway's
    /// own when it is on).
    pub(crate) preparer: Arc<crate::agents::Preparer>,
}

impl FromRef<AppState> for BodyLimit {
    fn from_ref(state: &AppState) -> Self {
        BodyLimit(state.limits.max_body_bytes)
    }
}

impl AppState {
    /// Connects the store (applying migrations) and builds the application.
    pub async fn from_config(config: &ServeConfig) -> anyhow::Result<AppState> {
        let store = compactd_store::connect(&crate::app::store_config(&config.storage)).await?;
        AppState::with_store(config, store)
    }

    /// The state around an already connected store.
    pub fn with_store(config: &ServeConfig, store: Arc<dyn Store>) -> anyhow::Result<AppState> {
        let app = App::build(&config.summarizers, &config.storage, store)?;
        if tokio::runtime::Handle::try_current().is_ok() {
            app.spawn_recall_purge();
        }
        let window = config.summarizers.context_window.get();
        let gateway = match config.gateway.enabled {
            true => Some(Arc::new(crate::agents::Gateway::new(
                &config.gateway,
                &config.summarizers.anthropic_version,
                window,
            )?)),
            false => None,
        };
        let preparer = match &gateway {
            Some(gateway) => gateway.preparer.clone(),
            None => Arc::new(crate::agents::Preparer::new(&config.gateway, window)),
        };
        Ok(AppState(Arc::new(StateParts {
            app,
            access: Arc::new(Access::new(crate::app::access_config(config))),
            limits: HttpLimits::from(&config.http),
            browser: Arc::new(browser::BrowserPolicy::of(config)),
            gateway,
            preparer,
        })))
    }
}

/// The router with every route and layer. Pure: tests drive it without a socket.
pub fn app(state: AppState) -> Router {
    let limits = state.limits;
    let browser = state.browser.clone();
    let (documented, _) = document::routes().split_for_parts();
    // The remote-endpoint wire sends no headers: the key can come in the path instead. These
    // copies are the same operations, so they are not documented twice.
    let (wires, _) = OpenApiRouter::new()
        .merge(remote_endpoint::router())
        .merge(chat::router())
        .merge(gateway::router())
        .split_for_parts();
    let mcp = mcp_service(&state);
    let routes = documented
        .nest("/k/{key}", wires)
        .route_service("/mcp", mcp.clone())
        .route_service("/k/{key}/mcp", mcp)
        .merge(console::router())
        .fallback(error::not_found)
        .method_not_allowed_fallback(|| async { ApiError::MethodNotAllowed })
        // Inside routing, so the route pattern is known to the metrics.
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            ops::track,
        ))
        .with_state(state);
    let routes = middleware::around(routes, limits, browser);
    // Clients write `…/chat/completions/` (oh-my-pi accepts a trailing slash) and `//v1/…`:
    // the path is normalized before routing, so every route answers with or without them.
    Router::new().fallback_service(NormalizePathLayer::trim_trailing_slash().layer(routes))
}

/// Recall's MCP server (Streamable HTTP), behind the REST API's authentication. Stateless, so
/// any replica answers any request; compactd's own middleware checks Host, Origin and body size.
fn mcp_service(state: &AppState) -> axum::routing::MethodRouter {
    use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let app = state.app.clone();
    let mut config = StreamableHttpServerConfig::default().disable_allowed_hosts();
    config.legacy_session_mode = false;
    config.json_response = true;
    config.sse_keep_alive = None;
    let service = StreamableHttpService::new(
        move || Ok(recall::mcp::RecallServer::new(app.clone())),
        std::sync::Arc::new(NeverSessionManager::default()),
        config,
    );
    axum::routing::any_service(service).layer(axum::middleware::from_fn_with_state(
        state.clone(),
        recall::mcp_caller,
    ))
}

/// Serves `app(state)` on `listener` until `shutdown` completes; then stops accepting, lets the
/// requests in flight finish for up to `grace`, and returns.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let limits = server::ConnectionLimits {
        max_connections: state.limits.max_connections,
        header_timeout: state.limits.header_timeout,
    };
    // Sessions stored before per-entry facts existed get them in the background (each is also
    // derived on its first use, so requests never wait for the sweep).
    let sweep = state.app.clone();
    tokio::spawn(async move {
        match sweep.derive_stale_facts().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(sessions = n, "entry facts derived for stored sessions"),
            Err(error) => tracing::warn!(%error, "deriving entry facts of stored sessions stopped"),
        }
    });
    server::serve(listener, app(state), limits, shutdown, grace).await
}
