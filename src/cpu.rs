//! CPU-heavy work — parsing a session, planning, laying out a large tree, redacting or
//! summarizing megabytes — runs on tokio's blocking threads, never on the runtime's workers, and
//! at most `CPUs − 1` such jobs at once (at least one): a request that parses 20 MB must not hold
//! up `/healthz` and the small requests behind it, neither by taking a runtime thread nor by
//! taking every core from it. Jobs beyond the bound wait their turn, in order.

use std::sync::LazyLock;

use tokio::sync::Semaphore;

/// Places for CPU jobs: one core is left to the runtime (on a single core, one job at a time).
static PLACES: LazyLock<Semaphore> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Semaphore::new(cores.saturating_sub(1).max(1))
});

/// Inputs at least this large are worth splitting across threads: below it, starting a thread
/// costs more than it saves.
pub(crate) const SPLIT_MIN_BYTES: usize = 1 << 20;

/// How many threads one job over `bytes` of input should use: one for small inputs, else one per
/// core (at most `most`).
pub(crate) fn threads_for(bytes: usize, most: usize) -> usize {
    if bytes < SPLIT_MIN_BYTES {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |n| n.get().min(most))
}

/// Where to split items of these sizes into two halves of about equal size: just after the item
/// that reaches half of their sum (a few large items can hold most of it).
pub(crate) fn half_way(sizes: impl IntoIterator<Item = usize> + Clone) -> usize {
    let total: usize = sizes.clone().into_iter().sum();
    let mut seen = 0;
    let mut count = 0;
    for size in sizes {
        seen += size;
        count += 1;
        if seen >= total / 2 {
            return count;
        }
    }
    count
}

/// `work` over `items` split at `middle`, both parts at once (the second on a thread of its own),
/// the results in order.
pub(crate) fn in_two<T: Sync, R: Send>(
    items: &[T],
    middle: usize,
    work: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let (first, second) = items.split_at(middle);
    std::thread::scope(|scope| {
        let second = scope.spawn(|| work(second));
        let mut results = work(first);
        results.extend(second.join().expect("the work does not panic"));
        results
    })
}

/// A CPU job that did not finish: it panicked (the panic is in the log).
#[derive(Debug, thiserror::Error)]
#[error("a background computation failed: {0}")]
pub(crate) struct CpuError(String);

/// Runs `work` on a blocking thread once a place is free, given up at `deadline`: `None` when it
/// passes first, whether waiting for a place or running (`work` is handed the deadline and stops
/// itself, answering `None`, so that its thread is free again too).
pub(crate) async fn off_runtime_until<T, F>(
    deadline: crate::deadline::Deadline,
    work: F,
) -> Result<Option<T>, CpuError>
where
    F: FnOnce(crate::deadline::Deadline) -> Option<T> + Send + 'static,
    T: Send + 'static,
{
    let job = off_runtime(move || work(deadline));
    match deadline.instant() {
        Some(at) => match tokio::time::timeout_at(at.into(), job).await {
            Ok(result) => result,
            Err(_) => Ok(None),
        },
        None => job.await,
    }
}

/// Runs `work` on a blocking thread once a place is free, in the caller's tracing span, and
/// returns its result.
pub(crate) async fn off_runtime<T, F>(work: F) -> Result<T, CpuError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let place = PLACES
        .acquire()
        .await
        .map_err(|e| CpuError(e.to_string()))?;
    let span = tracing::Span::current();
    let result = tokio::task::spawn_blocking(move || span.in_scope(work))
        .await
        .map_err(|e| CpuError(e.to_string()));
    drop(place);
    result
}
