//! What compactd's tests, benchmarks and load tools share, and nothing a build ships: a
//! dev-dependency of every crate of the workspace.
//!
//! * the parts a test needs beyond Rust, and the line it prints without one ([`needs!`],
//!   [`postgres_test!`], [`Part`]);
//! * [`samples`]: made-up secrets of every family the redactor must catch;
//! * [`synth`]: synthetic sessions of a given size, from a real one.

pub mod samples;
pub mod synth;
mod tiers;

pub use tiers::*;
