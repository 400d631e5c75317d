//! Routing state behind one lock, with a cache of encoded route bodies for the read path.
//!
//! Readers never re-serialise a route that has not changed. Each mutation of the [`Registry`]
//! reports exactly what it changed, and only that leaves the cache: a registration that changes
//! one topic's queues drops that topic's bodies, a group's new addresses drop every route
//! (rare: brokers joining, leaving, failing over), and cluster info and the topic list are
//! rebuilt only when they change. A route does not name its topic, so topics served by the
//! same queues on the same brokers (most of a cluster's) share one body: memory and cache
//! footprint follow distinct routes, not topics.
//!
//! Bodies are built and stored under the registry's read lock, and mutations drop them under
//! its write lock, so a body built from state that a mutation has since changed is never
//! stored after that mutation dropped the topic.
//!
//! - `tables`: the [`Registry`] and its plain data, its reads, snapshot restore and change log;
//! - `registration`: a broker registering, and what its next registration is compared with;
//! - `departures`: unregistration, closed connections, expiry and liveness deadlines;
//! - `rounds`: which registrations make a complete listing of a group's topics, and what
//!   leaves when one ends (restored routes, pruning of split registrations);
//! - `notes`: what the route journal is told of each mutation;
//! - `topic_changes`: the recorded topic mutations and the admin requests that change topics;
//! - `routes`: a topic's route assembled from the tables;
//! - `lists`: the topic lists consoles poll, kept ready;
//! - `queues`: one topic's queue data, held compactly;
//! - `topic_table`: the topic table in copy-on-write shards;
//! - `tests`: the registry's rules case by case, and property tests of the route cache;
//! - `interleavings`: brokers and housekeeping over thread interleavings (shuttle).

mod departures;
#[cfg(test)]
mod interleavings;
mod lists;
mod notes;
mod queues;
mod registration;
mod rounds;
mod routes;
mod tables;
#[cfg(test)]
mod tests;
mod topic_changes;
mod topic_table;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::{Mutex, RwLock, RwLockUpgradableReadGuard, RwLockWriteGuard};
use rocketmq_wire::body::TopicRouteData;
use rocketmq_wire::json::JsonStyle;

use crate::events::EventLog;
use crate::journal::Journal;
use lists::{Captured, TopicLists};
pub use lists::{Lists, Served};

pub use departures::{Expired, Expiry, Unregistered, Unregistration, Why, UNFENCED};
pub use queues::{Queues, TopicQueues};
pub use registration::{
    Fingerprint, MinIdNotice, RegisterOutcome, RegisterPolicy, Registrant, Registration, TableBase,
};
pub use tables::{BrokerAddrKey, BrokerLive, Changes, ConnId, Registry, PERM_WRITE};
pub use topic_table::TopicSnapshot;

/// What a route depends on besides the registry.
pub struct RouteExtras {
    pub acting_master: bool,
    pub order_topic_conf: Option<String>,
}

/// A REGISTER_BROKER request as [`RouteTable::register_broker`] reads it: its body only when
/// the registration is not a repeat, and then as the registry asks.
pub trait RegisterRequest {
    type Error: From<WholeRefused>;

    /// Identifies the request's headers but the body's checksum: a body is read as a difference
    /// only from a table that came with the same. Asked once, past the repeat.
    fn headers(&self) -> Fingerprint;

    /// Whether the body may be read as its difference from the broker's previous table.
    fn by_difference(&self) -> bool;

    /// Reads the body (as its difference from `base` when there is one, else whole) and applies
    /// the registration read with `apply`. Reading and applying are one step so that a reader
    /// that moves a large read off the async workers moves its application with it, and can give
    /// memory back once the registry has consumed the body.
    fn read(&self, base: Option<TableBase>, apply: Apply<'_>) -> Result<Applied, Self::Error>;
}

/// Applies a registration that [`RegisterRequest::read`] read.
pub struct Apply<'a> {
    table: &'a RouteTable,
    from: &'a Registrant,
    headers: Fingerprint,
    fingerprint: Fingerprint,
    policy: RegisterPolicy,
}

impl Apply<'_> {
    /// Who registers, for the registration's `from`.
    pub fn from(&self) -> &Registrant {
        self.from
    }

    /// [`RegisterRequest::headers`], for the registration's `headers`.
    pub fn headers(&self) -> Fingerprint {
        self.headers
    }

    /// Applies `reg`, remembering it for the broker's next registration.
    pub fn run(self, reg: Registration) -> Applied {
        Applied(self.table.register(reg, self.policy, self.fingerprint))
    }
}

/// What [`Apply::run`] did: nothing when it was given a difference from a table that is no
/// longer the broker's last.
pub struct Applied(Option<(RegisterOutcome, Option<MinIdNotice>)>);

/// A registration read whole was refused, which only a difference may be.
#[derive(Debug, thiserror::Error)]
#[error("a whole registration was refused")]
pub struct WholeRefused;

/// What [`RouteTable::register_broker`] did.
#[derive(Debug)]
pub struct Registered {
    pub outcome: RegisterOutcome,
    /// The NOTIFY_MIN_BROKER_ID_CHANGE to send.
    pub notice: Option<MinIdNotice>,
    /// Whether it repeated the broker's last registration, its body unread.
    pub repeat: bool,
}

type BodyCache = DashMap<Box<str>, (u64, Bytes), foldhash::fast::RandomState>;

#[derive(Default)]
pub struct RouteTable {
    registry: RwLock<Registry>,
    /// Moves on with every change anything shows: what the snapshot writer and the status page
    /// follow.
    generation: AtomicU64,
    /// Moves on with changes that any route may show: a group's addresses or settings, filter
    /// servers, and the KV and config settings routes carry. A cached body is served only while
    /// this is the value it was built at.
    shared: AtomicU64,
    cluster_info_generation: AtomicU64,
    /// Moves on with changes a topic list may show: topics added or removed, a topic's brokers
    /// changed, brokers moved between clusters.
    lists_generation: AtomicU64,
    standard: BodyCache,
    fastjson: BodyCache,
    /// The distinct bodies built recently, so that topics with the same route share one copy.
    distinct: Mutex<HashSet<Bytes>>,
    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER's and GET_TOPICS_BY_CLUSTER's bodies: consoles poll
    /// them, and at a million topics building them costs most of a second.
    lists: TopicLists,
    /// GET_BROKER_CLUSTER_INFO's body: every broker polls it.
    cluster_info: Built,
    /// Where the registry's events go, in the order its mutations were applied.
    events: Arc<EventLog>,
    /// Where its changes are journaled, with their causes.
    journal: Arc<Journal>,
}

/// A body built from the whole registry, kept with the generation it was built at.
/// Concurrent requests wait for one build rather than each making their own.
#[derive(Default)]
struct Built(Mutex<Option<(u64, Bytes)>>);

impl Built {
    fn get(&self, generation: u64, build: impl FnOnce() -> Bytes) -> Bytes {
        let mut cached = self.0.lock();
        match &*cached {
            Some((built, body)) if *built == generation => body.clone(),
            _ => {
                let body = build();
                *cached = Some((generation, body.clone()));
                body
            }
        }
    }
}

/// Distinct bodies kept for sharing, at least; beyond this and the number of cached entries,
/// the set starts over (bodies already cached stay shared).
const DISTINCT_KEPT: usize = 4096;

impl RouteTable {
    pub fn with_registry(mut registry: Registry) -> Self {
        registry.discard_events();
        RouteTable {
            registry: RwLock::new(registry),
            ..Default::default()
        }
    }

    /// Journals the registry's changes from now on.
    pub fn with_journal(mut self, journal: Arc<Journal>) -> Self {
        self.registry.get_mut().keep_notes(journal.is_enabled());
        self.journal = journal;
        self
    }

    /// The route journal, which others may write to as well.
    pub fn journal(&self) -> &Arc<Journal> {
        &self.journal
    }

    /// Changes the registry on behalf of `by` (an admin's address), who the journal names.
    pub fn change_by<R>(&self, by: Option<String>, f: impl FnOnce(&mut Registry) -> R) -> R {
        self.change(|r| r.asked_by(by, f))
    }

    /// The log the registry's events are written to, which others may write to as well.
    pub fn events(&self) -> Arc<EventLog> {
        self.events.clone()
    }

    /// Reads the registry.
    pub fn read<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        f(&self.registry.read())
    }

    /// The registry locked to be read and then changed: at once when no other change holds it,
    /// else waited for off the async worker (`offload::now`). Changes queue behind each other
    /// for as long as a fleet's registrations take turns applying theirs; a worker blocked in
    /// that queue would hold up every task queued behind it, the peers' Raft heartbeats and the
    /// controller's among them. (Readers wait for one change at most: they stay.)
    fn upgradable_locked(&self) -> RwLockUpgradableReadGuard<'_, Registry> {
        self.registry.try_upgradable_read().unwrap_or_else(|| {
            rocketmq_wire::server::offload::now(|| self.registry.upgradable_read())
        })
    }

    /// The registry write-locked, as [`RouteTable::upgradable_locked`].
    fn write_locked(&self) -> RwLockWriteGuard<'_, Registry> {
        self.registry
            .try_write()
            .unwrap_or_else(|| rocketmq_wire::server::offload::now(|| self.registry.write()))
    }

    /// Changes the registry; what the change reports leaves the caches before the lock is
    /// released.
    pub fn change<R>(&self, f: impl FnOnce(&mut Registry) -> R) -> R {
        let mut registry = self.write_locked();
        let result = f(&mut registry);
        self.settle(&mut registry);
        result
    }

    /// Drops what the last mutations made stale and logs their events. Called with the
    /// registry write-locked.
    fn settle(&self, registry: &mut Registry) {
        self.forget(registry.take_changes());
        let events = registry.take_events();
        if !events.is_empty() {
            self.events.extend(events);
        }
        let notes = registry.take_notes();
        if !notes.is_empty() {
            self.journal.record(notes);
        }
    }

    /// Drops what `changes` made stale. Called with the registry write-locked.
    fn forget(&self, changes: Changes) {
        if changes.is_empty() {
            return;
        }
        for cache in [&self.standard, &self.fastjson] {
            // A member filling its tables from peers changes a million entries before any route
            // is cached.
            if cache.is_empty() {
                continue;
            }
            for topic in &changes.topics {
                cache.remove(topic.as_str());
            }
        }
        if changes.shared || changes.all_topics {
            self.shared.fetch_add(1, Ordering::AcqRel);
        }
        if changes.cluster_info {
            self.cluster_info_generation.fetch_add(1, Ordering::AcqRel);
        }
        if changes.topic_list
            || changes.cluster_info
            || changes.all_topics
            || !changes.topics.is_empty()
        {
            self.lists_generation.fetch_add(1, Ordering::AcqRel);
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Registers a broker as cheaply as its registration allows: a repeat of its last one is
    /// applied without reading the body; else, when `request` allows, the body is read as its
    /// difference from the table the broker registered last; else, or when that difference is
    /// refused, it is read whole.
    pub fn register_broker<R: RegisterRequest>(
        &self,
        from: &Registrant,
        fingerprint: Fingerprint,
        policy: RegisterPolicy,
        request: R,
    ) -> Result<Registered, R::Error> {
        // Brokers re-register their whole table every 30 s, nearly always unchanged: such a
        // registration is not decoded again.
        if let Some(outcome) = self.change(|r| r.repeat(from, fingerprint)) {
            return Ok(Registered {
                outcome,
                notice: None,
                repeat: true,
            });
        }
        let headers = request.headers();
        let apply = || Apply {
            table: self,
            from,
            headers,
            fingerprint,
            policy,
        };
        let base = request
            .by_difference()
            .then(|| self.read(|r| r.table_base(from, headers)))
            .flatten();
        if let Some(base) = base {
            if let Applied(Some((outcome, notice))) = request.read(Some(base), apply())? {
                return Ok(Registered {
                    outcome,
                    notice,
                    repeat: false,
                });
            }
        }
        let Applied(applied) = request.read(None, apply())?;
        let (outcome, notice) = applied.ok_or(WholeRefused)?;
        Ok(Registered {
            outcome,
            notice,
            repeat: false,
        })
    }

    /// Registers a broker, remembering the registration for `repeat` and `table_base`. Which
    /// queues change is worked out while route lookups go on; only applying them takes the
    /// write lock. `None` when the registration holds only changes from a table that is no
    /// longer the broker's last (another registration or a change to its group came first):
    /// its body must be read whole.
    fn register(
        &self,
        reg: Registration,
        policy: RegisterPolicy,
        fingerprint: Fingerprint,
    ) -> Option<(RegisterOutcome, Option<MinIdNotice>)> {
        let registry = self.upgradable_locked();
        if let Some(base) = &reg.changes_since {
            // Checked under the same lock that applies it: nothing can come in between.
            if policy.delete_unlisted_topics || !registry.base_is_current(&reg.from, base) {
                return None;
            }
        }
        let plan = registry.plan(&reg, policy);
        let faithful = plan.faithful;
        let mut registry = RwLockUpgradableReadGuard::upgrade(registry);
        let from = reg.from.clone();
        let (headers, table) = (reg.headers, reg.table.clone());
        let (outcome, notice) = registry.register(reg, plan, policy);
        if matches!(outcome, RegisterOutcome::Registered { .. }) {
            registry.remember(&from, fingerprint, headers, table.filter(|_| faithful));
        }
        self.settle(&mut registry);
        Some((outcome, notice))
    }

    /// A peer's registration of a broker (`peers::routes`): the broker joins its group as the
    /// peer holds it, with no topics read from a body; the group's topics become exactly
    /// `topics`, dated `topics_ms` (when they changed where the word comes from); and the broker
    /// is dated `last_ms`, when the peer last heard it. Which topics change is worked out while
    /// route lookups go on, as for a registration.
    pub fn adopt(
        &self,
        peer: &str,
        reg: Registration,
        topics: &[(&str, Queues)],
        notify_min_id: bool,
        (last_ms, topics_ms): (i64, i64),
    ) -> (RegisterOutcome, Option<MinIdNotice>) {
        let registry = self.upgradable_locked();
        let plan = registry.plan_mirror(&reg.from.broker_name, topics);
        let mut registry = RwLockUpgradableReadGuard::upgrade(registry);
        let from = reg.from.clone();
        let (cluster, addr, name) = (&from.cluster, &from.broker_addr, &from.broker_name);
        let policy = RegisterPolicy {
            notify_min_id,
            delete_unlisted_topics: false,
        };
        let (outcome, notice) = registry.from_peer(peer, |registry| {
            let (outcome, notice) =
                registry.register(reg, registration::TopicPlan::default(), policy);
            if matches!(outcome, RegisterOutcome::Registered { .. }) {
                registry.dated(topics_ms, |r| r.apply_mirror(name, topics, plan));
                registry.round_settled_by_peer(name);
                registry.adopted_from_peer(cluster, addr, from.conn, last_ms, (name, topics_ms));
            }
            (outcome, notice)
        });
        self.settle(&mut registry);
        (outcome, notice)
    }

    /// Moves on with every change.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Drops every cached route (after a change outside the registry that routes show: the
    /// order-topic config, the acting-master setting).
    pub fn invalidate(&self) {
        self.shared.fetch_add(1, Ordering::AcqRel);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The encoded route of `topic`, from cache when current.
    pub fn route_body(
        &self,
        topic: &str,
        style: JsonStyle,
        extras: impl FnOnce() -> RouteExtras,
    ) -> Option<Bytes> {
        let cache = match style {
            JsonStyle::Standard => &self.standard,
            JsonStyle::Fastjson => &self.fastjson,
        };
        // Read before the registry: a body built from newer state under an older number is
        // merely rebuilt later, never served stale.
        let shared = self.shared.load(Ordering::Acquire);
        if let Some(entry) = cache.get(topic) {
            if entry.0 == shared {
                return Some(entry.1.clone());
            }
        }
        let extras = extras();
        let registry = self.registry.read();
        match assemble(&registry, topic, extras) {
            Some(route) => {
                let body = self.shared_copy(&route.encode(style));
                cache.insert(topic.into(), (shared, body.clone()));
                Some(body)
            }
            None => {
                cache.remove(topic);
                None
            }
        }
    }

    /// The encoded list of every topic, sorted.
    pub fn all_topics_body(&self) -> Bytes {
        self.topic_lists().all()
    }

    /// The encoded list of the topics a broker of `cluster` serves, sorted.
    pub fn cluster_topics_body(&self, cluster: &str) -> Bytes {
        self.topic_lists().of_cluster(cluster)
    }

    /// Moves on with every change a topic list may show.
    pub fn lists_generation(&self) -> u64 {
        self.lists_generation.load(Ordering::Acquire)
    }

    /// Whether the topic lists are older than the table (or were never built).
    pub fn topic_lists_stale(&self) -> bool {
        self.lists.newest_generation() != Some(self.lists_generation())
    }

    /// Builds the topic lists now if they are older than the table: what the keeper calls once
    /// changes pause, so that the next ask finds them ready.
    pub fn refresh_topic_lists(&self) {
        self.topic_lists();
    }

    /// The topics whose sys flag `pred` accepts, read from a snapshot of the table once the lock
    /// is released: the unit topic lists are rare, and a pass over a million topics must not hold
    /// registrations back.
    pub fn topics_by_sys_flag(&self, pred: impl Fn(i32) -> bool) -> Vec<String> {
        self.read(Registry::topic_snapshot).names_by_sys_flag(pred)
    }

    /// What is made from the whole topic table, at least as new as the table.
    pub fn topic_lists(&self) -> Arc<Lists> {
        let current = self.lists_generation.load(Ordering::Acquire);
        self.lists.at_least(current, || {
            // Read under the lock the generation moves under: the view and its number agree.
            self.read(|reg| Captured {
                generation: self.lists_generation.load(Ordering::Acquire),
                topics: reg.topic_snapshot(),
                clusters: reg
                    .clusters()
                    .map(|(c, names)| (c.to_string(), names.clone()))
                    .collect(),
            })
        })
    }

    /// The encoded cluster table; rebuilt only after it changed.
    pub fn cluster_info_body(&self) -> Bytes {
        let generation = self.cluster_info_generation.load(Ordering::Acquire);
        self.cluster_info.get(generation, || {
            Bytes::from(self.read(|reg| reg.cluster_info()).encode())
        })
    }

    /// The one copy of `encoded` among the bodies built recently. Exactly sized: the writer's
    /// spare capacity would otherwise stay with the cache.
    fn shared_copy(&self, encoded: &[u8]) -> Bytes {
        let mut distinct = self.distinct.lock();
        if let Some(body) = distinct.get(encoded) {
            return body.clone();
        }
        let cached = self.standard.len() + self.fastjson.len();
        if distinct.len() >= DISTINCT_KEPT.max(cached) {
            distinct.clear();
        }
        let body = Bytes::copy_from_slice(encoded);
        distinct.insert(body.clone());
        body
    }

    /// The route of `topic`, assembled now.
    pub fn route(&self, topic: &str, extras: RouteExtras) -> Option<TopicRouteData> {
        assemble(&self.registry.read(), topic, extras)
    }
}

fn assemble(registry: &Registry, topic: &str, extras: RouteExtras) -> Option<TopicRouteData> {
    let mut route = registry.route(topic, extras.acting_master)?;
    route.order_topic_conf = extras.order_topic_conf;
    Some(route)
}
