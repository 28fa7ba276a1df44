//! How deep a line's JSON nests, checked before it is decoded: `serde_json` depth-checks only
//! what it reads, yet a line is stored whole and may be read whole later.

/// Deepest nesting `serde_json` reads (its recursion limit), which bounds the stack a line can
/// take.
pub const JSON_DEPTH_LIMIT: usize = 128;

/// Whether the JSON text nests arrays and objects deeper than `limit`. A line with at most
/// `limit` opening brackets in all cannot, which two vectorised counts settle for nearly every
/// line (memchr counts one byte a vector at a time; its iterator over two bytes stops at each
/// one, and code in tool results is full of brackets). The few lines with more are walked, their
/// strings skipped a vector at a time: one byte at a time, the walk and the counting were 5 % of
/// the instructions of planning a 21 MB session, on 42 lines of its 21,379.
pub fn nesting_exceeds(bytes: &[u8], limit: usize) -> bool {
    let opening =
        memchr::memchr_iter(b'[', bytes).count() + memchr::memchr_iter(b'{', bytes).count();
    if opening <= limit {
        return false;
    }
    let mut depth = 0usize;
    let mut at = 0;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'"' => match crate::js_json::string_end(bytes, at + 1) {
                Some(end) => {
                    at = end;
                    continue;
                }
                // An unterminated string: nothing after it is structure.
                None => return false,
            },
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk one byte at a time that [`nesting_exceeds`] must agree with.
    fn walked(bytes: &[u8], limit: usize) -> bool {
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

    #[test]
    fn nesting_depth_counts_brackets_outside_strings() {
        let deep = format!("{}{}", "[".repeat(129), "]".repeat(129));
        assert!(nesting_exceeds(deep.as_bytes(), 128));
        let wide = format!("[{}]", "[],".repeat(500) + "[]");
        assert!(!nesting_exceeds(wide.as_bytes(), 128));
        let quoted = format!("{{\"s\":\"{}\\\"\"}}", "[".repeat(300));
        assert!(!nesting_exceeds(quoted.as_bytes(), 128), "{quoted}");
        // An escaped backslash ends its escape: the quote after it closes the string.
        let closed = format!("[\"\\\\\"{}", "[".repeat(200));
        assert!(nesting_exceeds(closed.as_bytes(), 128), "{closed}");
        let exact = format!(
            "{}{}",
            "{\"a\":".repeat(128),
            "1".to_owned() + &"}".repeat(128)
        );
        assert!(!nesting_exceeds(exact.as_bytes(), 128));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 3000, ..Default::default() })]
        /// Any text of brackets, quotes, backslashes and letters, at a low limit so that the walk
        /// runs: the same answer as one byte at a time.
        #[test]
        fn skipping_strings_finds_the_depth_the_byte_walk_finds(
            text in "[\\[\\]{}\"\\\\a]{0,40}",
            limit in 0usize..6,
        ) {
            proptest::prop_assert_eq!(nesting_exceeds(text.as_bytes(), limit), walked(text.as_bytes(), limit));
        }
    }
}
