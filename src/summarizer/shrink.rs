//! Fitting an oversized prompt (spec §10.4): when a model says the input is too long, the
//! `<conversation>` part is cut to a fraction of its size and the model is asked again. The
//! opening (the first request) and the most recent part are kept; the middle is replaced by a
//! marker saying how much was left out. Cuts fall on part boundaries (`\n\n[Role]: `) where
//! one is near, so no message is cut in half unless it is itself huge.

/// Conversations shorter than this are not worth shrinking.
const MIN_CONVERSATION: usize = 2_000;

/// `prompt` with its conversation cut to about `keep` (0–1) of its length, or `None` when the
/// prompt has no conversation block or it is already small.
pub fn shrink_conversation(prompt: &str, keep: f64) -> Option<String> {
    const OPEN: &str = "<conversation>\n";
    const CLOSE: &str = "\n</conversation>";
    let start = prompt.find(OPEN)? + OPEN.len();
    let end = prompt.rfind(CLOSE)?;
    let conversation = prompt.get(start..end)?;
    if conversation.len() < MIN_CONVERSATION {
        return None;
    }
    let target = (conversation.len() as f64 * keep.clamp(0.05, 0.95)) as usize;
    // A fifth for the opening, the rest for the most recent messages.
    let head_end = boundary_before(conversation, floor_char(conversation, target / 5));
    let tail_start = boundary_after(
        conversation,
        floor_char(conversation, conversation.len() - (target - target / 5)),
    );
    if tail_start <= head_end {
        return None;
    }
    let omitted = tail_start - head_end;
    Some(format!(
        "{}{}\n\n[... {omitted} bytes of the conversation were left out here to fit the model's context window ...]\n\n{}{}",
        &prompt[..start],
        &conversation[..head_end],
        &conversation[tail_start..],
        &prompt[end..]
    ))
}

fn floor_char(text: &str, mut index: usize) -> usize {
    index = index.min(text.len());
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

/// The start of the part boundary at or before `index` (within a tenth of the text), else `index`.
fn boundary_before(text: &str, index: usize) -> usize {
    let window = text.len() / 10;
    text[..index]
        .rfind("\n\n[")
        .filter(|&b| index - b <= window && b > 0)
        .unwrap_or(index)
}

/// The start of the first part at or after `index` (within a tenth of the text), else `index`.
fn boundary_after(text: &str, index: usize) -> usize {
    let window = text.len() / 10;
    text[index..]
        .find("\n\n[")
        .filter(|&offset| offset <= window)
        .map_or(index, |offset| index + offset + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(parts: usize) -> String {
        let conversation: Vec<String> = (0..parts)
            .map(|i| format!("[User]: message {i} {}", "é".repeat(60)))
            .collect();
        format!(
            "<conversation>\n{}\n</conversation>\n\n## Goal …",
            conversation.join("\n\n")
        )
    }

    #[test]
    fn keeps_the_opening_and_the_latest_parts_and_halves_the_size() {
        let original = prompt(200);
        let shrunk = shrink_conversation(&original, 0.5).unwrap();
        assert!(
            shrunk.len() < original.len() * 6 / 10 && shrunk.len() > original.len() * 4 / 10,
            "{} of {}",
            shrunk.len(),
            original.len()
        );
        assert!(shrunk.starts_with("<conversation>\n[User]: message 0 "));
        assert!(shrunk.contains("[User]: message 199 "));
        assert!(shrunk.ends_with("\n</conversation>\n\n## Goal …"));
        assert!(shrunk.contains("bytes of the conversation were left out here"));
        // Cuts fall between parts: every part left starts and ends whole.
        let inner = shrunk
            .strip_prefix("<conversation>\n")
            .unwrap()
            .split("\n</conversation>")
            .next()
            .unwrap();
        let parts: Vec<&str> = inner
            .split("\n\n")
            .filter(|p| !p.starts_with("[... "))
            .collect();
        assert_eq!(parts.len(), shrunk.matches("[User]: message").count());
        assert!(
            parts
                .iter()
                .all(|p| p.starts_with("[User]: message ") && p.ends_with(&"é".repeat(60))),
            "{parts:?}"
        );
    }

    #[test]
    fn small_or_untagged_prompts_are_left_alone() {
        assert_eq!(shrink_conversation(&prompt(3), 0.5), None);
        assert_eq!(shrink_conversation(&"x".repeat(10_000), 0.5), None);
    }
}
