//! Routing state behind one lock, with a cache of encoded route bodies for the read path.
//!
//! Readers never re-serialise a route that has not changed: every change that a route can show
//! bumps a generation number, and a cached body is served only while its generation is current.

mod registry;

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use dashmap::DashMap;
use parking_lot::RwLock;
use remoting::body::TopicRouteData;
use remoting::json::JsonStyle;

pub use registry::{
    BrokerAddrKey, BrokerLive, ConnId, MinIdNotice, RegisterOutcome, RegisterPolicy, Registration,
    Registry, Unregistration,
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
    standard: DashMap<Box<str>, (u64, Bytes)>,
    fastjson: DashMap<Box<str>, (u64, Bytes)>,
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
                // Exactly sized: the writer's spare capacity would otherwise stay with every
                // cached body (about twice the body at 100k topics).
                let body = Bytes::copy_from_slice(&route.encode(style));
                cache.insert(topic.into(), (generation, body.clone()));
                Some(body)
            }
            None => {
                cache.remove(topic);
                None
            }
        }
    }

    /// The route of `topic`, assembled now.
    pub fn route(&self, topic: &str, extras: RouteExtras) -> Option<TopicRouteData> {
        let mut route = self.registry.read().route(topic, extras.acting_master)?;
        route.order_topic_conf = extras.order_topic_conf;
        Some(route)
    }
}
