//! An entry's `type`: one enum for the session model, the per-entry facts, the store and the
//! planners, instead of the string compared wherever it is needed. Types pi does not define (an
//! extension's, a later version's) are kept as they were written, so every line round-trips.

use std::fmt;

/// An entry's `type`, as pi writes it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryType {
    Message,
    ThinkingLevelChange,
    ModelChange,
    Compaction,
    BranchSummary,
    Custom,
    CustomMessage,
    Label,
    SessionInfo,
    /// pi 1.5's edit of the context (read by its planner).
    ContextEdit,
    /// The header line's type, where a line that is not the first claims it.
    Session,
    /// Any other `type`, as written.
    Other(Box<str>),
}

/// The types pi defines and their names in the file.
const NAMED: [(EntryType, &str); 11] = [
    (EntryType::Message, "message"),
    (EntryType::ThinkingLevelChange, "thinking_level_change"),
    (EntryType::ModelChange, "model_change"),
    (EntryType::Compaction, "compaction"),
    (EntryType::BranchSummary, "branch_summary"),
    (EntryType::Custom, "custom"),
    (EntryType::CustomMessage, "custom_message"),
    (EntryType::Label, "label"),
    (EntryType::SessionInfo, "session_info"),
    (EntryType::ContextEdit, "context_edit"),
    (EntryType::Session, "session"),
];

impl EntryType {
    /// The type named `text` in a file.
    pub fn of(text: &str) -> EntryType {
        NAMED
            .iter()
            .find(|(_, name)| *name == text)
            .map_or_else(|| EntryType::Other(text.into()), |(t, _)| t.clone())
    }

    /// The name written in the file.
    pub fn as_str(&self) -> &str {
        match self {
            EntryType::Other(text) => text,
            known => NAMED
                .iter()
                .find(|(t, _)| t == known)
                .map(|(_, name)| *name)
                .expect("every named type is in NAMED"),
        }
    }
}

impl From<String> for EntryType {
    fn from(text: String) -> EntryType {
        EntryType::of(&text)
    }
}

impl From<&str> for EntryType {
    fn from(text: &str) -> EntryType {
        EntryType::of(text)
    }
}

impl fmt::Display for EntryType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_reads_back_as_its_type_and_others_are_kept() {
        for (entry_type, name) in NAMED {
            assert_eq!(EntryType::of(name), entry_type);
            assert_eq!(entry_type.as_str(), name);
        }
        let other = EntryType::of("plugin_state");
        assert_eq!(other, EntryType::Other("plugin_state".into()));
        assert_eq!(other.as_str(), "plugin_state");
    }
}
