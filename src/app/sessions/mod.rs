//! Stored sessions: upload, list, read, delete, the file back, appends. Every operation is for a
//! caller: another tenant's session is "not found", like a missing one.

pub(crate) mod index;
pub(crate) mod pins;

use crate::access::Identity;
use compactd_core::ids::Id;
use compactd_core::session::EntryType;
use compactd_core::session::{
    self, Entry, LineIssue, ParseError, ParseErrorKind, ParseOptions, Session,
};
use compactd_store::{Append, EntryRecord, NewEntry, SessionRecord, StoreError, now_ms};

use crate::app::{App, AppError};
use index::{FACTS_VERSION, IndexView};

/// A session just stored, and what lenient reading skipped or repaired on the way.
#[derive(Debug)]
pub(crate) struct Uploaded {
    pub(crate) record: SessionRecord,
    pub(crate) skipped: Vec<LineIssue>,
    pub(crate) repaired: Vec<LineIssue>,
}

/// For a session uploaded as v1 or v2: it was migrated with new entry ids, as pi migrates it (pi
/// also draws new random ids), so a compaction line appended to the client's old file would name
/// ids that do not exist there and pi would drop every kept message. The client replaces its
/// file with the stored one.
#[derive(Debug, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReplaceNotice {
    /// `/v1/sessions/{id}/entries`: download it over the local file.
    #[serde(skip_serializing_if = "Option::is_none")]
    replace_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    notice: Option<String>,
}

impl ReplaceNotice {
    pub(crate) fn of(record: &SessionRecord) -> ReplaceNotice {
        if record.source_version >= i64::from(session::CURRENT_VERSION) {
            return ReplaceNotice::default();
        }
        let file = format!("/v1/sessions/{}/entries", record.session_id);
        ReplaceNotice {
            notice: Some(format!(
                "this v{} file was migrated to v3 with new entry ids; replace your local file with GET {file} \
                 (after this upload and after each compaction) instead of appending lines to it",
                record.source_version
            )),
            replace_file: Some(file),
        }
    }
}

/// What an append did.
#[derive(Debug)]
pub(crate) struct Appended {
    pub(crate) appended: usize,
    /// Lines already stored with the same content, skipped.
    pub(crate) unchanged: usize,
    pub(crate) record: SessionRecord,
}

/// A page of sessions.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) sessions: Vec<SessionRecord>,
    /// Where the next page starts, when this one is full.
    pub(crate) next_cursor: Option<String>,
}

/// A stored session, read and parsed.
pub(crate) struct Loaded {
    pub(crate) record: SessionRecord,
    pub(crate) session: Session,
    /// Entries actually read: the count an append must find unchanged.
    pub(crate) entry_count: i64,
}

/// How many times an append re-reads the session when another writer got in first.
const APPEND_ATTEMPTS: usize = 5;

/// The session as JSONL, from its stored lines.
pub(crate) fn jsonl(record: &SessionRecord, entries: &[EntryRecord]) -> String {
    let size = record.header.len() + entries.iter().map(|e| e.raw.len() + 1).sum::<usize>() + 256;
    let mut text = String::with_capacity(size);
    for line in record
        .title_line
        .iter()
        .chain(std::iter::once(&record.header))
        .chain(entries.iter().map(|e| &e.raw))
    {
        text.push_str(line);
        text.push('\n');
    }
    text
}

/// The session's context tokens with `rows` as its last rows: the estimate at the last one.
pub(crate) fn context_tokens_at(rows: &[NewEntry]) -> i64 {
    rows.last()
        .map_or(0, |r| index::context_of(&r.facts).tokens() as i64)
}

/// Reads a session file off the async workers (a 20 MB file takes ~100 ms).
pub(crate) async fn parse(
    bytes: impl Into<bytes::Bytes> + Send + 'static,
    options: ParseOptions,
) -> Result<Session, AppError> {
    // Shared: the entries' raw lines are slices of the request body, not copies of it.
    crate::cpu::off_runtime(move || Session::parse_shared(bytes.into(), options))
        .await?
        .map_err(AppError::InvalidSession)
}

/// A stored session read whole. Its lines were accepted at upload or append; they are read
/// leniently so that links repaired at a lenient upload are repaired the same way again.
pub(crate) async fn parse_stored(
    record: &SessionRecord,
    entries: &[EntryRecord],
) -> Result<Session, AppError> {
    let options = ParseOptions {
        lenient: true,
        ..Default::default()
    };
    parse(jsonl(record, entries), options).await
}

fn invalid_line(line: usize, kind: ParseErrorKind, message: String) -> AppError {
    AppError::InvalidSession(ParseError {
        line: Some(line),
        kind,
        message,
    })
}

impl App {
    /// How to read uploaded session files: the configured limits, lenient or not.
    pub(crate) fn parse_options(&self, lenient: bool) -> ParseOptions {
        ParseOptions {
            lenient,
            max_line_bytes: Some(self.limits.max_line_bytes),
            max_entries: Some(self.limits.max_entries),
        }
    }

    /// Stores a session file (migrated to v3 when older) for `who`.
    pub(crate) async fn upload(
        &self,
        who: &Identity,
        bytes: impl Into<bytes::Bytes> + Send + 'static,
        lenient: bool,
    ) -> Result<Uploaded, AppError> {
        let session = parse(bytes, self.parse_options(lenient)).await?;
        // Lenient reading lets a later line win a duplicate id; storage keeps ids unique.
        if let Some(duplicate) = session
            .repairs
            .iter()
            .find(|r| r.kind == ParseErrorKind::DuplicateId)
        {
            return Err(invalid_line(
                duplicate.line,
                duplicate.kind,
                format!("{} (a stored session needs unique ids)", duplicate.message),
            ));
        }
        let rows = index::session_rows(&session);
        let now = now_ms();
        let byte_size = session
            .title
            .iter()
            .chain(std::iter::once(&session.header.raw))
            .chain(session.entries.iter().map(|e| &e.raw))
            .map(|l| l.len() + 1)
            .sum::<usize>();
        let record = SessionRecord {
            session_id: uuid::Uuid::new_v4().to_string(),
            tenant: who.tenant.clone(),
            header_id: session.header.id.clone(),
            title_line: session.title.as_deref().map(str::to_owned),
            header: session.header.raw.to_string(),
            source_version: i64::from(session.source_version),
            leaf_id: session.entries.last().map(|e| e.id.clone()),
            entry_count: session.entries.len() as i64,
            byte_size: byte_size as i64,
            context_tokens: rows
                .last()
                .map_or(0, |r| index::context_of(r).tokens() as i64),
            created_at_ms: now,
            updated_at_ms: now,
            facts_version: FACTS_VERSION,
            compaction_count: rows
                .iter()
                .filter(|r| r.entry_type == EntryType::Compaction)
                .count() as i64,
        };
        let Session {
            entries,
            skipped,
            repairs,
            ..
        } = session;
        // The lines move into the rows: a 20 MB upload is not copied again.
        let entries: Vec<NewEntry> = entries
            .into_iter()
            .zip(rows)
            .map(|(e, facts)| NewEntry {
                facts,
                parent_id: e.parent_id,
                raw: String::from(e.raw),
            })
            .collect();
        self.store.insert_session(&record, &entries).await?;
        tracing::info!(session = %record.session_id, entries = record.entry_count, bytes = record.byte_size, "session stored");
        Ok(Uploaded {
            record,
            skipped,
            repaired: repairs,
        })
    }

    /// `who`'s sessions, oldest first, `limit` (1–1000) a page, after `cursor`.
    pub(crate) async fn sessions(
        &self,
        who: &Identity,
        limit: i64,
        cursor: Option<&str>,
        search: Option<&str>,
    ) -> Result<Page, AppError> {
        if !(1..=1000).contains(&limit) {
            return Err(AppError::invalid(
                "limit",
                "limit must be between 1 and 1000",
            ));
        }
        let after = match cursor {
            None => None,
            Some(cursor) => Some(
                cursor
                    .split_once('.')
                    .and_then(|(ms, id)| Some((ms.parse::<i64>().ok()?, id.to_owned())))
                    // Ids never hold NUL (and PostgreSQL cannot compare text holding one).
                    .filter(|(_, id)| !id.contains('\0'))
                    .ok_or_else(|| {
                        AppError::invalid("cursor", "cursor is not one this API returned")
                    })?,
            ),
        };
        // No id or cwd holds NUL: such a search matches nothing (and is not sent to the store).
        if search.is_some_and(|s| s.contains('\0')) {
            return Ok(Page {
                sessions: Vec::new(),
                next_cursor: None,
            });
        }
        let sessions = self
            .store
            .list_sessions(&who.tenant, limit, after, search.filter(|s| !s.is_empty()))
            .await?;
        let next_cursor = (sessions.len() as i64 == limit)
            .then(|| {
                sessions
                    .last()
                    .map(|s| format!("{}.{}", s.created_at_ms, s.session_id))
            })
            .flatten();
        Ok(Page {
            sessions,
            next_cursor,
        })
    }

    /// `who`'s session record.
    pub(crate) async fn session(&self, who: &Identity, id: &Id) -> Result<SessionRecord, AppError> {
        self.store
            .get_session(id)
            .await?
            .filter(|record| record.tenant == who.tenant)
            .ok_or_else(|| AppError::NotFound(format!("no session with id {id:?}")))
    }

    /// Deletes `who`'s session with its entries and compactions.
    pub(crate) async fn delete_session(&self, who: &Identity, id: &Id) -> Result<(), AppError> {
        self.session(who, id).await?;
        self.index_cache.forget(id).await;
        if self.store.delete_session(id).await? {
            Ok(())
        } else {
            Err(AppError::NotFound(format!("no session with id {id:?}")))
        }
    }

    /// The session file as stored (v3 JSONL).
    pub(crate) async fn session_file(&self, who: &Identity, id: &Id) -> Result<String, AppError> {
        let record = self.session(who, id).await?;
        let entries = self.store.entries(id).await?;
        Ok(jsonl(&record, &entries))
    }

    /// A stored session, parsed whole. Stored lines were accepted at upload or append; they are
    /// read leniently so that links repaired at a lenient upload are repaired the same way again.
    /// (Only for what needs every entry: the compaction history, branch summaries.)
    pub(crate) async fn load(&self, who: &Identity, id: &Id) -> Result<Loaded, AppError> {
        let record = self.session(who, id).await?;
        let entries = self.store.entries(id).await?;
        let entry_count = entries.len() as i64;
        let session = parse_stored(&record, &entries).await?;
        Ok(Loaded {
            record,
            session,
            entry_count,
        })
    }

    /// Appends JSONL entries whose parents exist. An entry already stored with the same id and
    /// content is skipped; with other content it is a conflict. Costs O(new entries): ids and
    /// parents are checked against the session's index, not by reading the session.
    pub(crate) async fn append(
        &self,
        who: &Identity,
        id: &Id,
        body: &[u8],
    ) -> Result<Appended, AppError> {
        let lines = entry_lines(body, self.limits.max_line_bytes)?;
        for _ in 0..APPEND_ATTEMPTS {
            let record = self.session(who, id).await?;
            let view = self.index(&record).await?;
            let stored = self.stored_lines(id, &view, &lines).await?;
            let (new, unchanged) = check_append(&view, &stored, &lines)?;
            let total = view.count() + new.len();
            if total > self.limits.max_entries {
                return Err(invalid_line(
                    new[0].line,
                    ParseErrorKind::TooManyEntries,
                    format!(
                        "the session would have {total} entries, over the limit of {}",
                        self.limits.max_entries
                    ),
                ));
            }
            if new.is_empty() {
                return Ok(Appended {
                    appended: 0,
                    unchanged,
                    record,
                });
            }
            let rows = index::appended_rows(&view, &new);
            let append = Append {
                expected_entry_count: record.entry_count,
                leaf_id: new.last().map(|e| e.id.clone()),
                context_tokens: context_tokens_at(&rows),
                entries: rows,
                compaction: None,
            };
            let now = now_ms();
            match self.store.append(id, &append, now).await {
                Ok(()) => {
                    self.index_cache.appended(id, &append.entries).await;
                    return Ok(Appended {
                        appended: new.len(),
                        unchanged,
                        record: appended_record(record, &append, now),
                    });
                }
                Err(StoreError::Changed) => continue,
                Err(error) => return Err(error.into()),
            }
        }
        Err(StoreError::Changed.into())
    }

    /// The stored lines of the entries in `lines` whose ids are taken, by id: what a re-sent
    /// line is compared with.
    async fn stored_lines(
        &self,
        id: &str,
        view: &IndexView,
        lines: &[Entry],
    ) -> Result<std::collections::HashMap<String, String>, AppError> {
        let seqs: Vec<i64> = {
            let snapshot = view.read();
            lines
                .iter()
                .filter_map(|e| snapshot.seq_of(&e.id))
                .map(|seq| seq as i64)
                .collect()
        };
        if seqs.is_empty() {
            return Ok(Default::default());
        }
        let rows = self.store.lines_at(id, &seqs).await?;
        let snapshot = view.read();
        Ok(rows
            .into_iter()
            .map(|(seq, raw)| (snapshot.fact(seq as usize).entry_id.clone(), raw))
            .collect())
    }
}

/// The record after `append`, as the store now holds it (no second read).
pub(crate) fn appended_record(record: SessionRecord, append: &Append, now: i64) -> SessionRecord {
    let bytes: i64 = append.entries.iter().map(|e| e.raw.len() as i64 + 1).sum();
    SessionRecord {
        entry_count: record.entry_count + append.entries.len() as i64,
        byte_size: record.byte_size + bytes,
        leaf_id: append.leaf_id.clone(),
        context_tokens: append.context_tokens,
        compaction_count: record.compaction_count + append.compactions_added(),
        updated_at_ms: now,
        ..record
    }
}

/// The entry lines of an append body (v3 entries, no header), each checked on its own.
fn entry_lines(body: &[u8], max_line_bytes: usize) -> Result<Vec<Entry>, AppError> {
    let mut entries = Vec::new();
    for (index, line) in body.split(|&b| b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        if line.len() > max_line_bytes {
            return Err(invalid_line(
                index + 1,
                ParseErrorKind::LineTooLong,
                format!(
                    "the line is {} bytes, over the limit of {max_line_bytes} bytes",
                    line.len()
                ),
            ));
        }
        entries.push(session::parse_entry_line(index + 1, line)?);
    }
    if entries.is_empty() {
        return Err(AppError::invalid(
            "body",
            "the body holds no entries (one JSON entry per line)",
        ));
    }
    Ok(entries)
}

/// Splits the lines into new entries and ones already stored identically, checking ids and
/// parents against the session's index (`stored`: the lines of the taken ids).
fn check_append(
    view: &IndexView,
    stored: &std::collections::HashMap<String, String>,
    lines: &[Entry],
) -> Result<(Vec<Entry>, usize), AppError> {
    let snapshot = view.read();
    let mut new: Vec<Entry> = Vec::new();
    let mut unchanged = 0;
    for entry in lines {
        if let Some(stored) = stored.get(&entry.id) {
            let same = compactd_core::js_json::from_str::<serde_json::Value>(stored).ok()
                == compactd_core::js_json::from_str::<serde_json::Value>(&entry.raw).ok();
            if same {
                unchanged += 1;
                continue;
            }
            return Err(AppError::Conflict {
                code: "entry_conflict",
                message: format!(
                    "line {}: an entry with id {:?} is already stored with different content",
                    entry.line, entry.id
                ),
            });
        }
        if new.iter().any(|e| e.id == entry.id) {
            return Err(invalid_line(
                entry.line,
                ParseErrorKind::DuplicateId,
                format!("duplicate id {:?} in the request", entry.id),
            ));
        }
        if let Some(parent) = &entry.parent_id
            && snapshot.seq_of(parent).is_none()
            && !new.iter().any(|e| &e.id == parent)
        {
            return Err(invalid_line(
                entry.line,
                ParseErrorKind::DanglingParent,
                format!("parentId {parent:?} names no entry of the session or of the lines before"),
            ));
        }
        new.push(entry.clone());
    }
    Ok((new, unchanged))
}
