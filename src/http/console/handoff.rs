//! The console's handoff (issue 57): a session page's "Hand off" form drafts the first prompt
//! of a new thread for a goal (`POST /ui/sessions/{id}/handoff/draft`, nothing stored yet), the
//! draft page shows it for editing with the files it names and what it left out, and starting
//! the thread (`POST /ui/sessions/{id}/handoff`) stores the new session with the edited prompt.
//! The session page's map shows the threads a session came from and led to.

use askama::Template;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use compactd_core::ids::Id;
use serde::Deserialize;

use super::extract::{Form, Path};
use super::pages::Page;
use super::viewer::Viewer;
use super::views::{self, Chrome};
use crate::app::threads::map::{Linked, ThreadMap};
use compactd_core::session::time;

/// A session connected to the one shown.
#[derive(Debug, Clone)]
pub(super) struct LinkView {
    pub id: String,
    pub kind: &'static str,
    pub title: String,
    pub created_at: String,
}

/// The session page's map of threads.
#[derive(Debug, Clone, Default)]
pub(super) struct ThreadsView {
    pub parent: Option<LinkView>,
    pub parent_file: Option<String>,
    pub children: Vec<LinkView>,
}

fn link(linked: Linked) -> LinkView {
    LinkView {
        title: linked.title.unwrap_or_else(|| linked.id.clone()),
        id: linked.id,
        kind: linked.kind,
        created_at: time::epoch_ms_to_iso(linked.created_at_ms),
    }
}

pub(super) fn threads_view(map: ThreadMap) -> ThreadsView {
    ThreadsView {
        parent: map.parent.map(link),
        parent_file: map.parent_file,
        children: map.children.into_iter().map(link).collect(),
    }
}

pub(super) struct FileRow {
    pub path: String,
    pub why: String,
}

#[derive(Template)]
#[template(path = "console/handoff.html")]
pub(super) struct HandoffPage {
    pub chrome: Chrome,
    pub id: String,
    pub goal: String,
    pub prompt: String,
    pub files: Vec<FileRow>,
    pub left_out_files: Vec<String>,
    pub left_out_requests: usize,
    pub drafted_by: String,
}

impl HandoffPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct DraftForm {
    goal: String,
}

/// `POST /ui/sessions/{id}/handoff/draft`: the draft for the goal, to edit before starting.
pub(super) async fn draft(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
    Form(form): Form<DraftForm>,
) -> Page {
    let drafted = state
        .app
        .handoff_draft(&viewer.identity, &id, &form.goal, None)
        .await?;
    let draft = drafted.draft.into_inner();
    let page = HandoffPage {
        chrome: Chrome::of(&viewer),
        id: id.into_string(),
        goal: form.goal.trim().to_owned(),
        prompt: draft.prompt,
        files: draft
            .files
            .into_iter()
            .map(|f| FileRow {
                path: f.path,
                why: f.why,
            })
            .collect(),
        left_out_files: draft.left_out_files,
        left_out_requests: draft.left_out_requests,
        drafted_by: drafted.drafted_by,
    };
    Ok(views::render(StatusCode::OK, &page))
}

#[derive(Debug, Deserialize)]
pub(super) struct StartForm {
    prompt: String,
}

/// `POST /ui/sessions/{id}/handoff`: the new session, its first message the edited prompt.
pub(super) async fn start(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
    Form(form): Form<StartForm>,
) -> Page {
    // A browser's textarea sends CRLF line ends.
    let prompt = form.prompt.replace("\r\n", "\n");
    let uploaded = state
        .app
        .start_thread(&viewer.identity, &id, &prompt)
        .await?;
    let new = uploaded.record.session_id;
    Ok(Redirect::to(&format!("/ui/sessions/{new}?notice=handed-off")).into_response())
}
