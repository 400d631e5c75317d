//! Brokers leaving: UNREGISTER_BROKER, closed connections and expiry, each decided as the
//! removals of group members ([`Unregistration`]) that are applied later from a queue; and the
//! deadlines that decide expiry, which heartbeats refresh.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rocketmq_wire::body::BrokerData;

use super::registration::MinIdNotice;
use super::tables::{key, BrokerAddrKey, BrokerLive, ConnId, Registry, MASTER_ID, PERM_WRITE};
use crate::events::{Event, EventKind};
use crate::journal::{Cause, Entry};

/// The removal of one group member: UNREGISTER_BROKER, or a broker leaving (connection closed,
/// expired). Removals wait in a queue before they are applied, and the broker may register
/// again in the meantime; a removal therefore carries the number of the member's registration
/// it was decided against, and leaves alone any registration made after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unregistration {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    /// The member's registration number when the removal was decided (0: none); see
    /// [`Registry::unregistration`]. [`UNFENCED`] removes whatever is there.
    pub seen: u64,
    /// Why it leaves, for the route journal.
    pub why: Why,
}

/// Why a member leaves its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// UNREGISTER_BROKER.
    Unregistered,
    ConnectionClosed,
    Expired {
        silent_ms: i64,
        timeout_ms: i64,
    },
    /// A peer NameServer said the broker unregistered there.
    LeftAtPeer,
    /// Restored from the snapshot, and no broker backs it.
    Unbacked,
}

impl Why {
    /// Said by the broker (UNREGISTER_BROKER) rather than concluded here (connection closed,
    /// expired): it has left every NameServer, and peers are told so.
    fn announced(self) -> bool {
        matches!(self, Why::Unregistered | Why::LeftAtPeer)
    }

    fn cause(self) -> Cause {
        match self {
            Why::Unregistered => Cause::Unregistered,
            Why::ConnectionClosed => Cause::ConnectionClosed,
            Why::Expired { .. } => Cause::Expired,
            Why::LeftAtPeer => Cause::LeftAtPeer,
            Why::Unbacked => Cause::Unbacked,
        }
    }
}

/// When a broker address left, and whether the broker said so itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departure {
    pub at_ms: i64,
    pub announced: bool,
}

/// Marks a removal that applies whatever registered since (members restored from a snapshot
/// that no live entry backs).
pub const UNFENCED: u64 = u64::MAX;

/// How long a departure is remembered: longer than any broker's timeout, after which a peer
/// no longer holds word of the broker newer than its departure.
pub const DEPARTED_KEPT_MS: i64 = 10 * 60 * 1000;

/// A broker found silent past its deadline.
#[derive(Debug)]
pub struct Expired {
    pub key: BrokerAddrKey,
    /// The connection it registered on, to close.
    pub conn: ConnId,
    pub silent_ms: i64,
    pub timeout_ms: i64,
}

/// What an expiry scan decided.
#[derive(Debug, Default)]
pub struct Expiry {
    pub expired: Vec<Expired>,
    /// Their removals, to queue.
    pub leaving: Vec<Unregistration>,
}

/// What applying a batch of removals did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Unregistered {
    /// NOTIFY_MIN_BROKER_ID_CHANGE notices to send.
    pub notices: Vec<MinIdNotice>,
    /// Removals left unapplied because the member registered again after they were decided.
    pub stale: usize,
}

fn no_master(bd: Option<&BrokerData>) -> bool {
    bd.is_none_or(|bd| {
        bd.broker_addrs
            .keys()
            .next()
            .is_none_or(|min| *min > MASTER_ID)
    })
}

impl Registry {
    /// UNREGISTER_BROKER as it is received: the removal of the member's registration as it is
    /// now, to be applied later without touching a registration made in between.
    pub fn unregistration(
        &self,
        cluster: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Unregistration {
        Unregistration {
            cluster: cluster.to_string(),
            broker_addr: broker_addr.to_string(),
            broker_name: broker_name.to_string(),
            broker_id,
            seen: self.member_seq(broker_name, broker_addr),
            why: Why::Unregistered,
        }
    }

    // ---- leaving ----

    /// Applies a batch of unregistrations (UNREGISTER_BROKER, expiry, connection loss), each
    /// unless its member registered again after it was decided.
    pub fn unregister(&mut self, batch: &[Unregistration], notify: bool) -> Unregistered {
        let mut removed = BTreeSet::new();
        let mut reduced = BTreeSet::new();
        let mut min_changed: Vec<(String, String)> = Vec::new();
        let mut stale = 0;
        for req in batch {
            if req.seen != UNFENCED
                && self.member_seq(&req.broker_name, &req.broker_addr) > req.seen
            {
                stale += 1;
                self.note(|| {
                    Entry::new(Cause::StaleUnregistration)
                        .broker(
                            &req.cluster,
                            &req.broker_name,
                            &req.broker_addr,
                            req.broker_id,
                        )
                        .detail(format!(
                            "{} decided before the broker registered again; left unapplied",
                            req.why.cause().key()
                        ))
                });
                self.events.push(Event::new(
                    EventKind::StaleUnregistrationIgnored,
                    req.broker_name.clone(),
                    format!(
                        "{} id {} in {}: it registered again after the removal was decided",
                        req.broker_addr, req.broker_id, req.cluster
                    ),
                ));
                continue;
            }
            let addr_key = key(&req.cluster, &req.broker_addr);
            let mut remove_name = false;
            let mut left_here = None;
            if let Some(bd) = self.brokers.get_mut(&req.broker_name) {
                let was_min = bd.broker_addrs.keys().next() == Some(&req.broker_id);
                let count = bd.broker_addrs.len();
                bd.broker_addrs.retain(|_, a| *a != req.broker_addr);
                if bd.broker_addrs.len() != count {
                    let emptied = bd.broker_addrs.is_empty();
                    let mut e = Entry::new(req.why.cause()).broker(
                        &req.cluster,
                        &req.broker_name,
                        &req.broker_addr,
                        req.broker_id,
                    );
                    if let Why::Expired {
                        silent_ms,
                        timeout_ms,
                    } = req.why
                    {
                        e.silent_ms = Some(silent_ms);
                        e.timeout_ms = Some(timeout_ms);
                    }
                    if emptied {
                        e = e.detail("the group's last address");
                    }
                    left_here = Some(e);
                    self.changes.shared = true;
                    self.changes.cluster_info = true;
                    self.group_epochs.stamp(&req.broker_name);
                    let last = if bd.broker_addrs.is_empty() {
                        ", the group's last address"
                    } else {
                        ""
                    };
                    self.events.push(Event::new(
                        EventKind::BrokerLeft,
                        req.broker_addr.clone(),
                        format!(
                            "{} id {} in {}{last}",
                            req.broker_name, req.broker_id, req.cluster
                        ),
                    ));
                }
                if bd.broker_addrs.is_empty() {
                    self.brokers.remove(&req.broker_name);
                    self.group_epochs.remove(&req.broker_name);
                    self.topics_changed_ms.remove(&req.broker_name);
                    remove_name = true;
                } else if was_min {
                    min_changed.push((req.broker_name.clone(), req.broker_addr.clone()));
                }
                self.forget_member(&req.broker_name, &req.broker_addr);
            }
            if let Some(e) = left_here {
                self.note(|| e);
            }
            if remove_name {
                if let Some(names) = self.clusters.get_mut(&req.cluster) {
                    names.remove(&req.broker_name);
                    if names.is_empty() {
                        self.clusters.remove(&req.cluster);
                    }
                }
                self.changes.cluster_info = true;
                removed.insert(req.broker_name.clone());
            } else {
                reduced.insert(req.broker_name.clone());
            }
            if self.drop_live_if_unheld(&addr_key, req.why.announced())
                && self.filter_servers.remove(&addr_key).is_some()
            {
                self.changes.shared = true;
            }
        }

        // A master-less group of acting-master brokers stops taking writes; other groups that
        // lost an address keep their topics as they are.
        reduced.retain(|name| {
            let bd = self.brokers.get(name);
            bd.is_some_and(|b| b.enable_acting_master) && no_master(bd)
        });
        // Topics hold the registry's shared names, so a group's topics are found by comparing
        // pointers: a departure scans every topic, and at hundreds of thousands of topics
        // comparing names there took a core for a tenth of a second per departing group.
        let shared = |names: &BTreeSet<String>| -> Vec<Arc<str>> {
            names
                .iter()
                .filter_map(|n| self.names.get(n.as_str()).cloned())
                .collect()
        };
        let (removed_shared, reduced_shared) = (shared(&removed), shared(&reduced));
        if !removed_shared.is_empty() || !reduced_shared.is_empty() {
            let mut left = Vec::new();
            let mut read_only = Vec::new();
            for (topic, queues) in self.topics.iter() {
                for (name, q) in queues.entries() {
                    if removed_shared.iter().any(|r| Arc::ptr_eq(r, name)) {
                        left.push((topic.to_string(), name.to_string()));
                    } else if q.perm & PERM_WRITE != 0
                        && reduced_shared.iter().any(|r| Arc::ptr_eq(r, name))
                    {
                        read_only.push((topic.to_string(), name.to_string(), q.perm & !PERM_WRITE));
                    }
                }
            }
            for (topic, name) in left {
                self.leave_topic(&topic, &name);
            }
            for (topic, name, perm) in read_only {
                self.set_perm(&topic, &name, perm);
            }
        }

        if !removed.is_empty() {
            self.names.retain(|name| Arc::strong_count(name) > 1);
        }
        self.tell_topics("", "their last broker left");

        if !notify {
            return Unregistered {
                notices: Vec::new(),
                stale,
            };
        }
        let notices = min_changed
            .into_iter()
            .filter_map(|(name, offline)| {
                let bd = self.brokers.get(&name).filter(|b| b.enable_acting_master)?;
                let (min_id, min_addr) = bd.broker_addrs.iter().next()?;
                Some(MinIdNotice {
                    min_broker_id: *min_id,
                    min_broker_addr: min_addr.clone(),
                    offline_broker_addr: Some(offline),
                    ha_broker_addr: None,
                    recipients: bd.broker_addrs.values().cloned().collect(),
                })
            })
            .collect();
        Unregistered { notices, stale }
    }

    /// Whether `bd` belongs to `cluster`: the cluster it was created in, or one it joined later.
    fn in_cluster(&self, bd: &BrokerData, cluster: &str) -> bool {
        bd.cluster == cluster
            || self
                .clusters
                .get(cluster)
                .is_some_and(|names| names.contains(&bd.broker_name))
    }

    /// The unregistrations that take a live entry's address out of every group of its cluster
    /// that lists it: one address may be registered under two broker names (a broker renamed
    /// on the same host and port), and a departure must leave no routable ghost behind.
    pub fn unregistrations_for(&self, live_key: &BrokerAddrKey) -> Vec<Unregistration> {
        let mut out = Vec::new();
        for bd in self.brokers.values() {
            if !self.in_cluster(bd, &live_key.cluster) {
                continue;
            }
            for (id, addr) in &bd.broker_addrs {
                if *addr == live_key.addr {
                    let mut leaving =
                        self.unregistration(&live_key.cluster, addr, &bd.broker_name, *id);
                    leaving.why = Why::ConnectionClosed;
                    out.push(leaving);
                }
            }
        }
        out.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        out
    }

    /// Whether some group of `key`'s cluster still lists its address.
    fn holds(&self, key: &BrokerAddrKey) -> bool {
        self.brokers.values().any(|bd| {
            self.in_cluster(bd, &key.cluster) && bd.broker_addrs.values().any(|a| *a == key.addr)
        })
    }

    /// Drops a live entry that no group lists any more; true if it is gone.
    pub(super) fn drop_live_if_unheld(&mut self, key: &BrokerAddrKey, announced: bool) -> bool {
        if self.holds(key) {
            return false;
        }
        self.drop_live(key, announced);
        true
    }

    /// Drops a live entry, noting when it left.
    fn drop_live(&mut self, key: &BrokerAddrKey, announced: bool) {
        if self.live.remove(key).is_some() {
            let at_ms = rocketmq_wire::clock::now_ms();
            self.departed
                .insert(key.clone(), Departure { at_ms, announced });
        }
    }

    /// Brokers leaving (connection closed, expired): the unregistrations that remove them
    /// from every group listing them. Live entries no group lists are dropped at once.
    pub fn departures(&mut self, keys: &[BrokerAddrKey]) -> Vec<Unregistration> {
        let mut out = Vec::new();
        for k in keys {
            let found = self.unregistrations_for(k);
            if found.is_empty() {
                self.drop_live(k, false);
            }
            out.extend(found);
        }
        out
    }

    /// Connection `conn` closed: the removals of every broker still registered on it (one that
    /// registered again on another connection is not).
    pub fn closed(&mut self, conn: ConnId) -> Vec<Unregistration> {
        self.departures(&self.registered_on(conn))
    }

    /// Brokers whose deadline passed at `now_ms`, and their removals, decided together: a
    /// registration that landed before this is seen (and its broker kept), one after it is
    /// numbered after the removals (which then leave it alone).
    pub fn expire(&mut self, now_ms: i64) -> Expiry {
        let expired: Vec<Expired> = self
            .expired(now_ms)
            .into_iter()
            .map(|(key, conn)| {
                let live = &self.live[&key];
                Expired {
                    silent_ms: now_ms - live.last_update_ms,
                    timeout_ms: live.timeout_ms,
                    key,
                    conn,
                }
            })
            .collect();
        self.forget_departures(now_ms);
        if expired.is_empty() {
            return Expiry::default();
        }
        let keys: Vec<BrokerAddrKey> = expired.iter().map(|e| e.key.clone()).collect();
        let mut leaving = self.departures(&keys);
        for u in &mut leaving {
            if let Some(e) = expired
                .iter()
                .find(|e| e.key.addr == u.broker_addr && e.key.cluster == u.cluster)
            {
                u.why = Why::Expired {
                    silent_ms: e.silent_ms,
                    timeout_ms: e.timeout_ms,
                };
            }
        }
        Expiry { expired, leaving }
    }

    /// The live entries registered on connection `conn`.
    pub fn registered_on(&self, conn: ConnId) -> Vec<BrokerAddrKey> {
        let mut keys: Vec<BrokerAddrKey> = self
            .live
            .iter()
            .filter(|(_, l)| l.conn == conn)
            .map(|(k, _)| k.clone())
            .collect();
        // In a fixed order: departures of one address from groups of the same name in two
        // clusters depend on it.
        keys.sort();
        keys
    }

    /// Live entries whose deadline passed at `now_ms`, with the connection each registered on.
    pub fn expired(&self, now_ms: i64) -> Vec<(BrokerAddrKey, ConnId)> {
        self.live
            .iter()
            .filter(|(_, l)| l.last_update_ms.saturating_add(l.timeout_ms) < now_ms)
            .map(|(k, l)| (k.clone(), l.conn))
            .collect::<BTreeMap<_, _>>()
            .into_iter()
            .collect()
    }

    /// Removes group members that have no live entry (after loading a snapshot, whose members
    /// must be backed by a broker that can still expire), and the topics left without groups.
    /// Returns whether anything was removed.
    pub fn drop_members_without_live(&mut self) -> bool {
        let mut gone = Vec::new();
        for bd in self.brokers.values() {
            for (id, addr) in &bd.broker_addrs {
                let alive = self
                    .live
                    .keys()
                    .any(|k| k.addr == *addr && self.in_cluster(bd, &k.cluster));
                if !alive {
                    gone.push(Unregistration {
                        cluster: bd.cluster.clone(),
                        broker_addr: addr.clone(),
                        broker_name: bd.broker_name.clone(),
                        broker_id: *id,
                        seen: UNFENCED,
                        why: Why::Unbacked,
                    });
                }
            }
        }
        if gone.is_empty() {
            return false;
        }
        self.unregister(&gone, false);
        true
    }

    /// Every group member that clients can be routed to has a live entry, so that it expires
    /// when its broker goes silent. Checked by tests after every step.
    #[cfg(test)]
    pub fn members_are_alive(&self) -> Result<(), String> {
        for bd in self.brokers.values() {
            for addr in bd.broker_addrs.values() {
                let alive = self
                    .live
                    .keys()
                    .any(|k| k.addr == *addr && self.in_cluster(bd, &k.cluster));
                if !alive {
                    return Err(format!(
                        "{}: {addr} is listed but not alive",
                        bd.broker_name
                    ));
                }
            }
        }
        Ok(())
    }

    /// When the broker at `addr` of `cluster` last left, if it did within [`DEPARTED_KEPT_MS`].
    pub fn departed_at(&self, cluster: &str, addr: &str) -> Option<i64> {
        self.departed.get(&key(cluster, addr)).map(|d| d.at_ms)
    }

    /// The brokers that said they were leaving (UNREGISTER_BROKER) within
    /// [`DEPARTED_KEPT_MS`], and when they left: what peers are told.
    pub fn announced_departures(&self) -> impl Iterator<Item = (&BrokerAddrKey, i64)> {
        self.departed
            .iter()
            .filter(|(_, d)| d.announced)
            .map(|(k, d)| (k, d.at_ms))
    }

    /// A peer says the broker at `addr` told it at `at_ms` that it was leaving. Held here on a
    /// peer's word only (live on connection `conn`) and heard of no later, it leaves here too;
    /// one that registered here itself, or that some NameServer heard later, stays. Returns
    /// the removals, to apply at once.
    pub fn left_at_peer(
        &self,
        cluster: &str,
        addr: &str,
        at_ms: i64,
        conn: ConnId,
    ) -> Vec<Unregistration> {
        let k = key(cluster, addr);
        match self.live.get(&k) {
            Some(live) if live.conn == conn && live.last_update_ms <= at_ms => self
                .unregistrations_for(&k)
                .into_iter()
                .map(|u| Unregistration {
                    why: Why::LeftAtPeer,
                    ..u
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// A peer heard the broker at `at_ms`: its deadline moves to that if later. A broker heard
    /// by any NameServer of the group stays alive on all of them.
    pub fn heard_by_peer(&mut self, cluster: &str, addr: &str, at_ms: i64) -> bool {
        match self.live.get_mut(&key(cluster, addr)) {
            Some(live) if live.last_update_ms < at_ms => {
                live.last_update_ms = at_ms;
                true
            }
            _ => false,
        }
    }

    /// A broker taken over from a peer's registration is as alive as the peer last heard it,
    /// not as of now, unless it also registered here itself.
    /// Its topics date from when they changed where the peer's word came from.
    pub fn adopted_from_peer(
        &mut self,
        cluster: &str,
        addr: &str,
        conn: ConnId,
        at_ms: i64,
        (broker_name, topics_changed_ms): (&str, i64),
    ) {
        if let Some(live) = self.live.get_mut(&key(cluster, addr)) {
            if live.conn == conn {
                live.last_update_ms = at_ms;
                self.topics_changed_ms
                    .insert(broker_name.to_string(), topics_changed_ms);
            }
        }
    }

    /// Forgets departures older than [`DEPARTED_KEPT_MS`].
    pub fn forget_departures(&mut self, now_ms: i64) {
        self.departed
            .retain(|_, d| now_ms - d.at_ms < DEPARTED_KEPT_MS);
    }

    /// Refreshes the deadline of an existing live entry (QUERY_DATA_VERSION, BROKER_HEARTBEAT).
    pub fn touch(&mut self, cluster: &str, addr: &str, now_ms: i64) -> Option<&BrokerLive> {
        let live = self.live.get_mut(&key(cluster, addr))?;
        live.last_update_ms = now_ms;
        Some(live)
    }
}
