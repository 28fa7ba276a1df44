//! The fleet page: a tenant's calls of the last day by model and outcome, and this replica's
//! counters, as bars and tables.

use axum::extract::State;
use axum::http::StatusCode;

use super::pages::Page;
use super::viewer::Viewer;
use super::views::{self, AgentRow, Bar, CallRow, Chrome, FleetPage, SeriesRow};
use crate::app::views::fleet;
use compactd_core::session::time;

/// `GET /ui/fleet`: calls over the last day by model and outcome; this replica's counters.
pub(super) async fn fleet(State(state): State<crate::http::AppState>, viewer: Viewer) -> Page {
    let fleet = state.app.fleet(&viewer.identity).await?;
    Ok(views::render(StatusCode::OK, &fleet_page(&viewer, &fleet)))
}

fn fleet_page(viewer: &Viewer, fleet: &fleet::Fleet) -> FleetPage {
    let bars = bars(fleet);
    let r = &fleet.replica;
    let whole = |v: f64| views::grouped(v as i64);
    FleetPage {
        chrome: Chrome::of(viewer),
        bars,
        series: fleet
            .series
            .iter()
            .enumerate()
            .map(|(index, s)| SeriesRow {
                index,
                name: s.name.clone(),
                calls: s.calls,
                input_tokens: views::grouped(s.input_tokens),
                output_tokens: views::grouped(s.output_tokens),
                latency_p50: format!("{:.2} s", s.latency_p50_ms as f64 / 1000.0),
            })
            .collect(),
        agents: fleet
            .agents
            .iter()
            .map(|a| AgentRow {
                agent: or_dash(&a.agent),
                wire: or_dash(&a.wire),
                compactions: views::grouped(a.compactions as i64),
                tokens_before: views::grouped(a.tokens_before),
                tokens_after: views::grouped(a.tokens_after),
                fidelity: fidelity(Some(a.anchors), Some(a.anchors_kept)),
            })
            .collect(),
        recent: fleet.recent.iter().map(call_row).collect(),
        totals: totals(&fleet.totals),
        replica: vec![
            ("Compactions", whole(r.compactions)),
            ("Tokens saved", whole(r.tokens_saved)),
            ("Fallbacks to another model", whole(r.fallbacks)),
            ("Secrets redacted", whole(r.redactions)),
            ("Summary cache hits", whole(r.cache_hits)),
            ("Loops caught", whole(r.loops)),
            ("Prepared summaries used", whole(r.prepared_used)),
            ("Prepared summaries wasted", whole(r.prepared_wasted)),
        ],
        calls_read: fleet.calls_read,
    }
}

/// The calls of each hour, stacked by series, as heights of a bar chart.
fn bars(fleet: &fleet::Fleet) -> Vec<Bar> {
    let index_of = |name: &str| {
        fleet
            .series
            .iter()
            .position(|s| s.name == name)
            .unwrap_or(0)
    };
    let tallest = fleet
        .buckets
        .iter()
        .map(|b| b.total)
        .max()
        .unwrap_or(0)
        .max(1);
    fleet
        .buckets
        .iter()
        .map(|bucket| Bar {
            label: time::epoch_ms_to_iso(bucket.start_ms)[11..13].to_owned(),
            total: bucket.total,
            stack: bucket
                .by_series
                .iter()
                .map(|(name, &calls)| (index_of(name), calls, calls * 1000 / tallest))
                .collect(),
        })
        .collect()
}

/// One recent call as the page lists it.
fn call_row(c: &compactd_store::CallRecord) -> CallRow {
    CallRow {
        at: time::epoch_ms_to_iso(c.created_at_ms)[..19].replace('T', " "),
        agent: or_dash(&c.agent),
        wire: or_dash(&c.wire),
        purpose: c.purpose.clone(),
        model: c.model.clone().unwrap_or_else(|| "—".into()),
        outcome: c.outcome.clone(),
        tokens: format!(
            "{} → {}",
            views::grouped(c.tokens_before),
            views::grouped(c.tokens_after)
        ),
        fidelity: fidelity(c.anchors, c.anchors_kept),
        latency: format!("{:.2} s", c.latency_ms as f64 / 1000.0),
    }
}

/// The fleet's totals over the calls read, as labelled figures.
fn totals(t: &fleet::CallTotals) -> Vec<(&'static str, String)> {
    vec![
        ("Calls", views::grouped(t.calls as i64)),
        ("Failed", views::grouped(t.failed as i64)),
        ("Compactions served", views::grouped(t.compactions as i64)),
        ("Tokens saved", views::grouped(t.tokens_saved)),
        (
            "Session compactions",
            views::grouped(t.session_compactions as i64),
        ),
        (
            "Answered from the cache",
            views::grouped(t.cache_hits as i64),
        ),
        (
            "Answered by the extractive summarizer",
            views::grouped(t.extractive as i64),
        ),
        ("Loops caught", views::grouped(t.loops as i64)),
        ("Prepared ahead", views::grouped(t.prepared as i64)),
        (
            "Tokens spent preparing ahead",
            views::grouped(t.prepared_tokens),
        ),
        (
            "Over the daily budget",
            views::grouped(t.budget_exhausted as i64),
        ),
        ("Input tokens", views::grouped(t.input_tokens)),
        ("Output tokens", views::grouped(t.output_tokens)),
    ]
}

/// An empty name (a call logged before compactd recorded it) as a dash.
fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        text.to_owned()
    }
}

/// `kept/anchors` of the fidelity gate, `—` when it checked nothing.
fn fidelity(anchors: Option<i64>, kept: Option<i64>) -> String {
    match (anchors, kept) {
        (Some(anchors), Some(kept)) if anchors > 0 => format!("{kept}/{anchors}"),
        _ => "—".to_owned(),
    }
}
