//! The routing tables and every rule that changes them. Plain data, no locking: the caller
//! holds the lock and owns timing.
//!
//! Every mutation records what it changed in a [`Changes`] log — which topics' routes, whether
//! something all routes show changed (a group's addresses or settings), whether cluster info or
//! the topic list changed — so that the route cache drops exactly what went stale. Mutations
//! are only reachable through methods of [`Registry`]; its tables are private.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use rocketmq_wire::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerBody, TableIndex, TopicConfig,
    TopicQueueMappingInfo, TopicRouteData,
};

use super::queues::{Queues, TopicQueues};
use super::topic_table::{TopicSnapshot, TopicTable};
use crate::events::{version_name, Event, EventKind, TopicTally};

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
    /// What its last full registration left to compare the next one with.
    pub last_registration: Option<LastRegistration>,
}

/// Identifies a registration's content (headers and body).
pub type Fingerprint = u128;

/// A broker's last applied registration, as far as its next one is compared with it. It is
/// kept in the live entry of its cluster and address, which another group registering on the
/// same address shares: it speaks only for the group, id and connection that made it.
#[derive(Clone, Debug)]
pub struct LastRegistration {
    pub broker_name: String,
    pub broker_id: i64,
    pub conn: ConnId,
    /// Of the whole registration.
    pub fingerprint: Fingerprint,
    /// Of its headers but the body's checksum.
    pub headers: Fingerprint,
    /// The group's epoch right after it.
    pub epoch: u64,
    /// Its topic table's index, when it was read as JSON.
    pub table: Option<Arc<TableIndex>>,
}

/// What the next registration of a broker may be read against: its previous topic table,
/// valid while the group is at `epoch`.
#[derive(Clone, Debug)]
pub struct TableBase {
    pub table: Arc<TableIndex>,
    pub epoch: u64,
}

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
    /// Topic configs the body lists: all of `body`'s, or more when it holds only changes.
    pub listed: usize,
    /// Set when `body` holds only the entries that differ from this table, which the broker
    /// registered last: the entries left out are applied already while the group is at its
    /// epoch.
    pub changes_since: Option<TableBase>,
    /// The body's headers (but the checksum), and its table's index, to remember.
    pub headers: Fingerprint,
    pub table: Option<Arc<TableIndex>>,
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
}

/// Marks a removal that applies whatever registered since (members restored from a snapshot
/// that no live entry backs).
pub const UNFENCED: u64 = u64::MAX;

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

/// What mutations since the last [`Registry::take_changes`] changed, as the caches see it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Topics whose route (queues, mappings) changed.
    pub topics: BTreeSet<String>,
    /// Something every route that shows a group may show: its addresses, settings or filter
    /// servers. Rare (brokers joining, leaving, failing over), so not tracked by topic.
    pub shared: bool,
    pub cluster_info: bool,
    pub topic_list: bool,
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }
}

#[derive(Default)]
pub struct Registry {
    /// The largest table, looked up once per topic of every registration.
    topics: TopicTable,
    brokers: HashMap<String, BrokerData>,
    clusters: HashMap<String, BTreeSet<String>>,
    live: HashMap<BrokerAddrKey, BrokerLive>,
    filter_servers: HashMap<BrokerAddrKey, Vec<String>>,
    mappings: HashMap<String, BTreeMap<String, TopicQueueMappingInfo>>,
    /// One shared copy of each broker name that topics refer to.
    names: HashSet<Arc<str>>,
    /// Numbers accepted registrations, in the order the lock applied them.
    registrations: u64,
    /// Per group and member address, the number of the member's latest registration: what a
    /// queued removal is checked against.
    member_seqs: HashMap<String, HashMap<String, u64>>,
    /// Per group, bumped by every change that a broker's identical re-registration would undo
    /// (its settings, or its queues changed by anyone else): a broker may skip decoding a
    /// repeated registration only while its group's epoch is the one it left.
    group_epochs: HashMap<String, u64>,
    changes: Changes,
    /// What people are shown of the mutations since the last [`Registry::take_events`].
    events: Vec<Event>,
    /// Topics created and removed by the mutation under way, told as one event when it ends.
    created: TopicTally,
    removed: TopicTally,
}

/// The queue changes a registration makes, worked out under a read lock so that the write lock
/// is held only to apply them: brokers re-register their whole table every 30 s and nearly all
/// of it is unchanged.
#[derive(Debug, Default)]
pub struct TopicPlan {
    /// Whether the broker speaks for its group's topics (a master, or the lowest slave of a
    /// 5.x group without one).
    applies: bool,
    /// Whether its mapping infos are to be applied (first registration, or a new version).
    mappings: bool,
    /// Indexes into the registration's topic configs whose queues must be set, with them.
    set: Vec<(usize, Queues)>,
    /// Whether, once applied, the group holds every listed topic as listed (or the broker does
    /// not speak for its group's topics at all). Only then may the broker's next registration
    /// be read as a difference from this one: an entry left out of that difference must be in
    /// the table already.
    pub faithful: bool,
    /// Topics the group must leave (`deleteTopicWithBrokerRegistration`).
    leave: Vec<String>,
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

/// How a registration's address joined its group.
enum Joined {
    Member {
        min_id_changed: bool,
    },
    /// A member with a newer state version holds the id.
    Stale,
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
    // ---- reading ----

    pub fn topic_count(&self) -> usize {
        self.topics.len()
    }

    pub fn topic_names(&self) -> impl Iterator<Item = &str> {
        self.topics.iter().map(|(t, _)| t)
    }

    pub fn topic_queues(&self) -> impl Iterator<Item = (&str, &TopicQueues)> {
        self.topics.iter()
    }

    /// The topic table as it is now, to read without holding the registry.
    pub fn topic_snapshot(&self) -> TopicSnapshot {
        self.topics.snapshot()
    }

    pub fn group(&self, broker_name: &str) -> Option<&BrokerData> {
        self.brokers.get(broker_name)
    }

    pub fn groups(&self) -> impl Iterator<Item = &BrokerData> {
        self.brokers.values()
    }

    /// Cluster names and the broker names in each.
    pub fn clusters(&self) -> impl Iterator<Item = (&str, &BTreeSet<String>)> {
        self.clusters.iter().map(|(c, n)| (c.as_str(), n))
    }

    pub fn live(&self, cluster: &str, addr: &str) -> Option<&BrokerLive> {
        self.live.get(&key(cluster, addr))
    }

    pub fn live_entries(&self) -> impl Iterator<Item = (&BrokerAddrKey, &BrokerLive)> {
        self.live.iter()
    }

    pub fn filter_servers(&self) -> impl Iterator<Item = (&BrokerAddrKey, &Vec<String>)> {
        self.filter_servers.iter()
    }

    pub fn mappings(
        &self,
    ) -> impl Iterator<Item = (&str, &BTreeMap<String, TopicQueueMappingInfo>)> {
        self.mappings.iter().map(|(t, m)| (t.as_str(), m))
    }

    // ---- loading a snapshot (before the registry serves anyone) ----

    pub fn restore_group(&mut self, bd: BrokerData) {
        self.brokers.insert(bd.broker_name.clone(), bd);
    }

    pub fn restore_cluster(&mut self, cluster: String, names: BTreeSet<String>) {
        self.clusters.insert(cluster, names);
    }

    pub fn restore_live(&mut self, key: BrokerAddrKey, live: BrokerLive) {
        self.live.insert(key, live);
    }

    pub fn restore_filter_servers(&mut self, key: BrokerAddrKey, servers: Vec<String>) {
        self.filter_servers.insert(key, servers);
    }

    pub fn restore_mapping(&mut self, topic: &str, info: TopicQueueMappingInfo) {
        if let Some(bname) = info.bname.clone() {
            self.mappings
                .entry(topic.to_string())
                .or_default()
                .insert(bname, info);
        }
    }

    /// What changed since the last call; the route cache calls it after every mutation.
    pub fn take_changes(&mut self) -> Changes {
        std::mem::take(&mut self.changes)
    }

    /// The events of the mutations since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Forgets what loading a snapshot did: restored state is not news.
    pub fn discard_events(&mut self) {
        self.events.clear();
        self.created = TopicTally::default();
        self.removed = TopicTally::default();
    }

    /// Tells the topics the mutation created and removed, each with why.
    fn tell_topics(&mut self, created_why: &str, removed_why: &str) {
        for (tally, kind, why) in [
            (
                std::mem::take(&mut self.created),
                EventKind::TopicsCreated,
                created_why,
            ),
            (
                std::mem::take(&mut self.removed),
                EventKind::TopicsDeleted,
                removed_why,
            ),
        ] {
            if tally.count == 0 {
                continue;
            }
            let detail = if tally.count == 1 {
                why.to_string()
            } else {
                format!("{}; {why}", tally.describe())
            };
            self.events.push(Event::new(kind, tally.subject(), detail));
        }
    }

    // ---- small recorded mutations ----

    fn shared_name(&mut self, broker_name: &str) -> Arc<str> {
        if let Some(name) = self.names.get(broker_name) {
            return name.clone();
        }
        let name: Arc<str> = broker_name.into();
        self.names.insert(name.clone());
        name
    }

    fn bump_group(&mut self, broker_name: &str) {
        *self
            .group_epochs
            .entry(broker_name.to_string())
            .or_default() += 1;
    }

    fn group_epoch(&self, broker_name: &str) -> u64 {
        self.group_epochs.get(broker_name).copied().unwrap_or(0)
    }

    /// The number of a member's latest registration; 0 if it has none (not a member, or
    /// restored from a snapshot and not registered since).
    fn member_seq(&self, broker_name: &str, addr: &str) -> u64 {
        self.member_seqs
            .get(broker_name)
            .and_then(|members| members.get(addr))
            .copied()
            .unwrap_or(0)
    }

    /// Gives a member's registration the next number. Allocates only for a new member: every
    /// repeated registration passes here.
    fn number_registration(&mut self, broker_name: &str, addr: &str) {
        self.registrations += 1;
        let seq = self.registrations;
        let members = match self.member_seqs.get_mut(broker_name) {
            Some(members) => members,
            None => self.member_seqs.entry(broker_name.to_string()).or_default(),
        };
        match members.get_mut(addr) {
            Some(slot) => *slot = seq,
            None => {
                members.insert(addr.to_string(), seq);
            }
        }
    }

    fn forget_member(&mut self, broker_name: &str, addr: &str) {
        if let Some(members) = self.member_seqs.get_mut(broker_name) {
            members.remove(addr);
            if members.is_empty() {
                self.member_seqs.remove(broker_name);
            }
        }
    }

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
        }
    }

    /// Sets a broker group's queues of a topic; returns whether anything changed.
    pub fn set_queues(&mut self, topic: &str, qd: &QueueData) -> bool {
        let name = self.shared_name(&qd.broker_name);
        self.set_topic_queues(topic, &name, Queues::of(qd))
    }

    fn set_topic_queues(&mut self, topic: &str, broker_name: &Arc<str>, queues: Queues) -> bool {
        // Looked up by reference first: re-registrations mostly touch known topics, and an
        // owned key for each would cost an allocation per topic.
        let changed = match self.topics.get_mut(topic) {
            Some(slot) => slot.set(broker_name, queues),
            None => {
                let mut slot = TopicQueues::default();
                slot.set(broker_name, queues);
                self.topics.insert(topic, slot);
                self.changes.topic_list = true;
                self.created.add(topic);
                true
            }
        };
        if changed {
            self.changes.topics.insert(topic.to_string());
        }
        changed
    }

    /// Takes a group out of a topic, and the topic out of the table when no group is left.
    fn leave_topic(&mut self, topic: &str, broker_name: &str) -> bool {
        let Some(queues) = self.topics.get_mut(topic) else {
            return false;
        };
        if !queues.remove(broker_name) {
            return false;
        }
        if queues.is_empty() {
            self.topics.remove(topic);
            self.changes.topic_list = true;
            self.removed.add(topic);
        }
        self.changes.topics.insert(topic.to_string());
        true
    }

    /// Changes a group's permission on a topic.
    fn set_perm(&mut self, topic: &str, broker_name: &str, perm: i32) -> bool {
        let changed = self
            .topics
            .get_mut(topic)
            .is_some_and(|q| q.set_perm(broker_name, perm));
        if changed {
            self.changes.topics.insert(topic.to_string());
        }
        changed
    }

    // ---- registration, in steps ----

    /// Works out which queues a registration changes, without changing anything.
    pub fn plan(&self, reg: &Registration, policy: RegisterPolicy) -> TopicPlan {
        let Registrant {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ..
        } = &reg.from;
        let group = self.brokers.get(broker_name);
        let held = group.and_then(|bd| bd.broker_addrs.get(broker_id));
        let register_first = held.is_none_or(|a| a.is_empty());
        // The group's lowest id once this address holds `broker_id` (and no other id).
        let min_id = group
            .into_iter()
            .flat_map(|bd| bd.broker_addrs.iter())
            .filter(|(id, a)| *a != broker_addr || *id == broker_id)
            .map(|(id, _)| *id)
            .chain([*broker_id])
            .min();
        let old_version = reg.enable_acting_master.is_none();
        let is_master = *broker_id == MASTER_ID;
        let is_prime_slave = !old_version && !is_master && min_id == Some(*broker_id);
        if !(is_master || is_prime_slave) {
            // Such a broker never changes topics; becoming master or prime slave changes its
            // group, and with it the group's epoch that a difference read depends on.
            return TopicPlan {
                faithful: true,
                ..Default::default()
            };
        }
        let wrapper = &reg.body.wrapper;
        let version_changed = self
            .live
            .get(&key(cluster, broker_addr))
            .map(|l| l.data_version)
            != Some(wrapper.data_version);
        let acting_master = reg.enable_acting_master.unwrap_or(false);
        let mut plan = TopicPlan {
            applies: true,
            mappings: version_changed || register_first,
            faithful: true,
            ..Default::default()
        };
        if wrapper.mapping_info.is_empty() && policy.delete_unlisted_topics {
            let incoming: HashSet<&str> = wrapper
                .topic_configs
                .iter()
                .filter_map(|tc| tc.topic_name.as_deref())
                .collect();
            plan.leave = self
                .topics
                .iter()
                .filter(|(t, q)| !incoming.contains(t) && q.contains(broker_name))
                .map(|(t, _)| t.to_string())
                .collect();
        }
        // An unchanged broker only adds topics it is missing from.
        let unchanged = !(register_first || version_changed);
        for (i, tc) in wrapper.topic_configs.iter().enumerate() {
            let Some(topic) = tc.topic_name.as_deref() else {
                continue;
            };
            let current = self.topics.get(topic).and_then(|q| q.get(broker_name));
            let mut perm = tc.perm;
            if is_prime_slave && acting_master {
                perm &= !PERM_WRITE;
            }
            let wanted = queues(tc, perm);
            if current == Some(&wanted) {
                continue;
            }
            if unchanged && current.is_some() {
                // Java keeps what the table holds when the data version did not move (an admin
                // may have changed it since), so the table now differs from what was listed.
                plan.faithful = false;
                continue;
            }
            plan.set.push((i, wanted));
        }
        plan
    }

    /// Registers a broker with the queue changes `plan` worked out on the same state. Returns
    /// the outcome and the notice to send.
    pub fn register(
        &mut self,
        reg: Registration,
        plan: TopicPlan,
        policy: RegisterPolicy,
    ) -> (RegisterOutcome, Option<MinIdNotice>) {
        if self.refuses(&reg) {
            return (RegisterOutcome::Refused, None);
        }
        let min_id_changed = match self.join_group(&reg) {
            Joined::Stale => {
                self.drop_live_if_unheld(&key(&reg.from.cluster, &reg.from.broker_addr));
                return (RegisterOutcome::Stale, None);
            }
            Joined::Member { min_id_changed } => min_id_changed,
        };
        self.number_registration(&reg.from.broker_name, &reg.from.broker_addr);
        self.apply_topics(&reg, plan);
        self.refresh_live(&reg);
        self.set_filter_servers(&reg);
        let Registrant {
            cluster,
            broker_name,
            broker_id,
            broker_addr,
            ..
        } = &reg.from;
        if self.created.count + self.removed.count > 0 {
            self.tell_topics(
                &format!("registered by {broker_name} ({broker_addr})"),
                &format!("no longer listed by {broker_name} ({broker_addr})"),
            );
        }
        let outcome = self.registered(cluster, broker_name, *broker_id);
        let notice = (min_id_changed && policy.notify_min_id)
            .then(|| self.min_id_notice(broker_name, &reg.ha_server_addr));
        (outcome, notice.flatten())
    }

    /// Java creates the group and the cluster entry before refusing; a refused registration
    /// here changes nothing, so that refusals cannot pile up empty groups.
    fn refuses(&self, reg: &Registration) -> bool {
        let id_known = self
            .brokers
            .get(&reg.from.broker_name)
            .is_some_and(|bd| bd.broker_addrs.contains_key(&reg.from.broker_id));
        !id_known && reg.listed == 1
    }

    /// Joins the cluster and the group under the registration's id, unless a member with a
    /// newer state version holds that id.
    fn join_group(&mut self, reg: &Registration) -> Joined {
        let Registrant {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ..
        } = &reg.from;
        if self
            .clusters
            .entry(cluster.clone())
            .or_default()
            .insert(broker_name.clone())
        {
            self.changes.cluster_info = true;
        }
        let bd = self
            .brokers
            .entry(broker_name.clone())
            .or_insert_with(|| BrokerData::new(cluster, broker_name));
        let before = bd.clone();
        bd.enable_acting_master = reg.enable_acting_master.unwrap_or(false);
        bd.zone_name = reg.zone_name.clone();
        let prev_min = bd.broker_addrs.keys().next().copied().unwrap_or(0);
        let new_member = bd.broker_addrs.get(broker_id) != Some(broker_addr);
        // One address holds one id in a group (a slave switched to master on the same host).
        bd.broker_addrs
            .retain(|id, addr| addr != broker_addr || id == broker_id);
        let stale = bd
            .broker_addrs
            .get(broker_id)
            .filter(|holder| *holder != broker_addr)
            .and_then(|holder| self.live.get(&key(cluster, holder)))
            .is_some_and(|l| {
                l.data_version.state_version > reg.body.wrapper.data_version.state_version
            });
        let replaced = if stale {
            None
        } else {
            bd.broker_addrs
                .insert(*broker_id, broker_addr.clone())
                .filter(|old| old != broker_addr)
        };
        if *bd != before {
            self.changes.shared = true;
            self.changes.cluster_info = true;
            self.bump_group(broker_name);
        }
        if let Some(old) = replaced {
            self.forget_member(broker_name, &old);
        }
        if stale {
            Joined::Stale
        } else {
            if new_member {
                self.events.push(Event::new(
                    EventKind::BrokerJoined,
                    broker_addr.clone(),
                    format!(
                        "{broker_name} id {broker_id} in {cluster}, {}",
                        version_name(reg.version)
                    ),
                ));
            }
            Joined::Member {
                min_id_changed: *broker_id < prev_min,
            }
        }
    }

    fn apply_topics(&mut self, reg: &Registration, plan: TopicPlan) {
        if !plan.applies {
            return;
        }
        let broker_name = &reg.from.broker_name;
        let name = self.shared_name(broker_name);
        for topic in &plan.leave {
            self.leave_topic(topic, broker_name);
        }
        let configs = &reg.body.wrapper.topic_configs;
        for (i, queues) in plan.set {
            if let Some(topic) = configs.get(i).and_then(|tc| tc.topic_name.as_deref()) {
                self.set_topic_queues(topic, &name, queues);
            }
        }
        if plan.mappings {
            for (topic, info) in &reg.body.wrapper.mapping_info {
                let Some(bname) = info.bname.clone() else {
                    continue;
                };
                let slot = self.mappings.entry(topic.clone()).or_default();
                if slot.get(&bname) != Some(info) {
                    slot.insert(bname, info.clone());
                    self.changes.topics.insert(topic.clone());
                }
            }
        }
    }

    fn refresh_live(&mut self, reg: &Registration) {
        let last_registration = self
            .live
            .get_mut(&key(&reg.from.cluster, &reg.from.broker_addr))
            .and_then(|l| l.last_registration.take());
        self.live.insert(
            key(&reg.from.cluster, &reg.from.broker_addr),
            BrokerLive {
                last_update_ms: reg.from.now_ms,
                timeout_ms: reg.timeout_ms.unwrap_or(DEFAULT_BROKER_TIMEOUT_MS),
                data_version: reg.body.wrapper.data_version,
                conn: reg.from.conn,
                ha_server_addr: reg.ha_server_addr.clone(),
                version: reg.version,
                last_registration,
            },
        );
    }

    fn set_filter_servers(&mut self, reg: &Registration) {
        let Some(list) = &reg.body.filter_server_list else {
            return;
        };
        let addr_key = key(&reg.from.cluster, &reg.from.broker_addr);
        let prev = if list.is_empty() {
            self.filter_servers.remove(&addr_key)
        } else {
            self.filter_servers.insert(addr_key, list.clone())
        };
        if prev.as_ref() != Some(list) && !(prev.is_none() && list.is_empty()) {
            self.changes.shared = true;
        }
    }

    fn min_id_notice(&self, broker_name: &str, ha_server_addr: &str) -> Option<MinIdNotice> {
        let bd = self.brokers.get(broker_name)?;
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
        Some(MinIdNotice {
            min_broker_id: min_id,
            min_broker_addr: min_addr,
            offline_broker_addr: None,
            ha_broker_addr: Some(ha_server_addr.to_string()),
            recipients,
        })
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

    /// Applies a registration identical to the broker's last full one while its group is as
    /// that registration left it: the full path would change nothing, so only its liveness and
    /// connection are refreshed. Changes elsewhere in the cluster do not matter. `None` sends it
    /// down the full path.
    pub fn repeat(
        &mut self,
        reg: &Registrant,
        fingerprint: Fingerprint,
    ) -> Option<RegisterOutcome> {
        let last = self.last_registration(reg)?;
        if last.fingerprint != fingerprint {
            return None;
        }
        let live = self.live.get_mut(&key(&reg.cluster, &reg.broker_addr))?;
        live.last_update_ms = reg.now_ms;
        live.conn = reg.conn;
        self.number_registration(&reg.broker_name, &reg.broker_addr);
        Some(self.registered(&reg.cluster, &reg.broker_name, reg.broker_id))
    }

    /// The table a registration with these headers may be read against: the broker's last
    /// one, while the broker holds its id and its group is as that registration left it.
    pub fn table_base(&self, reg: &Registrant, headers: Fingerprint) -> Option<TableBase> {
        let last = self.last_registration(reg)?;
        if last.headers != headers {
            return None;
        }
        Some(TableBase {
            table: last.table.clone()?,
            epoch: last.epoch,
        })
    }

    /// Whether `base` is still what [`Registry::table_base`] gives.
    pub fn base_is_current(&self, reg: &Registrant, base: &TableBase) -> bool {
        self.last_registration(reg).is_some_and(|last| {
            last.epoch == base.epoch
                && last
                    .table
                    .as_ref()
                    .is_some_and(|t| Arc::ptr_eq(t, &base.table))
        })
    }

    /// The broker's last registration while it is still in force: the broker holds its id in
    /// its group and cluster, and nothing has changed the group since.
    fn last_registration(&self, reg: &Registrant) -> Option<&LastRegistration> {
        let group = self.brokers.get(&reg.broker_name)?;
        if group.broker_addrs.get(&reg.broker_id) != Some(&reg.broker_addr)
            || !self
                .clusters
                .get(&reg.cluster)
                .is_some_and(|names| names.contains(&reg.broker_name))
        {
            return None;
        }
        let epoch = self.group_epoch(&reg.broker_name);
        let live = self.live.get(&key(&reg.cluster, &reg.broker_addr))?;
        live.last_registration.as_ref().filter(|last| {
            last.epoch == epoch
                && last.broker_name == reg.broker_name
                && last.broker_id == reg.broker_id
                && last.conn == reg.conn
        })
    }

    /// Remembers a full registration with the group epoch it left.
    pub fn remember(
        &mut self,
        reg: &Registrant,
        fingerprint: Fingerprint,
        headers: Fingerprint,
        table: Option<Arc<TableIndex>>,
    ) {
        let epoch = self.group_epoch(&reg.broker_name);
        if let Some(live) = self.live.get_mut(&key(&reg.cluster, &reg.broker_addr)) {
            live.last_registration = Some(LastRegistration {
                broker_name: reg.broker_name.clone(),
                broker_id: reg.broker_id,
                conn: reg.conn,
                fingerprint,
                headers,
                epoch,
                table,
            });
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
            if let Some(bd) = self.brokers.get_mut(&req.broker_name) {
                let was_min = bd.broker_addrs.keys().next() == Some(&req.broker_id);
                let count = bd.broker_addrs.len();
                bd.broker_addrs.retain(|_, a| *a != req.broker_addr);
                if bd.broker_addrs.len() != count {
                    self.changes.shared = true;
                    self.changes.cluster_info = true;
                    *self
                        .group_epochs
                        .entry(req.broker_name.clone())
                        .or_default() += 1;
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
                    remove_name = true;
                } else if was_min {
                    min_changed.push((req.broker_name.clone(), req.broker_addr.clone()));
                }
                self.forget_member(&req.broker_name, &req.broker_addr);
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
            if self.drop_live_if_unheld(&addr_key)
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
                    out.push(self.unregistration(&live_key.cluster, addr, &bd.broker_name, *id));
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

    /// Connection `conn` closed: the removals of every broker still registered on it (one that
    /// registered again on another connection is not).
    pub fn closed(&mut self, conn: ConnId) -> Vec<Unregistration> {
        let keys = self.registered_on(conn);
        if keys.is_empty() {
            return Vec::new();
        }
        self.departures(&keys)
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
        if expired.is_empty() {
            return Expiry::default();
        }
        let keys: Vec<BrokerAddrKey> = expired.iter().map(|e| e.key.clone()).collect();
        let leaving = self.departures(&keys);
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

    /// Sets (wipe) or restores (add) write permission on every topic of a broker group;
    /// returns how many topics the group serves.
    pub fn change_write_perm(&mut self, broker_name: &str, wipe: bool) -> usize {
        let changes: Vec<(String, i32)> = self
            .topics
            .iter()
            .filter_map(|(topic, queues)| {
                let perm = queues.get(broker_name)?.perm;
                let perm = if wipe {
                    perm & !PERM_WRITE
                } else {
                    PERM_READ | PERM_WRITE
                };
                Some((topic.to_string(), perm))
            })
            .collect();
        for (topic, perm) in &changes {
            self.set_perm(topic, broker_name, *perm);
        }
        self.bump_group(broker_name);
        let (kind, done) = if wipe {
            (EventKind::WritePermWiped, "wiped")
        } else {
            (EventKind::WritePermAdded, "restored")
        };
        self.events.push(Event::new(
            kind,
            broker_name,
            format!("write permission {done} on {} topics", changes.len()),
        ));
        changes.len()
    }

    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) -> bool {
        let Some(queues) = self.topics.get(topic) else {
            return false;
        };
        let names: Vec<String> = match cluster {
            None => queues.iter().map(|(name, _)| name.to_string()).collect(),
            Some(cluster) => {
                let Some(names) = self.clusters.get(cluster) else {
                    return false;
                };
                names
                    .iter()
                    .filter(|n| queues.contains(n))
                    .cloned()
                    .collect()
            }
        };
        let mut changed = false;
        let mut left = Vec::new();
        for name in names {
            if self.leave_topic(topic, &name) {
                changed = true;
                left.push(name.clone());
            }
            // A broker's next identical registration brings the topic back.
            self.bump_group(&name);
        }
        // Told here, with the groups it left, whether or not other groups still serve it.
        self.removed = TopicTally::default();
        if changed {
            self.events.push(Event::new(
                EventKind::TopicsDeleted,
                topic,
                format!(
                    "deleted from {} by an admin request{}",
                    left.join(", "),
                    if self.topics.contains_key(topic) {
                        " (other groups still serve it)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        changed
    }

    /// REGISTER_TOPIC_IN_NAMESRV: stores queue data of known brokers, stopping at the first
    /// unknown one as Java does.
    pub fn register_topic(&mut self, topic: &str, queue_datas: &[QueueData]) -> bool {
        let mut changed = false;
        for qd in queue_datas {
            if !self.brokers.contains_key(&qd.broker_name) {
                break;
            }
            if self.set_queues(topic, qd) {
                changed = true;
                self.bump_group(&qd.broker_name);
            }
        }
        self.tell_topics("by REGISTER_TOPIC_IN_NAMESRV", "");
        changed
    }

    /// Refreshes the deadline of an existing live entry (QUERY_DATA_VERSION, BROKER_HEARTBEAT).
    pub fn touch(&mut self, cluster: &str, addr: &str, now_ms: i64) -> Option<&BrokerLive> {
        let live = self.live.get_mut(&key(cluster, addr))?;
        live.last_update_ms = now_ms;
        Some(live)
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
            .map(|(t, _)| t.to_string())
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
            .map(|(t, _)| t.to_string())
            .collect();
        out.sort();
        out
    }
}
