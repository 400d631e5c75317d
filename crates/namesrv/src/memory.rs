//! Giving memory back after large transient work (big registrations, route snapshots). glibc
//! keeps freed memory in per-thread arenas, and such work runs on several blocking threads, so
//! without this a server that once decoded large bodies stays that large.

/// Bodies and snapshots above this size are worth a trim afterwards.
pub const LARGE_WORK: usize = 4 * 1024 * 1024;
/// Registered topic tables above this many entries take about as much once decoded.
pub const LARGE_TABLE: usize = 20_000;

/// Releases free memory when dropped, at the end of a large piece of work.
pub struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_free();
    }
}

/// Caps glibc's arenas at one per core (its default is eight per core). Large registrations
/// decoded on several blocking threads at once otherwise leave each thread's arena holding its
/// own fragmented share: at 100k topics × 10 brokers, 127 MB resident instead of 87. Called
/// once at start, before any other thread exists.
pub fn one_arena_per_core() {
    #[cfg(target_env = "gnu")]
    {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let arenas = libc::c_int::try_from(cores).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets a glibc tunable; it is called before other threads start.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// For a NameServer with peers: a fixed mapping threshold of 1 MiB. glibc raises its own to the
/// size of every mapped block freed, so after the first answer of megabytes (a peer's pull of
/// registrations) later ones come from the heap and stay resident: a member of three under the
/// same fleet and load held 22 MB with it raised, 19 MB with it fixed (one alone, 14 MB). A
/// lone NameServer keeps glibc's own: fixed, every body over 1 MiB would be mapped and faulted
/// in afresh, and one broker's 10k-topic JSON registration took about twice as long. Called
/// once at start, before any other thread exists.
pub fn fixed_mapping_threshold() {
    #[cfg(target_env = "gnu")]
    {
        const MMAP_THRESHOLD: libc::c_int = 1024 * 1024;
        // SAFETY: mallopt only sets a glibc tunable; it is called before other threads start.
        unsafe {
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
