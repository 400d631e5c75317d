//! Everything the handlers share: config, KV store, routes, and the hooks into the server's
//! background work.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use dashmap::DashMap;
use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::auth::Credentials;
use crate::config_store::ConfigStore;
use crate::events::EventLog;
use crate::kv::KvStore;
use crate::kv::ORDER_TOPIC_CONFIG;
use crate::metrics::Metrics;
use crate::peers::group::PeerGroup;
use crate::registry::{ConnId, RouteExtras, RouteTable, Unregistration};
use rocketmq_wire::listener::Admission;
use rocketmq_wire::server::tls::Tls;
use rocketmq_wire::server::DecodeBudget;

pub struct State {
    pub config: ConfigStore,
    /// Compressed registration bodies are inflated one at a time, so that what a small body can
    /// claim in memory has one ceiling for the whole server, not one per request.
    pub inflate_gate: Mutex<()>,
    pub kv: Arc<KvStore>,
    /// The NameServers' KV group, when `namesrvPeers` is set: KV writes go through it.
    pub peer_group: Option<Arc<PeerGroup>>,
    /// The route exchange with the same peers.
    pub peer_routes: Option<Arc<crate::peers::routes::PeerRoutes>>,
    /// With `namesrvPeerSecretPath`: the sealed links peers opened to this NameServer.
    pub peer_sessions: Option<Arc<rocketmq_raft::peer_auth::PeerSessions>>,
    pub routes: RouteTable,
    /// Recent changes for the status page; the registry writes its own into it.
    pub events: Arc<EventLog>,
    pub unregister_queue: mpsc::Sender<Unregistration>,
    /// Cancelling a token closes that connection.
    pub connections: DashMap<ConnId, CancellationToken>,
    pub tls: Arc<Tls>,
    /// Present when authenticated writes are on.
    pub credentials: Option<Arc<Credentials>>,
    pub metrics: Metrics,
    /// Caps on connections, in total and per source address.
    pub admission: Arc<Admission>,
    /// What large frames being read and decoded may hold across all connections, in KiB.
    pub decode_budget: DecodeBudget,
    /// Where the remoting listener is bound.
    pub remoting_addr: SocketAddr,
    /// The embedded controller node, when `enableControllerInNamesrv` is on.
    pub controller: Option<Arc<rocketmq_controller::Controller>>,
    pub started: Instant,
    pub shutting_down: AtomicBool,
}

impl State {
    pub fn close_connection(&self, conn: ConnId) {
        if let Some(token) = self.connections.get(&conn) {
            token.cancel();
        }
    }

    /// Queues removals decided under the registry's lock. Each carries the registration it saw,
    /// so one that a broker's new registration overtakes in the queue is left unapplied.
    pub fn queue_unregistrations(&self, requests: Vec<Unregistration>) {
        for request in requests {
            if self.unregister_queue.try_send(request).is_err() {
                warn!("unregistration queue full; a broker will wait for expiry");
            }
        }
    }

    /// A connection closed: every broker still registered on it leaves. Which brokers that
    /// is, and their removals, are decided under one lock: a broker that has registered again
    /// on another connection is not on this one any more.
    pub fn connection_closed(&self, conn: ConnId) {
        self.connections.remove(&conn);
        if let Some(sessions) = &self.peer_sessions {
            sessions.closed(conn);
        }
        // Going away, this NameServer answers GO_AWAY, and 5.x brokers close their connections
        // to it at once: they are not leaving, it is. The table stays as the brokers last left
        // it, so that the route snapshot written at exit is what it serves once restarted (a
        // StatefulSet's pods deleted together would otherwise all come back with no routes).
        if self.is_shutting_down() {
            return;
        }
        // Most connections are clients': only a connection a broker registered on is worth
        // the write lock, which route lookups wait for.
        if self.routes.read(|r| r.registered_on(conn).is_empty()) {
            return;
        }
        let requests = self.routes.change(|r| r.closed(conn));
        self.queue_unregistrations(requests);
    }

    /// Whether routes are still held back after start (`needWaitForService`), so that brokers
    /// re-register before clients see partial routes.
    pub fn waiting_for_service(&self) -> bool {
        let s = self.config.settings();
        s.server.need_wait_for_service
            && self.started.elapsed().as_secs() < s.server.wait_seconds_for_service.max(0) as u64
    }

    /// Why this NameServer does not answer clients' route requests yet, when it has peers and
    /// has not caught up with them since it started: its routes (restored from its snapshot)
    /// may still hold a topic deleted or a permission wiped while it was down. Bounded: a member
    /// stops waiting for peers that do not answer (10 s, or 120 s while a pull goes on).
    pub fn catching_up(&self) -> Option<&'static str> {
        if self.peer_group.as_ref().is_some_and(|g| !g.caught_up()) {
            return Some("catching up with its KV group (admin changes made while it was down)");
        }
        if self.peer_routes.as_ref().is_some_and(|p| !p.filled()) {
            return Some("taking its peers' routes");
        }
        None
    }

    /// What a topic's route shows besides the registry, as clients are given it.
    pub fn route_extras(&self, topic: &str) -> RouteExtras {
        let (acting_master, order_enabled) = {
            let s = self.config.settings();
            (
                s.server.support_acting_master,
                s.server.order_message_enable,
            )
        };
        RouteExtras {
            acting_master,
            order_topic_conf: order_enabled
                .then(|| self.kv.get(ORDER_TOPIC_CONFIG, topic))
                .flatten(),
        }
    }

    /// Ready to serve: not stopping, past the start-up gate, caught up with its KV group and
    /// filled from its peers' routes (if it has peers) since it started, and its embedded controller (if any) still running; a NameServer
    /// whose controller stopped still serves routes.
    pub fn is_ready(&self) -> bool {
        !self.is_shutting_down()
            && !self.waiting_for_service()
            && self.peer_group.as_ref().is_none_or(|g| g.caught_up())
            && self.peer_routes.as_ref().is_none_or(|p| p.filled())
            && self
                .controller
                .as_ref()
                .is_none_or(|c| c.group().failure().is_none())
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::Acquire)
    }
}

/// The peers layer sees this much of the server.
impl crate::peers::Local for State {
    fn kv(&self) -> &KvStore {
        &self.kv
    }

    fn routes(&self) -> &RouteTable {
        &self.routes
    }

    fn notify_min_broker_id_changed(&self) -> bool {
        self.config.settings().server.notify_min_broker_id_changed
    }
}
