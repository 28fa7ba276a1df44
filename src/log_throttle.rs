//! A warning that could repeat on every request (the store down, a full queue) is logged at most
//! once a minute, with how many times it happened meanwhile; a metric counts each time.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a throttled warning may be logged.
const EVERY: Duration = Duration::from_secs(60);

/// One throttled warning.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    /// Milliseconds since the process's clock start of the last line (0: never).
    last_ms: AtomicU64,
    /// Occurrences since the last line.
    since: AtomicU64,
}

fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    // Offset by one so that 0 means "never".
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

impl Throttle {
    pub(crate) const fn new() -> Throttle {
        Throttle {
            last_ms: AtomicU64::new(0),
            since: AtomicU64::new(0),
        }
    }

    /// Counts an occurrence; `Some(n)` (occurrences since the last line, this one included) when
    /// a line is due now.
    pub(crate) fn hit(&self) -> Option<u64> {
        let count = self.since.fetch_add(1, Ordering::Relaxed) + 1;
        let now = clock_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= EVERY.as_millis() as u64;
        if due
            && self
                .last_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.since.fetch_sub(count, Ordering::Relaxed);
            return Some(count);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::Throttle;

    #[test]
    fn the_first_occurrence_is_logged_and_the_next_wait_a_minute() {
        let throttle = Throttle::new();
        assert_eq!(throttle.hit(), Some(1));
        for _ in 0..1000 {
            assert_eq!(throttle.hit(), None);
        }
    }
}
