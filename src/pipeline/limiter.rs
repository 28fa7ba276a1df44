//! A bound on concurrent summarizations and on the queue in front of them. Past the queue a
//! request is refused at once (the HTTP layer answers 429 with `Retry-After`) instead of piling up
//! behind a slow upstream until every agent's 180 s timeout has passed.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug)]
pub struct Limiter {
    permits: Arc<Semaphore>,
    max_concurrent: usize,
    max_queue: usize,
    waiting: AtomicUsize,
}

/// The queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many summarizations in progress")]
pub struct Busy;

/// Decrements the queue count when the wait ends, whether it got a permit or was cancelled.
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Limiter {
    pub fn new(max_concurrent: usize, max_queue: usize) -> Self {
        Limiter {
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            max_concurrent: max_concurrent.max(1),
            max_queue,
            waiting: AtomicUsize::new(0),
        }
    }

    /// A slot to run one summarization, waiting in the queue if all are taken; `Busy` when the
    /// queue is full too.
    #[cfg(test)]
    pub(crate) async fn acquire(&self) -> Result<OwnedSemaphorePermit, Busy> {
        self.acquire_many(1).await.map(|(permit, _)| permit)
    }

    /// `n` slots at once (at most all of them), for calls that must run together; waits in the
    /// queue as one request. Returns the permit and how many slots it holds.
    pub(crate) async fn acquire_many(
        &self,
        n: usize,
    ) -> Result<(OwnedSemaphorePermit, usize), Busy> {
        let n = n.clamp(1, self.max_concurrent);
        let count = n as u32;
        if let Ok(permit) = self.permits.clone().try_acquire_many_owned(count) {
            return Ok((permit, n));
        }
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.max_queue {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(Busy);
        }
        let _waiting = Waiting(&self.waiting);
        let permit = self
            .permits
            .clone()
            .acquire_many_owned(count)
            .await
            .map_err(|_| Busy)?;
        Ok((permit, n))
    }

    /// Requests waiting for a slot.
    pub(crate) fn queue_depth(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Summarizations running now.
    pub(crate) fn in_flight(&self) -> usize {
        self.max_concurrent - self.permits.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refuses_past_the_queue_and_recovers() {
        let limiter = Arc::new(Limiter::new(1, 1));
        let first = limiter.acquire().await.unwrap();
        let queued = tokio::spawn({
            let limiter = limiter.clone();
            async move { limiter.acquire().await.map(drop) }
        });
        while limiter.queue_depth() == 0 {
            tokio::task::yield_now().await;
        }
        assert_eq!(limiter.acquire().await.unwrap_err(), Busy);
        assert_eq!(limiter.in_flight(), 1);
        drop(first);
        queued.await.unwrap().unwrap();
        assert_eq!(limiter.queue_depth(), 0);
        assert!(limiter.acquire().await.is_ok());
    }
}
