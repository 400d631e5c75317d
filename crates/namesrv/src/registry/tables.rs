//! The routing tables: the [`Registry`] and its plain data, what reads them and what restores
//! them from a snapshot. Plain data, no locking: the caller holds the lock and owns timing.
//!
//! Every mutation records what it changed in a [`Changes`] log — which topics' routes, whether
//! something all routes show changed (a group's addresses or settings), whether cluster info or
//! the topic list changed — so that the route cache drops exactly what went stale. Mutations
//! are only reachable through methods of [`Registry`]: its tables are private to the registry
//! module, and the rules that change them are methods in the sibling module of their duty
//! (`registration`, `departures`, `topic_changes`), written on the small recorded mutations
//! here and in `topic_changes` that keep the log.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use rocketmq_wire::body::{BrokerData, ClusterInfo, DataVersion, TopicQueueMappingInfo};

use super::queues::{Queues, TopicQueues};
use super::registration::LastRegistration;
use super::topic_table::{TopicSnapshot, TopicTable};
use crate::events::{Event, TopicTally};

/// Identifies one accepted connection for the lifetime of the process.
pub type ConnId = u64;

pub const PERM_WRITE: i32 = 2;
pub const PERM_READ: i32 = 4;
pub(super) const MASTER_ID: i64 = 0;

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

/// What mutations since the last [`Registry::take_changes`] changed, as the caches see it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Topics whose route (queues, mappings) changed, while they are few: past
    /// [`NAMED_TOPICS`] they are `all_topics` instead, and a table of 100k topics taken whole
    /// costs no name copied. Hashed, not ordered: names sharing long prefixes make an ordered
    /// set compare bytes for most of its time.
    pub topics: foldhash::HashSet<String>,
    /// Too many topics changed to name: every cached route is dropped.
    pub all_topics: bool,
    /// Topic changes recorded, repeats included: a step changed some when this moved.
    pub topic_changes: usize,
    /// Something every route that shows a group may show: its addresses, settings or filter
    /// servers. Rare (brokers joining, leaving, failing over), so not tracked by topic.
    pub shared: bool,
    pub cluster_info: bool,
    pub topic_list: bool,
}

/// Changed topics named one by one (see [`Changes::topics`]).
const NAMED_TOPICS: usize = 4096;

impl Changes {
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// Records that `topic`'s route changed.
    pub fn topic(&mut self, topic: &str) {
        self.topic_changes += 1;
        if self.all_topics || self.topics.contains(topic) {
            return;
        }
        if self.topics.len() == NAMED_TOPICS {
            self.topics = foldhash::HashSet::default();
            self.all_topics = true;
            return;
        }
        self.topics.insert(topic.to_string());
    }
}

#[derive(Default)]
pub struct Registry {
    /// The largest table, looked up once per topic of every registration.
    pub(super) topics: TopicTable,
    pub(super) brokers: HashMap<String, BrokerData>,
    pub(super) clusters: HashMap<String, BTreeSet<String>>,
    pub(super) live: HashMap<BrokerAddrKey, BrokerLive>,
    pub(super) filter_servers: HashMap<BrokerAddrKey, Vec<String>>,
    pub(super) mappings: HashMap<String, BTreeMap<String, TopicQueueMappingInfo>>,
    /// One shared copy of each broker name that topics refer to.
    pub(super) names: HashSet<Arc<str>>,
    /// Numbers accepted registrations, in the order the lock applied them.
    pub(super) registrations: u64,
    /// Per group and member address, the number of the member's latest registration: what a
    /// queued removal is checked against.
    pub(super) member_seqs: HashMap<String, HashMap<String, u64>>,
    /// Per group, its epoch: a stamp drawn anew by every change to the group (see
    /// [`Registry::bump_group`] for the rule a kept registration relies on).
    pub(super) group_epochs: GroupEpochs,
    pub(super) changes: Changes,
    /// What people are shown of the mutations since the last [`Registry::take_events`].
    pub(super) events: Vec<Event>,
    /// What the route journal is told of the mutations under way, when it keeps any.
    pub(super) notes: Option<super::notes::Notes>,
    /// Topics created and removed by the mutation under way, told as one event when it ends.
    pub(super) created: TopicTally,
    pub(super) removed: TopicTally,
    /// When each recently departed broker address left (unregistered, its connection closed,
    /// expired): a peer's older word of it must not bring it back (`peers::routes`).
    pub(super) departed: HashMap<BrokerAddrKey, super::departures::Departure>,
    /// When each group's topics last changed here (or where a peer's word of them came from):
    /// peers holding the same data version but other topics take the later (`peers::routes`).
    pub(super) topics_changed_ms: HashMap<String, i64>,
    /// Per group, a hash of its topics and their queues, kept as they change once
    /// [`Registry::hash_topics`] is called: what peers compare their groups by (`peers::routes`),
    /// which a scan of the table would cost milliseconds per look at 100k topics. A NameServer
    /// without peers keeps none.
    pub(super) topic_sums: Option<foldhash::HashMap<Arc<str>, GroupSum>>,
    /// The time the mutation under way dates its changes from, when not now (a peer's word of
    /// a group, dated when its topics changed there, on this NameServer's clock).
    pub(super) dating: Option<i64>,
    /// The mutation under way is an admin change applied late (committed before this member
    /// caught up with its KV group): it changes only groups whose topics are as restored, and
    /// dates nothing.
    pub(super) late: bool,
    /// The position in the KV group's admin changes these routes reflect (`peers::group`), kept
    /// with them in the route snapshot: a restarted member applies exactly the changes after
    /// it, whatever any clock says. `None`: routes that never took an admin change position.
    pub(super) admin_position: Option<u64>,
    /// Registration rounds that something waits for (`rounds`).
    pub(super) rounds: super::rounds::Rounds,
}

/// Each group's epoch, drawn from one counter: epochs are never reused, not even by a group
/// removed and created again, so an old registration's epoch never matches a later state by
/// chance (a group emptied and registered anew once restarted its count and matched).
#[derive(Default)]
pub(super) struct GroupEpochs {
    last: u64,
    by_group: HashMap<String, u64>,
}

impl GroupEpochs {
    /// Gives `group` a new epoch.
    pub(super) fn stamp(&mut self, group: &str) {
        self.last += 1;
        match self.by_group.get_mut(group) {
            Some(slot) => *slot = self.last,
            None => {
                self.by_group.insert(group.to_string(), self.last);
            }
        }
    }

    /// The group's epoch; 0, which no group is ever stamped with, for one never stamped.
    pub(super) fn of(&self, group: &str) -> u64 {
        self.by_group.get(group).copied().unwrap_or(0)
    }

    pub(super) fn remove(&mut self, group: &str) {
        self.by_group.remove(group);
    }
}

/// One topic's queues of a group as the group's hash counts them: the same on every member,
/// whatever its build (no per-process seed, no dependence on std's hasher).
/// A group's topics as peers compare them: their hash, and how many there are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupSum {
    pub hash: u64,
    pub topics: usize,
}

pub(super) fn entry_hash(topic: &str, q: &Queues) -> u64 {
    let mut queues = [0u8; 16];
    for (i, n) in [q.read, q.write, q.perm, q.sys_flag]
        .into_iter()
        .enumerate()
    {
        queues[i * 4..i * 4 + 4].copy_from_slice(&n.to_le_bytes());
    }
    let seed = xxhash_rust::xxh3::xxh3_64(&queues);
    xxhash_rust::xxh3::xxh3_64_with_seed(topic.as_bytes(), seed)
}

pub(super) fn key(cluster: &str, addr: &str) -> BrokerAddrKey {
    BrokerAddrKey {
        cluster: cluster.to_string(),
        addr: addr.to_string(),
    }
}

impl Registry {
    // ---- reading ----

    pub fn topic_count(&self) -> usize {
        self.topics.len()
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

    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.brokers.clone().into_iter().collect(),
            cluster_addr_table: self.clusters.clone().into_iter().collect(),
        }
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

    // ---- shared names, group epochs and member numbers, for the rules ----

    pub(super) fn shared_name(&mut self, broker_name: &str) -> Arc<str> {
        if let Some(name) = self.names.get(broker_name) {
            return name.clone();
        }
        let name: Arc<str> = broker_name.into();
        self.names.insert(name.clone());
        name
    }

    /// Stamps a group with a new epoch. The rule that reading a registration as a difference
    /// (and serving an identical one as a repeat) relies on: a broker's kept registration
    /// stands for its group exactly as that registration left it, so every change to the group
    /// afterwards, by whomever, stamps it anew: its members or settings, any of its topic
    /// entries (a registration from another cluster or address speaking for the same group
    /// included), its removal and creation. The registering broker's own changes are stamped
    /// before its registration is kept, so they do not invalidate it.
    pub(super) fn bump_group(&mut self, broker_name: &str) {
        self.group_epochs.stamp(broker_name);
        self.topics_changed(broker_name);
    }

    /// Notes that a group's topics changed here now. A late admin change dates nothing: its
    /// group stays as old as it was restored, so any peer's word of it wins.
    pub(super) fn topics_changed(&mut self, broker_name: &str) {
        if self.late {
            return;
        }
        let now = self.dating.unwrap_or_else(rocketmq_wire::clock::now_ms);
        match self.topics_changed_ms.get_mut(broker_name) {
            Some(at) => *at = (*at).max(now),
            None => {
                self.topics_changed_ms.insert(broker_name.to_string(), now);
            }
        }
    }

    /// Runs `f`, dating the changes it makes to groups' topics `at_ms`.
    pub fn dated<R>(&mut self, at_ms: i64, f: impl FnOnce(&mut Self) -> R) -> R {
        let before = self.dating.replace(at_ms);
        let out = f(self);
        self.dating = before;
        out
    }

    /// Whether the mutation under way is an admin change applied late and the group's topics
    /// changed on this member since it started (a registration here, or a peer's word): that
    /// came after the change was committed or carries it already, and supersedes it. Decided
    /// by what happened here, never by comparing the proposer's clock with this one.
    pub(super) fn superseded(&self, broker_name: &str) -> bool {
        self.late && self.topics_changed_ms.contains_key(broker_name)
    }

    /// Runs `f`, an admin change committed before this member caught up with its group.
    pub fn late<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        self.late = true;
        let out = f(self);
        self.late = false;
        out
    }

    /// The admin change position these routes reflect.
    pub fn admin_position(&self) -> Option<u64> {
        self.admin_position
    }

    /// Notes that these routes reflect the admin changes up to `position`.
    pub fn set_admin_position(&mut self, position: u64) {
        self.admin_position = Some(position);
    }

    /// Forgets when groups' topics changed (after a restore): they are older than any word a
    /// peer has of them.
    pub fn undate_topics(&mut self) {
        self.topics_changed_ms.clear();
    }

    /// Keeps every group's topic hash from now on, counted from the table as it is.
    pub fn hash_topics(&mut self) {
        self.topic_sums = Some(self.counted_topic_sums());
    }

    /// Every group's topic hash and count, counted from the table (none for a group with no
    /// topics).
    pub(super) fn counted_topic_sums(&self) -> foldhash::HashMap<Arc<str>, GroupSum> {
        let mut sums = foldhash::HashMap::<Arc<str>, GroupSum>::default();
        for (topic, queues) in self.topics.iter() {
            for (name, q) in queues.entries() {
                let sum = sums.entry(name.clone()).or_default();
                sum.hash = sum.hash.wrapping_add(entry_hash(topic, q));
                sum.topics += 1;
            }
        }
        sums
    }

    /// A hash of the group's topics and their queues, in any order; 0 for a group with none, or
    /// before [`Registry::hash_topics`].
    pub fn topics_hash(&self, broker_name: &str) -> u64 {
        self.group_sum(broker_name).hash
    }

    /// How many topics the group serves, when hashes are kept (else 0).
    pub fn group_topic_count(&self, broker_name: &str) -> usize {
        self.group_sum(broker_name).topics
    }

    fn group_sum(&self, broker_name: &str) -> GroupSum {
        self.topic_sums
            .as_ref()
            .and_then(|sums| sums.get(broker_name))
            .copied()
            .unwrap_or_default()
    }

    /// Moves the group's hash and count from `old` to `new` queues of `topic`.
    pub(super) fn rehash(
        &mut self,
        broker_name: &Arc<str>,
        topic: &str,
        old: Option<Queues>,
        new: Option<Queues>,
    ) {
        // Every change of a topic's queues passes here.
        self.note_move(topic, broker_name, old, new);
        let Some(sums) = &mut self.topic_sums else {
            return;
        };
        let sum = sums.entry(broker_name.clone()).or_default();
        sum.hash = sum
            .hash
            .wrapping_sub(old.map_or(0, |old| entry_hash(topic, &old)))
            .wrapping_add(new.map_or(0, |new| entry_hash(topic, &new)));
        sum.topics =
            (sum.topics + usize::from(new.is_some())).saturating_sub(usize::from(old.is_some()));
        if sum.topics == 0 {
            sums.remove(&**broker_name);
        }
    }

    /// When the group's topics last changed here, as peers compare them.
    pub fn topics_changed_at(&self, broker_name: &str) -> i64 {
        self.topics_changed_ms
            .get(broker_name)
            .copied()
            .unwrap_or(0)
    }

    pub(super) fn group_epoch(&self, broker_name: &str) -> u64 {
        self.group_epochs.of(broker_name)
    }

    /// The number of a member's latest registration; 0 if it has none (not a member, or
    /// restored from a snapshot and not registered since).
    pub(super) fn member_seq(&self, broker_name: &str, addr: &str) -> u64 {
        self.member_seqs
            .get(broker_name)
            .and_then(|members| members.get(addr))
            .copied()
            .unwrap_or(0)
    }

    /// Gives a member's registration the next number. Allocates only for a new member: every
    /// repeated registration passes here.
    pub(super) fn number_registration(&mut self, broker_name: &str, addr: &str) {
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

    pub(super) fn forget_member(&mut self, broker_name: &str, addr: &str) {
        if let Some(members) = self.member_seqs.get_mut(broker_name) {
            members.remove(addr);
            if members.is_empty() {
                self.member_seqs.remove(broker_name);
            }
        }
    }
}
