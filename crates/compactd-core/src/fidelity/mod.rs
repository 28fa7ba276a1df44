//! Summaries compactd can vouch for. From the text a summary replaces, [`anchors`] extracts the
//! facts a continuation cannot do without (the latest request, the files changed, the open work,
//! the user's constraints, pinned text: *critical*; unresolved errors, failed commands, files
//! read, identifiers the user named: *important*). [`matching`] decides whether a summary keeps
//! an anchor; [`gate`] tells a usable answer from a blank one, a refusal or one without the asked
//! structure, writes the repair request, and appends what is still missing in the section it
//! belongs to. The pipeline runs the gate on every summary (`crate::pipeline::gate`).
//!
//! Pure, synchronous and cheap: no model call, a few milliseconds for a 400 KB prompt.

pub mod anchors;
mod errors;
pub mod facts;
pub mod gate;
pub mod ledger;
pub mod matching;
pub mod standing;
#[cfg(test)]
mod tests;
mod user_turn;
pub mod user_words;
pub mod words;

use serde::{Deserialize, Serialize};

pub use anchors::{Anchor, AnchorKind, Weight};

/// What the gate did to one summary: how many anchors it checked, how many the model's answer
/// kept, how many were repaired (by the repair call or appended), and the important anchors the
/// summary does not keep (what the agent will no longer know). Critical anchors are never
/// missing: what the model leaves out is appended.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub anchors: usize,
    /// Kept by the model's first answer.
    pub kept: usize,
    /// Missing from the first answer, present in the summary returned.
    pub repaired: usize,
    /// Of the repaired, the ones compactd appended verbatim.
    pub appended: usize,
    /// Whether the model was asked once more to include what it left out.
    pub repair_call: bool,
    /// Anchors the returned summary does not keep.
    pub missing: Vec<Missing>,
    /// The user's standing rules the summary carries (its constraint anchors, verbatim): every
    /// one is kept, repaired or appended, so this is what the agent will still be told to obey.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<String>,
    /// The dialect the conversation was read in (`generic` when it was in none compactd knows:
    /// its anchors are a best guess). Absent when there was no conversation to read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

/// An anchor a summary does not keep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Missing {
    pub kind: AnchorKind,
    pub text: String,
}

impl Report {
    /// The report of a summary made of parts (the two halves of a split turn).
    pub fn merge(mut self, other: Report) -> Report {
        self.anchors += other.anchors;
        self.kept += other.kept;
        self.repaired += other.repaired;
        self.appended += other.appended;
        self.repair_call |= other.repair_call;
        self.dialect = self.dialect.or(other.dialect);
        for rule in other.rules {
            if !self.rules.contains(&rule) {
                self.rules.push(rule);
            }
        }
        for missing in other.missing {
            if !self.missing.contains(&missing) {
                self.missing.push(missing);
            }
        }
        self
    }

    /// The compact form of a response header: `anchors=12; kept=9; repaired=3; missing=1`.
    pub fn header_value(&self) -> String {
        format!(
            "anchors={}; kept={}; repaired={}; appended={}; missing={}; repair-call={}",
            self.anchors,
            self.kept,
            self.repaired,
            self.appended,
            self.missing.len(),
            self.repair_call
        )
    }
}
