//! The console's pages as data for their templates (`templates/console/`, compiled into the
//! binary by askama: a template that does not match its struct does not build), and the
//! formatting they share.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::markdown::DiffLine;

/// What every page's frame shows: whether a key is in use, and for which tenant.
#[derive(Debug, Clone, Default)]
pub(super) struct Chrome {
    pub signed_in: bool,
    pub tenant: String,
}

impl Chrome {
    pub(super) fn of(viewer: &super::viewer::Viewer) -> Chrome {
        Chrome {
            signed_in: viewer.signed_in,
            tenant: viewer.identity.tenant.clone(),
        }
    }
}

/// `html` with every control character and bidirectional override — which sessions carry in
/// tool output (terminal escapes, NUL, a cut emoji's replacement is not one) and which a browser
/// would act on or hide — written as the text `\u{1b}`. The templates hold none but newlines
/// and tabs, so whatever else is there came from a session.
fn visible_controls(html: String) -> String {
    let hidden = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    };
    if !html.contains(hidden) {
        return html;
    }
    let mut out = String::with_capacity(html.len() + 16);
    for c in html.chars() {
        if hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// A page as a response. Pages are never cached: they show a tenant's data.
pub(super) fn render(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(html) => {
            let mut response = (status, visible_controls(html)).into_response();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            );
            response
        }
        Err(error) => {
            tracing::error!(%error, "a console page did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "internal error").into_response()
        }
    }
}

#[derive(Template)]
#[template(path = "console/login.html")]
pub(super) struct LoginPage {
    pub message: Option<&'static str>,
    pub anonymous: bool,
}

impl LoginPage {
    fn chrome(&self) -> Chrome {
        Chrome::default()
    }
}

#[derive(Template)]
#[template(path = "console/error.html")]
pub(super) struct ErrorPage {
    pub status: u16,
    pub reason: &'static str,
    pub message: String,
}

impl ErrorPage {
    fn chrome(&self) -> Chrome {
        Chrome::default()
    }
}

#[derive(Debug, Clone)]
pub(super) struct SessionRow {
    pub id: String,
    pub title: String,
    pub cwd: String,
    pub size: String,
    pub entries: i64,
    pub context_tokens: String,
    pub compactions: i64,
    pub updated_at: String,
}

#[derive(Template)]
#[template(path = "console/sessions.html")]
pub(super) struct SessionsPage {
    pub chrome: Chrome,
    pub search: String,
    pub sessions: Vec<SessionRow>,
    /// The link to the next page, if there is one.
    pub next: Option<String>,
}

impl SessionsPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

/// One entry of the tree as drawn.
#[derive(Debug, Clone)]
pub(super) struct RowView {
    pub id: String,
    pub seq: usize,
    pub depth: usize,
    pub kind: String,
    pub tokens: String,
    /// CSS classes: `path`, `leaf`, the plan part.
    pub classes: String,
    pub part: &'static str,
    pub branches: usize,
    pub preview: String,
    /// The compaction page of a compaction entry.
    pub link: Option<String>,
}

/// A part of the plan as a share of the path's tokens.
#[derive(Debug, Clone)]
pub(super) struct Segment {
    pub part: &'static str,
    pub label: &'static str,
    pub tokens: String,
    /// Width in per mille of the bar.
    pub width: i64,
}

#[derive(Debug, Clone)]
pub(super) struct PlanBox {
    pub first_kept_entry_id: String,
    pub split_turn: bool,
    pub tokens_before: String,
    pub messages_to_summarize: usize,
    pub turn_prefix_messages: usize,
    pub read_files: usize,
    pub modified_files: usize,
}

#[derive(Debug, Clone)]
pub(super) struct CompactionRow {
    pub entry_id: String,
    pub source: String,
    pub model: String,
    pub tokens_before: String,
    pub tokens_after: String,
    pub created_at: String,
    pub on_path: bool,
}

#[derive(Debug, Clone)]
pub(super) struct PinRow {
    pub id: String,
    pub text: String,
}

/// What a session page says after an action that redirected to it (`?notice=`).
pub(super) fn notice(code: &str) -> Option<String> {
    let text = match code {
        "nothing" => "Nothing to compact with these settings.",
        "pinned" => "Pinned: the next compaction carries it.",
        "unpinned" => "Unpinned.",
        "handed-off" => {
            "Handed off: this new thread starts with the prompt below; download it to open in pi."
        }
        _ => return None,
    };
    Some(text.to_owned())
}

#[derive(Template)]
#[template(path = "console/session.html")]
pub(super) struct SessionPage {
    pub chrome: Chrome,
    pub id: String,
    pub title: String,
    pub cwd: String,
    pub size: String,
    pub entries: usize,
    pub path_len: usize,
    pub branch_points: usize,
    pub context_tokens: String,
    pub keep_recent_tokens: u64,
    pub reserve_tokens: u64,
    pub plan: Option<PlanBox>,
    pub reason: Option<String>,
    pub segments: Vec<Segment>,
    pub rows: Vec<RowView>,
    pub page: usize,
    pub pages: usize,
    /// Links to the other pages of the tree (`page`, `href`).
    pub page_links: Vec<(usize, String)>,
    /// The latest compactions, newest first.
    pub compactions: Vec<CompactionRow>,
    /// Compactions in the session.
    pub compactions_total: usize,
    pub pins: Vec<PinRow>,
    pub notice: Option<String>,
    /// The threads it came from and led to (handoffs, forks).
    pub threads: super::handoff::ThreadsView,
}

impl SessionPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

#[derive(Debug, Clone)]
pub(super) struct FidelityView {
    pub anchors: usize,
    pub kept: usize,
    pub repaired: usize,
    pub appended: usize,
    pub repair_call: bool,
    pub rules: Vec<String>,
}

#[derive(Template)]
#[template(path = "console/compaction.html")]
pub(super) struct CompactionPage {
    pub chrome: Chrome,
    pub session_id: String,
    pub entry_id: String,
    pub source: String,
    pub model: String,
    pub latency: String,
    pub tokens_before: String,
    pub tokens_after: String,
    pub tokens_saved: String,
    pub cached: String,
    pub loop_detected: bool,
    pub created_at: String,
    pub summary_html: String,
    pub previous_id: Option<String>,
    pub diff: Vec<DiffLine>,
    pub added: usize,
    pub removed: usize,
    pub fidelity: Option<FidelityView>,
    /// Anchors the summary does not keep: (kind, text).
    pub forgotten: Vec<(String, String)>,
}

impl CompactionPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

/// One hour of calls: a stacked bar.
#[derive(Debug, Clone)]
pub(super) struct Bar {
    pub label: String,
    pub total: u64,
    /// (series index, calls, height in per mille of the tallest bar).
    pub stack: Vec<(usize, u64, u64)>,
}

#[derive(Debug, Clone)]
pub(super) struct SeriesRow {
    pub index: usize,
    pub name: String,
    pub calls: u64,
    pub input_tokens: String,
    pub output_tokens: String,
    pub latency_p50: String,
}

/// The compactions one agent had served on one wire.
#[derive(Debug, Clone)]
pub(super) struct AgentRow {
    pub agent: String,
    pub wire: String,
    pub compactions: String,
    pub tokens_before: String,
    pub tokens_after: String,
    /// Anchors kept of anchors checked (`—` when none were).
    pub fidelity: String,
}

/// One of the newest calls.
#[derive(Debug, Clone)]
pub(super) struct CallRow {
    pub at: String,
    pub agent: String,
    pub wire: String,
    pub purpose: String,
    pub model: String,
    pub outcome: String,
    pub tokens: String,
    pub fidelity: String,
    pub latency: String,
}

#[derive(Template)]
#[template(path = "console/fleet.html")]
pub(super) struct FleetPage {
    pub chrome: Chrome,
    pub bars: Vec<Bar>,
    pub series: Vec<SeriesRow>,
    pub agents: Vec<AgentRow>,
    pub recent: Vec<CallRow>,
    /// (label, value) pairs of the tenant's call log.
    pub totals: Vec<(&'static str, String)>,
    /// (label, value) pairs of this replica's counters.
    pub replica: Vec<(&'static str, String)>,
    pub calls_read: usize,
}

impl FleetPage {
    fn chrome(&self) -> Chrome {
        self.chrome.clone()
    }
}

/// `1234567` as `1,234,567`.
pub(super) fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

/// A byte count as people read it.
pub(super) fn size(bytes: i64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MB", b as f64 / (1u64 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_shown_as_escapes() {
        let html = "<p>a\u{1b}[31mred\u{0}\u{7f}\u{85}\u{202e}txt.exe</p>\n\t".to_owned();
        assert_eq!(
            super::visible_controls(html),
            "<p>a\\u{1b}[31mred\\u{0}\\u{7f}\\u{85}\\u{202e}txt.exe</p>\n\t"
        );
    }

    use super::*;

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(-1234567), "-1,234,567");
        assert_eq!(size(512), "512 B");
        assert_eq!(size(2048), "2.0 KB");
        assert_eq!(size(20 * 1024 * 1024 + 300_000), "20.3 MB");
    }
}
