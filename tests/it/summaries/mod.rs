//! What a summary holds: fidelity, the rubric on real text, standing rules, redaction, dialects, savings, a local model.

pub mod anytime_fold;
pub mod dialects;
pub mod extractive;
pub mod fidelity;
pub mod local_model;
pub mod pins;
pub mod real_rules;
pub mod real_transcripts;
pub mod redaction;
pub mod redaction_paths;
pub mod rubric;
pub mod savings;
pub mod standing_chain;
pub mod standing_rules;
pub mod typed;
