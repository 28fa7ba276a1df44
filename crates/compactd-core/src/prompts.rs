//! compactd's prompt templates (`prompts/*.md`): compiled into the binary, and replaceable one by
//! one from a directory at start-up (`COMPACTD_PROMPTS_DIR`; the service reads the files).

/// The templates, each without its trailing newline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    /// System prompt of every summarization call.
    pub system: String,
    /// Instructions for a first summary.
    pub summary: String,
    /// Instructions for merging new messages into a previous summary.
    pub update: String,
    /// Instructions for the prefix of a split turn.
    pub turn_prefix: String,
    /// Instructions for summarizing an abandoned branch.
    pub branch: String,
    /// Two lines put before every branch summary.
    pub branch_preamble: String,
    /// Instructions for the 2–3 sentence short summary.
    pub short_summary: String,
    /// Instructions for drafting a handoff's first prompt (`/v1/sessions/{id}/handoff`).
    pub handoff: String,
    /// Instructions for answering a question about a thread (`read_thread`).
    pub read_thread: String,
}

/// (file name, built-in text, field setter)
type Slot = (&'static str, &'static str, fn(&mut Prompts) -> &mut String);

const SLOTS: [Slot; 9] = [
    ("system.md", include_str!("../prompts/system.md"), |p| {
        &mut p.system
    }),
    ("summary.md", include_str!("../prompts/summary.md"), |p| {
        &mut p.summary
    }),
    ("update.md", include_str!("../prompts/update.md"), |p| {
        &mut p.update
    }),
    (
        "turn-prefix.md",
        include_str!("../prompts/turn-prefix.md"),
        |p| &mut p.turn_prefix,
    ),
    ("branch.md", include_str!("../prompts/branch.md"), |p| {
        &mut p.branch
    }),
    (
        "branch-preamble.md",
        include_str!("../prompts/branch-preamble.md"),
        |p| &mut p.branch_preamble,
    ),
    (
        "short-summary.md",
        include_str!("../prompts/short-summary.md"),
        |p| &mut p.short_summary,
    ),
    ("handoff.md", include_str!("../prompts/handoff.md"), |p| {
        &mut p.handoff
    }),
    (
        "read-thread.md",
        include_str!("../prompts/read-thread.md"),
        |p| &mut p.read_thread,
    ),
];

impl Default for Prompts {
    fn default() -> Self {
        Prompts::builtin()
    }
}

impl Prompts {
    /// The templates compiled into the binary.
    pub fn builtin() -> Prompts {
        let mut prompts = Prompts {
            system: String::new(),
            summary: String::new(),
            update: String::new(),
            turn_prefix: String::new(),
            branch: String::new(),
            branch_preamble: String::new(),
            short_summary: String::new(),
            handoff: String::new(),
            read_thread: String::new(),
        };
        for (_, text, field) in SLOTS {
            *field(&mut prompts) = text.trim_end().to_owned();
        }
        prompts
    }

    /// The built-in templates, with the text of each file named in `files` used instead (a
    /// name of [`Prompts::file_names`]); an empty text is an error naming the file.
    pub fn with_files<'a>(
        files: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Prompts, String> {
        let mut prompts = Prompts::builtin();
        for (name, text) in files {
            let Some((_, _, field)) = SLOTS.iter().find(|(slot, _, _)| *slot == name) else {
                return Err(format!("{name} is no prompt template"));
            };
            if text.trim().is_empty() {
                return Err(format!("prompt template {name} is empty"));
            }
            *field(&mut prompts) = text.trim_end().to_owned();
        }
        Ok(prompts)
    }

    /// The names of the template files a prompt directory may hold.
    pub fn file_names() -> impl Iterator<Item = &'static str> {
        SLOTS.iter().map(|(name, _, _)| *name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_templates_ask_for_the_checkpoint_sections() {
        let p = Prompts::builtin();
        for heading in [
            "## Goal",
            "## Constraints & Preferences",
            "### Done",
            "### In Progress",
            "### Blocked",
            "## Key Decisions",
            "## Next Steps",
            "## Critical Context",
        ] {
            assert!(p.summary.contains(heading), "summary lacks {heading}");
            assert!(p.update.contains(heading), "update lacks {heading}");
        }
        assert!(!p.branch.contains("## Critical Context"));
        for heading in [
            "## Original Request",
            "## Early Progress",
            "## Context for Suffix",
        ] {
            assert!(p.turn_prefix.contains(heading));
        }
        assert_eq!(p.branch_preamble.lines().count(), 2);
    }

    #[test]
    fn files_override_only_the_templates_they_name() {
        let p = Prompts::with_files([("summary.md", "Custom instructions.\n")]).unwrap();
        assert_eq!(p.summary, "Custom instructions.");
        assert_eq!(p.system, Prompts::builtin().system);
        let empty = Prompts::with_files([("update.md", "  \n")]).unwrap_err();
        assert!(empty.contains("is empty"), "{empty}");
        assert!(Prompts::with_files([("other.md", "x")]).is_err());
    }
}

/// pi 1.5's own templates, as its compaction sends them (a session pi 1.5 wrote is compacted as
/// pi 1.5 compacts it).
pub mod pi15 {
    pub const SYSTEM: &str = include_str!("../prompts/pi15/system.md");
    pub const SUMMARY: &str = include_str!("../prompts/pi15/summary.md");
    pub const UPDATE: &str = include_str!("../prompts/pi15/update.md");
    pub const TURN_PREFIX: &str = include_str!("../prompts/pi15/turn-prefix.md");
}
