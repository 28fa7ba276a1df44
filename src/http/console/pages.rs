//! The console's pages and actions. Like the API's handlers they are thin: each reads the viewer
//! and the request, calls the application layer, and turns the result into a page (or, for an
//! action, a redirect to the page that shows its result).

use axum::extract::State;
use compactd_core::ids::Id;

use super::extract::{Multipart, Path, Query};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;

use super::error::PageError;
use super::extract::Form;
use super::markdown;
use super::viewer::Viewer;
use super::views::{self, *};
use crate::app::AppError;
use crate::app::compaction::Compacted;
use crate::app::compaction::compactor::CompactionRequest;
use crate::app::compaction::plans::settings;
use crate::app::views::history::HistoryRange;
use compactd_core::compaction::CompactionSettings;
use compactd_core::session::time;
use compactd_store::SessionRecord;

pub(super) type Page = Result<Response, PageError>;

const SESSIONS_PER_PAGE: i64 = 50;

#[derive(Debug, Deserialize)]
pub(super) struct ListQuery {
    q: Option<String>,
    cursor: Option<String>,
}

/// `GET /ui`: the tenant's sessions, searchable by id or cwd.
pub(super) async fn sessions(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Query(query): Query<ListQuery>,
) -> Page {
    let search = query.q.unwrap_or_default().trim().to_owned();
    let page = state
        .app
        .sessions(
            &viewer.identity,
            SESSIONS_PER_PAGE,
            query.cursor.as_deref(),
            Some(&search),
        )
        .await?;
    let next = page.next_cursor.map(|cursor| {
        let mut link = form_urlencoded::Serializer::new(String::new());
        if !search.is_empty() {
            link.append_pair("q", &search);
        }
        link.append_pair("cursor", &cursor);
        format!("/ui?{}", link.finish())
    });
    let sessions = page
        .sessions
        .iter()
        .map(|record| {
            let (title, cwd) = title_and_cwd(record);
            SessionRow {
                id: record.session_id.clone(),
                title,
                cwd,
                size: views::size(record.byte_size),
                entries: record.entry_count,
                context_tokens: views::grouped(record.context_tokens),
                compactions: record.compaction_count,
                updated_at: time::epoch_ms_to_iso(record.updated_at_ms),
            }
        })
        .collect();
    Ok(views::render(
        StatusCode::OK,
        &SessionsPage {
            chrome: Chrome::of(&viewer),
            search,
            sessions,
            next,
        },
    ))
}

/// `POST /ui/sessions`: a session file from the upload form.
pub(super) async fn upload(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Multipart(mut form): Multipart,
) -> Page {
    let mut file = None;
    let mut lenient = false;
    while let Some(field) = form
        .next_field()
        .await
        .map_err(|e| PageError::bad_request(format!("the upload form: {}", e.body_text())))?
    {
        match field.name() {
            Some("file") => {
                file = Some(field.bytes().await.map_err(|e| {
                    PageError::bad_request(format!("the uploaded file: {}", e.body_text()))
                })?)
            }
            Some("lenient") => lenient = true,
            _ => {}
        }
    }
    let file = file
        .filter(|bytes| !bytes.is_empty())
        .ok_or_else(|| PageError::bad_request("file: choose a session file (.jsonl) to upload"))?;
    let uploaded = state.app.upload(&viewer.identity, file, lenient).await?;
    Ok(Redirect::to(&format!("/ui/sessions/{}", uploaded.record.session_id)).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionQuery {
    keep_recent_tokens: Option<String>,
    reserve_tokens: Option<String>,
    page: Option<String>,
    notice: Option<String>,
}

/// A number from a form or a query: absent or empty is `None`; anything else must read.
fn number(name: &str, value: Option<&str>) -> Result<Option<i64>, PageError> {
    match value.map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| {
            PageError::from(AppError::invalid(
                name,
                format!("{name} must be a whole number, not {v:?}"),
            ))
        }),
    }
}

fn plan_settings(
    keep: Option<&str>,
    reserve: Option<&str>,
) -> Result<CompactionSettings, PageError> {
    Ok(settings(
        number("keepRecentTokens", keep)?,
        number("reserveTokens", reserve)?,
    )?)
}

/// Compactions a session page lists (the latest).
const COMPACTIONS_SHOWN: usize = 50;

/// `GET /ui/sessions/{id}`: the tree, the next plan for the chosen settings, compactions, pins.
pub(super) async fn session(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
    Query(query): Query<SessionQuery>,
) -> Page {
    let settings = plan_settings(
        query.keep_recent_tokens.as_deref(),
        query.reserve_tokens.as_deref(),
    )?;
    let page = number("page", query.page.as_deref())?.map(|p| p.max(1) as usize - 1);
    let who = &viewer.identity;
    let tree = state.app.session_tree(who, &id, &settings, page).await?;
    // The latest compactions; the API pages through all of them.
    let compactions = state
        .app
        .compaction_history(
            who,
            &id,
            HistoryRange {
                after: None,
                limit: COMPACTIONS_SHOWN,
                newest: true,
            },
        )
        .await?;
    let pins = state.app.pins(who, &id).await?;
    let threads = super::handoff::threads_view(state.app.thread_map(who, &id).await?);
    let notice = query.notice.as_deref().and_then(views::notice);
    let mut page =
        super::session_page::session_page(&viewer, tree, &settings, &compactions, pins, notice);
    page.threads = threads;
    Ok(views::render(StatusCode::OK, &page))
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactForm {
    keep_recent_tokens: Option<String>,
    reserve_tokens: Option<String>,
    custom_instructions: Option<String>,
}

/// `POST /ui/sessions/{id}/compact`: compacts now and shows the compaction.
pub(super) async fn compact(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
    Form(form): Form<CompactForm>,
) -> Page {
    let settings = plan_settings(
        form.keep_recent_tokens.as_deref(),
        form.reserve_tokens.as_deref(),
    )?;
    let request = CompactionRequest {
        leaf_id: None,
        settings,
        custom_instructions: form
            .custom_instructions
            .map(|text| text.trim().to_owned())
            .filter(|text| !text.is_empty()),
        ..Default::default()
    };
    let entry_id = match state.app.compact(&viewer.identity, &id, request).await {
        Ok(Compacted::Created { outcome, .. }) => outcome.entry.id.clone(),
        Ok(Compacted::Existing { entry, .. }) => entry
            .get("id")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned(),
        Err(AppError::Nothing(..)) => {
            return Ok(Redirect::to(&format!(
                "/ui/sessions/{id}?keepRecentTokens={}&reserveTokens={}&notice=nothing",
                settings.keep_recent_tokens, settings.reserve_tokens
            ))
            .into_response());
        }
        Err(error) => return Err(error.into()),
    };
    Ok(Redirect::to(&format!("/ui/sessions/{id}/compactions/{entry_id}")).into_response())
}

#[derive(Debug, Deserialize)]
pub(super) struct PinForm {
    text: String,
}

/// `POST /ui/sessions/{id}/pins`.
pub(super) async fn add_pin(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
    Form(form): Form<PinForm>,
) -> Page {
    state.app.add_pin(&viewer.identity, &id, &form.text).await?;
    Ok(Redirect::to(&format!("/ui/sessions/{id}?notice=pinned#pins")).into_response())
}

/// `POST /ui/sessions/{id}/pins/{pin}/delete` (forms cannot send DELETE).
pub(super) async fn delete_pin(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path((id, pin)): Path<(Id, Id)>,
) -> Page {
    state.app.delete_pin(&viewer.identity, &id, &pin).await?;
    Ok(Redirect::to(&format!("/ui/sessions/{id}?notice=unpinned#pins")).into_response())
}

/// `GET /ui/sessions/{id}/download`: the session file as stored.
pub(super) async fn download(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path(id): Path<Id>,
) -> Page {
    let file = state.app.session_file(&viewer.identity, &id).await?;
    // Session ids are UUIDs compactd made: safe in a header as they are.
    let disposition = format!("attachment; filename=\"{id}.jsonl\"");
    Ok((
        [
            (header::CONTENT_TYPE, "application/x-ndjson".to_owned()),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        file,
    )
        .into_response())
}

/// `GET /ui/sessions/{id}/compactions/{entry}`: the summary, its diff against the previous one
/// of its path, the fidelity report.
pub(super) async fn compaction(
    State(state): State<crate::http::AppState>,
    viewer: Viewer,
    Path((id, entry_id)): Path<(Id, String)>,
) -> Page {
    let (view, previous) = state
        .app
        .compaction_detail(&viewer.identity, &id, &entry_id)
        .await?;
    let view = &view;
    let previous = previous.as_ref();
    let summary = view.summary.as_deref().unwrap_or_default();
    let diff = previous
        .map(|p| markdown::diff(p.summary.as_deref().unwrap_or_default(), summary))
        .unwrap_or_default();
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let page = CompactionPage {
        chrome: Chrome::of(&viewer),
        session_id: id.to_string(),
        entry_id: view.entry_id.clone(),
        source: view.source.clone(),
        model: view.model.clone().unwrap_or_else(|| "— (uploaded)".into()),
        latency: view
            .latency_ms
            .map(|ms| format!("{:.1} s", ms as f64 / 1000.0))
            .unwrap_or_else(|| "—".into()),
        tokens_before: views::grouped(view.tokens_before),
        tokens_after: view
            .tokens_after
            .map(views::grouped)
            .unwrap_or_else(|| "—".into()),
        tokens_saved: view
            .tokens_saved
            .map(views::grouped)
            .unwrap_or_else(|| "—".into()),
        cached: view.cached.map(yes_no).unwrap_or_else(|| "—".into()),
        loop_detected: view.loop_detected.unwrap_or(false),
        created_at: view.created_at.clone().unwrap_or_default(),
        summary_html: markdown::to_html(summary),
        previous_id: previous.map(|p| p.entry_id.clone()),
        added: diff.iter().filter(|l| l.change == "added").count(),
        removed: diff.iter().filter(|l| l.change == "removed").count(),
        diff,
        fidelity: view.fidelity.as_ref().map(|f| FidelityView {
            anchors: f.anchors,
            kept: f.kept,
            repaired: f.repaired,
            appended: f.appended,
            repair_call: f.repair_call,
            rules: f.rules.clone(),
        }),
        forgotten: view
            .forgotten
            .iter()
            .flatten()
            .map(|m| {
                let kind = serde_json::to_value(m.kind)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                (kind, m.text.clone())
            })
            .collect(),
    };
    Ok(views::render(StatusCode::OK, &page))
}

/// A session's title and working directory, from its header: the cwd's last component names it.
pub(super) fn title_and_cwd(record: &SessionRecord) -> (String, String) {
    let cwd = compactd_core::js_json::from_str::<serde_json::Value>(&record.header)
        .ok()
        .and_then(|h| h.get("cwd").and_then(|c| c.as_str()).map(str::to_owned))
        .unwrap_or_default();
    let title = cwd
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .unwrap_or_else(|| {
            format!(
                "session {}",
                &record.session_id[..8.min(record.session_id.len())]
            )
        });
    (title, cwd)
}
