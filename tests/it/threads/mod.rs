//! Thread references and handoff.

pub mod cli_handoff;
pub mod handoff;
pub mod handoff_rules;
pub mod read;
