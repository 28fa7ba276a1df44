//! The console's recall page: the search box over the tenant's kept conversations (the same
//! search as `recall_search` and `GET /v1/recall/search`).

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use serde::Deserialize;

use super::pages::Page;
use super::viewer::Viewer;
use super::views::{self, Chrome};
use compactd_core::session::time;
use compactd_store::RecallQuery;

#[derive(Debug, Deserialize)]
pub(super) struct Params {
    #[serde(default)]
    q: String,
    /// Only the entries this session's compactions summarized.
    session: Option<String>,
}

pub(super) struct HitView {
    pub recall_id: String,
    pub session_id: Option<String>,
    pub seq: i32,
    pub role: String,
    pub tool: Option<String>,
    pub snippet: String,
    pub created_at: String,
}

#[derive(Template)]
#[template(path = "console/recall.html")]
pub(super) struct RecallPage {
    pub chrome: Chrome,
    pub query: String,
    pub session: Option<String>,
    pub hits: Vec<HitView>,
}

impl RecallPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

pub(super) async fn recall(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Query(params): Query<Params>,
) -> Page {
    let query = params.q.trim().to_owned();
    let hits = if compactd_store::recall::query_words(&query).is_empty() {
        Vec::new()
    } else {
        let search = RecallQuery {
            text: query.clone(),
            session_id: params.session.clone().filter(|s| !s.is_empty()),
            limit: 50,
            ..RecallQuery::default()
        };
        state.app.search_recall(&viewer.identity, search).await?
    };
    let page = RecallPage {
        chrome: Chrome::of(&viewer),
        query,
        session: params.session.filter(|s| !s.is_empty()),
        hits: hits
            .into_iter()
            .map(|hit| HitView {
                recall_id: hit.recall_id,
                session_id: hit.session_id,
                seq: hit.seq,
                role: hit.role,
                tool: hit.tool,
                snippet: hit.snippet,
                created_at: time::epoch_ms_to_iso(hit.created_at_ms),
            })
            .collect(),
    };
    Ok(views::render(StatusCode::OK, &page))
}
