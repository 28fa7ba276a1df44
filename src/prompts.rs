//! compactd's prompt templates (`prompts/*.md`): compiled into the binary, and replaceable one by
//! one from a directory at start-up (`COMPACTD_PROMPTS_DIR`).

use std::path::Path;

use anyhow::Context;

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

    /// The built-in templates, with each file of the same name found in `dir` used instead.
    /// A file that exists but cannot be read, or is empty, is an error.
    pub fn load(dir: &Path) -> anyhow::Result<Prompts> {
        let mut prompts = Prompts::builtin();
        if !dir.is_dir() {
            anyhow::bail!("prompt directory {} does not exist", dir.display());
        }
        for (name, _, field) in SLOTS {
            let path = dir.join(name);
            if !path.exists() {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading prompt template {}", path.display()))?;
            if text.trim().is_empty() {
                anyhow::bail!("prompt template {} is empty", path.display());
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
    fn a_directory_overrides_only_the_files_it_holds() {
        let dir = std::env::temp_dir().join(format!("compactd-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("summary.md"), "Custom instructions.\n").unwrap();
        let p = Prompts::load(&dir).unwrap();
        assert_eq!(p.summary, "Custom instructions.");
        assert_eq!(p.system, Prompts::builtin().system);
        std::fs::write(dir.join("update.md"), "  \n").unwrap();
        assert!(
            Prompts::load(&dir)
                .unwrap_err()
                .to_string()
                .contains("is empty")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(Prompts::load(&dir).is_err());
    }
}
