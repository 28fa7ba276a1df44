//! The session page's view: the plan's bar, the tree of entries, the compaction history, the
//! pins — from what the application read.

use super::pages::title_and_cwd;
use super::viewer::Viewer;
use super::views::{self, *};
use crate::app::views::history::HistoryPage;
use crate::app::views::tree::{self as tree_view, SessionTree};
use compactd_core::compaction::CompactionSettings;

pub(super) fn session_page(
    viewer: &Viewer,
    tree: SessionTree,
    settings: &CompactionSettings,
    compactions: &HistoryPage,
    pins: Vec<compactd_store::PinRecord>,
    notice: Option<String>,
) -> SessionPage {
    let id = tree.record.session_id.clone();
    let (title, cwd) = title_and_cwd(&tree.record);
    let segments = segments(&tree);
    let plan = tree.plan.plan.as_ref().map(|plan| PlanBox {
        first_kept_entry_id: plan.first_kept_entry_id.clone(),
        split_turn: plan.is_split_turn,
        tokens_before: views::grouped(plan.tokens_before as i64),
        messages_to_summarize: plan.messages_to_summarize,
        turn_prefix_messages: plan.turn_prefix_messages,
        read_files: plan.read_files.len(),
        modified_files: plan.modified_files.len(),
    });
    let link_to = |page: usize| {
        format!(
            "/ui/sessions/{id}?keepRecentTokens={}&reserveTokens={}&page={}",
            settings.keep_recent_tokens,
            settings.reserve_tokens,
            page + 1
        )
    };
    let rows = tree.rows.iter().map(|row| row_view(&id, row)).collect();
    SessionPage {
        chrome: Chrome::of(viewer),
        title,
        cwd,
        size: views::size(tree.record.byte_size),
        entries: tree.entries,
        path_len: tree.path_len,
        branch_points: tree.branch_points,
        context_tokens: views::grouped(tree.record.context_tokens),
        keep_recent_tokens: settings.keep_recent_tokens,
        reserve_tokens: settings.reserve_tokens,
        plan,
        reason: tree.plan.reason.clone(),
        segments,
        rows,
        page: tree.page,
        pages: tree.pages,
        page_links: (0..tree.pages).map(|n| (n, link_to(n))).collect(),
        compactions_total: compactions.total,
        compactions: compactions
            .compactions
            .iter()
            .rev()
            .map(|c| compaction_row(c, &tree.path_compactions))
            .collect(),
        pins: pins
            .into_iter()
            .map(|p| PinRow {
                id: p.pin_id,
                text: p.text,
            })
            .collect(),
        notice,
        threads: Default::default(),
        id,
    }
}

/// The parts of the session's context as the plan would cut it, as widths of a bar.
fn segments(tree: &SessionTree) -> Vec<Segment> {
    let parts = &tree.part_tokens;
    let total = (parts.compacted + parts.summarized + parts.prefix + parts.kept).max(1);
    if tree.plan.plan.is_none() {
        return Vec::new();
    }
    [
        ("compacted", "behind an earlier summary", parts.compacted),
        ("summarized", "would be summarized", parts.summarized),
        ("prefix", "split turn's prefix", parts.prefix),
        ("kept", "would be kept", parts.kept),
    ]
    .into_iter()
    .filter(|(_, _, tokens)| *tokens > 0)
    .map(|(part, label, tokens)| Segment {
        part,
        label,
        tokens: views::grouped(tokens),
        width: tokens * 1000 / total,
    })
    .collect()
}

/// One entry of the tree as the page shows it.
fn row_view(id: &str, row: &tree_view::TreeRow) -> RowView {
    let part = row.part.map_or("", tree_view::Part::name);
    let mut classes = vec![format!("type-{}", row.entry_type)];
    classes.extend(row.on_path.then(|| "path".to_owned()));
    classes.extend(row.leaf.then(|| "leaf".to_owned()));
    classes.extend((!part.is_empty()).then(|| part.to_owned()));
    RowView {
        id: row.id.clone(),
        seq: row.seq,
        depth: row.depth.min(12),
        kind: match (&row.entry_type[..], &row.role) {
            ("message", Some(role)) => role.clone(),
            (kind, _) => kind.to_owned(),
        },
        tokens: row.tokens.map(views::grouped).unwrap_or_default(),
        classes: classes.join(" "),
        part,
        branches: row.branches,
        preview: row.preview.clone(),
        link: (row.entry_type == "compaction")
            .then(|| format!("/ui/sessions/{id}/compactions/{}", row.id)),
    }
}

/// One compaction of the session's history as the page lists it.
fn compaction_row(
    c: &crate::app::views::history::CompactionView,
    on_path: &std::collections::HashSet<String>,
) -> CompactionRow {
    CompactionRow {
        entry_id: c.entry_id.clone(),
        source: c.source.clone(),
        model: c.model.clone().unwrap_or_else(|| "—".into()),
        tokens_before: views::grouped(c.tokens_before),
        tokens_after: c
            .tokens_after
            .map(views::grouped)
            .unwrap_or_else(|| "—".into()),
        created_at: c.created_at.clone().unwrap_or_default(),
        on_path: on_path.contains(&c.entry_id),
    }
}
