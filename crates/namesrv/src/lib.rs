//! A drop-in RocketMQ NameServer.
//!
//! A request arrives on a connection of `server` (let in by the wire crate's listener and served
//! by its remoting server, which unwraps PROXY headers and TLS), is dispatched through the one table of
//! request codes in `handler` (one module per request family), and reads or changes the state
//! in `state::State`: the [`registry`], the [`kv`] store and the [`config`].
//!
//! - `auth`: signature checks of state-changing requests and their credentials file;
//! - [`config`]: the Java properties keys, defaults, blacklist and listing;
//! - `config_store`: the live settings and their file, changed by remote updates;
//! - `events`: the recent changes the status page lists;
//! - `handler`: the table of request codes and one module per request family;
//! - `housekeeping`: the timer of the broker expiry scan and the batch unregistration queue;
//! - `http`: the read-only HTTP port (metrics, probes, address list, status page);
//! - [`journal`]: every route change with its cause, on disk, for `nsadmin explainRoute`;
//! - [`kv`]: the namespaced KV store and its file;
//! - [`memory`]: giving memory back after large transient work;
//! - `metrics`: Prometheus metrics, and the request rate and latency of the last 15 minutes;
//! - `notify`: the outbound NOTIFY_MIN_BROKER_ID_CHANGE;
//! - `peers`: NameServers that agree (`namesrvPeers`): their Raft group replicating the KV config
//!   and admin topic changes, and the routes they exchange until they agree;
//! - `persist`: crash-safe file replacement;
//! - [`registry`]: the routing tables, their rules, liveness, and the encoded-route cache;
//! - `server`: the accept loop, and the NameServer as the remoting server's `Service`;
//! - `snapshot`: the route snapshot for warm restarts;
//! - `state`: everything the handlers share.

mod auth;
pub mod config;
mod config_store;
mod events;
mod handler;
mod housekeeping;
mod http;
pub mod journal;
pub mod kv;
pub mod memory;
mod metrics;
mod notify;
mod peers;
mod persist;
pub mod registry;
mod server;
mod snapshot;
mod state;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use rocketmq_wire::listener::admission;
use rocketmq_wire::server::tls::{Tls, TlsMode, TlsSettings};
use rocketmq_wire::server::DecodeBudget;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::info;

use crate::config::Settings;
use crate::config_store::ConfigStore;
use crate::kv::KvStore;
use crate::registry::RouteTable;
use crate::state::State;

/// Where the server listens.
pub struct Endpoints {
    pub remoting: SocketAddr,
    pub http: Option<SocketAddr>,
    /// The embedded controller's port, when `enableControllerInNamesrv` is on.
    pub controller: Option<SocketAddr>,
}

async fn bind_http(host: &str, port: i32) -> anyhow::Result<tokio::net::TcpListener> {
    let port = u16::try_from(port).with_context(|| format!("invalid httpPort {port}"))?;
    let addr = (host, port);
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {host}:{port}"))
}

/// Descriptors kept out of the connection cap besides the HTTP port's: files, logs, the
/// blocking pool's work.
const FD_RESERVE: u64 = 256;
/// How long a KV group leader that is stopping tries to hand its office on: a hand-over takes
/// about a second; past this it stops anyway and the others elect a leader.
const HAND_OVER_BOUND: Duration = Duration::from_secs(10);

/// Starts serving with `settings`, calls `on_ready` with the bound addresses once the
/// listeners accept, and runs until `shutdown` completes; `hurry` completing cuts the graceful
/// wait short (an operator's second Ctrl-C).
pub async fn run(
    settings: Settings,
    on_ready: impl FnOnce(Endpoints),
    shutdown: impl Future<Output = ()>,
    hurry: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let server = &settings.server;
    // Java reads the controller's keys from the NameServer's own config file.
    let controller = if server.enable_controller_in_namesrv {
        let home = std::env::var_os("HOME")
            .map_or_else(|| std::path::PathBuf::from("."), std::path::PathBuf::from);
        let config = rocketmq_controller::ControllerConfig::from_properties(
            &settings.controller_properties(),
            &home,
        )
        .context("enableControllerInNamesrv is on but the controller config is invalid")?;
        Some(rocketmq_controller::start(config).await?)
    } else {
        None
    };
    // The KV store and the route snapshot clear their own leftovers when they load.
    persist::remove_stale_temps(std::path::Path::new(&server.config_store_path));
    let kv = Arc::new(KvStore::open(server.kv_config_path.clone().into())?);
    let tls = Arc::new(Tls::new(TlsSettings::from_properties(|k| {
        settings.extra(k).map(String::from)
    })?)?);
    let snapshot_path = server
        .route_snapshot_enable
        .then(|| std::path::PathBuf::from(&server.route_snapshot_path));
    let mut registry = snapshot_path
        .as_deref()
        .map(snapshot::load)
        .unwrap_or_default();
    let peers = peers::members::Peers::from_config(&server.namesrv_peers, &server.namesrv_self_id)?;
    let peer_secret = match (&peers, server.namesrv_peer_secret_path.trim()) {
        (Some(_), "") if server.authentication_enabled => anyhow::bail!(
            "authenticationEnabled=true with namesrvPeers needs namesrvPeerSecretPath: without \
             it any process on a member's host could change every member's state through a \
             peer request"
        ),
        (Some(_), "") => None,
        (Some(_), path) => Some(
            rocketmq_raft::peer_auth::PeerSecret::load(std::path::Path::new(path))
                .map_err(anyhow::Error::msg)?,
        ),
        (None, _) => None,
    };
    // Links to peers: over TLS when this port takes only TLS, sealed with the secret if any.
    let peer_connector = || -> anyhow::Result<rocketmq_raft::Connect> {
        let connect = rocketmq_raft::connector(&tls)?;
        Ok(match &peer_secret {
            Some(secret) => rocketmq_raft::peer_auth::sealed(connect, secret.clone()),
            None => connect,
        })
    };
    let peer_group = match peers {
        Some(peers) => {
            info!(
                members = peers.members.len(),
                proven = peer_secret.is_some(),
                "KV config replicated among the NameServers of namesrvPeers"
            );
            let store = &server.namesrv_peer_store_path;
            Some(peers::group::PeerGroup::start(peers, store, peer_connector()?).await?)
        }
        None => None,
    };
    let peer_routes = match &peer_group {
        Some(group) => Some(peers::routes::PeerRoutes::new(
            {
                let group = group.clone();
                Box::new(move || group.raft().others())
            },
            peer_connector()?,
            group.raft().source(),
        )),
        None => None,
    };
    let peer_sessions =
        peer_secret.map(|s| Arc::new(rocketmq_raft::peer_auth::PeerSessions::new(s)));
    let credentials = if server.authentication_enabled {
        Some(Arc::new(auth::Credentials::open(
            server.auth_credentials_path.clone().into(),
        )?))
    } else {
        None
    };
    let bind_addr: SocketAddr = format!("{}:{}", server.bind_address, server.listen_port)
        .parse()
        .or_else(|_| format!("[{}]:{}", server.bind_address, server.listen_port).parse())
        .with_context(|| format!("invalid bindAddress {}", server.bind_address))?;
    let listener = rocketmq_wire::listener::bind(bind_addr)
        .with_context(|| format!("cannot listen on {bind_addr}"))?;
    let local = listener.local_addr()?;
    let (queue_tx, queue_rx) =
        mpsc::channel(server.unregister_broker_queue_capacity.max(1) as usize);

    let http_listener = if server.http_enable {
        let host = if server.http_bind_address.is_empty() {
            &server.bind_address
        } else {
            &server.http_bind_address
        };
        match bind_http(host, server.http_port).await {
            Ok(l) => Some(l),
            Err(e) => {
                // The HTTP port is an aid; the remoting port is the service.
                tracing::error!("HTTP port disabled: {e:#}");
                None
            }
        }
    } else {
        None
    };

    let fd_limit = admission::raise_open_files_limit();
    let admission = admission::Limits::derive(
        server.server_max_connections,
        server.server_max_connections_per_address,
        fd_limit,
        FD_RESERVE
            + if server.http_enable {
                server.http_max_connections.max(0) as u64
            } else {
                0
            },
    );
    info!(
        open_files = fd_limit,
        connections = admission.total,
        per_address = admission.per_address,
        "connection limits"
    );
    if server.authentication_enabled && tls.mode() != TlsMode::Enforcing {
        tracing::warn!(
            "authentication is on but TLS is not enforcing: request signatures cover neither the \
             request code nor a nonce, so anyone who can see a signed write can replay it, as \
             this or another write; set tls.server.mode=enforcing"
        );
    }
    let decode_budget = DecodeBudget::for_frames_up_to(server.max_frame_length.max(0) as usize);
    let mut metrics = metrics::Metrics::default();
    if let Some(running) = &controller {
        rocketmq_controller::metrics::register(metrics.registry(), running.controller.clone());
    }
    if let Some(group) = &peer_group {
        peers::view::register_metrics(metrics.registry(), group.clone());
    }
    if let Some(routes) = &peer_routes {
        peers::routes::register_metrics(metrics.registry(), routes.clone());
    }
    if peer_routes.is_some() {
        registry.hash_topics();
    }
    let journal = Arc::new(open_journal(server));
    metrics.watch_journal(journal.clone());
    journal.record(started_entries(&registry, &snapshot_path));
    let routes = RouteTable::with_registry(registry).with_journal(journal.clone());
    let state = Arc::new(State {
        config: ConfigStore::new(settings),
        inflate_gate: parking_lot::Mutex::new(()),
        kv: kv.clone(),
        peer_group: peer_group.clone(),
        peer_routes: peer_routes.clone(),
        peer_sessions,
        events: routes.events(),
        routes,
        unregister_queue: queue_tx,
        connections: Default::default(),
        tls: tls.clone(),
        credentials: credentials.clone(),
        metrics,
        admission: Arc::new(admission::Admission::new(admission)),
        decode_budget,
        remoting_addr: local,
        controller: controller.as_ref().map(|c| c.controller.clone()),
        started: Instant::now(),
        shutting_down: Default::default(),
    });
    let stop = CancellationToken::new();
    let tracker = TaskTracker::new();
    housekeeping::spawn(state.clone(), queue_rx, stop.clone());
    tokio::spawn(metrics::sample_requests(state.clone(), stop.clone()));
    tls.spawn_reloader(stop.clone());
    if let Some(group) = &peer_group {
        tokio::spawn(group.clone().follow(state.clone(), stop.clone()));
    }
    if let Some(routes) = &peer_routes {
        tokio::spawn(routes.clone().run(state.clone(), stop.clone()));
    }
    if let Some(credentials) = credentials {
        credentials.spawn_reloader(stop.clone());
    }
    let accept = tokio::spawn(server::accept_loop(
        state.clone(),
        listener,
        stop.clone(),
        tracker.clone(),
    ));
    let snapshot_writer =
        snapshot_path.map(|p| snapshot::spawn_writer(state.clone(), p, stop.clone()));
    let http_addr = http_listener.as_ref().and_then(|l| l.local_addr().ok());
    if let Some(listener) = http_listener {
        tokio::spawn(http::serve(state.clone(), listener, stop.clone()));
    }
    on_ready(Endpoints {
        remoting: local,
        http: http_addr,
        controller: controller.as_ref().map(|c| c.addr),
    });

    shutdown.await;
    // A controller leader hands its office on first: the group has a leader that has heard the
    // brokers while this one answers GO_AWAY.
    if let Some(controller) = &controller {
        controller.prepare_to_leave().await;
    }
    // So does the KV group's leader, so that KV writes meet a leader at once.
    if let Some(group) = &peer_group {
        let _ =
            tokio::time::timeout(HAND_OVER_BOUND, group.raft().hand_over_before_leaving()).await;
    }
    let (graceful, wait) = {
        let s = state.config.settings();
        (
            s.server.enable_shutdown_gracefully,
            Duration::from_secs(s.server.shutdown_wait_time_seconds.max(0) as u64),
        )
    };
    if graceful {
        info!("shutting down gracefully: answering GO_AWAY for {wait:?}");
        state.shutting_down.store(true, Ordering::Release);
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = hurry => info!("asked again: not waiting any longer"),
        }
    }
    info!("shutting down");
    stop.cancel();
    let _ = accept.await;
    tracker.close();
    let _ = tokio::time::timeout(Duration::from_secs(10), tracker.wait()).await;
    if let Some(writer) = snapshot_writer {
        let _ = writer.await;
    }
    if let Some(controller) = controller {
        controller.shutdown().await;
    }
    if let Some(group) = peer_group {
        group.shutdown().await;
    }
    journal.close();
    Ok(())
}

/// The route journal as configured; one that cannot be opened is logged and kept off: the
/// journal explains routes, it does not serve them.
fn open_journal(server: &config::ServerConfig) -> journal::Journal {
    if !server.route_journal_enable {
        return journal::Journal::disabled();
    }
    let limits = journal::Limits {
        max_bytes: server.route_journal_max_bytes.max(0) as u64,
        max_age_ms: server
            .route_journal_max_age_hours
            .max(0)
            .saturating_mul(3_600_000),
    };
    match journal::Journal::open(server.route_journal_path.clone().into(), limits) {
        Ok(j) => j,
        Err(e) => {
            tracing::error!(path = %server.route_journal_path, "route journal off: cannot open it: {e}");
            journal::Journal::disabled()
        }
    }
}

/// What the journal is told at start: that this NameServer started, and each group the
/// route snapshot brought back (served until its brokers register again or expire).
fn started_entries(
    registry: &registry::Registry,
    snapshot: &Option<std::path::PathBuf>,
) -> Vec<journal::Entry> {
    use journal::{Cause, Entry};
    let groups: Vec<_> = registry.groups().collect();
    let mut entries = vec![Entry::new(Cause::Started).detail(match snapshot {
        Some(path) => format!(
            "mqnamesrv {}; {} broker groups restored from {}",
            env!("CARGO_PKG_VERSION"),
            groups.len(),
            path.display()
        ),
        None => format!(
            "mqnamesrv {}; route snapshot off (routeSnapshotEnable=false)",
            env!("CARGO_PKG_VERSION")
        ),
    })];
    for bd in groups {
        let addrs: Vec<String> = bd
            .broker_addrs
            .iter()
            .map(|(id, addr)| format!("{id}={addr}"))
            .collect();
        let mut e = Entry::new(Cause::Restored).group(&bd.broker_name);
        e.cluster = Some(bd.cluster.clone());
        entries.push(e.detail(format!("members {}", addrs.join(", "))));
    }
    entries
}
