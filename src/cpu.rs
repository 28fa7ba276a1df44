//! CPU-heavy work — parsing a session, planning, laying out a large tree, redacting or
//! summarizing megabytes — runs on tokio's blocking threads, never on the runtime's workers, and
//! at most `CPUs − 1` such jobs at once (at least one): a request that parses 20 MB must not hold
//! up `/healthz` and the small requests behind it, neither by taking a runtime thread nor by
//! taking every core from it. Jobs beyond the bound wait their turn, in order. (Splitting one
//! job over threads is the core's: `compactd_core::parallel`.)

use std::sync::LazyLock;

use tokio::sync::Semaphore;

/// Places for CPU jobs: one core is left to the runtime (on a single core, one job at a time).
static PLACES: LazyLock<Semaphore> = LazyLock::new(|| {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    Semaphore::new(cores.saturating_sub(1).max(1))
});

/// A CPU job that did not finish: it panicked (the panic is in the log).
#[derive(Debug, thiserror::Error)]
#[error("a background computation failed: {0}")]
pub(crate) struct CpuError(String);

/// Runs `work` on a blocking thread once a place is free, given up at `deadline`: `None` when it
/// passes first, whether waiting for a place or running (`work` is handed the deadline and stops
/// itself, answering `None`, so that its thread is free again too).
pub(crate) async fn off_runtime_until<T, F>(
    deadline: compactd_core::deadline::Deadline,
    work: F,
) -> Result<Option<T>, CpuError>
where
    F: FnOnce(compactd_core::deadline::Deadline) -> Option<T> + Send + 'static,
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
