//! JSON string escaping, byte for byte as `serde_json` escapes and as JavaScript's
//! `JSON.stringify` does: the two differ only on lone surrogates, which a Rust string cannot hold.
//!
//! A plan's conversation is most of its JSON (9.4 MB of the 9.7 MB a 21 MB session plans to).
//! `serde_json` escapes it one byte at a time through a table, on one core, after everything else
//! is done: 11–16 ms of the 75–90 ms the whole command took (BENCHMARKS.md). Here the runs between
//! escapes are skipped eight bytes at a time, and a long string is escaped in two halves at once.
//! Tool-call arguments are measured and written (`JSON.stringify`) with the same scan.

use std::io::{self, Write};

/// What `serde_json` writes for each byte: 0 for the byte itself, `u` for `\u00XX`, else the
/// letter after the backslash.
static ESCAPE: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = b'u';
        byte += 1;
    }
    table[0x08] = b'b';
    table[0x09] = b't';
    table[0x0A] = b'n';
    table[0x0C] = b'f';
    table[0x0D] = b'r';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table
};

const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);

/// A word's bytes that may need escaping, flagged by their high bit. The lowest flag is always a
/// byte below 0x20, a quote or a backslash (the bit tricks can only add false flags above a true
/// one, where a borrow carries), which is all the scan uses.
fn flags(word: u64) -> u64 {
    let zero = |w: u64| w.wrapping_sub(ONES) & !w;
    let control = word.wrapping_sub(ONES * 0x20) & !word;
    let quote = zero(word ^ (ONES * u64::from(b'"')));
    let backslash = zero(word ^ (ONES * u64::from(b'\\')));
    (control | quote | backslash) & HIGHS
}

/// Appends `text` escaped (without the quotes around it) to `out`.
pub fn escape_into(out: &mut String, text: &str) {
    let bytes = text.as_bytes();
    let mut run = 0;
    while let Some(at) = next_escape(bytes, run) {
        // Escaped bytes are ASCII, so both ends of the run are character boundaries.
        out.push_str(&text[run..at]);
        push_escape(out, bytes[at]);
        run = at + 1;
    }
    out.push_str(&text[run..]);
}

/// How many bytes escaping adds to `text`.
pub fn added_len(text: &str) -> usize {
    let bytes = text.as_bytes();
    let (mut added, mut from) = (0, 0);
    while let Some(at) = next_escape(bytes, from) {
        added += if ESCAPE[usize::from(bytes[at])] == b'u' {
            5
        } else {
            1
        };
        from = at + 1;
    }
    added
}

/// Where the first byte at or after `from` that needs escaping is.
fn next_escape(bytes: &[u8], mut at: usize) -> Option<usize> {
    while at < bytes.len() {
        if let Some(word) = bytes.get(at..at + 8) {
            let flagged = flags(u64::from_le_bytes(word.try_into().expect("eight bytes")));
            if flagged == 0 {
                at += 8;
                continue;
            }
            // Little-endian: the lowest flag is the earliest byte.
            at += (flagged.trailing_zeros() / 8) as usize;
        }
        if ESCAPE[usize::from(bytes[at])] != 0 {
            return Some(at);
        }
        at += 1;
    }
    None
}

fn push_escape(out: &mut String, byte: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match ESCAPE[usize::from(byte)] {
        b'u' => {
            out.push_str("\\u00");
            out.push(char::from(HEX[usize::from(byte >> 4)]));
            out.push(char::from(HEX[usize::from(byte & 0xF)]));
        }
        letter => {
            out.push('\\');
            out.push(char::from(letter));
        }
    }
}

/// Writes `text` as a JSON string, quotes included. A long one is escaped in two halves at once:
/// the second into memory on its own thread while the first is escaped and written here, a
/// piece at a time, so that only the second half is ever held escaped.
pub fn write_str(out: &mut impl Write, text: &str) -> io::Result<()> {
    out.write_all(b"\"")?;
    if crate::cpu::threads_for(text.len(), 2) < 2 {
        write_pieces(out, text)?;
    } else {
        let mut middle = text.len() / 2;
        while !text.is_char_boundary(middle) {
            middle += 1;
        }
        let (first, second) = text.split_at(middle);
        std::thread::scope(|scope| {
            let second = scope.spawn(|| {
                let mut escaped = String::with_capacity(second.len() + second.len() / 8);
                escape_into(&mut escaped, second);
                escaped
            });
            write_pieces(out, first)?;
            out.write_all(second.join().expect("escaping does not panic").as_bytes())
        })?;
    }
    out.write_all(b"\"")
}

/// Escapes and writes `text` through one small buffer.
fn write_pieces(out: &mut impl Write, text: &str) -> io::Result<()> {
    const PIECE: usize = 64 << 10;
    let mut buffer = String::with_capacity(PIECE + PIECE / 4);
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE);
        while !rest.is_char_boundary(end) {
            end += 1;
        }
        let (piece, after) = rest.split_at(end);
        buffer.clear();
        escape_into(&mut buffer, piece);
        out.write_all(buffer.as_bytes())?;
        rest = after;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{added_len, escape_into, write_str};

    fn escaped(text: &str) -> String {
        let mut out = String::new();
        escape_into(&mut out, text);
        assert_eq!(added_len(text), out.len() - text.len(), "{text:?}");
        out
    }

    fn serde(text: &str) -> String {
        serde_json::to_string(text).unwrap()
    }

    #[test]
    fn every_byte_that_serde_escapes_is_escaped_as_serde_escapes_it() {
        // Each character alone, and inside words so that the eight-byte scan meets it at every
        // position of a word.
        for c in (0u32..0x80).chain([0xE9, 0x2028, 0xFFFD, 0x1F600]) {
            let c = char::from_u32(c).unwrap();
            for pad in 0..9 {
                let text = format!("{}{c}{}", "a".repeat(pad), "b".repeat(8 - pad));
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

    proptest! {
        #[test]
        fn any_string_escapes_as_serde_escapes_it(text in "(\\PC|[\\x00-\\x1f\"\\\\])*") {
            prop_assert_eq!(format!("\"{}\"", escaped(&text)), serde(&text));
            let mut out = Vec::new();
            write_str(&mut out, &text).unwrap();
            prop_assert_eq!(String::from_utf8(out).unwrap(), serde(&text));
        }
    }
}
