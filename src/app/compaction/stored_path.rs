//! Reading a stored session for planning, compacting and rebuilding a context: the active path is
//! walked on the session's index, and only the lines the planner reads are fetched and parsed —
//! the path from the latest compaction's boundary to the leaf, plus the last model and thinking
//! level settings before it. Everything before the boundary is known from its facts alone.
//!
//! The planner then runs on that part as on a whole file; its path indices are moved back to
//! positions on the full path, and the estimates of the messages not read come from their facts,
//! so that a stored plan is the same as the plan of the file.

use crate::access::Identity;
use crate::app::sessions::index::IndexView;
use crate::app::{App, AppError};
use compactd_core::compaction::PlanOutcome;
use compactd_core::ids::Id;
use compactd_core::session::EntryType;
use compactd_core::session::{Entry, Session};
use compactd_store::SessionRecord;

/// A stored session's active path, partly read.
pub(crate) struct StoredPath {
    pub record: SessionRecord,
    pub view: IndexView,
    /// The lines read, root first, linked as one chain: the settings entries of the unread head,
    /// then the tail of the path, ending at the leaf.
    pub session: Session,
    /// The leaf's position in the file (`None` for a session without entries).
    pub leaf_seq: Option<usize>,
    /// How many settings entries of the head lead `session`.
    settings: usize,
    /// Path index of the first tail entry.
    tail_start: usize,
    /// Estimates of the head's `message` entries, in path order (for the plan's `entryTokens`).
    head_tokens: Vec<(String, u64)>,
    /// How many of the settings entries read are `message` entries.
    settings_messages: usize,
}

impl StoredPath {
    /// The full path's index of a tail entry's index in `session`.
    fn full_index(&self, index: usize) -> usize {
        index - self.settings + self.tail_start
    }

    /// The plan of the partial path with indices and estimates as on the full path.
    pub(crate) fn rebase(&self, mut outcome: PlanOutcome) -> PlanOutcome {
        if let Some(plan) = &mut outcome.plan {
            plan.first_kept_path_index = self.full_index(plan.first_kept_path_index);
            plan.turn_start_path_index = plan.turn_start_path_index.map(|i| self.full_index(i));
            let tail = plan
                .entry_tokens
                .split_off(self.settings_messages.min(plan.entry_tokens.len()));
            plan.entry_tokens = self.head_tokens.iter().cloned().chain(tail).collect();
        }
        outcome
    }
}

impl App {
    /// `who`'s session, read along the active path to `leaf_id` (its last entry by default).
    pub(crate) async fn load_path(
        &self,
        who: &Identity,
        id: &Id,
        leaf_id: Option<&str>,
    ) -> Result<StoredPath, AppError> {
        let record = self.session(who, id).await?;
        let view = self.index(&record).await?;
        let plan = {
            let snapshot = view.read();
            let leaf_seq = match leaf_id {
                Some(leaf) => Some(snapshot.seq_of(leaf).ok_or_else(|| {
                    AppError::invalid(
                        "leafId",
                        format!("no entry with id {leaf:?} in this session"),
                    )
                })?),
                None => view.count().checked_sub(1),
            };
            let path = leaf_seq.map(|l| snapshot.path(l)).unwrap_or_default();
            let kind = |seq: usize| &snapshot.fact(seq).entry_type;
            // Where reading starts: the latest compaction, or its first kept entry when that is
            // on the path before it (the planner's boundary and the context's kept part).
            let tail_start = match path
                .iter()
                .rposition(|&s| *kind(s) == EntryType::Compaction)
            {
                None => 0,
                Some(previous) => {
                    let first_kept = snapshot.fact(path[previous]).first_kept_id.clone();
                    first_kept
                        .and_then(|id| path.iter().position(|&s| snapshot.fact(s).entry_id == id))
                        .map_or(previous, |kept| kept.min(previous))
                }
            };
            let head = &path[..tail_start];
            // The model and thinking level in force come from the last such entries anywhere on
            // the path: read the head's last ones too.
            let mut settings: Vec<usize> = [
                head.iter()
                    .rposition(|&s| *kind(s) == EntryType::ThinkingLevelChange),
                head.iter().rposition(|&s| {
                    *kind(s) == EntryType::ModelChange
                        || snapshot.fact(s).role.as_deref() == Some("assistant")
                }),
            ]
            .into_iter()
            .flatten()
            .collect();
            settings.sort_unstable();
            let settings_messages = settings
                .iter()
                .filter(|&&i| *kind(head[i]) == EntryType::Message)
                .count();
            let head_tokens = head
                .iter()
                .map(|&s| snapshot.fact(s))
                .filter(|f| f.entry_type == EntryType::Message)
                .map(|f| (f.entry_id.clone(), f.tokens.unwrap_or(0).max(0) as u64))
                .collect();
            let settings: Vec<usize> = settings.into_iter().map(|i| head[i]).collect();
            let tail = path[tail_start..].to_vec();
            ReadPlan {
                leaf_seq,
                settings,
                tail,
                tail_start,
                head_tokens,
                settings_messages,
            }
        };
        let session = self.read_lines(&record, &plan.settings, &plan.tail).await?;
        Ok(StoredPath {
            record,
            view,
            session,
            leaf_seq: plan.leaf_seq,
            settings: plan.settings.len(),
            tail_start: plan.tail_start,
            head_tokens: plan.head_tokens,
            settings_messages: plan.settings_messages,
        })
    }

    /// Fetches the lines at `settings` and `tail` (each ascending on the path) and parses them
    /// as one chain. The tail is fetched in slices, each parsed on a blocking thread while the
    /// next is being fetched: reading a 20 MB path overlaps the database with the parser.
    async fn read_lines(
        &self,
        record: &SessionRecord,
        settings: &[usize],
        tail: &[usize],
    ) -> Result<Session, AppError> {
        let id = &record.session_id;
        let mut parsing = Vec::new();
        for &seq in settings {
            let lines = self.store.entry_lines(id, seq as i64, seq as i64).await?;
            parsing.push(tokio::spawn(crate::cpu::off_runtime(move || {
                parse_lines(lines)
            })));
        }
        for slice in tail.chunks(TAIL_SLICE_ENTRIES) {
            let (low, high) = (slice[0], slice[slice.len() - 1]);
            let mut lines = self.store.entry_lines(id, low as i64, high as i64).await?;
            // A path's tail is almost always the end of the file; when it branches, the lines of
            // other branches in its range are dropped.
            if lines.len() != slice.len() {
                let wanted: std::collections::HashSet<i64> =
                    slice.iter().map(|&s| s as i64).collect();
                lines.retain(|(seq, _)| wanted.contains(seq));
            }
            parsing.push(tokio::spawn(crate::cpu::off_runtime(move || {
                parse_lines(lines)
            })));
        }
        let mut entries = Vec::with_capacity(settings.len() + tail.len());
        for task in parsing {
            let parsed = task
                .await
                .map_err(|e| {
                    AppError::Internal(anyhow::anyhow!("the session reader failed: {e}"))
                })??
                .map_err(|e| {
                    AppError::Internal(anyhow::anyhow!(
                        "session {id}: a stored line no longer reads: {e}"
                    ))
                })?;
            entries.extend(parsed);
        }
        if entries.len() != settings.len() + tail.len() {
            return Err(AppError::Internal(anyhow::anyhow!(
                "session {id}: {} lines of the path were found for {} entries",
                entries.len(),
                settings.len() + tail.len()
            )));
        }
        let mut head = String::new();
        for line in record
            .title_line
            .iter()
            .chain(std::iter::once(&record.header))
        {
            head.push_str(line);
            head.push('\n');
        }
        Session::from_path(head.as_bytes(), entries).map_err(|e| {
            AppError::Internal(anyhow::anyhow!(
                "session {id}: its header no longer reads: {e}"
            ))
        })
    }
}

/// Entries a tail slice fetches and parses at a time.
const TAIL_SLICE_ENTRIES: usize = 2048;

fn parse_lines(
    lines: Vec<(i64, String)>,
) -> Result<Vec<Entry>, compactd_core::session::ParseError> {
    lines
        .into_iter()
        .map(|(_, raw)| compactd_core::session::parse_stored_line(raw))
        .collect()
}

/// What to read of a path, decided under the index's lock.
struct ReadPlan {
    leaf_seq: Option<usize>,
    settings: Vec<usize>,
    tail: Vec<usize>,
    tail_start: usize,
    head_tokens: Vec<(String, u64)>,
    settings_messages: usize,
}
