//! One line of a session file: its length and nesting limits, its text, and its JSON decoded
//! as an entry, with errors that name the line (spec §1.1, §1.5). [`super::parse`] reads whole
//! files line by line with these.

use std::cell::RefCell;

use bytestring::ByteString;

use super::entry::{Entry, Missing, WireEntry};
use super::nesting::{JSON_DEPTH_LIMIT, nesting_exceeds};
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
    let built = match decode_fast(&raw, |wire| wire.into_entry(number)) {
        Some(built) => built,
        None => {
            let text = js_json::replace_lone_surrogates_str(&raw);
            decode::<WireEntry>(number, &text)?.into_entry(number)
        }
    };
    let build = built.map_err(|problem| match problem {
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

/// A line's copy and simd-json's working memory, one per thread that reads lines.
#[derive(Default)]
struct Scratch {
    line: Vec<u8>,
    buffers: simd_json::Buffers,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::default();
}

/// Past this, a line's scratch memory is given back once the line is read: a thread of the
/// blocking pool that once read a long line does not keep its size.
const KEPT_SCRATCH: usize = 1 << 20;

/// `then` of the entry simd-json decodes from the line, or `None` where simd-json refuses the
/// line, for [`decode`] to decode it or name what is wrong. simd-json finds a string's escapes a
/// vector at a time where serde_json stops at each one, and most of a session's bytes are texts
/// with a line break or a quote every few dozen bytes: planning a 21 MB session took 15 % less
/// time (BENCHMARKS.md, issue 26). It decodes in place, so the line is copied first (lone
/// surrogates made U+FFFD on the copy, as [`decode`]'s callers do). Where the two accept a line
/// they read the same values, bit for bit (tested on every line of the shared sessions, and on
/// lines broken at random); what simd-json alone refuses (integers past 64 bits) serde_json
/// reads, and what it reads otherwise — lone surrogates, which it decodes to U+0000, and the
/// lines [`read_alike`] finds — never reaches it.
fn decode_fast<R>(raw: &str, then: impl FnOnce(WireEntry<'_>) -> R) -> Option<R> {
    if !read_alike(raw.as_bytes()) {
        return None;
    }
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.line.clear();
        scratch.line.extend_from_slice(raw.as_bytes());
        js_json::replace_lone_surrogates_in_place(&mut scratch.line);
        let decoded = simd_json::serde::from_slice_with_buffers::<WireEntry>(
            &mut scratch.line,
            &mut scratch.buffers,
        );
        let result = decoded.ok().map(then);
        if scratch.line.capacity() > KEPT_SCRATCH {
            *scratch = Scratch::default();
        }
        result
    })
}

/// Whether simd-json reads `line` as serde_json does, as far as quick searches tell. Where it
/// does not: a NUL byte after a number ends the number (`[1\u{0}2]`, which serde_json refuses);
/// the integer `-0` is read as 0 (serde_json: −0.0, as JavaScript does); a number of 19 digits or
/// more, which simd-json reads on a slower path, may be followed by anything
/// (`[1234567890123456789x]`). A text that looks like one of these (`2026-01-01`, a long number
/// in a message) sends its line to serde_json too, which only costs time.
fn read_alike(line: &[u8]) -> bool {
    memchr::memchr(0, line).is_none()
        && !memchr::memmem::find_iter(line, b"-0")
            .any(|at| !matches!(line.get(at + 2), Some(b'0'..=b'9' | b'.' | b'e' | b'E')))
        && !long_number_runs_on(line)
}

/// Whether `line` has a run of 19 or more digits and points that is not a whole JSON number in a
/// value's place: after `:`, `,`, `[` or a space (and a minus), in JSON's form (no leading zero,
/// one point at most, an exponent with digits), then `,`, `}`, `]` or a space. JavaScript writes
/// such numbers in a third of pi's lines (costs such as `0.0009562500000000001`), always so. Such a
/// run holds a byte of any grid of 18, so only every 18th byte is looked at until one is a digit
/// or a point. (This check and the two searches cost 6 % of planning's instructions.)
fn long_number_runs_on(line: &[u8]) -> bool {
    const LONG: usize = 19;
    let numeric = |b: &u8| b.is_ascii_digit() || *b == b'.';
    let mut at = LONG - 1;
    while at < line.len() {
        if numeric(&line[at]) {
            let start = at - line[..at].iter().rev().take_while(|b| numeric(b)).count();
            let end = at + line[at..].iter().take_while(|b| numeric(b)).count();
            if end - start >= LONG && !whole_number(line, start, end) {
                return true;
            }
            at = end;
        }
        at += LONG - 1;
    }
    false
}

/// Whether the digits and points `line[start..end]` are a JSON number standing as a value.
fn whole_number(line: &[u8], start: usize, end: usize) -> bool {
    let before = match line[..start] {
        [.., before, b'-'] | [.., before] => before,
        [] => return false,
    };
    let digits = &line[start..end];
    let (whole, fraction) = match digits.iter().position(|&b| b == b'.') {
        Some(point) => (&digits[..point], Some(&digits[point + 1..])),
        None => (digits, None),
    };
    let mut rest = &line[end..];
    if let [b'e' | b'E', after @ ..] = rest {
        let after = after
            .strip_prefix(b"+")
            .or(after.strip_prefix(b"-"))
            .unwrap_or(after);
        let exponent = after.iter().take_while(|b| b.is_ascii_digit()).count();
        if exponent == 0 {
            return false;
        }
        rest = &after[exponent..];
    }
    matches!(before, b':' | b',' | b'[' | b' ' | b'\t' | b'\r')
        && !whole.is_empty()
        && !(whole.len() > 1 && whole[0] == b'0')
        && fraction.is_none_or(|f| !f.is_empty() && !f.contains(&b'.'))
        && matches!(
            rest.first(),
            Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\r')
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entry (as `Debug` prints it, so that numbers compare bit for bit) the serde_json path
    /// reads from `line`, and the one the simd-json path reads (`None`: it refused the line).
    fn both_ways(line: &str) -> (Result<String, ParseError>, Option<String>) {
        let raw = ByteString::from(line.to_owned());
        let text = js_json::replace_lone_surrogates_str(line);
        let slow = decode::<WireEntry>(1, &text).and_then(|wire| {
            let build = wire.into_entry(1).map_err(|_| {
                ParseError::at(
                    1,
                    ParseErrorKind::InvalidField,
                    "a required field is missing",
                )
            })?;
            Ok(format!("{:?}", build(raw.clone())))
        });
        let fast = decode_fast(line, |wire| wire.into_entry(1).ok())
            .map(|built| built.map(|build| format!("{:?}", build(raw.clone()))));
        let fast = fast.map(|entry| entry.unwrap_or_else(|| "a required field is missing".into()));
        (slow, fast)
    }

    #[test]
    fn simd_json_reads_every_line_of_real_sessions_as_serde_json_does() {
        let fixtures = compactd_testkit::fixtures();
        let fixtures = fixtures.display();
        let (mut lines, mut entries, mut left_to_serde) = (0, 0, 0);
        for name in [
            "large-session.jsonl",
            "before-compaction.jsonl",
            "pi15/s0000.jsonl",
            "pi15/s0001.jsonl",
            "pi15/s0002.jsonl",
        ] {
            let file = std::fs::read_to_string(format!("{fixtures}/{name}")).unwrap();
            // The header (the first line) is not an entry.
            for (number, line) in file.lines().enumerate().skip(1) {
                // Lines of v1 files have no ids (migration gives them some): both ways say so.
                let (slow, fast) = both_ways(line);
                let slow = slow.map_or_else(
                    |e| e.message,
                    |entry| {
                        entries += 1;
                        entry
                    },
                );
                let at = number + 1;
                match fast {
                    Some(fast) => assert_eq!(fast, slow, "{name}:{at}"),
                    None => {
                        assert!(!read_alike(line.as_bytes()), "{name}:{at}");
                        left_to_serde += 1;
                    }
                }
                lines += 1;
            }
        }
        assert!(entries > 500, "{entries} entries");
        // JavaScript's long numbers (costs) are in a third of these lines: they stay on the
        // fast path.
        assert!(
            left_to_serde * 50 < lines,
            "{left_to_serde} of {lines} lines"
        );
    }

    #[test]
    fn simd_json_reads_javascripts_escapes_and_leaves_the_rest_to_serde_json() {
        let message = |text: &str| {
            format!(
                r#"{{"type":"message","id":"a","parentId":null,"timestamp":"2026-01-01T00:00:00.000Z","message":{{"role":"user","content":[{{"type":"text","text":"{text}"}}],"timestamp":1767225600000}}}}"#
            )
        };
        // Every escape JSON.stringify writes, a pair, and a lone surrogate: read by the fast
        // path, the same as serde_json reads them (the lone one as U+FFFD, not simd-json's U+0000).
        for text in [
            r#"q\"b\\s\/\b\f\n\r\t\u001b[0m"#,
            r#"pair \ud83d\ude00 and lone \ud83d"#,
            r#"cut at the end \ude00"#,
        ] {
            let (slow, fast) = both_ways(&message(text));
            let slow = slow.unwrap();
            assert_eq!(fast.as_deref(), Some(slow.as_str()), "{text}");
        }
        let (_, lone) = both_ways(&message(r#"lone \ud83d"#));
        assert!(lone.unwrap().contains("lone \u{fffd}"));
        // An integer past 64 bits: simd-json refuses it, serde_json reads it, and the line is read.
        let big = r#"{"type":"compaction","id":"c","parentId":null,"summary":"s","firstKeptEntryId":"a","tokensBefore":123456789012345678901234567890}"#;
        let (slow, fast) = both_ways(big);
        assert!(slow.is_ok() && fast.is_none(), "{slow:?} {fast:?}");
        let entry = entry_from_line(1, ByteString::from(big)).unwrap();
        assert!(format!("{:?}", entry.kind).contains("tokens_before: 1.2345678901234568e29"));
        // A raw control character in a string: refused by both, the error serde_json's.
        let line = message("ctl").replace("ctl", "ctl\u{1}");
        let error = entry_from_line(1, ByteString::from(line)).unwrap_err();
        assert_eq!(error.kind, ParseErrorKind::InvalidJson, "{error:?}");
        assert!(
            error.message.contains("control character"),
            "{}",
            error.message
        );
    }

    #[test]
    fn lines_simd_json_would_read_otherwise_are_left_to_serde_json() {
        for odd in [
            "[1,2\u{0}]",
            r#"{"n":-0}"#,
            r#"{"n":[-0,1]}"#,
            r#"{"n":1234567890123456789x}"#,
            r#"{"n":0.000956250000000000.1}"#,
            r#"{"n":0.0009562500000000001e}"#,
            r#"{"n":00000000000000000001}"#,
            r#"{"n":--1234567890123456789}"#,
        ] {
            assert!(!read_alike(odd.as_bytes()), "{odd}");
        }
        for plain in [
            r#"{"cost":{"input":0.0009562500000000001,"total":1.2345678901234567e-7},"n":-0.5}"#,
            r#"{"timestamp":"2026-01-01T00:00:00.000Z","n":[12345678901234567890, 1]}"#,
            r#"{"text":"order 12345678901234567890 shipped"}"#,
        ] {
            assert!(read_alike(plain.as_bytes()), "{plain}");
        }
    }

    /// Real entry lines: an assistant's thinking and tool call with numbers of every form; a
    /// tool result with JavaScript's escapes, a pair and a lone surrogate, non-ASCII text; a
    /// compaction with its details.
    const LINES: [&str; 3] = [
        r#"{"type":"message","id":"b1","parentId":"a0","timestamp":"2026-01-01T00:00:00.000Z","message":{"role":"assistant","content":[{"type":"thinking","thinking":"read \"a.rs\"\n"},{"type":"toolCall","id":"t","name":"read","arguments":{"path":"a.rs","limit":-2.5e3,"n":[0,1.0,true,null]}}],"usage":{"input":12,"output":3.5,"cacheRead":0,"cacheWrite":0,"totalTokens":15.5},"stopReason":"toolUse","timestamp":1767225600000}}"#,
        r#"{"type":"message","id":"c2","parentId":"b1","timestamp":"2026-01-01T00:00:01.000Z","message":{"role":"toolResult","toolCallId":"t","toolName":"read","content":[{"type":"text","text":"\u001b[1mcafé\u001b[0m\t\\ 😀 \ud83d\ude00 cut \ud83d"}],"isError":false,"timestamp":1767225601000}}"#,
        r#"{"type":"compaction","id":"d3","parentId":"c2","timestamp":"2026-01-01T00:00:02.000Z","summary":"Goal:\nfix it","firstKeptEntryId":"c2","tokensBefore":0.0009562500000000001,"details":{"readFiles":["a.rs"],"modifiedFiles":[]},"fromHook":false}"#,
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]
        /// A line broken anywhere, with any of JSON's own characters (or a control character,
        /// or a multi-byte one): both decoders accept it or both refuse it, and what they accept
        /// they read alike.
        #[test]
        fn a_broken_line_is_accepted_or_refused_by_both_decoders(
            which in 0..LINES.len(),
            at in 0usize..400,
            cut in 0usize..4,
            insert in "[\"\\\\\\{}\\[\\],:0-9a-zE+. \\x00-\\x1f\u{e9}\u{1F600}-]{0,3}",
        ) {
            let mut line = LINES[which].to_owned();
            let at = at.min(line.len());
            let at = (0..=at).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
            let end = (at + cut).min(line.len());
            let end = (end..=line.len()).find(|&i| line.is_char_boundary(i)).unwrap();
            line.replace_range(at..end, &insert);
            let (slow, fast) = both_ways(&line);
            match (slow, fast) {
                (Ok(slow), Some(fast)) => proptest::prop_assert_eq!(fast, slow),
                // simd-json refuses more (integers past 64 bits): serde_json reads those.
                (Ok(_), None) | (Err(_), None) => {}
                // Missing fields are told alike.
                (Err(slow), Some(fast)) => proptest::prop_assert_eq!(fast, slow.message, "{}", line),
            }
        }
    }
}
