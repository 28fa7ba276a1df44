//! One line of a session file: its length and nesting limits, its text, and its JSON decoded
//! as an entry, with errors that name the line (spec §1.1, §1.5). [`super::parse`] reads whole
//! files line by line with these.

use bytestring::ByteString;

use super::entry::{Entry, Missing, WireEntry};
use super::parse::{ParseError, ParseErrorKind, ParseOptions};
use crate::js_json;

/// The line-length and nesting limits, checked before anything else is done with the line.
/// Nesting is checked here rather than left to `serde_json` because fields the reader skips are
/// not depth-checked by it, yet the line is stored and may be read whole later.
pub(super) fn check_length(
    number: usize,
    bytes: &[u8],
    options: ParseOptions,
) -> Result<(), ParseError> {
    if let Some(limit) = options.max_line_bytes
        && bytes.len() > limit
    {
        return Err(ParseError::at(
            number,
            ParseErrorKind::LineTooLong,
            format!(
                "the line is {} bytes, over the limit of {limit} bytes",
                bytes.len()
            ),
        ));
    }
    if nesting_exceeds(bytes, JSON_DEPTH_LIMIT) {
        return Err(ParseError::at(
            number,
            ParseErrorKind::TooDeep,
            format!("JSON nested deeper than {JSON_DEPTH_LIMIT} levels"),
        ));
    }
    Ok(())
}

/// The nesting limit alone, for single lines read outside a file (appends).
pub(super) fn check_nesting(number: usize, bytes: &[u8]) -> Result<(), ParseError> {
    check_length(number, bytes, ParseOptions::default())
}

/// Whether the JSON text nests arrays and objects deeper than `limit`. A line with at most
/// `limit` opening brackets in all cannot, which a vectorised count settles for nearly every line.
pub fn nesting_exceeds(bytes: &[u8], limit: usize) -> bool {
    // memchr's vectorised search skips the long runs of text between brackets.
    let opening = memchr::memchr2_iter(b'[', b'{', bytes).count();
    if opening <= limit {
        return false;
    }
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in bytes {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

pub(super) fn line_text(number: usize, bytes: &[u8]) -> Result<&str, ParseError> {
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
pub(super) fn decode<'a, T: serde::Deserialize<'a>>(
    number: usize,
    text: &'a str,
) -> Result<T, ParseError> {
    serde_json::from_str(text).map_err(|e| {
        let kind = match e.classify() {
            serde_json::error::Category::Data if !text.trim_start().starts_with('{') => {
                ParseErrorKind::NotAnObject
            }
            serde_json::error::Category::Data => ParseErrorKind::InvalidField,
            _ => ParseErrorKind::InvalidJson,
        };
        let message = match kind {
            _ if e.to_string().starts_with("recursion limit exceeded") => {
                format!(
                    "JSON nested deeper than {JSON_DEPTH_LIMIT} levels (column {})",
                    e.column()
                )
            }
            ParseErrorKind::NotAnObject => "the line is not a JSON object".to_owned(),
            ParseErrorKind::InvalidJson => format!("not valid JSON: {}", error_text(&e)),
            _ => error_text(&e),
        };
        ParseError::at(number, kind, message)
    })
}

/// Deepest nesting `serde_json` reads (its recursion limit), which bounds the stack a line can
/// take.
pub const JSON_DEPTH_LIMIT: usize = 128;

/// `serde_json`'s message with its "at line 1 column N" rewritten as "(column N)": every line is
/// decoded on its own, so its line number would always read 1.
fn error_text(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let message = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(message, _)| message);
    format!("{message} (column {})", e.column())
}

/// Reads one entry line (v3 form). The raw line is kept as it is; its text is decoded with lone
/// surrogates as U+FFFD (`js_json::replace_lone_surrogates`).
pub(super) fn entry_from_line(number: usize, raw: ByteString) -> Result<Entry, ParseError> {
    let text = js_json::replace_lone_surrogates_str(&raw);
    let wire: WireEntry = decode(number, &text)?;
    let build = wire.into_entry(number).map_err(|problem| match problem {
        Missing::Type => ParseError::at(
            number,
            ParseErrorKind::MissingType,
            "the entry has no \"type\"",
        ),
        Missing::Id => ParseError::at(number, ParseErrorKind::MissingId, "the entry has no \"id\""),
        Missing::Message => ParseError::at(
            number,
            ParseErrorKind::MissingMessage,
            "the message entry has no \"message\" object",
        ),
        Missing::NulInId => ParseError::at(
            number,
            ParseErrorKind::InvalidField,
            "the entry's \"id\" or \"parentId\" holds a NUL character (\\u0000), which ids cannot contain",
        ),
    })?;
    Ok(build(raw))
}

#[cfg(test)]
mod tests {
    use super::nesting_exceeds;

    #[test]
    fn nesting_depth_counts_brackets_outside_strings() {
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        assert!(nesting_exceeds(deep.as_bytes(), 128));
        let wide = format!("[{}]", "[],".repeat(500) + "[]");
        assert!(!nesting_exceeds(wide.as_bytes(), 128));
        let quoted = format!("{{\"s\":\"{}\\\"\"}}", "[".repeat(300));
        assert!(!nesting_exceeds(quoted.as_bytes(), 128), "{quoted}");
        let exact = format!(
            "{}{}",
            "{\"a\":".repeat(128),
            "1".to_owned() + &"}".repeat(128)
        );
        assert!(!nesting_exceeds(exact.as_bytes(), 128));
    }
}
