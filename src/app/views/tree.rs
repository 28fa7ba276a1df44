//! A stored session as a tree, for the console: every entry placed by its facts (no line parsed
//! but those of the page shown), the active path marked, and the next compaction's plan drawn on
//! it — what is already behind a summary, what would be summarized, the split turn's prefix and
//! what would be kept.

use compactd_core::ids::Id;
use compactd_core::session::EntryType;
use std::collections::HashMap;

use crate::access::Identity;
use crate::app::sessions::index::Snapshot;
use crate::app::{App, AppError};
use compactd_core::compaction::{CompactionSettings, PlanOutcome};
use compactd_store::SessionRecord;

/// Rows of the tree on one page: a 20 MB session has tens of thousands of entries, and a page
/// of them is what a person reads at once.
pub(crate) const PAGE_ROWS: usize = 250;

/// Where an entry of the active path falls in the next compaction's plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    /// Before the last compaction's boundary: the context holds its summary instead.
    Compacted,
    /// Would be summarized into the history summary.
    Summarized,
    /// The split turn's prefix, summarized on its own.
    TurnPrefix,
    /// Would be kept verbatim.
    Kept,
}

impl Part {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Part::Compacted => "compacted",
            Part::Summarized => "summarized",
            Part::TurnPrefix => "prefix",
            Part::Kept => "kept",
        }
    }
}

/// One entry as the tree shows it.
#[derive(Debug, Clone)]
pub(crate) struct TreeRow {
    pub(crate) seq: usize,
    pub(crate) id: String,
    /// Branches off the line of their parent are drawn one step in.
    pub(crate) depth: usize,
    pub(crate) entry_type: String,
    pub(crate) role: Option<String>,
    pub(crate) tokens: Option<i64>,
    pub(crate) on_path: bool,
    pub(crate) leaf: bool,
    /// Children beyond the first: the branches that start here.
    pub(crate) branches: usize,
    pub(crate) part: Option<Part>,
    /// The start of the entry's text (for the rows of the page shown).
    pub(crate) preview: String,
}

/// Token estimates of the plan's parts (of the `message` entries in each).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PartTokens {
    pub(crate) compacted: i64,
    pub(crate) summarized: i64,
    pub(crate) prefix: i64,
    pub(crate) kept: i64,
}

/// A page of a session's tree with the plan drawn on it.
#[derive(Debug)]
pub(crate) struct SessionTree {
    pub(crate) record: SessionRecord,
    pub(crate) rows: Vec<TreeRow>,
    pub(crate) page: usize,
    pub(crate) pages: usize,
    pub(crate) entries: usize,
    pub(crate) path_len: usize,
    /// Entries where the tree branches.
    pub(crate) branch_points: usize,
    pub(crate) plan: PlanOutcome,
    pub(crate) part_tokens: PartTokens,
    /// The compactions on the active path, by entry id.
    pub(crate) path_compactions: std::collections::HashSet<String>,
}

impl App {
    /// `who`'s session as a tree, one page of it (the page holding the planned cut, or the leaf,
    /// when `page` is `None`), with the plan for `settings`.
    pub(crate) async fn session_tree(
        &self,
        who: &Identity,
        id: &Id,
        settings: &CompactionSettings,
        page: Option<usize>,
    ) -> Result<SessionTree, AppError> {
        let plan = self.plan(who, id, settings, None, None).await?;
        let record = self.session(who, id).await?;
        let view = self.index(&record).await?;
        // Laying out every entry of the session is linear in its size: off the runtime.
        let (laid, plan) = {
            let view = view.clone();
            crate::cpu::off_runtime(move || {
                let snapshot = view.read();
                (layout(&snapshot, view.count(), &plan, page), plan)
            })
            .await?
        };
        let mut tree = laid;
        if let (Some(first), Some(last)) = (tree.rows.first(), tree.rows.last()) {
            let (from, to) = (
                tree.rows.iter().map(|r| r.seq).min().unwrap_or(first.seq),
                tree.rows.iter().map(|r| r.seq).max().unwrap_or(last.seq),
            );
            // A page is mostly one stretch of the file; one far-off branch would make the range
            // large, and then previews are left out rather than reading much of the session.
            if to - from < PAGE_ROWS * 4 {
                let lines: HashMap<i64, String> = self
                    .store
                    .entry_lines(id, from as i64, to as i64)
                    .await?
                    .into_iter()
                    .collect();
                let redactor = self.pipeline.redactor();
                for row in &mut tree.rows {
                    if let Some(line) = lines.get(&(row.seq as i64)) {
                        row.preview = crate::app::views::preview::of_line(line, redactor);
                    }
                }
            }
        }
        Ok(SessionTree {
            record,
            rows: tree.rows,
            page: tree.page,
            pages: tree.pages,
            entries: view.count(),
            path_len: tree.path_len,
            branch_points: tree.branch_points,
            plan,
            part_tokens: tree.part_tokens,
            path_compactions: tree.path_compactions,
        })
    }
}

struct Layout {
    rows: Vec<TreeRow>,
    page: usize,
    pages: usize,
    path_len: usize,
    branch_points: usize,
    part_tokens: PartTokens,
    path_compactions: std::collections::HashSet<String>,
}

/// Places every entry: depth-first from the roots, the active path's child first, so that the
/// active path reads as one line and branches hang off it one step in.
fn layout(
    snapshot: &Snapshot<'_>,
    count: usize,
    plan: &PlanOutcome,
    page: Option<usize>,
) -> Layout {
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut roots = Vec::new();
    for seq in 0..count {
        match snapshot.fact(seq).parent_seq {
            Some(parent) if (parent as usize) < count => children[parent as usize].push(seq),
            _ => roots.push(seq),
        }
    }
    let path = count
        .checked_sub(1)
        .map(|l| snapshot.path(l))
        .unwrap_or_default();
    let mut path_index = vec![None; count];
    for (i, &seq) in path.iter().enumerate() {
        path_index[seq] = Some(i);
    }
    let parts = plan_parts(snapshot, &path, plan);
    let mut part_tokens = PartTokens::default();
    for (i, &seq) in path.iter().enumerate() {
        let tokens = snapshot.fact(seq).tokens.unwrap_or(0);
        match parts(i) {
            Some(Part::Compacted) => part_tokens.compacted += tokens,
            Some(Part::Summarized) => part_tokens.summarized += tokens,
            Some(Part::TurnPrefix) => part_tokens.prefix += tokens,
            Some(Part::Kept) => part_tokens.kept += tokens,
            None => {}
        }
    }

    // The order and depth of every entry (cheap: no text), then the rows of one page.
    let mut order: Vec<(usize, usize)> = Vec::with_capacity(count);
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((seq, depth)) = stack.pop() {
        order.push((seq, depth));
        let mut kids = children[seq].clone();
        if let Some(on) = kids.iter().position(|&k| path_index[k].is_some()) {
            let child = kids.remove(on);
            kids.insert(0, child);
        }
        for (n, &kid) in kids.iter().enumerate().rev() {
            stack.push((kid, if n == 0 { depth } else { depth + 1 }));
        }
    }
    let pages = order.len().div_ceil(PAGE_ROWS).max(1);
    // By default the page with the planned cut, else the leaf's.
    let focus = plan
        .plan
        .as_ref()
        .and_then(|p| path.get(p.first_kept_path_index))
        .or(path.last())
        .copied();
    let page = page.unwrap_or_else(|| {
        focus
            .and_then(|f| order.iter().position(|&(seq, _)| seq == f))
            .map_or(0, |row| row / PAGE_ROWS)
    });
    let page = page.min(pages - 1);
    let leaf = path.last().copied();
    let rows = order
        .iter()
        .skip(page * PAGE_ROWS)
        .take(PAGE_ROWS)
        .map(|&(seq, depth)| {
            let fact = snapshot.fact(seq);
            TreeRow {
                seq,
                id: fact.entry_id.clone(),
                depth,
                entry_type: fact.entry_type.to_string(),
                role: fact.role.clone(),
                tokens: fact.tokens,
                on_path: path_index[seq].is_some(),
                leaf: Some(seq) == leaf,
                branches: children[seq].len().saturating_sub(1),
                part: path_index[seq].and_then(&parts),
                preview: String::new(),
            }
        })
        .collect();
    Layout {
        rows,
        page,
        pages,
        path_len: path.len(),
        branch_points: children.iter().filter(|c| c.len() > 1).count(),
        part_tokens,
        path_compactions: path
            .iter()
            .map(|&seq| snapshot.fact(seq))
            .filter(|fact| fact.entry_type == EntryType::Compaction)
            .map(|fact| fact.entry_id.clone())
            .collect(),
    }
}

/// The part of the plan each path index falls in. The boundary is where the planner starts:
/// the last compaction's first kept entry when it lies on the path before it, else the entry
/// after that compaction, else the root.
fn plan_parts(
    snapshot: &Snapshot<'_>,
    path: &[usize],
    outcome: &PlanOutcome,
) -> impl Fn(usize) -> Option<Part> + use<> {
    let previous = path
        .iter()
        .rposition(|&seq| snapshot.fact(seq).entry_type == EntryType::Compaction);
    let boundary = previous.map_or(0, |prev| {
        let first_kept = snapshot.fact(path[prev]).first_kept_id.as_deref();
        path[..prev]
            .iter()
            .position(|&seq| Some(snapshot.fact(seq).entry_id.as_str()) == first_kept)
            .unwrap_or(prev + 1)
    });
    let cut = outcome.plan.as_ref().map(|plan| {
        let first_kept = plan.first_kept_path_index;
        let history_end = plan.turn_start_path_index.unwrap_or(first_kept);
        (history_end, first_kept)
    });
    move |i| match cut {
        _ if i < boundary => Some(Part::Compacted),
        None => None,
        Some((history_end, _)) if i < history_end => Some(Part::Summarized),
        Some((_, first_kept)) if i < first_kept => Some(Part::TurnPrefix),
        Some(_) => Some(Part::Kept),
    }
}
