//! Where work that may block runs. Route lookups are served on the async workers; work that
//! takes milliseconds (decoding megabytes, walking every topic, writing files) must leave the
//! worker it would otherwise stall. Moving it costs a thread wake-up, which on busy cores is
//! itself milliseconds, so a request that is cheap in the common case (a broker's
//! re-registration) moves only its expensive steps, and only when it has them.

use tokio::runtime::{Handle, RuntimeFlavor};

/// Runs `work` now, on this thread, after handing this worker's other tasks to another worker
/// when on a multi-threaded runtime's worker. Elsewhere (the blocking pool, a test's
/// single-threaded runtime, no runtime) it simply runs.
pub fn now<T>(work: impl FnOnce() -> T) -> T {
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// Runs `work` off the async workers: on this very thread when the runtime has other workers
/// to take over its tasks (no thread to wake first, so the work starts at once even while
/// every core serves routes), else on the blocking pool.
pub async fn off_the_reactor<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    if Handle::current().runtime_flavor() == RuntimeFlavor::MultiThread {
        return Ok(tokio::task::block_in_place(work));
    }
    tokio::task::spawn_blocking(work).await
}
