//! The threads a node's groups run their consensus on: every group's Raft core, its replication
//! streams to the other members, and the watch that dates the leader's lease. One thread of
//! their own, not the host's workers: a host busy with its own work (a fleet of brokers
//! registering at once) must not hold up heartbeats, or its leaders lose their lease and its
//! followers stand for election. The work is light (a few messages per heartbeat); the store
//! writes on threads of its own ([`crate::store`]).

use std::future::Future;

use tokio::runtime::{Builder, Handle, Runtime};

/// The consensus runtime; `None` (and the host's runtime is used) when the system would not
/// give it a thread.
fn threads() -> Option<&'static Handle> {
    static THREADS: std::sync::OnceLock<Option<Runtime>> = std::sync::OnceLock::new();
    THREADS
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .thread_name("raft-core")
                .build()
                .map_err(|e| tracing::warn!("no thread of its own for consensus: {e}"))
                .ok()
        })
        .as_ref()
        .map(Runtime::handle)
}

/// Runs `work` to its end on the consensus threads.
pub(super) async fn run<F>(work: F) -> anyhow::Result<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    match threads() {
        Some(threads) => Ok(threads.spawn(work).await?),
        None => Ok(work.await),
    }
}

/// Starts `work` on the consensus threads.
pub(super) fn spawn<F>(work: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    match threads() {
        Some(threads) => drop(threads.spawn(work)),
        None => drop(tokio::spawn(work)),
    }
}
