//! The history of a stored session's compactions: every compaction entry on record, the ones
//! compactd wrote (with model, usage, savings and fidelity) and the ones that came with an
//! upload, each with the compaction before it on its path (the summary it replaced).
//!
//! Linear in what is shown: the compactions and their predecessors are found on the session's
//! facts in one pass (no line read), then only the page's lines and records are read, in one
//! query each. A session compacted 60,000 times answers a page as fast as one compacted twice.

use compactd_core::ids::Id;
use compactd_core::session::EntryType;
use serde::Serialize;

use crate::access::Identity;
use crate::app::compaction::UsageView;
use crate::app::{App, AppError};
use compactd_core::fidelity::{Missing, Report};
use compactd_core::session::{EntryKind, Message, time};
use compactd_store::CompactionRecord;

/// Most compactions a page of the history holds.
pub(crate) const MAX_HISTORY_PAGE: usize = 1000;

/// A compaction on record: one compactd wrote (with model, usage and savings) or one that came
/// with the upload.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompactionView {
    pub(crate) entry_id: String,
    /// `compactd` or `upload`.
    pub(crate) source: String,
    /// The leaf it was made from (its parent).
    pub(crate) leaf_id: Option<String>,
    pub(crate) first_kept_entry_id: Option<String>,
    /// The compaction before it on its path: the summary this one replaced.
    pub(crate) previous_entry_id: Option<String>,
    pub(crate) summary: Option<String>,
    /// The model(s) that wrote it; `null` for uploaded ones.
    pub(crate) model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) usage: Option<UsageView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) latency_ms: Option<i64>,
    pub(crate) tokens_before: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_after: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tokens_saved: Option<i64>,
    pub(crate) created_at: Option<String>,
    /// What the fidelity gate found and did (compactions compactd wrote).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<crate::openapi::Report>)]
    pub(crate) fidelity: Option<Report>,
    /// The anchors of the replaced history this summary does not keep: what the agent will no
    /// longer know.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<crate::openapi::Missing>>)]
    pub(crate) forgotten: Option<Vec<Missing>>,
    /// Flagged as a compaction loop (compactions compactd wrote).
    #[serde(rename = "loop", skip_serializing_if = "Option::is_none")]
    pub(crate) loop_detected: Option<bool>,
    /// Every summary came from the summary cache (compactions compactd wrote).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cached: Option<bool>,
}

/// Which compactions of the history to show.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HistoryRange {
    /// Oldest first after this cursor (a position in the session, from the previous page's
    /// `next_cursor`); `None` from the start.
    pub(crate) after: Option<usize>,
    /// At most this many (1 to [`MAX_HISTORY_PAGE`]).
    pub(crate) limit: usize,
    /// The newest `limit` instead (the console shows the latest first); `after` is ignored.
    pub(crate) newest: bool,
}

/// A page of the history, oldest first.
#[derive(Debug)]
pub(crate) struct HistoryPage {
    pub(crate) compactions: Vec<CompactionView>,
    /// Where the next page starts, if there is one.
    pub(crate) next_cursor: Option<String>,
    /// Compactions in the whole session.
    pub(crate) total: usize,
}

impl App {
    /// A page of the compactions on record for `who`'s session, oldest first.
    pub(crate) async fn compaction_history(
        &self,
        who: &Identity,
        id: &Id,
        range: HistoryRange,
    ) -> Result<HistoryPage, AppError> {
        let record = self.session(who, id).await?;
        let view = self.index(&record).await?;
        let (page, total, more) = {
            let snapshot = view.read();
            let count = view.count();
            // The nearest compaction at or above each entry, in one pass: a parent comes before
            // its children in the file.
            let mut nearest: Vec<Option<usize>> = Vec::with_capacity(count);
            let mut compactions = Vec::new();
            for seq in 0..count {
                let fact = snapshot.fact(seq);
                let above = fact
                    .parent_seq
                    .map(|p| p as usize)
                    .filter(|&p| p < seq)
                    .and_then(|p| nearest[p]);
                if fact.entry_type == EntryType::Compaction {
                    compactions.push((seq, above));
                    nearest.push(Some(seq));
                } else {
                    nearest.push(above);
                }
            }
            let total = compactions.len();
            let limit = range.limit.clamp(1, MAX_HISTORY_PAGE);
            let start = if range.newest {
                total.saturating_sub(limit)
            } else {
                range.after.map_or(0, |after| {
                    compactions.partition_point(|&(seq, _)| seq <= after)
                })
            };
            let end = (start + limit).min(total);
            let page: Vec<(usize, Option<String>)> = compactions[start..end]
                .iter()
                .map(|&(seq, previous)| (seq, previous.map(|p| snapshot.fact(p).entry_id.clone())))
                .collect();
            let more = (end < total && !range.newest).then(|| compactions[end - 1].0);
            (page, total, more)
        };
        let seqs: Vec<i64> = page.iter().map(|&(seq, _)| seq as i64).collect();
        let lines = self.store.lines_at(id, &seqs).await?;
        let ids: Vec<String> = {
            let snapshot = view.read();
            page.iter()
                .map(|&(seq, _)| snapshot.fact(seq).entry_id.clone())
                .collect()
        };
        let records = self.store.compactions_of(id, &ids).await?;
        let compactions = crate::cpu::off_runtime(move || {
            let mut views = Vec::with_capacity(page.len());
            for ((seq, previous), (_, raw)) in page.into_iter().zip(lines) {
                let entry = compactd_core::session::parse_entry_line(seq + 1, raw.as_bytes())
                    .map_err(|e| {
                        AppError::Internal(anyhow::anyhow!(
                            "a stored compaction entry does not read: {e}"
                        ))
                    })?;
                let made = records.iter().find(|m| m.entry_id == entry.id);
                views.push(CompactionView::of(&entry, made, previous));
            }
            Ok::<_, AppError>(views)
        })
        .await??;
        Ok(HistoryPage {
            compactions,
            next_cursor: more.map(|seq| seq.to_string()),
            total,
        })
    }

    /// One compaction of `who`'s session and the one before it on its path, if any.
    pub(crate) async fn compaction_detail(
        &self,
        who: &Identity,
        id: &Id,
        entry_id: &str,
    ) -> Result<(CompactionView, Option<CompactionView>), AppError> {
        let not_found =
            || AppError::NotFound(format!("no compaction {entry_id:?} in this session"));
        let record = self.session(who, id).await?;
        let view = self.index(&record).await?;
        let (seq, previous) = {
            let snapshot = view.read();
            let seq = snapshot.seq_of(entry_id).ok_or_else(not_found)?;
            if snapshot.fact(seq).entry_type != EntryType::Compaction {
                return Err(not_found());
            }
            let mut above = snapshot.fact(seq).parent_seq.map(|p| p as usize);
            while let Some(at) = above.filter(|&at| at < seq) {
                if snapshot.fact(at).entry_type == EntryType::Compaction {
                    break;
                }
                above = snapshot
                    .fact(at)
                    .parent_seq
                    .map(|p| p as usize)
                    .filter(|&p| p < at);
            }
            (seq, above)
        };
        let seqs: Vec<i64> = std::iter::once(seq)
            .chain(previous)
            .map(|s| s as i64)
            .collect();
        let lines = self.store.lines_at(id, &seqs).await?;
        let ids: Vec<String> = {
            let snapshot = view.read();
            seqs.iter()
                .map(|&s| snapshot.fact(s as usize).entry_id.clone())
                .collect()
        };
        let records = self.store.compactions_of(id, &ids).await?;
        let view_of = |seq: usize, previous: Option<String>| {
            let (_, raw) = lines
                .iter()
                .find(|(s, _)| *s == seq as i64)
                .ok_or_else(not_found)?;
            let entry =
                compactd_core::session::parse_entry_line(seq + 1, raw.as_bytes()).map_err(|e| {
                    AppError::Internal(anyhow::anyhow!(
                        "a stored compaction entry does not read: {e}"
                    ))
                })?;
            let made = records.iter().find(|m| m.entry_id == entry.id);
            Ok::<_, AppError>(CompactionView::of(&entry, made, previous))
        };
        let previous_id = previous.map(|_| ids[1].clone());
        let this = view_of(seq, previous_id)?;
        let before = match previous {
            Some(at) => Some(view_of(at, None)?),
            None => None,
        };
        Ok((this, before))
    }
}

impl CompactionView {
    /// The view of a compaction entry, with compactd's record of it if compactd wrote it.
    pub(super) fn of(
        entry: &compactd_core::session::Entry,
        made: Option<&CompactionRecord>,
        previous_entry_id: Option<String>,
    ) -> CompactionView {
        if let Some(m) = made {
            let report = m
                .fidelity
                .as_deref()
                .and_then(|f| serde_json::from_str::<Report>(f).ok());
            return CompactionView {
                entry_id: entry.id.clone(),
                source: "compactd".into(),
                leaf_id: Some(m.leaf_id.clone()),
                first_kept_entry_id: Some(m.first_kept_entry_id.clone()),
                previous_entry_id,
                summary: Some(m.summary.clone()),
                model: Some(m.model.clone()),
                usage: Some(UsageView {
                    input_tokens: m.input_tokens,
                    output_tokens: m.output_tokens,
                }),
                latency_ms: Some(m.latency_ms),
                tokens_before: m.tokens_before,
                tokens_after: Some(m.tokens_after),
                tokens_saved: Some(m.tokens_before - m.tokens_after),
                created_at: Some(time::epoch_ms_to_iso(m.created_at_ms)),
                forgotten: report.as_ref().map(|r| r.missing.clone()),
                fidelity: report,
                loop_detected: Some(m.loop_detected),
                cached: Some(m.cached),
            };
        }
        let (first_kept_entry_id, tokens_before) = match &entry.kind {
            EntryKind::Compaction {
                first_kept_entry_id,
                message: Message::CompactionSummary { tokens_before, .. },
                ..
            } => (first_kept_entry_id.clone(), *tokens_before as i64),
            EntryKind::Compaction {
                first_kept_entry_id,
                ..
            } => (first_kept_entry_id.clone(), 0),
            _ => (None, 0),
        };
        CompactionView {
            entry_id: entry.id.clone(),
            source: "upload".into(),
            leaf_id: entry.parent_id.clone(),
            first_kept_entry_id,
            previous_entry_id,
            summary: entry.summary().map(str::to_owned),
            model: None,
            usage: None,
            latency_ms: None,
            tokens_before,
            tokens_after: None,
            tokens_saved: None,
            created_at: entry.timestamp.clone(),
            fidelity: None,
            forgotten: None,
            loop_detected: None,
            cached: None,
        }
    }
}
