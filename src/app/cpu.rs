//! CPU-heavy work (parsing, planning, rendering large pages, redacting large texts) runs on
//! tokio's blocking threads, not on the runtime's workers: a request that parses 20 MB must not
//! hold up `/healthz` and the small requests behind it.

use super::AppError;

/// Runs `work` on a blocking thread, in the caller's tracing span; waits for its result.
pub async fn off_runtime<T, F>(work: F) -> Result<T, AppError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(work))
        .await
        .map_err(|e| AppError::Internal(anyhow::anyhow!("a background computation failed: {e}")))
}
