//! What a process holds, read from `/proc`, so that tests can bound what peers make the server
//! hold (memory is on [`crate::Server::memory_kib`]).

/// How many descriptors process `pid` has open.
pub fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The soft limit on open files this test process (and the server it starts) runs with.
pub fn open_files_soft_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(1024)
}
