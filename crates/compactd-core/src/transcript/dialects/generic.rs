//! Text in no dialect compactd knows: turns are looked for at lines that open with a role
//! (`User:`, `Human:`, `Assistant:`, `AI:`, `System:`, `Tool:`, any case, optionally bold or a
//! heading); without any, the whole text is the user's. The paths and the last request are then
//! found in it as in any other conversation, and the fidelity report names the dialect
//! `generic` so that a reader knows the anchors were guessed.

use crate::transcript::{Message, Role};

/// The role a line opens with, and where its text starts.
fn role_at(line: &str) -> Option<(Role, usize)> {
    let trimmed = line.trim_start_matches(['#', '*', ' ', '>']);
    let lead = line.len() - trimmed.len();
    let colon = trimmed.find(':').filter(|&c| c <= 12)?;
    let word = trimmed[..colon]
        .trim_end_matches('*')
        .trim()
        .to_ascii_lowercase();
    let role = match word.as_str() {
        "user" | "human" | "me" => Role::User,
        "assistant" | "ai" | "model" | "agent" => Role::Assistant,
        "system" | "developer" => Role::Developer,
        "tool" | "tool result" | "tool output" | "observation" => Role::ToolResult,
        _ => return None,
    };
    let after = &trimmed[colon + 1..];
    let after = after.trim_start_matches('*');
    let text_start = lead + colon + 1 + (trimmed[colon + 1..].len() - after.len());
    Some((role, text_start + (after.len() - after.trim_start().len())))
}

pub(super) fn read(conversation: &str) -> Vec<Message> {
    let mut messages: Vec<Message> = Vec::new();
    let mut current: Option<Message> = None;
    for line in conversation.split_inclusive('\n') {
        match role_at(line) {
            Some((role, start)) => {
                messages.extend(current.take());
                current = Some(Message::with_text(role, line[start..].to_owned()));
            }
            None => match &mut current {
                Some(message) => message.text.push_str(line),
                None => current = Some(Message::with_text(Role::User, line.to_owned())),
            },
        }
    }
    messages.extend(current);
    for message in &mut messages {
        let trimmed = message.text.trim_end().len();
        message.text.truncate(trimmed);
    }
    messages
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_found_at_line_starts_or_the_whole_text_is_the_users() {
        let read_back = read("**User:** fix src/a.rs\nplease\n\nAssistant: done.\nTool: ok\n");
        let roles: Vec<Role> = read_back.iter().map(|m| m.role).collect();
        assert_eq!(roles, [Role::User, Role::Assistant, Role::ToolResult]);
        assert_eq!(read_back[0].text, "fix src/a.rs\nplease");
        let plain = read("just some notes about src/b.rs");
        assert_eq!(plain.len(), 1);
        assert_eq!(plain[0].role, Role::User);
    }
}
