//! The routing tables and every rule that changes them. Plain data, no locking: the caller
//! holds the lock and owns timing.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use rocketmq_wire::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerBody, TopicConfig,
    TopicQueueMappingInfo, TopicRouteData,
};

use super::queues::{Queues, TopicQueues};

/// Identifies one accepted connection for the lifetime of the process.
pub type ConnId = u64;

pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;
const MASTER_ID: i64 = 0;
pub const DEFAULT_BROKER_TIMEOUT_MS: i64 = 120_000;
const SYNC_BROKER_MEMBER_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrKey {
    pub cluster: String,
    pub addr: String,
}

#[derive(Clone, Debug)]
pub struct BrokerLive {
    pub last_update_ms: i64,
    pub timeout_ms: i64,
    pub data_version: DataVersion,
    pub conn: ConnId,
    pub ha_server_addr: String,
    /// The broker's protocol version (`MQVersion` ordinal) at its last registration.
    pub version: i32,
    /// The fingerprint of its last full registration and the route generation right after it.
    pub last_registration: Option<(Fingerprint, u64)>,
}

/// Identifies a registration's content (headers and body).
pub type Fingerprint = u128;

/// Who sends a registration, on which connection and when.
pub struct Registrant {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: ConnId,
    pub now_ms: i64,
}

pub struct Registration {
    pub from: Registrant,
    pub ha_server_addr: String,
    pub zone_name: Option<String>,
    pub timeout_ms: Option<i64>,
    /// `None` marks a 4.x broker, which does not send the field.
    pub enable_acting_master: Option<bool>,
    pub body: RegisterBrokerBody,
    pub version: i32,
}

/// Config switches that change how a registration is applied.
#[derive(Clone, Copy, Debug, Default)]
pub struct RegisterPolicy {
    pub notify_min_id: bool,
    /// `deleteTopicWithBrokerRegistration`: a full registration is the whole truth.
    pub delete_unlisted_topics: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum RegisterOutcome {
    Registered {
        master_addr: Option<String>,
        ha_server_addr: Option<String>,
    },
    /// A member with a newer state version holds this id; answered as success, ignored.
    Stale,
    /// A single-topic registration from an id the group does not know yet.
    Refused,
}

/// What NOTIFY_MIN_BROKER_ID_CHANGE tells brokers, and whom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinIdNotice {
    pub min_broker_id: i64,
    pub min_broker_addr: String,
    pub offline_broker_addr: Option<String>,
    pub ha_broker_addr: Option<String>,
    pub recipients: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unregistration {
    pub cluster: String,
    pub broker_addr: String,
    pub broker_name: String,
    pub broker_id: i64,
}

#[derive(Default)]
pub struct Registry {
    /// The largest table, looked up once per topic of every registration: a fast keyed hash.
    pub topics: foldhash::HashMap<String, TopicQueues>,
    pub brokers: HashMap<String, BrokerData>,
    pub clusters: HashMap<String, BTreeSet<String>>,
    pub live: HashMap<BrokerAddrKey, BrokerLive>,
    pub filter_servers: HashMap<BrokerAddrKey, Vec<String>>,
    pub mappings: HashMap<String, BTreeMap<String, TopicQueueMappingInfo>>,
    /// One shared copy of each broker name that topics refer to.
    names: HashSet<Arc<str>>,
}

pub(super) fn key(cluster: &str, addr: &str) -> BrokerAddrKey {
    BrokerAddrKey {
        cluster: cluster.to_string(),
        addr: addr.to_string(),
    }
}

fn queues(tc: &TopicConfig, perm: i32) -> Queues {
    Queues {
        read: tc.read_queue_nums,
        write: tc.write_queue_nums,
        perm,
        sys_flag: tc.topic_sys_flag,
    }
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
    fn shared_name(&mut self, broker_name: &str) -> Arc<str> {
        if let Some(name) = self.names.get(broker_name) {
            return name.clone();
        }
        let name: Arc<str> = broker_name.into();
        self.names.insert(name.clone());
        name
    }

    /// Sets a broker group's queues of a topic; returns whether anything changed.
    pub fn set_queues(&mut self, topic: &str, qd: &QueueData) -> bool {
        let name = self.shared_name(&qd.broker_name);
        self.set_topic_queues(topic, &name, Queues::of(qd))
    }

    fn set_topic_queues(&mut self, topic: &str, broker_name: &Arc<str>, queues: Queues) -> bool {
        // Looked up by reference first: re-registrations mostly touch known topics, and an
        // owned key for each would cost an allocation per topic.
        if let Some(slot) = self.topics.get_mut(topic) {
            return slot.set(broker_name, queues);
        }
        let mut slot = TopicQueues::default();
        slot.set(broker_name, queues);
        self.topics.insert(topic.to_string(), slot);
        true
    }

    /// Registers a broker. Returns the outcome and whether anything a route shows changed.
    pub fn register(
        &mut self,
        reg: Registration,
        policy: RegisterPolicy,
    ) -> (RegisterOutcome, bool, Option<MinIdNotice>) {
        let Registrant {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ..
        } = &reg.from;
        let wrapper = &reg.body.wrapper;
        // Java creates the group and the cluster entry before refusing; a refused registration
        // here changes nothing, so that refusals cannot pile up empty groups.
        let id_known = self
            .brokers
            .get(broker_name)
            .is_some_and(|bd| bd.broker_addrs.contains_key(broker_id));
        if !id_known && wrapper.topic_configs.len() == 1 {
            return (RegisterOutcome::Refused, false, None);
        }
        let addr_key = key(cluster, broker_addr);
        let name = self.shared_name(broker_name);

        // Cluster membership shows in cluster info, which is cached like routes.
        let joined_cluster = self
            .clusters
            .entry(cluster.clone())
            .or_default()
            .insert(broker_name.clone());

        let mut register_first = !self.brokers.contains_key(broker_name);
        let bd = self
            .brokers
            .entry(broker_name.clone())
            .or_insert_with(|| BrokerData::new(cluster, broker_name));
        let before = bd.clone();
        let old_version = reg.enable_acting_master.is_none();
        bd.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        bd.zone_name = reg.zone_name.clone();

        let prev_min = bd.broker_addrs.keys().next().copied().unwrap_or(0);
        let min_id_changed = *broker_id < prev_min;

        // One address holds one id in a group (a slave switched to master on the same host).
        bd.broker_addrs
            .retain(|id, addr| addr != broker_addr || id == broker_id);

        if let Some(holder) = bd.broker_addrs.get(broker_id).filter(|a| *a != broker_addr) {
            let holder_state = self
                .live
                .get(&key(cluster, holder))
                .map(|l| l.data_version.state_version);
            if holder_state.is_some_and(|s| s > wrapper.data_version.state_version) {
                let changed = *bd != before || joined_cluster;
                self.drop_live_if_unheld(&addr_key);
                return (RegisterOutcome::Stale, changed, None);
            }
        }

        let old = bd.broker_addrs.insert(*broker_id, broker_addr.clone());
        register_first |= old.as_deref().is_none_or(str::is_empty);
        let is_master = *broker_id == MASTER_ID;
        let min_id = bd.broker_addrs.keys().next().copied();
        let is_prime_slave = !old_version && !is_master && min_id == Some(*broker_id);
        let acting_master = bd.enable_acting_master;
        let mut changed = *bd != before || joined_cluster;

        let prev_version = self.live.get(&addr_key).map(|l| l.data_version);
        let version_changed = prev_version != Some(wrapper.data_version);

        if is_master || is_prime_slave {
            if wrapper.mapping_info.is_empty() && policy.delete_unlisted_topics {
                let incoming: BTreeSet<&str> = wrapper
                    .topic_configs
                    .iter()
                    .filter_map(|tc| tc.topic_name.as_deref())
                    .collect();
                changed |= self.remove_broker_from_topics(broker_name, |t| !incoming.contains(t));
            }
            for tc in &wrapper.topic_configs {
                let Some(topic) = tc.topic_name.as_deref() else {
                    continue;
                };
                // An unchanged broker only adds topics it is missing from.
                let unchanged = !(register_first || version_changed);
                if unchanged
                    && self
                        .topics
                        .get(topic)
                        .is_some_and(|m| m.contains(broker_name))
                {
                    continue;
                }
                let mut perm = tc.perm;
                if is_prime_slave && acting_master {
                    perm &= !PERM_WRITE;
                }
                changed |= self.set_topic_queues(topic, &name, queues(tc, perm));
            }
            if version_changed || register_first {
                for (topic, info) in &wrapper.mapping_info {
                    let Some(bname) = info.bname.clone() else {
                        continue;
                    };
                    let slot = self.mappings.entry(topic.clone()).or_default();
                    if slot.get(&bname) != Some(info) {
                        slot.insert(bname, info.clone());
                        changed = true;
                    }
                }
            }
        }

        self.live.insert(
            addr_key.clone(),
            BrokerLive {
                last_update_ms: reg.from.now_ms,
                timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_BROKER_TIMEOUT_MS),
                data_version: wrapper.data_version,
                conn: reg.from.conn,
                ha_server_addr: reg.ha_server_addr.clone(),
                version: reg.version,
                last_registration: None,
            },
        );

        if let Some(list) = &reg.body.filter_server_list {
            let prev = if list.is_empty() {
                self.filter_servers.remove(&addr_key)
            } else {
                self.filter_servers.insert(addr_key, list.clone())
            };
            changed |= prev.as_ref() != Some(list) && !(prev.is_none() && list.is_empty());
        }

        let outcome = self.registered(cluster, broker_name, *broker_id);
        let bd = &self.brokers[broker_name.as_str()];

        let notice = (min_id_changed && policy.notify_min_id).then(|| {
            let (min_id, min_addr) = bd
                .broker_addrs
                .iter()
                .next()
                .map(|(id, a)| (*id, a.clone()))
                .unwrap_or_default();
            let recipients = if bd.broker_addrs.len() == 1 {
                bd.broker_addrs.values().cloned().collect()
            } else {
                bd.broker_addrs
                    .iter()
                    .filter(|(id, _)| **id != min_id)
                    .map(|(_, a)| a.clone())
                    .collect()
            };
            MinIdNotice {
                min_broker_id: min_id,
                min_broker_addr: min_addr,
                offline_broker_addr: None,
                ha_broker_addr: Some(reg.ha_server_addr.clone()),
                recipients,
            }
        });

        (outcome, changed, notice)
    }

    /// A registered broker's answer: a slave learns its live master and its HA address.
    fn registered(&self, cluster: &str, broker_name: &str, broker_id: i64) -> RegisterOutcome {
        let master = (broker_id != MASTER_ID)
            .then(|| self.brokers.get(broker_name)?.broker_addrs.get(&MASTER_ID))
            .flatten()
            .and_then(|master| Some((master, self.live.get(&key(cluster, master))?)));
        RegisterOutcome::Registered {
            master_addr: master.map(|(addr, _)| addr.clone()),
            ha_server_addr: master.map(|(_, live)| live.ha_server_addr.clone()),
        }
    }

    /// Applies a registration identical to the broker's last full one, made while nothing a
    /// route shows has changed (`generation`): the full path would change nothing, so only its
    /// liveness and connection are refreshed. `None` sends it down the full path.
    pub fn repeat(
        &mut self,
        reg: &Registrant,
        fingerprint: Fingerprint,
        generation: u64,
    ) -> Option<RegisterOutcome> {
        let group = self.brokers.get(&reg.broker_name)?;
        if group.cluster != reg.cluster
            || group.broker_addrs.get(&reg.broker_id) != Some(&reg.broker_addr)
        {
            return None;
        }
        let live = self.live.get_mut(&key(&reg.cluster, &reg.broker_addr))?;
        if live.last_registration != Some((fingerprint, generation)) {
            return None;
        }
        live.last_update_ms = reg.now_ms;
        live.conn = reg.conn;
        Some(self.registered(&reg.cluster, &reg.broker_name, reg.broker_id))
    }

    /// Remembers a full registration's fingerprint and the generation it left the routes at.
    pub fn remember(
        &mut self,
        cluster: &str,
        broker_addr: &str,
        fingerprint: Fingerprint,
        generation: u64,
    ) {
        if let Some(live) = self.live.get_mut(&key(cluster, broker_addr)) {
            live.last_registration = Some((fingerprint, generation));
        }
    }

    /// Removes `broker_name`'s queue data from every topic matching `which`; drops emptied
    /// topics. Returns whether anything was removed.
    fn remove_broker_from_topics(
        &mut self,
        broker_name: &str,
        which: impl Fn(&str) -> bool,
    ) -> bool {
        let mut changed = false;
        self.topics.retain(|topic, queues| {
            if which(topic) && queues.remove(broker_name) {
                changed = true;
            }
            !queues.is_empty()
        });
        changed
    }

    /// Applies a batch of unregistrations (UNREGISTER_BROKER, expiry, connection loss).
    /// Returns whether routes changed and the notices to send.
    pub fn unregister(
        &mut self,
        batch: &[Unregistration],
        notify: bool,
    ) -> (bool, Vec<MinIdNotice>) {
        let mut changed = false;
        let mut removed = BTreeSet::new();
        let mut reduced = BTreeSet::new();
        let mut min_changed: Vec<(String, String)> = Vec::new();
        for req in batch {
            let addr_key = key(&req.cluster, &req.broker_addr);
            let mut remove_name = false;
            if let Some(bd) = self.brokers.get_mut(&req.broker_name) {
                let was_min = bd.broker_addrs.keys().next() == Some(&req.broker_id);
                let count = bd.broker_addrs.len();
                bd.broker_addrs.retain(|_, a| *a != req.broker_addr);
                changed |= bd.broker_addrs.len() != count;
                if bd.broker_addrs.is_empty() {
                    self.brokers.remove(&req.broker_name);
                    remove_name = true;
                } else if was_min {
                    min_changed.push((req.broker_name.clone(), req.broker_addr.clone()));
                }
            }
            if remove_name {
                if let Some(names) = self.clusters.get_mut(&req.cluster) {
                    names.remove(&req.broker_name);
                    if names.is_empty() {
                        self.clusters.remove(&req.cluster);
                    }
                }
                removed.insert(req.broker_name.clone());
            } else {
                reduced.insert(req.broker_name.clone());
            }
            if self.drop_live_if_unheld(&addr_key) {
                changed |= self.filter_servers.remove(&addr_key).is_some();
            }
        }

        let brokers = &self.brokers;
        self.topics.retain(|_, queues| {
            for name in &removed {
                changed |= queues.remove(name);
            }
            for name in &reduced {
                let Some(qd) = queues.get_mut(name) else {
                    continue;
                };
                let bd = brokers.get(name);
                if bd.is_some_and(|b| b.enable_acting_master)
                    && no_master(bd)
                    && qd.perm & PERM_WRITE != 0
                {
                    qd.perm &= !PERM_WRITE;
                    changed = true;
                }
            }
            !queues.is_empty()
        });

        if !removed.is_empty() {
            self.names.retain(|name| Arc::strong_count(name) > 1);
        }

        let notices = if notify {
            min_changed
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
                .collect()
        } else {
            Vec::new()
        };
        (changed, notices)
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
                    out.push(Unregistration {
                        cluster: live_key.cluster.clone(),
                        broker_addr: live_key.addr.clone(),
                        broker_name: bd.broker_name.clone(),
                        broker_id: *id,
                    });
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
    fn drop_live_if_unheld(&mut self, key: &BrokerAddrKey) -> bool {
        if self.holds(key) {
            return false;
        }
        self.live.remove(key);
        true
    }

    /// Brokers leaving (connection closed, expired): the unregistrations that remove them
    /// from every group listing them. Live entries no group lists are dropped at once.
    pub fn departures(&mut self, keys: &[BrokerAddrKey]) -> Vec<Unregistration> {
        let mut out = Vec::new();
        for k in keys {
            let found = self.unregistrations_for(k);
            if found.is_empty() {
                self.live.remove(k);
            }
            out.extend(found);
        }
        out
    }

    /// The live entries registered on connection `conn`.
    pub fn registered_on(&self, conn: ConnId) -> Vec<BrokerAddrKey> {
        self.live
            .iter()
            .filter(|(_, l)| l.conn == conn)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Live entries whose deadline passed at `now_ms`, with the connection each registered on.
    pub fn expired(&self, now_ms: i64) -> Vec<(BrokerAddrKey, ConnId)> {
        self.live
            .iter()
            .filter(|(_, l)| l.last_update_ms.saturating_add(l.timeout_ms) < now_ms)
            .map(|(k, l)| (k.clone(), l.conn))
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

    /// Refreshes the deadline of an existing live entry (QUERY_DATA_VERSION, BROKER_HEARTBEAT).
    pub fn touch(&mut self, cluster: &str, addr: &str, now_ms: i64) -> Option<&BrokerLive> {
        let live = self.live.get_mut(&key(cluster, addr))?;
        live.last_update_ms = now_ms;
        Some(live)
    }

    pub fn live(&self, cluster: &str, addr: &str) -> Option<&BrokerLive> {
        self.live.get(&key(cluster, addr))
    }

    /// Sets (wipe) or restores (add) write permission on every topic of a broker group.
    pub fn change_write_perm(&mut self, broker_name: &str, wipe: bool) -> (usize, bool) {
        let mut count = 0;
        let mut changed = false;
        for queues in self.topics.values_mut() {
            if let Some(qd) = queues.get_mut(broker_name) {
                let perm = if wipe {
                    qd.perm & !PERM_WRITE
                } else {
                    PERM_READ | PERM_WRITE
                };
                changed |= perm != qd.perm;
                qd.perm = perm;
                count += 1;
            }
        }
        (count, changed)
    }

    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        match cluster {
            None => self.topics.remove(topic).is_some(),
            Some(cluster) => {
                let Some(names) = self.clusters.get(cluster) else {
                    return false;
                };
                let Some(queues) = self.topics.get_mut(topic) else {
                    return false;
                };
                let mut changed = false;
                for name in names {
                    changed |= queues.remove(name);
                }
                if queues.is_empty() {
                    self.topics.remove(topic);
                }
                changed
            }
        }
    }

    /// REGISTER_TOPIC_IN_NAMESRV: stores queue data of known brokers, stopping at the first
    /// unknown one as Java does.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        let mut changed = false;
        for qd in queue_datas {
            if !self.brokers.contains_key(&qd.broker_name) {
                break;
            }
            changed |= self.set_queues(topic, qd);
        }
        changed
    }

    /// Assembles a topic's route; `None` if the topic or all its brokers are unknown.
    pub fn route(&self, topic: &str, acting_master: bool) -> Option<TopicRouteData> {
        let queues = self.topics.get(topic)?;
        let mut route = TopicRouteData {
            queue_datas: queues.to_queue_datas(),
            ..Default::default()
        };
        for (name, _) in queues.iter() {
            if let Some(bd) = self.brokers.get(name) {
                route.broker_datas.push(bd.clone());
            }
        }
        if route.broker_datas.is_empty() {
            return None;
        }
        if !self.filter_servers.is_empty() {
            for bd in &route.broker_datas {
                for addr in bd.broker_addrs.values() {
                    if let Some(list) = self.filter_servers.get(&key(&bd.cluster, addr)) {
                        route.filter_server_table.insert(addr.clone(), list.clone());
                    }
                }
            }
        }
        route.topic_queue_mapping_by_broker = self.mappings.get(topic).cloned();
        if acting_master && !topic.starts_with(SYNC_BROKER_MEMBER_PREFIX) {
            self.rewrite_acting_master(&mut route, queues);
        }
        Some(route)
    }

    /// Lets clients treat the lowest slave of a master-less group as master, when that group's
    /// queue data is no longer writable.
    fn rewrite_acting_master(&self, route: &mut TopicRouteData, queues: &TopicQueues) {
        let masterless = |bd: &BrokerData| {
            !bd.broker_addrs.is_empty() && !bd.broker_addrs.contains_key(&MASTER_ID)
        };
        if !route.broker_datas.iter().any(masterless) {
            return;
        }
        for bd in route.broker_datas.iter_mut() {
            if !masterless(bd) || !bd.enable_acting_master {
                continue;
            }
            let writable = queues
                .get(&bd.broker_name)
                .is_some_and(|qd| qd.perm & PERM_WRITE != 0);
            if writable {
                continue;
            }
            if let Some((&min_id, _)) = bd.broker_addrs.iter().next() {
                let addr = bd.broker_addrs.remove(&min_id).unwrap_or_default();
                bd.broker_addrs.insert(MASTER_ID, addr);
            }
        }
    }

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self
                .brokers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            cluster_addr_table: self
                .clusters
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }

    pub fn topics_of_cluster(&self, cluster: &str) -> Vec<String> {
        let Some(names) = self.clusters.get(cluster) else {
            return Vec::new();
        };
        let mut out: Vec<String> = self
            .topics
            .iter()
            .filter(|(_, queues)| names.iter().any(|n| queues.contains(n)))
            .map(|(t, _)| t.clone())
            .collect();
        out.sort();
        out
    }

    /// Topics whose first queue data's sys flag satisfies `pred`.
    pub fn topics_by_sys_flag(&self, pred: impl Fn(i32) -> bool) -> Vec<String> {
        let mut out: Vec<String> = self
            .topics
            .iter()
            .filter(|(_, queues)| queues.iter().next().is_some_and(|(_, q)| pred(q.sys_flag)))
            .map(|(t, _)| t.clone())
            .collect();
        out.sort();
        out
    }
}
