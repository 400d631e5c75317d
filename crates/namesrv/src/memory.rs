//! Giving memory back after large transient work (big registrations, route snapshots). glibc
//! keeps freed memory in per-thread arenas, and such work runs on several blocking threads, so
//! without this a server that once decoded large bodies stays that large.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// Bodies and snapshots above this size are worth a trim afterwards.
pub const LARGE_WORK: usize = 4 * 1024 * 1024;

/// Topics read from whole registrations since memory was last given back, past which a pause
/// in them is worth a trim: registrations decoded side by side leave megabytes free in the
/// arenas that one re-registration after another never needs again (10 brokers' first 10k-topic
/// registrations: 25 MB resident, 16 MB once given back).
const TOPICS_WORTH_A_TRIM: usize = 20_000;
/// How long registrations must pause before memory is given back.
const PAUSE: Duration = Duration::from_secs(1);

static TOPICS_READ: AtomicUsize = AtomicUsize::new(0);

/// Counts the topics of a whole registration's table just read.
pub fn note_topics_read(topics: usize) {
    TOPICS_READ.fetch_add(topics, Ordering::Relaxed);
}

/// Gives free memory back once enough registrations were read and they pause, on the blocking
/// pool. Never while they go on: a trim holds the arenas' locks, which every allocation waits
/// for, and a busy cluster's next registrations reuse what the last ones freed.
pub async fn release_after_registrations(shutdown: CancellationToken) {
    let mut seen = 0;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(PAUSE) => {}
            _ = shutdown.cancelled() => return,
        }
        let read = TOPICS_READ.load(Ordering::Relaxed);
        if read == seen && read >= TOPICS_WORTH_A_TRIM {
            TOPICS_READ.fetch_sub(read, Ordering::Relaxed);
            let _ = tokio::task::spawn_blocking(release_free).await;
        }
        seen = TOPICS_READ.load(Ordering::Relaxed);
    }
}

/// Tunes glibc's allocator for a server whose large work comes and goes. Called once at start,
/// before any other thread exists.
/// - One arena per core (its default is eight per core): large registrations decoded on several
///   blocking threads at once otherwise leave each thread's arena holding its own fragmented
///   share (at 100k topics × 10 brokers, 127 MB resident instead of 87).
/// - A fixed mapping threshold of 4 MiB. glibc raises its own to the size of every mapped block
///   freed, so after the first body of megabytes later ones come from the heap, are copied as
///   they grow and stay resident: with it raised, 10 brokers' 10k-topic JSON registrations left
///   35 MB resident instead of 24, and a 100k-topic body took 30 ms instead of 21. Fixed, bodies
///   above it (a 100k-topic registration, a snapshot) are mapped afresh and given back when freed.
///   Not lower: a broker's usual body (10k topics as JSON, 1.9 MB) mapped afresh costs page
///   faults and an unmap every time, which at 1 MiB made its registration 1.7 times as slow
///   (2.9 ms against 1.75, and 4.7 against 3.5 compressed); from the heap it reuses what the
///   last one freed, which the keeper above gives back once registrations pause.
pub fn tune_allocator() {
    #[cfg(target_env = "gnu")]
    {
        const MMAP_THRESHOLD: libc::c_int = 4 * 1024 * 1024;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets glibc tunables; it is called before other threads start.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Returns free heap memory to the operating system.
pub fn release_free() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks glibc's own heaps; any argument is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}
