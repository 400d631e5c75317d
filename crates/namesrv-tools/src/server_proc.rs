//! What the kernel says about the server process.

/// Resident memory of `pid` in KiB (`VmRSS` of `/proc/PID/status`), if the process exists.
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_vm_rss() {
        let status = "Name:\tjava\nVmPeak:\t  100 kB\nVmRSS:\t   5432 kB\nThreads:\t3\n";
        assert_eq!(super::parse_vm_rss(status), Some(5432));
    }

    #[test]
    fn own_process_has_resident_memory() {
        assert!(super::rss_kib(std::process::id()).unwrap() > 0);
    }
}
