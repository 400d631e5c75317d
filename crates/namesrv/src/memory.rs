//! Giving memory back after large transient work (big registrations, route snapshots). glibc
//! keeps freed memory in per-thread arenas, and such work runs on several blocking threads, so
//! without this a server that once decoded large bodies stays that large.

/// Bodies and snapshots above this size are worth a trim afterwards.
pub const LARGE_WORK: usize = 4 * 1024 * 1024;

/// Releases free memory when dropped, at the end of a large piece of work.
pub struct ReleaseOnDrop;

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        release_free();
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
