//! Which addresses speak for a group's members now. A member is a name (`host:port`, as a
//! StatefulSet's headless service names its pods), not an address resolved once: a member
//! restarted elsewhere under the same name must be heard as soon as its name points there, and
//! one whose name did not resolve when this node started must be heard once it does. So every
//! name is resolved again every few seconds, and at once (at most once a second) when a request
//! comes from an address no member has; a name that fails to resolve for a while keeps the
//! addresses it last had (a DNS outage must not cut the members off from each other), and one
//! that resolves elsewhere loses its old ones.
//!
//! The address is only the second fence: who a peer is, is for the peer to prove where the
//! group is configured so.

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How often every member's name is resolved again.
pub const REFRESH_EVERY: Duration = Duration::from_secs(3);
/// A request from an address no member has makes the names resolve again at once, but not more
/// often than this: a stranger's requests must not make this node hammer its resolver.
const AGAIN_AFTER: Duration = Duration::from_secs(1);

pub struct MemberAddresses {
    inner: Mutex<Inner>,
    ips: watch::Sender<HashSet<IpAddr>>,
}

#[derive(Default)]
struct Inner {
    names: Vec<String>,
    /// Each name's addresses as last resolved.
    by_name: HashMap<String, Vec<IpAddr>>,
    /// When the names were last resolved (or that began).
    looked: Option<Instant>,
}

impl MemberAddresses {
    /// The members `names` (`host:port` each), resolved once now; those that do not resolve
    /// are tried again with every refresh.
    pub async fn resolve(names: Vec<String>) -> Arc<Self> {
        let this = Arc::new(MemberAddresses {
            inner: Mutex::new(Inner {
                names,
                ..Inner::default()
            }),
            ips: watch::Sender::new(HashSet::new()),
        });
        this.refresh().await;
        this
    }

    /// The members are now `names` (the group's membership changed): a name no longer listed
    /// is no longer heard from now on; new ones once resolved ([`MemberAddresses::refresh`]).
    pub fn set_names(&self, names: Vec<String>) {
        let mut inner = self.inner.lock();
        inner.by_name.retain(|name, _| names.contains(name));
        inner.names = names;
        let ips = inner.by_name.values().flatten().copied().collect();
        self.ips.send_replace(ips);
    }

    /// Resolves every name again.
    pub async fn refresh(&self) {
        let names = {
            let mut inner = self.inner.lock();
            inner.looked = Some(Instant::now());
            inner.names.clone()
        };
        let mut found = Vec::with_capacity(names.len());
        for name in &names {
            found.push((name, lookup(name).await));
        }
        let mut inner = self.inner.lock();
        for (name, ips) in found {
            // A name that does not resolve now keeps what it had: a resolver that fails for a
            // while must not cut the members off from each other.
            if let Some(ips) = ips.filter(|ips| !ips.is_empty()) {
                inner.by_name.insert(name.clone(), ips);
            }
        }
        // Names removed meanwhile (`set_names`) are not brought back.
        let Inner { names, by_name, .. } = &*inner;
        let ips: HashSet<IpAddr> = names
            .iter()
            .filter_map(|n| by_name.get(n))
            .flatten()
            .copied()
            .collect();
        self.ips.send_if_modified(|held| {
            let changed = *held != ips;
            *held = ips;
            changed
        });
    }

    /// Whether `ip` is an address of a member as last resolved.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ips.borrow().contains(&ip)
    }

    /// Whether `ip` is an address of a member: as last resolved, or else as resolved again now
    /// (unless that was done within the last second).
    pub async fn admits(&self, ip: IpAddr) -> bool {
        if self.contains(ip) {
            return true;
        }
        let again = {
            let mut inner = self.inner.lock();
            let due = inner.looked.is_none_or(|at| at.elapsed() >= AGAIN_AFTER);
            if due {
                inner.looked = Some(Instant::now());
            }
            due
        };
        if again {
            self.refresh().await;
        }
        self.contains(ip)
    }

    /// Every member's addresses, as they change.
    pub fn subscribe(&self) -> watch::Receiver<HashSet<IpAddr>> {
        self.ips.subscribe()
    }

    /// Resolves the names again every [`REFRESH_EVERY`] until `stop`.
    pub fn keep_fresh(self: &Arc<Self>, stop: CancellationToken) {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(REFRESH_EVERY) => this.refresh().await,
                }
            }
        });
    }
}

/// The addresses `name` resolves to; `None` when the lookup failed.
async fn lookup(name: &str) -> Option<Vec<IpAddr>> {
    match tokio::net::lookup_host(name).await {
        Ok(found) => Some(found.map(|a| a.ip()).collect()),
        Err(e) => {
            tracing::debug!(%name, error = %e, "a group member's name does not resolve now");
            None
        }
    }
}

/// How often a kind of refused peer request is told at most.
pub const TELL_REFUSALS_EVERY: Duration = Duration::from_secs(5);

/// Refused peer requests of one kind, told in the log at most once every
/// [`TELL_REFUSALS_EVERY`]: a stranger's requests, or a member's whose name has just moved and
/// is not resolved again yet, come hundreds a second, and each must not be a line of its own.
pub struct RefusalLog {
    /// When the last line was told, and the refusals since.
    state: Mutex<(Option<Instant>, u64)>,
}

impl RefusalLog {
    pub const fn new() -> Self {
        RefusalLog {
            state: parking_lot::const_mutex((None, 0)),
        }
    }

    /// Counts a refusal; `Some(n)` when it is to be told, `n` the refusals since the last line
    /// (this one included). The first is told at once.
    pub fn tell(&self) -> Option<u64> {
        let mut state = self.state.lock();
        state.1 += 1;
        let now = Instant::now();
        if state
            .0
            .is_some_and(|last| now.duration_since(last) < TELL_REFUSALS_EVERY)
        {
            return None;
        }
        let refused = state.1;
        *state = (Some(now), 0);
        Some(refused)
    }
}

impl Default for RefusalLog {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_name_that_does_not_resolve_keeps_what_it_had_and_a_removed_one_is_forgotten() {
        let members =
            MemberAddresses::resolve(vec!["127.0.0.1:1".into(), "127.0.0.2:1".into()]).await;
        let (one, two) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
        assert!(members.contains(one) && members.contains(two));
        assert!(!members.contains("127.0.0.3".parse().unwrap()));
        // A name that fails to resolve (no such host) adds nothing and removes nothing.
        members.set_names(vec![
            "127.0.0.1:1".into(),
            "127.0.0.2:1".into(),
            "no-such-member.invalid:1".into(),
        ]);
        members.refresh().await;
        assert!(members.contains(one) && members.contains(two));
        members.set_names(vec!["127.0.0.2:1".into()]);
        assert!(
            !members.contains(one),
            "a member removed is no longer heard"
        );
        assert!(members.admits(two).await);
        // A stranger makes the names resolve again, once a second at most.
        assert!(!members.admits("127.0.0.9".parse().unwrap()).await);
    }

    #[test]
    fn a_flood_of_refusals_is_told_once_then_counted_until_the_next_line() {
        let log = RefusalLog::new();
        assert_eq!(log.tell(), Some(1));
        for _ in 0..430 {
            assert_eq!(log.tell(), None);
        }
        // As if the last line were older than the interval.
        log.state.lock().0 = Some(Instant::now() - TELL_REFUSALS_EVERY);
        assert_eq!(log.tell(), Some(431));
        assert_eq!(log.tell(), None);
    }
}
