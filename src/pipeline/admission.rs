//! Admission: who may use the models, how much at once. A per-key cap on summarizations running
//! at once (`COMPACTD_MAX_CONCURRENT_PER_KEY`), then a place among the summarizations this
//! process runs (`COMPACTD_MAX_CONCURRENT`) with a bounded queue in front (`COMPACTD_MAX_QUEUE`).
//! Past either, a run is refused at once (429 with `Retry-After` on HTTP) instead of piling up
//! behind a slow upstream until every agent's 180 s timeout has passed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::limiter::{Busy, Limiter};

/// Per-key semaphores kept before idle ones are dropped.
const MAX_KEYS: usize = 10_000;

#[derive(Debug)]
pub struct Admission {
    pub limiter: Limiter,
    /// Runs at once per key; 0: no cap beyond the global one.
    max_per_key: usize,
    per_key: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// Held while a run (or the runs of one compaction) uses the models.
#[derive(Debug)]
pub(crate) struct Admitted {
    _key: Option<OwnedSemaphorePermit>,
    _slots: OwnedSemaphorePermit,
    /// How many of the admitted summarizations may run at the same time.
    pub(crate) parallel: usize,
}

impl Admission {
    pub fn new(limiter: Limiter, max_per_key: usize) -> Admission {
        Admission {
            limiter,
            max_per_key,
            per_key: Mutex::default(),
        }
    }

    /// Admits `n` summarizations that belong together for `bucket` (a key), waiting in the
    /// global queue until `deadline` at most.
    pub(crate) async fn admit(
        &self,
        bucket: &str,
        n: usize,
        deadline: Instant,
    ) -> Result<Admitted, Busy> {
        let key = self.key_slot(bucket)?;
        let (slots, parallel) =
            match tokio::time::timeout_at(deadline.into(), self.limiter.acquire_many(n)).await {
                Ok(admitted) => admitted?,
                Err(_) => return Err(Busy),
            };
        Ok(Admitted {
            _key: key,
            _slots: slots,
            parallel,
        })
    }

    /// One of the key's slots, or `Busy` when all are taken.
    fn key_slot(&self, bucket: &str) -> Result<Option<OwnedSemaphorePermit>, Busy> {
        let cap = self.max_per_key;
        if cap == 0 {
            return Ok(None);
        }
        let semaphore = {
            let mut slots = self.per_key.lock().unwrap_or_else(|e| e.into_inner());
            if slots.len() >= MAX_KEYS {
                slots.retain(|_, s| s.available_permits() < cap);
            }
            slots
                .entry(bucket.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(cap)))
                .clone()
        };
        semaphore.try_acquire_owned().map(Some).map_err(|_| Busy)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn each_key_has_its_own_cap_and_all_share_the_global_one() {
        let admission = Admission::new(Limiter::new(2, 0), 1);
        let soon = || Instant::now() + Duration::from_millis(50);
        let held = admission.admit("key:a", 1, soon()).await.unwrap();
        assert_eq!(admission.admit("key:a", 1, soon()).await.unwrap_err(), Busy);
        let other = admission.admit("key:b", 1, soon()).await.unwrap();
        // Both global places taken and no queue: a third key is refused too.
        assert_eq!(admission.admit("key:c", 1, soon()).await.unwrap_err(), Busy);
        drop((held, other));
        assert!(admission.admit("key:a", 2, soon()).await.is_ok());
    }
}
