//! When CPU work that could run long on a hostile input gives up: the request's deadline,
//! checked by the loops of the pure core (a handoff's turns, a thread's entries) between steps,
//! so that a thread of the blocking pool is free again when the caller has stopped waiting.

use std::time::Instant;

/// A point in time past which work stops, or none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deadline(Option<Instant>);

impl Deadline {
    /// No deadline: the work runs to its end (the command line, tests).
    pub const NONE: Deadline = Deadline(None);

    pub fn at(instant: Instant) -> Deadline {
        Deadline(Some(instant))
    }

    /// Whether it has passed.
    pub fn passed(&self) -> bool {
        self.0.is_some_and(|at| Instant::now() >= at)
    }

    pub fn instant(&self) -> Option<Instant> {
        self.0
    }
}
