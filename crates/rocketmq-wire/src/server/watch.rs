//! Reloading files that operators replace while the server runs (certificates, credentials).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

const CHECK_EVERY: Duration = Duration::from_secs(2);

/// Calls `on_change` whenever the modification time of any of `files` changes. Polling keeps
/// this independent of the filesystem and of how the files are replaced (rename or rewrite).
pub fn on_change(
    files: Vec<PathBuf>,
    shutdown: CancellationToken,
    on_change: impl Fn() + Send + 'static,
) {
    if files.is_empty() {
        return;
    }
    let stamp = move || -> Vec<Option<SystemTime>> {
        files
            .iter()
            .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
            .collect()
    };
    tokio::spawn(async move {
        let mut last = stamp();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECK_EVERY) => {}
                _ = shutdown.cancelled() => return,
            }
            let now = stamp();
            if now != last {
                last = now;
                on_change();
            }
        }
    });
}
