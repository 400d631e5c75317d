//! Routing state behind one lock, with a cache of encoded route bodies for the read path.
//!
//! Readers never re-serialise a route that has not changed: every change that a route can show
//! bumps a generation number, and a cached body is served only while its generation is current.
//! A route does not name its topic, so topics served by the same queues on the same brokers (most
//! of a cluster's) share one body: memory and cache footprint follow distinct routes, not topics.

#[cfg(test)]
mod invariants;
mod queues;
mod tables;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::{Mutex, RwLock};
use rocketmq_wire::body::{TopicList, TopicRouteData};
use rocketmq_wire::json::JsonStyle;

pub use queues::TopicQueues;
pub use tables::{
    BrokerAddrKey, BrokerLive, ConnId, Fingerprint, MinIdNotice, RegisterOutcome, RegisterPolicy,
    Registrant, Registration, Registry, Unregistration,
};

/// What a route depends on besides the registry.
pub struct RouteExtras {
    pub acting_master: bool,
    pub order_topic_conf: Option<String>,
}

#[derive(Default)]
pub struct RouteTable {
    registry: RwLock<Registry>,
    generation: AtomicU64,
    standard: DashMap<Box<str>, (u64, Bytes), foldhash::fast::RandomState>,
    fastjson: DashMap<Box<str>, (u64, Bytes), foldhash::fast::RandomState>,
    /// Distinct bodies built since the generation it names; older ones live on only in the
    /// cache entries that still hold them.
    distinct: Mutex<(u64, HashSet<Bytes>)>,
    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body: consoles poll it, and at 100k+ topics
    /// building it (copy, sort, encode) costs tens of milliseconds.
    all_topics: Built,
    /// GET_BROKER_CLUSTER_INFO's body: every broker polls it.
    cluster_info: Built,
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

impl RouteTable {
    /// Reads the registry.
    pub fn read<R>(&self, f: impl FnOnce(&Registry) -> R) -> R {
        f(&self.registry.read())
    }

    /// Changes the registry; `f` reports whether anything a route shows changed.
    pub fn write<R>(&self, f: impl FnOnce(&mut Registry) -> (R, bool)) -> R {
        let mut registry = self.registry.write();
        let (result, changed) = f(&mut registry);
        if changed {
            self.invalidate();
        }
        result
    }

    /// Registers a broker, remembering the registration's fingerprint for `repeat`.
    pub fn register(
        &self,
        reg: Registration,
        policy: RegisterPolicy,
        fingerprint: Fingerprint,
    ) -> (RegisterOutcome, Option<MinIdNotice>) {
        let (cluster, addr) = (reg.from.cluster.clone(), reg.from.broker_addr.clone());
        let mut registry = self.registry.write();
        let (outcome, changed, notice) = registry.register(reg, policy);
        if changed {
            self.invalidate();
        }
        if matches!(outcome, RegisterOutcome::Registered { .. }) {
            // Read under the same lock: any later change to the routes moves it on.
            registry.remember(&cluster, &addr, fingerprint, self.generation());
        }
        (outcome, notice)
    }

    /// Applies a registration that repeats the broker's previous one while the routes have
    /// not changed since; `None` if it must take the full path.
    pub fn repeat(&self, reg: &Registrant, fingerprint: Fingerprint) -> Option<RegisterOutcome> {
        let mut registry = self.registry.write();
        registry.repeat(reg, fingerprint, self.generation())
    }

    pub fn with_registry(registry: Registry) -> Self {
        RouteTable {
            registry: RwLock::new(registry),
            ..Default::default()
        }
    }

    /// Changes whenever something a route shows changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Drops every cached body (after a change outside the registry: KV, config).
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, Ordering::Release);
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
        let generation = self.generation.load(Ordering::Acquire);
        if let Some(entry) = cache.get(topic) {
            if entry.0 == generation {
                return Some(entry.1.clone());
            }
        }
        match self.route(topic, extras()) {
            Some(route) => {
                let body = self.shared(generation, &route.encode(style));
                cache.insert(topic.into(), (generation, body.clone()));
                Some(body)
            }
            None => {
                cache.remove(topic);
                None
            }
        }
    }

    /// The encoded list of every topic, sorted; rebuilt only after a change.
    pub fn all_topics_body(&self) -> Bytes {
        self.all_topics.get(self.generation(), || {
            // Copied out so that registrations are not held up by the sort and encoding.
            let mut topics: Vec<String> = self.read(|reg| reg.topics.keys().cloned().collect());
            topics.sort_unstable();
            let list = TopicList {
                topic_list: topics,
                broker_addr: None,
            };
            Bytes::from(list.encode())
        })
    }

    /// The encoded cluster table; rebuilt only after a change.
    pub fn cluster_info_body(&self) -> Bytes {
        self.cluster_info.get(self.generation(), || {
            Bytes::from(self.read(|reg| reg.cluster_info()).encode())
        })
    }

    /// The one copy of `encoded` among bodies built since `generation`. Exactly sized: the
    /// writer's spare capacity would otherwise stay with the cache.
    fn shared(&self, generation: u64, encoded: &[u8]) -> Bytes {
        let mut distinct = self.distinct.lock();
        if distinct.0 < generation {
            *distinct = (generation, HashSet::new());
        }
        if let Some(body) = distinct.1.get(encoded) {
            return body.clone();
        }
        let body = Bytes::copy_from_slice(encoded);
        distinct.1.insert(body.clone());
        body
    }

    /// The route of `topic`, assembled now.
    pub fn route(&self, topic: &str, extras: RouteExtras) -> Option<TopicRouteData> {
        let mut route = self.registry.read().route(topic, extras.acting_master)?;
        route.order_topic_conf = extras.order_topic_conf;
        Some(route)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rocketmq_wire::body::{BrokerData, QueueData};

    use super::*;

    fn table(topics: &[(&str, i32)]) -> RouteTable {
        let mut registry = Registry::default();
        registry.brokers.insert(
            "b".into(),
            BrokerData {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: BTreeMap::from([(0, "10.0.0.1:10911".into())]),
                ..Default::default()
            },
        );
        for (topic, queues) in topics {
            let qd = QueueData {
                broker_name: "b".into(),
                read_queue_nums: *queues,
                write_queue_nums: *queues,
                perm: 6,
                topic_sys_flag: 0,
            };
            registry.set_queues(topic, &qd);
        }
        RouteTable::with_registry(registry)
    }

    fn body(table: &RouteTable, topic: &str) -> Bytes {
        let extras = || RouteExtras {
            acting_master: false,
            order_topic_conf: None,
        };
        table
            .route_body(topic, JsonStyle::Standard, extras)
            .unwrap()
    }

    #[test]
    fn topics_with_the_same_route_share_one_body() {
        let t = table(&[("a", 8), ("b", 8), ("c", 4)]);
        let (a, b, c) = (body(&t, "a"), body(&t, "b"), body(&t, "c"));
        assert_eq!(a, b);
        assert_eq!(a.as_ptr(), b.as_ptr());
        assert_ne!(a, c);
        t.invalidate();
        let rebuilt = body(&t, "b");
        assert_eq!(rebuilt, a);
        assert_ne!(
            rebuilt.as_ptr(),
            a.as_ptr(),
            "a new generation starts a new set"
        );
        assert_eq!(body(&t, "a").as_ptr(), rebuilt.as_ptr());
    }
}
