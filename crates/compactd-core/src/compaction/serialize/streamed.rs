//! The serialized conversation written straight into a JSON document as an escaped string, a
//! piece at a time, never held whole: `compactd plan` writes a long session's plan this way.
//!
//! Held whole, a 21 MB session's 9 MB conversation was written into fresh memory (its second half
//! twice: written apart on a second thread, then copied after the first), and escaped into fresh
//! memory once more before it was written out. Fresh memory is zeroed by the kernel at first
//! touch, and on a VM that was most of what planning spent after reading (BENCHMARKS.md). Here
//! each thread serializes its half of the messages into one small buffer and escapes each piece
//! as it fills: the first half is written out as it goes, the second is held escaped until the
//! first is out.

use std::io::{self, Write};

use super::{size_hints, to_llm, write_part};
use crate::js_json::escape;
use crate::session::Message;
use crate::transcript::pi::PART_SEPARATOR;

/// About how much serialized text is escaped at a time.
const PIECE: usize = 64 << 10;

/// Writes `serialize_conversation(messages)` as a JSON string, quotes included: the same bytes
/// as `escape::write_str` of it.
pub fn write_conversation_json<'a>(
    out: &mut impl Write,
    messages: impl IntoIterator<Item = &'a Message>,
) -> io::Result<()> {
    let messages: Vec<&Message> = messages.into_iter().collect();
    let hints = size_hints(&messages);
    out.write_all(b"\"")?;
    if crate::parallel::threads_for(hints.iter().sum(), 2) < 2 {
        for_each_piece(&messages, |piece| escape::write_pieces(out, piece))?;
    } else {
        let middle = crate::parallel::half_way(hints.iter().copied());
        let (first, second) = messages.split_at(middle);
        std::thread::scope(|scope| {
            let second = scope.spawn(|| {
                // Escaping adds about a byte in nine to code and prose: room for that up front, so
                // that the buffer is not grown by copies into fresh memory.
                let size: usize = hints[middle..].iter().sum();
                let mut escaped = Vec::with_capacity(size + size / 8);
                let wrote =
                    for_each_piece(second, |piece| escape::write_pieces(&mut escaped, piece));
                wrote.map(|wrote| (wrote, escaped))
            });
            let wrote_first = for_each_piece(first, |piece| escape::write_pieces(out, piece))?;
            let (wrote_second, escaped) = second.join().expect("serializing does not panic")?;
            // The blank line between parts that `pi::join_parts` puts where two halves meet.
            if wrote_first && wrote_second {
                escape::write_pieces(out, PART_SEPARATOR)?;
            }
            out.write_all(&escaped)
        })?;
    }
    out.write_all(b"\"")
}

/// Serializes `messages` as `serialize_conversation` does, handing the text to `emit` a piece of
/// about [`PIECE`] bytes at a time; whether there was any text.
fn for_each_piece<E>(
    messages: &[&Message],
    mut emit: impl FnMut(&str) -> Result<(), E>,
) -> Result<bool, E> {
    let mut piece = String::new();
    let mut emitted = false;
    for message in messages {
        let Some(llm) = to_llm(message) else { continue };
        let fresh = piece.is_empty();
        write_part(&mut piece, &llm);
        // A part starts with the separator unless nothing comes before it (`pi::begin_part`),
        // and an emptied piece looks like nothing: the separator is put back in front.
        if fresh && emitted && !piece.is_empty() {
            piece.insert_str(0, PART_SEPARATOR);
        }
        if piece.len() >= PIECE {
            emit(&piece)?;
            emitted = true;
            piece.clear();
            if piece.capacity() > 4 * PIECE {
                // One long message would otherwise keep its size for the rest.
                piece = String::new();
            }
        }
    }
    if !piece.is_empty() {
        emit(&piece)?;
        emitted = true;
    }
    Ok(emitted)
}
