//! Files of megabytes: read in parallel chunks, and shared instead of copied.

use super::*;

/// A session of about `megabytes` MB: user and assistant turns with texts JavaScript escapes.
fn large_file(megabytes: usize) -> String {
    let mut b = SessionBuilder::new();
    let text = "é 😀 \"quoted\" line\n".repeat(50);
    while b.jsonl().len() < megabytes << 20 {
        for _ in 0..100 {
            b.user(&text);
            b.assistant(&text);
        }
    }
    b.jsonl()
}

#[test]
fn a_large_file_read_shared_is_the_session_read_by_copies_with_its_lines_in_one_buffer() {
    // Over a megabyte: read in parallel chunks.
    let text = large_file(2);
    let options = ParseOptions::default();
    let copied = Session::parse(text.as_bytes(), options).unwrap();
    let buffer = bytes::Bytes::from(text.clone());
    let shared = Session::parse_shared(buffer.clone(), options).unwrap();
    assert_eq!(shared.entries, copied.entries);
    assert_eq!((&shared.header, shared.to_jsonl()), (&copied.header, text));
    let within = |raw: &str| buffer.as_ptr_range().contains(&raw.as_ptr());
    assert!(within(&shared.header.raw));
    assert!(shared.entries.iter().all(|e| within(&e.raw)));
    assert!(!copied.entries.iter().any(|e| within(&e.raw)));
}

#[test]
fn a_bad_line_in_a_later_chunk_of_a_large_file_is_named_by_its_line() {
    let text = large_file(2);
    let lines: Vec<&str> = text.lines().collect();
    let bad = lines.len() - 3; // 0-based: line bad + 1 of the file
    let mut broken: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    broken[bad] = "{oops".into();
    let broken = file(&broken);
    let err = Session::parse_shared(broken.clone().into(), ParseOptions::default()).unwrap_err();
    assert_eq!(
        (err.line, err.kind),
        (Some(bad + 1), ParseErrorKind::InvalidJson)
    );
    let session = Session::parse_shared(
        broken.into(),
        ParseOptions {
            lenient: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(session.entries.len(), lines.len() - 2);
    assert_eq!(session.skipped[0].line, bad + 1);
}

#[test]
fn a_file_with_a_line_that_is_not_utf8_is_read_shared_by_copies() {
    let mut bytes = file(&[HEADER_V3.into(), line("a", None)]).into_bytes();
    bytes.extend_from_slice(b"{\"type\":\"x\",\"id\":\"\xff\xfe\"}\n");
    bytes.extend_from_slice(file(&[line("b", Some("a"))]).as_bytes());
    let err = Session::parse_shared(bytes.clone().into(), ParseOptions::default()).unwrap_err();
    assert_eq!((err.line, err.kind), (Some(3), ParseErrorKind::InvalidUtf8));
    let lenient = ParseOptions {
        lenient: true,
        ..Default::default()
    };
    let session = Session::parse_shared(bytes.into(), lenient).unwrap();
    let ids: Vec<&str> = session.entries.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(session.skipped[0].line, 3);
}

#[test]
fn bad_lines_in_many_pieces_of_a_large_file_are_named_in_file_order() {
    // Read in pieces taken by whichever thread is free: the error is still the earliest line's,
    // and lenient reading lists the skipped lines in file order.
    let text = large_file(3);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let bad: Vec<usize> = [0.2, 0.35, 0.6, 0.97]
        .iter()
        .map(|share| (lines.len() as f64 * share) as usize)
        .collect();
    for &at in &bad {
        lines[at] = "{oops".into();
    }
    let broken = file(&lines);
    let err = Session::parse_shared(broken.clone().into(), ParseOptions::default()).unwrap_err();
    assert_eq!(
        (err.line, err.kind),
        (Some(bad[0] + 1), ParseErrorKind::InvalidJson)
    );
    let lenient = ParseOptions {
        lenient: true,
        ..Default::default()
    };
    let session = Session::parse_shared(broken.into(), lenient).unwrap();
    let skipped: Vec<usize> = session.skipped.iter().map(|s| s.line).collect();
    assert_eq!(skipped, bad.iter().map(|at| at + 1).collect::<Vec<_>>());
    assert_eq!(session.entries.len(), lines.len() - 1 - bad.len());
    let numbers: Vec<usize> = session.entries.iter().map(|e| e.line).collect();
    assert!(
        numbers.windows(2).all(|w| w[0] < w[1]),
        "entries in file order"
    );
    // Each piece numbers its lines from 1 and is renumbered once the pieces before it are
    // counted: every entry still names its own line of the file.
    let misnumbered = session
        .entries
        .iter()
        .find(|e| lines[e.line - 1] != e.raw.as_ref() as &str);
    assert!(misnumbered.is_none(), "{misnumbered:?}");
}

#[test]
fn a_large_file_not_utf8_in_its_second_half_is_read_by_copies() {
    // UTF-8 is checked in two halves at once: a bad byte in the second is found all the same.
    let text = large_file(2);
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let bad = lines.len() - 5;
    let mut bytes = file(&lines[..bad]).into_bytes();
    bytes.extend_from_slice(b"{\"type\":\"x\",\"id\":\"\xff\xfe\"}\n");
    lines.drain(..=bad);
    bytes.extend_from_slice(file(&lines).as_bytes());
    let err = Session::parse_shared(bytes.into(), ParseOptions::default()).unwrap_err();
    assert_eq!(
        (err.line, err.kind),
        (Some(bad + 1), ParseErrorKind::InvalidUtf8)
    );
}
