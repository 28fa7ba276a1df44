//! JSON string escaping, byte for byte as `serde_json` escapes and as JavaScript's
//! `JSON.stringify` does: the two differ only on lone surrogates, which a Rust string cannot hold.
//!
//! A plan's conversation is most of its JSON (9.4 MB of the 9.7 MB a 21 MB session plans to),
//! with an escape every ~9 bytes (the quotes and newlines of code). It is escaped by
//! `json-escape-simd` (sonic-rs's kernel, chosen at run time for the CPU: AVX2, SSE2, NEON or a
//! portable fallback), which stores a whole vector before it looks for the next escape instead of
//! copying each run between escapes: a third of the instructions of the eight-bytes-at-a-time scan
//! this module had (BENCHMARKS.md), the output the same (the tests hold it to `serde_json`). A long
//! string is escaped in two halves at once. Sizes are measured here without writing anything
//! (`added_len`).

use std::cell::RefCell;
use std::io::{self, Write};

/// Appends `text` as a JSON string literal with JavaScript's escaping, quotes included, to
/// `out`: `"` and `\`, the short escapes `\b \f \n \r \t`, other control characters as
/// lowercase `\u00xx`; everything else verbatim (the kernel's output as it is).
pub fn push_quoted(out: &mut String, text: &str) {
    SCRATCH.with_borrow_mut(|scratch| {
        // The kernel writes ASCII escapes and copies every other byte, so the bytes are UTF-8;
        // checking them costs a small fraction of escaping them (an ASCII run is checked a word
        // at a time), and keeps this code free of `unsafe`.
        out.push_str(std::str::from_utf8(escape(scratch, text)).expect("escaped UTF-8 is UTF-8"));
        if scratch.capacity() > SCRATCH_KEPT {
            *scratch = Vec::new();
        }
    });
}

thread_local! {
    /// Where `push_quoted` escapes before appending: the kernel writes into a byte vector.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Past this, the scratch vector of a thread is freed after use rather than kept (one long
/// tool-call argument would otherwise hold six times its size for the thread's life).
const SCRATCH_KEPT: usize = 1 << 20;

/// `text` escaped into `buffer` (cleared first) as a JSON string, quotes included.
fn escape<'b>(buffer: &'b mut Vec<u8>, text: &str) -> &'b [u8] {
    buffer.clear();
    json_escape_simd::escape_into(text, buffer);
    buffer
}

/// A JSON string the kernel wrote, without its quotes.
fn unquoted(escaped: &[u8]) -> &[u8] {
    &escaped[1..escaped.len() - 1]
}

/// How many bytes escaping adds to each byte: one for a quote, a backslash and a control
/// character with a short escape (`\n`), five for the other control characters (`\u00XX`).
static ADDED: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = 5;
        byte += 1;
    }
    let mut short = [0x08, 0x09, 0x0A, 0x0C, 0x0D, b'"', b'\\'].as_slice();
    while let [byte, rest @ ..] = short {
        table[*byte as usize] = 1;
        short = rest;
    }
    table
};

/// How many bytes escaping adds to `text`, a table lookup a byte: a token estimate and a buffer's
/// size measure every tool call's arguments this way, most of them short strings (paths,
/// commands) where a scan a word at a time spends more on starting and stopping than it saves,
/// and code has an escape every few bytes.
pub fn added_len(text: &str) -> usize {
    text.bytes()
        .map(|b| usize::from(ADDED[usize::from(b)]))
        .sum()
}

/// Writes `text` as a JSON string, quotes included. A long one is escaped in two halves at once:
/// the second into memory on its own thread while the first is escaped and written here, a
/// piece at a time, so that only the second half is ever held escaped.
pub fn write_str(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    if crate::parallel::threads_for(text.len(), 2) < 2 {
        write_pieces(out, text)?;
    } else {
        let (first, second) = text.split_at(text.ceil_char_boundary(text.len() / 2));
        std::thread::scope(|scope| {
            let second = scope.spawn(|| {
                let mut escaped = Vec::new();
                escape(&mut escaped, second);
                escaped
            });
            write_pieces(out, first)?;
            out.write_all(unquoted(&second.join().expect("escaping does not panic")))
        })?;
    }
    out.write_all(b"\"")
}

/// Escapes and writes `text`, without quotes, through one small buffer (a JSON string may be
/// written so a piece at a time: escaping is per character, so pieces escaped apart are the whole
/// escaped).
pub fn write_pieces(out: &mut impl Write, text: &str) -> io::Result<()> {
    const PIECE: usize = 64 << 10;
    // The thread's scratch vector, not one of its own: called once per piece of a conversation
    // written a piece at a time, a new vector each call was fresh memory each call (the kernel
    // zeroing it cost more CPU than writing the conversation whole had).
    SCRATCH.with_borrow_mut(|buffer| {
        let mut rest = text;
        while !rest.is_empty() {
            let (piece, after) = rest.split_at(rest.ceil_char_boundary(PIECE));
            out.write_all(unquoted(escape(buffer, piece)))?;
            rest = after;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{added_len, push_quoted, write_str};

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        push_quoted(&mut out, text);
        assert_eq!(added_len(text), out.len() - text.len() - 2, "{text:?}");
        out[1..out.len() - 1].to_owned()
    }

    fn serde(text: &str) -> String {
        serde_json::to_string(text).unwrap()
    }

    #[test]
    fn every_byte_that_serde_escapes_is_escaped_as_serde_escapes_it() {
        // Each character inside runs of letters, so that it falls at every position of a vector
        // (32 bytes with AVX2) and of the tail the kernel copies after the last whole vector.
        for c in (0u32..0x80).chain([0xE9, 0x2028, 0xFFFD, 0x1F600]) {
            let c = char::from_u32(c).unwrap();
            for pad in 0..70 {
                let text = format!("{}{c}{}", "a".repeat(pad), "b".repeat(pad % 37));
                assert_eq!(
                    format!("\"{}\"", escaped(&text)),
                    serde(&text),
                    "{c:?} at {pad}"
                );
            }
        }
    }

    #[test]
    fn a_long_string_written_in_two_halves_is_serdes_string() {
        // Over the split threshold, with a multi-byte character where the halves meet and escapes
        // on both sides, as a plan's conversation has.
        let line = "[Tool result]: {\"ok\":true}\n\tcafé 😀 \u{1}\\ ";
        let text = line.repeat((1 << 20) / line.len() + 3);
        let mut out = Vec::new();
        write_str(&mut out, &text).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), serde(&text));
    }

    #[test]
    fn escapes_append_after_what_the_string_holds_whatever_came_before() {
        // The scratch vector is reused, and dropped after a text over `SCRATCH_KEPT`: each append
        // writes its own text after what `out` held, with nothing left of the last one.
        let long = "\"line\"\n".repeat((super::SCRATCH_KEPT / 8) + 1);
        let mut out = String::from("[");
        for text in ["a\tb", long.as_str(), "", "c\u{1}", "\u{1F600}\\"] {
            push_quoted(&mut out, text);
            out.push(',');
        }
        let expected: Vec<String> = ["a\tb", long.as_str(), "", "c\u{1}", "\u{1F600}\\"]
            .iter()
            .copied()
            .map(serde)
            .collect();
        assert_eq!(out, format!("[{},", expected.join(",")));
    }

    proptest! {
        #[test]
        fn any_string_escapes_as_serde_escapes_it(text in "(\\PC|[\\x00-\\x1f\\x7f\"\\\\])*") {
            prop_assert_eq!(format!("\"{}\"", escaped(&text)), serde(&text));
            let mut out = Vec::new();
            write_str(&mut out, &text).unwrap();
            prop_assert_eq!(String::from_utf8(out).unwrap(), serde(&text));
        }
    }
}
