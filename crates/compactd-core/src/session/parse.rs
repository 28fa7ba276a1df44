//! Reading a session file: JSONL lines, the header (and oh-my-pi's title slot before it),
//! migration of v1/v2 files, and the errors that name the line that is wrong (spec §1.1–§1.6).

use std::sync::atomic::{AtomicUsize, Ordering};

use bytestring::ByteString;
use serde::Serialize;
use serde_json::Value;

use super::entry::{Entry, Header, WireHeader};
use super::line::{check_length, decode, entry_from_line, line_text};
use super::migrate::{self, CURRENT_VERSION};
use crate::js_json;

/// How strictly to read a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
    /// Longest line accepted, in bytes (`None`: no limit). A longer line is an error even in
    /// lenient mode: limits protect the service, they are not malformed input to skip.
    pub max_line_bytes: Option<usize>,
    /// Most entries accepted (`None`: no limit).
    pub max_entries: Option<usize>,
    /// Skip malformed lines the way pi does instead of rejecting the file, and repair broken
    /// links (a dangling `parentId` makes a root, a duplicate id is won by the later line, a
    /// `parentId` cycle is cut). What was skipped or repaired is reported on the session.
    pub lenient: bool,
}

/// Why a file was rejected. `line` is the 1-based physical line number, when one line is at fault.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
pub struct ParseError {
    pub line: Option<usize>,
    pub kind: ParseErrorKind,
    pub message: String,
}

/// The kinds of problems a session file can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseErrorKind {
    Empty,
    InvalidUtf8,
    InvalidJson,
    NotAnObject,
    InvalidHeader,
    MissingType,
    MissingId,
    MissingMessage,
    InvalidField,
    DuplicateId,
    DanglingParent,
    ParentCycle,
    /// A line over [`ParseOptions::max_line_bytes`].
    LineTooLong,
    /// More entries than [`ParseOptions::max_entries`].
    TooManyEntries,
    /// JSON nested deeper than [`super::JSON_DEPTH_LIMIT`].
    TooDeep,
    /// A session header (or title slot) where an entry was expected: appended lines are entries.
    UnexpectedHeader,
}

/// A line that lenient reading skipped or repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineIssue {
    pub line: usize,
    pub kind: ParseErrorKind,
    pub message: String,
}

impl ParseError {
    pub fn at(line: usize, kind: ParseErrorKind, message: impl Into<String>) -> Self {
        ParseError {
            line: Some(line),
            kind,
            message: message.into(),
        }
    }
}

/// Where the raw lines of what is read come from.
#[derive(Clone, Copy)]
pub(super) enum Lines<'a> {
    /// Slices of these texts, which are the input being read, in order and split at newlines
    /// (see [`shared_text`]).
    Shared(&'a [ByteString]),
    /// A copy of each line.
    Copied,
}

impl<'a> Lines<'a> {
    /// The text of `bytes`, a line of the input, checked as UTF-8 unless the whole input was.
    fn text(self, number: usize, bytes: &'a [u8]) -> Result<&'a str, ParseError> {
        match self {
            Lines::Shared(parts) => {
                let part = part_of(parts, bytes);
                let start = bytes.as_ptr() as usize - part.as_ptr() as usize;
                // Lines end at a newline, and parts too, so both ends are character boundaries.
                Ok(&part[start..start + bytes.len()])
            }
            Lines::Copied => line_text(number, bytes),
        }
    }

    /// The raw form of `text`, a line of the input.
    fn raw(self, text: &str) -> ByteString {
        match self {
            Lines::Shared(parts) => part_of(parts, text.as_bytes()).slice_ref(text),
            Lines::Copied => text.into(),
        }
    }
}

/// The part that holds `line`, a non-empty line of the input.
fn part_of<'a>(parts: &'a [ByteString], line: &[u8]) -> &'a ByteString {
    let at = line.as_ptr() as usize;
    parts
        .iter()
        .find(|part| at.wrapping_sub(part.as_ptr() as usize) < part.len())
        .expect("a line of the input lies in one of its parts")
}

/// `input` as UTF-8 text (`None` where it is not), in parts that end at a newline: a large input
/// is checked in two halves at once. Checking the 21 MB generated session whole took ~2 ms of
/// one core before any line could be read.
pub(super) fn shared_text(input: &bytes::Bytes) -> Option<Vec<ByteString>> {
    if crate::parallel::threads_for(input.len(), 2) < 2 {
        return Some(vec![ByteString::try_from(input.clone()).ok()?]);
    }
    let middle = line_start_from(input, input.len() / 2);
    let (first, second) = (input.slice(..middle), input.slice(middle..));
    let (first, second) = std::thread::scope(|scope| {
        let second = scope.spawn(|| ByteString::try_from(second));
        let first = ByteString::try_from(first);
        (first, second.join().expect("checking UTF-8 does not panic"))
    });
    Some(vec![first.ok()?, second.ok()?])
}

/// Just after the first newline at or after `at` (the end of `input` when there is none).
fn line_start_from(input: &[u8], at: usize) -> usize {
    memchr::memchr(b'\n', &input[at..]).map_or(input.len(), |i| at + i + 1)
}

/// What reading produced before the entries are linked into a tree.
pub(super) struct ReadFile {
    pub title: Option<ByteString>,
    pub header: Header,
    pub entries: Vec<Entry>,
    pub source_version: u32,
    pub skipped: Vec<LineIssue>,
}

/// Non-blank physical lines of `input` with their 1-based numbers, counting from `first_number`.
/// pi trims the text and skips blank lines; numbering stays physical so errors point at the line
/// an editor shows.
fn lines(input: &[u8], first_number: usize) -> impl Iterator<Item = (usize, &[u8])> {
    let mut rest = input;
    let mut number = first_number;
    std::iter::from_fn(move || {
        while !rest.is_empty() {
            let (line, next) = match memchr::memchr(b'\n', rest) {
                Some(end) => (&rest[..end], &rest[end + 1..]),
                None => (rest, &rest[rest.len()..]),
            };
            rest = next;
            number += 1;
            if !line.iter().all(u8::is_ascii_whitespace) {
                return Some((number - 1, line));
            }
        }
        None
    })
}

/// Reads the v3 entry lines of `input` (everything after the header), first line numbered
/// `first_number`, in parallel for large inputs. Results keep file order, so in strict mode the
/// error reported is the one on the earliest bad line.
fn read_entries<'a>(
    input: &'a [u8],
    first_number: usize,
    options: ParseOptions,
    source: Lines<'a>,
) -> Result<(Vec<Entry>, Vec<LineIssue>), ParseError> {
    // The lines of a v3 file are independent, and decoding them is the most expensive step of
    // planning a large session.
    let threads = crate::parallel::threads_for(input.len(), 4);
    if threads < 2 {
        let newlines = memchr::memchr_iter(b'\n', input).count();
        let capacity = capacity(newlines, input.len(), options);
        return read_chunk(input, first_number, options, capacity, source);
    }
    // Many more pieces than threads, each taken by the next thread free: a session's lines cost
    // unlike amounts per byte (escaped texts against plain ones), and two halves of the 21 MB
    // generated session took 27 and 47 ms, one thread idle for the difference. Piece boundaries
    // are just after a newline near each i/pieces of the input.
    let pieces = threads * PIECES_PER_THREAD;
    let mut bounds = Vec::with_capacity(pieces);
    let mut start = 0;
    for k in 1..=pieces {
        let end = if k == pieces {
            input.len()
        } else {
            line_start_from(input, (input.len() * k / pieces).max(start))
        };
        bounds.push(&input[start..end]);
        start = end;
    }
    // Each piece's lines are counted by the thread that reads it (for its vector's size) and
    // numbered from 1 there; they are renumbered below, once every piece before them has been
    // counted. Counting the whole input before any piece could start was ~2 ms of one core while
    // the other waited.
    let next = AtomicUsize::new(0);
    let take = || {
        let mut done = Vec::new();
        loop {
            let k = next.fetch_add(1, Ordering::Relaxed);
            let Some(&piece) = bounds.get(k) else {
                return done;
            };
            let newlines = memchr::memchr_iter(b'\n', piece).count();
            let capacity = capacity(newlines, piece.len(), options);
            done.push((k, newlines, read_chunk(piece, 1, options, capacity, source)));
        }
    };
    let mut read = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(take)).collect();
        let mut read = take();
        for helper in helpers {
            read.extend(helper.join().expect("reading a piece does not panic"));
        }
        read
    });
    read.sort_unstable_by_key(|(k, ..)| *k);
    let total = read
        .iter()
        .map(|(_, _, result)| result.as_ref().map_or(0, |(entries, _)| entries.len()))
        .sum();
    // One vector sized for every entry, the pieces' entries moved into it (a vector grown by
    // copies is fresh memory to fault in, twice).
    let mut entries = Vec::with_capacity(total);
    let mut skipped = Vec::new();
    // Lines before the piece: its line n is line n + before of the file.
    let mut before = first_number - 1;
    for (_, newlines, result) in read {
        let (piece_entries, piece_skipped) = result.map_err(|mut error| {
            error.line = error.line.map(|line| line + before);
            error
        })?;
        entries.extend(piece_entries.into_iter().map(|mut entry| {
            entry.line += before;
            entry
        }));
        skipped.extend(piece_skipped.into_iter().map(|mut issue| {
            issue.line += before;
            issue
        }));
        before += newlines;
    }
    Ok((entries, skipped))
}

/// Pieces of a large input per reading thread (see [`read_entries`]).
const PIECES_PER_THREAD: usize = 8;

/// How many entries a text of `bytes` with `newlines` can hold: its lines, but no more than
/// lines of the shortest entry (`{"type":"","id":""}`), so that a file of blank lines reserves
/// little, nor more than one over the entry limit. Reserved capacity that no entry fills is never
/// touched: it costs address space, not memory.
fn capacity(newlines: usize, bytes: usize, options: ParseOptions) -> usize {
    let limit = options
        .max_entries
        .map_or(usize::MAX, |m| m.saturating_add(1));
    (newlines + 1).min(bytes / 19 + 1).min(limit)
}

fn read_chunk<'a>(
    chunk: &'a [u8],
    first_number: usize,
    options: ParseOptions,
    capacity: usize,
    source: Lines<'a>,
) -> Result<(Vec<Entry>, Vec<LineIssue>), ParseError> {
    let lenient = options.lenient;
    let mut entries = Vec::with_capacity(capacity);
    let mut skipped = Vec::new();
    for (number, bytes) in lines(chunk, first_number) {
        check_length(number, bytes, options)?;
        match source
            .text(number, bytes)
            .and_then(|text| entry_from_line(number, source.raw(text)))
        {
            Ok(entry) => entries.push(entry),
            Err(e) if lenient => skipped.push(LineIssue {
                line: number,
                kind: e.kind,
                message: e.message,
            }),
            Err(e) => return Err(e),
        }
    }
    Ok((entries, skipped))
}

pub(super) fn read<'a>(
    input: &'a [u8],
    options: ParseOptions,
    source: Lines<'a>,
) -> Result<ReadFile, ParseError> {
    let mut skipped = Vec::new();
    let mut lines = lines(input, 1);
    let (title, header, header_end) =
        read_header(input, &mut lines, options, source, &mut skipped)?;
    let source_version = header.version;
    let (header, entries) = if source_version >= CURRENT_VERSION {
        // Everything after the header line, numbered from the line after it.
        let rest = input.get(header_end + 1..).unwrap_or_default();
        let (entries, more_skipped) = read_entries(rest, header.line + 1, options, source)?;
        skipped.extend(more_skipped);
        (header, entries)
    } else {
        read_migrated(header, lines, options, source, &mut skipped)?
    };
    Ok(ReadFile {
        title,
        header,
        entries,
        source_version,
        skipped,
    })
}

/// In lenient mode a bad line is recorded in `skipped`; in strict mode it ends the read.
fn reject(
    options: ParseOptions,
    issue: ParseError,
    skipped: &mut Vec<LineIssue>,
) -> Result<(), ParseError> {
    match (options.lenient, issue.line) {
        (true, Some(line)) => {
            skipped.push(LineIssue {
                line,
                kind: issue.kind,
                message: issue.message,
            });
            Ok(())
        }
        _ => Err(issue),
    }
}

/// The session header (and a title line before it, if any): the first line that parses, as
/// pi's loader finds it, and where it ends in `input`.
fn read_header<'a>(
    input: &'a [u8],
    lines: &mut impl Iterator<Item = (usize, &'a [u8])>,
    options: ParseOptions,
    source: Lines<'a>,
    skipped: &mut Vec<LineIssue>,
) -> Result<(Option<ByteString>, Header, usize), ParseError> {
    let mut title = None;
    loop {
        let Some((number, bytes)) = lines.next() else {
            return Err(ParseError {
                line: None,
                kind: ParseErrorKind::Empty,
                message: "the session file has no header line (it is empty)".into(),
            });
        };
        check_length(number, bytes, options)?;
        let text = match source.text(number, bytes) {
            Ok(text) => text,
            Err(e) => {
                reject(options, e, skipped)?;
                continue;
            }
        };
        let wire: WireHeader = match decode(number, &js_json::replace_lone_surrogates_str(text)) {
            Ok(wire) => wire,
            // pi's loader looks for the first line that parses; lenient reading does the same.
            Err(e) if e.kind != ParseErrorKind::InvalidField => {
                reject(options, e, skipped)?;
                continue;
            }
            Err(e) => return Err(header_error(number, e.message)),
        };
        match (wire.kind.as_deref(), &wire.id) {
            (Some("title"), _) if title.is_none() && wire.v == Some(Value::from(1)) => {
                title = Some(source.raw(text));
            }
            (Some("session"), Some(Value::String(id))) if id.contains('\0') => {
                return Err(header_error(
                    number,
                    "the session header's \"id\" holds a NUL character (\\u0000), which ids cannot contain".into(),
                ));
            }
            (Some("session"), Some(Value::String(id))) => {
                let version = wire.version.map_or(1, |v| v.max(0.0) as u32);
                // Where the header line ends in `input` (`bytes` is a slice of it).
                let end = bytes.as_ptr() as usize - input.as_ptr() as usize + bytes.len();
                let header = Header {
                    line: number,
                    raw: source.raw(text),
                    id: id.clone(),
                    version,
                    cwd: wire.cwd,
                    timestamp: wire.timestamp,
                };
                return Ok((title, header, end));
            }
            (Some("session"), _) => {
                return Err(header_error(
                    number,
                    "the session header has no string \"id\"".into(),
                ));
            }
            (kind, _) => {
                let found = kind.map_or("no \"type\"".to_owned(), |k| format!("type {k:?}"));
                return Err(header_error(
                    number,
                    format!("expected the session header (type \"session\") but found {found}"),
                ));
            }
        }
    }
}

/// A v1/v2 file's `header` and its remaining `lines`: the parsed objects migrated as pi does,
/// then read as v3 lines.
fn read_migrated<'a>(
    header: Header,
    lines: impl Iterator<Item = (usize, &'a [u8])>,
    options: ParseOptions,
    source: Lines<'a>,
    skipped: &mut Vec<LineIssue>,
) -> Result<(Header, Vec<Entry>), ParseError> {
    let header_line = header.line;
    let source_version = header.version;
    // Lone surrogates are carried through as JavaScript would carry them (`js_json::preserving`).
    let mut objects: Vec<Value> = vec![
        js_json::preserving::parse(&header.raw)
            .map_err(|e| header_error(header_line, e.to_string()))?,
    ];
    let mut numbers = vec![header_line];
    for (number, bytes) in lines {
        check_length(number, bytes, options)?;
        let parsed = source.text(number, bytes).and_then(|text| {
            // Read keeping lone surrogates; a line that does not parse is decoded again for the
            // error that names its problem.
            let value: Value = match js_json::preserving::parse(text) {
                Ok(value) => value,
                Err(_) => decode(number, &js_json::replace_lone_surrogates_str(text))?,
            };
            if value.is_object() {
                Ok(value)
            } else {
                Err(ParseError::at(
                    number,
                    ParseErrorKind::NotAnObject,
                    "the line is not a JSON object",
                ))
            }
        });
        match parsed {
            Ok(value) => {
                objects.push(value);
                numbers.push(number);
            }
            Err(e) => reject(options, e, skipped)?,
        }
    }
    migrate::migrate(&mut objects, source_version);
    let mut objects = objects.into_iter().zip(numbers);
    let (header_object, _) = objects.next().expect("the header is the first object");
    let header = Header {
        raw: js_json::preserving::stringify(&header_object).into(),
        version: CURRENT_VERSION,
        ..header
    };
    let mut entries = Vec::with_capacity(objects.len());
    for (object, number) in objects {
        match entry_from_line(number, js_json::preserving::stringify(&object).into()) {
            Ok(entry) => entries.push(entry),
            Err(e) => reject(options, e, skipped)?,
        }
    }
    Ok((header, entries))
}

fn header_error(line: usize, message: String) -> ParseError {
    ParseError::at(line, ParseErrorKind::InvalidHeader, message)
}
