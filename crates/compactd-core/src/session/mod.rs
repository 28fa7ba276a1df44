//! The pi session model: reading JSONL session files of every version, the entry tree, the active
//! path, and writing the session back (spec §1, §2).
//!
//! Pure and synchronous: no I/O beyond the bytes handed in.

mod entry;
mod entry_type;
mod line;
mod message;
mod migrate;
mod nesting;
mod parse;
pub mod time;
mod tree;

pub use entry::{Entry, EntryKind, Header};
pub use entry_type::EntryType;
pub use message::{BashExecution, Block, Content, Message, Usage, joined_text_blocks};
pub use migrate::{CURRENT_VERSION, IdSet, new_entry_id};
pub use nesting::{JSON_DEPTH_LIMIT, nesting_exceeds};
pub use parse::{LineIssue, ParseError, ParseErrorKind, ParseOptions};

use bytestring::ByteString;

/// A parsed, migrated and linked session.
#[derive(Debug, Clone)]
pub struct Session {
    /// oh-my-pi's fixed-width title slot line before the header, kept as file metadata.
    pub title: Option<ByteString>,
    pub header: Header,
    /// Entries in file (append) order.
    pub entries: Vec<Entry>,
    /// The version the file had before migration (1, 2 or 3).
    pub source_version: u32,
    /// Lines that lenient reading skipped.
    pub skipped: Vec<LineIssue>,
    /// Links that lenient reading repaired (dangling parents, duplicate ids, cycles).
    pub repairs: Vec<LineIssue>,
    /// id → index in `entries`; with duplicate ids the later line wins, as in pi.
    ids: tree::IdIndex,
    /// Resolved parent of each entry (`None` for roots and orphans).
    parents: Vec<Option<usize>>,
}

impl IdSet for Session {
    fn contains_id(&self, id: &str) -> bool {
        self.index_of(id).is_some()
    }
}

impl Session {
    /// Reads a session file. Strict by default: the first problem is an error naming its line.
    pub fn parse(input: &[u8], options: ParseOptions) -> Result<Session, ParseError> {
        Session::linked(parse::read(input, options, parse::Lines::Copied)?, options)
    }

    /// [`Session::parse`] of a file the session may keep: its entries' raw lines are slices of
    /// `input` instead of copies (for a file of megabytes, a second copy of it not made and
    /// not faulted in). A file that is not UTF-8 throughout is read as [`Session::parse`] reads
    /// it, so that lenient reading can skip its bad lines.
    pub fn parse_shared(input: bytes::Bytes, options: ParseOptions) -> Result<Session, ParseError> {
        match parse::shared_text(&input) {
            Some(parts) => Session::linked(
                parse::read(&input, options, parse::Lines::Shared(&parts))?,
                options,
            ),
            None => Session::parse(&input, options),
        }
    }

    fn linked(file: parse::ReadFile, options: ParseOptions) -> Result<Session, ParseError> {
        if let Some(limit) = options.max_entries
            && file.entries.len() > limit
        {
            return Err(ParseError {
                line: Some(file.entries[limit].line),
                kind: ParseErrorKind::TooManyEntries,
                message: format!(
                    "the session has {} entries, over the limit of {limit}",
                    file.entries.len()
                ),
            });
        }
        let mut repairs = Vec::new();
        let (ids, parents) = tree::link(&file.entries, options.lenient, &mut repairs)?;
        Ok(Session {
            title: file.title,
            header: file.header,
            entries: file.entries,
            source_version: file.source_version,
            skipped: file.skipped,
            repairs,
            ids,
            parents,
        })
    }

    /// A session holding one path of a stored session: `head` is its title slot (if any) and
    /// header lines; `entries` are the path's entries, root first, possibly with entries left
    /// out (those planning does not need). Each entry is linked to the one before it instead of
    /// by `parentId`.
    pub fn from_path(head: &[u8], entries: Vec<Entry>) -> Result<Session, ParseError> {
        let file = parse::read(head, ParseOptions::default(), parse::Lines::Copied)?;
        let mut ids = tree::IdIndex::with_capacity(entries.len());
        for index in 0..entries.len() {
            ids.insert(&entries, index);
        }
        let parents = (0..entries.len()).map(|i| i.checked_sub(1)).collect();
        Ok(Session {
            title: file.title,
            header: file.header,
            entries,
            source_version: file.source_version,
            skipped: Vec::new(),
            repairs: Vec::new(),
            ids,
            parents,
        })
    }

    /// Index of the entry with this id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.ids.get(&self.entries, id)
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.index_of(id).map(|i| &self.entries[i])
    }

    /// The ids in use, for making new ones that do not collide.
    pub fn ids(&self) -> &(impl IdSet + Sync) {
        self
    }

    /// Index of the parent entry of `index`.
    pub fn parent_of(&self, index: usize) -> Option<usize> {
        self.parents[index]
    }

    /// The leaf of a loaded file: the last entry in file order (spec §1.7).
    pub fn leaf(&self) -> Option<usize> {
        self.entries.len().checked_sub(1)
    }

    /// The leaf named by `leaf_id`, or the last entry when `None`. An id that names no entry is an
    /// error here; pi silently falls back to the last entry, which hides a client's mistake.
    pub fn resolve_leaf(&self, leaf_id: Option<&str>) -> Result<Option<usize>, UnknownEntry> {
        match leaf_id {
            None => Ok(self.leaf()),
            Some(id) => self
                .index_of(id)
                .map(Some)
                .ok_or_else(|| UnknownEntry(id.to_owned())),
        }
    }

    /// Entry indices from the root to `leaf` (the active path), following `parentId`.
    pub fn path_indices(&self, leaf: usize) -> Vec<usize> {
        tree::path(&self.parents, leaf)
    }

    /// The entries from the root to `leaf`.
    pub fn path(&self, leaf: usize) -> Vec<&Entry> {
        self.path_indices(leaf)
            .into_iter()
            .map(|i| &self.entries[i])
            .collect()
    }

    /// The active path to the leaf named by `leaf_id` (the last entry by default); empty for a
    /// session without entries.
    pub fn active_path(&self, leaf_id: Option<&str>) -> Result<Vec<&Entry>, UnknownEntry> {
        Ok(self
            .resolve_leaf(leaf_id)?
            .map(|leaf| self.path(leaf))
            .unwrap_or_default())
    }

    /// The session as JSONL: title slot (if any), header and entries, one per line, each line
    /// ending in `\n`. For v3 input every line comes back byte for byte.
    pub fn to_jsonl(&self) -> String {
        let size = self.title.as_ref().map_or(0, |t| t.len() + 1)
            + self.header.raw.len()
            + 1
            + self.entries.iter().map(|e| e.raw.len() + 1).sum::<usize>();
        let mut out = String::with_capacity(size);
        for line in self
            .title
            .iter()
            .chain(std::iter::once(&self.header.raw))
            .chain(self.entries.iter().map(|e| &e.raw))
        {
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Reads one entry line (v3 form) on its own, e.g. a line appended to a stored session.
/// `line` is its number in the request, for errors.
pub fn parse_entry_line(line: usize, bytes: &[u8]) -> Result<Entry, ParseError> {
    line::check_nesting(line, bytes)?;
    let text = std::str::from_utf8(bytes).map_err(|e| ParseError {
        line: Some(line),
        kind: ParseErrorKind::InvalidUtf8,
        message: format!(
            "the line is not valid UTF-8 (byte {} of the line)",
            e.valid_up_to() + 1
        ),
    })?;
    let entry = line::entry_from_line(line, text.into())?;
    if *entry.entry_type() == EntryType::Session {
        return Err(ParseError {
            line: Some(line),
            kind: ParseErrorKind::UnexpectedHeader,
            message: "a session header cannot be appended: a session has one header, and appended lines must be entries".into(),
        });
    }
    Ok(entry)
}

/// Reads a stored entry line (v3, accepted when it was stored), keeping the line as it is.
pub fn parse_stored_line(raw: String) -> Result<Entry, ParseError> {
    line::entry_from_line(0, raw.into())
}

/// A leaf or target id that names no entry of the session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no entry with id {0:?} in this session")]
pub struct UnknownEntry(pub String);

#[cfg(test)]
mod tests;
