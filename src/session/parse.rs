//! Reading a session file: JSONL lines, the header (and oh-my-pi's title slot before it),
//! migration of v1/v2 files, and the errors that name the line that is wrong (spec §1.1–§1.6).

use serde::Serialize;
use serde_json::Value;

use super::entry::{Entry, EntryProblem, Header, WireEntry, WireHeader};
use super::migrate::{self, CURRENT_VERSION};
use crate::js_json;

/// How strictly to read a file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ParseOptions {
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
}

/// A line that lenient reading skipped or repaired.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineIssue {
    pub line: usize,
    pub kind: ParseErrorKind,
    pub message: String,
}

impl ParseError {
    pub(super) fn at(line: usize, kind: ParseErrorKind, message: impl Into<String>) -> Self {
        ParseError {
            line: Some(line),
            kind,
            message: message.into(),
        }
    }
}

/// What reading produced before the entries are linked into a tree.
pub(super) struct ReadFile {
    pub(super) title: Option<Box<str>>,
    pub(super) header: Header,
    pub(super) entries: Vec<Entry>,
    pub(super) source_version: u32,
    pub(super) skipped: Vec<LineIssue>,
}

/// Non-blank physical lines with their 1-based numbers. pi trims the text and skips blank lines;
/// numbering stays physical so errors point at the line an editor shows.
fn lines(input: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    input
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line))
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
}

pub(super) fn read(input: &[u8], options: ParseOptions) -> Result<ReadFile, ParseError> {
    let mut skipped = Vec::new();
    // In lenient mode a bad line is recorded and skipped; in strict mode it ends the read.
    let reject = |issue: ParseError, skipped: &mut Vec<LineIssue>| -> Result<(), ParseError> {
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
    };

    let mut lines = lines(input);
    let mut title = None;
    let header = loop {
        let Some((number, bytes)) = lines.next() else {
            return Err(ParseError {
                line: None,
                kind: ParseErrorKind::Empty,
                message: "the session file has no header line (it is empty)".into(),
            });
        };
        let text = match line_text(number, bytes) {
            Ok(text) => text,
            Err(e) => {
                reject(e, &mut skipped)?;
                continue;
            }
        };
        let wire: WireHeader = match decode(number, text) {
            Ok(wire) => wire,
            // pi's loader looks for the first line that parses; lenient reading does the same.
            Err(e) if e.kind != ParseErrorKind::InvalidField => {
                reject(e, &mut skipped)?;
                continue;
            }
            Err(e) => return Err(header_error(number, e.message)),
        };
        match (wire.kind.as_deref(), &wire.id) {
            (Some("title"), _) if title.is_none() && wire.v == Some(Value::from(1)) => {
                title = Some(text.into());
            }
            (Some("session"), Some(Value::String(id))) => {
                let version = wire.version.map_or(1, |v| v.max(0.0) as u32);
                break Header {
                    line: number,
                    raw: text.into(),
                    id: id.clone(),
                    version,
                    cwd: wire.cwd,
                    timestamp: wire.timestamp,
                };
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
    };

    let source_version = header.version;
    if source_version >= CURRENT_VERSION {
        let mut entries = Vec::with_capacity(input.len() / 512);
        for (number, bytes) in lines {
            match line_text(number, bytes).and_then(|text| entry_from_line(number, text.into())) {
                Ok(entry) => entries.push(entry),
                Err(e) => reject(e, &mut skipped)?,
            }
        }
        return Ok(ReadFile {
            title,
            header,
            entries,
            source_version,
            skipped,
        });
    }

    // v1/v2: migrate the parsed objects as pi does, then read the rewritten lines like v3 input.
    let header_line = header.line;
    let mut objects: Vec<Value> = vec![
        serde_json::from_str(&header.raw).map_err(|e| header_error(header_line, e.to_string()))?,
    ];
    let mut numbers = vec![header_line];
    for (number, bytes) in lines {
        let parsed = line_text(number, bytes).and_then(|text| {
            let value: Value = decode(number, text)?;
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
            Err(e) => reject(e, &mut skipped)?,
        }
    }
    migrate::migrate(&mut objects, source_version);
    let mut objects = objects.into_iter().zip(numbers);
    let (header_object, _) = objects.next().expect("the header is the first object");
    let header = Header {
        raw: js_json::stringify(&header_object).into(),
        version: CURRENT_VERSION,
        ..header
    };
    let mut entries = Vec::with_capacity(objects.len());
    for (object, number) in objects {
        match entry_from_line(number, js_json::stringify(&object).into()) {
            Ok(entry) => entries.push(entry),
            Err(e) => reject(e, &mut skipped)?,
        }
    }
    Ok(ReadFile {
        title,
        header,
        entries,
        source_version,
        skipped,
    })
}

fn header_error(line: usize, message: String) -> ParseError {
    ParseError::at(line, ParseErrorKind::InvalidHeader, message)
}

fn line_text(number: usize, bytes: &[u8]) -> Result<&str, ParseError> {
    std::str::from_utf8(bytes).map_err(|e| {
        ParseError::at(
            number,
            ParseErrorKind::InvalidUtf8,
            format!(
                "the line is not valid UTF-8 (byte {} of the line)",
                e.valid_up_to() + 1
            ),
        )
    })
}

/// Decodes one line, turning `serde_json`'s error into one that names the line and the column.
fn decode<'a, T: serde::Deserialize<'a>>(number: usize, text: &'a str) -> Result<T, ParseError> {
    serde_json::from_str(text).map_err(|e| {
        let kind = match e.classify() {
            serde_json::error::Category::Data if !text.trim_start().starts_with('{') => {
                ParseErrorKind::NotAnObject
            }
            serde_json::error::Category::Data => ParseErrorKind::InvalidField,
            _ => ParseErrorKind::InvalidJson,
        };
        let message = match kind {
            ParseErrorKind::NotAnObject => "the line is not a JSON object".to_owned(),
            ParseErrorKind::InvalidJson => format!("not valid JSON: {}", error_text(&e)),
            _ => error_text(&e),
        };
        ParseError::at(number, kind, message)
    })
}

/// `serde_json`'s message with its "at line 1 column N" rewritten as "(column N)": every line is
/// decoded on its own, so its line number would always read 1.
fn error_text(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    format!("{message} (column {})", e.column())
}

/// Reads one entry line (v3 form).
pub(super) fn entry_from_line(number: usize, raw: Box<str>) -> Result<Entry, ParseError> {
    let wire: WireEntry = decode(number, &raw)?;
    wire.into_entry(number, raw)
        .map_err(|problem| match problem {
            EntryProblem::MissingType => ParseError::at(
                number,
                ParseErrorKind::MissingType,
                "the entry has no \"type\"",
            ),
            EntryProblem::MissingId => {
                ParseError::at(number, ParseErrorKind::MissingId, "the entry has no \"id\"")
            }
            EntryProblem::MissingMessage => ParseError::at(
                number,
                ParseErrorKind::MissingMessage,
                "the message entry has no \"message\" object",
            ),
        })
}
