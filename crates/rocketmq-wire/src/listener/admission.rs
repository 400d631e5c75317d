//! Who may hold a connection: caps on connections in total and per source address, so that
//! one host opening thousands of idle sockets cannot take every descriptor and lock brokers
//! and clients out. A share of the total is kept for hosts the server trusts (the NameServer:
//! hosts that registered brokers; a controller: its group's members): when a flood from many
//! addresses fills the rest, they can still reconnect.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;

use parking_lot::Mutex;

/// Trusted hosts remembered, at most; beyond that none are added (the reserve then protects the
/// hosts already known).
const TRUSTED_HOSTS_KEPT: usize = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub total: usize,
    pub per_address: usize,
    /// Of `total`, how many only trusted hosts may take.
    pub reserve: usize,
}

impl Limits {
    /// Limits from the configured values, where 0 or less derives a value from the number of
    /// descriptors the process may open (`fd_limit`), keeping `fd_reserve` of them for files,
    /// the HTTP port and the like.
    pub fn derive(total: i64, per_address: i64, fd_limit: u64, fd_reserve: u64) -> Self {
        let total = if total > 0 {
            total as usize
        } else {
            let usable = fd_limit.saturating_sub(fd_reserve.max(fd_limit / 10));
            usable.clamp(64, 100_000) as usize
        };
        Self::with_total(total, per_address)
    }

    /// Limits for a configured `total`, where a `per_address` of 0 or less is a quarter of it.
    pub fn with_total(total: usize, per_address: i64) -> Self {
        let per_address = if per_address > 0 {
            per_address as usize
        } else {
            (total / 4).max(16)
        };
        Limits {
            total,
            per_address,
            reserve: (total / 10).max(1),
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    PerAddress,
    Total,
}

pub struct Admission {
    limits: Limits,
    state: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_address: HashMap<IpAddr, usize>,
    trusted: HashSet<IpAddr>,
}

/// An admitted connection; dropping it gives its place back.
pub struct Admitted {
    admission: Arc<Admission>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.admission.state.lock();
        counts.total -= 1;
        if let Some(n) = counts.per_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                counts.per_address.remove(&self.ip);
            }
        }
    }
}

impl Admission {
    pub fn new(limits: Limits) -> Self {
        Admission {
            limits,
            state: Mutex::default(),
        }
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Admitted, Refusal> {
        let mut counts = self.state.lock();
        let from_ip = counts.per_address.get(&ip).copied().unwrap_or(0);
        if from_ip >= self.limits.per_address {
            return Err(Refusal::PerAddress);
        }
        let open_to_all = self.limits.total - self.limits.reserve;
        let cap = if counts.trusted.contains(&ip) {
            self.limits.total
        } else {
            open_to_all
        };
        if counts.total >= cap {
            return Err(Refusal::Total);
        }
        counts.total += 1;
        *counts.per_address.entry(ip).or_default() += 1;
        Ok(Admitted {
            admission: self.clone(),
            ip,
        })
    }

    /// Trusts `ip` from now on: it may use the reserve.
    pub fn trust(&self, ip: IpAddr) {
        let mut counts = self.state.lock();
        if counts.trusted.len() < TRUSTED_HOSTS_KEPT || counts.trusted.contains(&ip) {
            counts.trusted.insert(ip);
        }
    }
}

/// The soft and hard limits on open files, where the platform has them.
#[cfg(unix)]
fn open_files_limits() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit)
}

/// The soft limit on open files in force now, if there is one.
pub fn open_files_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        // rlim_t is not u64 on every platform.
        #[allow(clippy::unnecessary_cast)]
        open_files_limits()
            .filter(|l| l.rlim_cur != libc::RLIM_INFINITY)
            .map(|l| l.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Raises the soft limit on open files to the hard limit, as far as the system lets us, and
/// returns the soft limit in force: the default soft limit (often 1,024) is far below what a
/// NameServer with thousands of clients needs, and an administrator's hard limit says what is
/// allowed.
pub fn raise_open_files_limit() -> u64 {
    #[cfg(unix)]
    {
        let Some(mut limit) = open_files_limits() else {
            return 1024;
        };
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            // SAFETY: setrlimit only reads the struct it is given.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                limit = raised;
            }
        }
        // rlim_t is not u64 on every platform.
        #[allow(clippy::unnecessary_cast)]
        let soft = limit.rlim_cur as u64;
        soft
    }
    #[cfg(not(unix))]
    {
        1024
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn one_address_cannot_take_more_than_its_share() {
        let a = Arc::new(Admission::new(Limits {
            total: 100,
            per_address: 10,
            reserve: 10,
        }));
        let held: Vec<_> = (0..10).map(|_| a.admit(ip(2)).unwrap()).collect();
        assert_eq!(a.admit(ip(2)).err(), Some(Refusal::PerAddress));
        assert!(a.admit(ip(3)).is_ok());
        drop(held);
        assert!(
            a.admit(ip(2)).is_ok(),
            "places come back when connections close"
        );
    }

    #[test]
    fn trusted_hosts_keep_a_reserve_when_everyone_else_is_refused() {
        let a = Arc::new(Admission::new(Limits {
            total: 20,
            per_address: 5,
            reserve: 4,
        }));
        a.trust(ip(9));
        let _flood: Vec<_> = (10..14)
            .flat_map(|host| (0..4).map(move |_| host))
            .map(|host| a.admit(ip(host)).unwrap())
            .collect();
        assert_eq!(a.admit(ip(30)).err(), Some(Refusal::Total));
        let _trusted: Vec<_> = (0..4).map(|_| a.admit(ip(9)).unwrap()).collect();
        assert_eq!(a.admit(ip(9)).err(), Some(Refusal::Total));
    }

    #[test]
    fn derived_limits_follow_the_descriptor_limit() {
        let l = Limits::derive(0, 0, 4096, 300);
        assert_eq!(l.total, 4096 - 409);
        assert_eq!(l.per_address, (4096 - 409) / 4);
        assert_eq!(Limits::derive(500, 20, 4096, 300).per_address, 20);
        assert_eq!(Limits::derive(0, 0, 100, 300).total, 64);
    }
}
