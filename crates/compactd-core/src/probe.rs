//! Counters a test reads to prove that work is done once per request (a conversation read, its
//! facts extracted), whatever else the process does meanwhile: texts are told apart by how they
//! open. One relaxed load per counted event while nothing is watched.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Counts of the events on texts that open with a watched opening.
pub struct Probe {
    watching: AtomicBool,
    watched: Mutex<Vec<(String, u64)>>,
}

impl Probe {
    pub const fn new() -> Probe {
        Probe {
            watching: AtomicBool::new(false),
            watched: Mutex::new(Vec::new()),
        }
    }

    /// Counts the events on texts that start with `opening` from now on.
    pub fn watch(&self, opening: &str) {
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        watched.push((opening.to_owned(), 0));
        self.watching.store(true, Ordering::Release);
    }

    /// How many events on texts starting with `opening` were counted since [`Probe::watch`].
    pub fn count_of(&self, opening: &str) -> u64 {
        let watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        (watched.iter())
            .filter(|(watched, _)| watched == opening)
            .map(|(_, n)| n)
            .sum()
    }

    /// One event on `text`.
    pub fn count(&self, text: &str) {
        if !self.watching.load(Ordering::Acquire) {
            return;
        }
        let mut watched = self.watched.lock().unwrap_or_else(|e| e.into_inner());
        for (opening, n) in watched.iter_mut() {
            if text.starts_with(opening.as_str()) {
                *n += 1;
            }
        }
    }
}

impl Default for Probe {
    fn default() -> Probe {
        Probe::new()
    }
}
