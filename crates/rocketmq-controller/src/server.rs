//! The controller's port: remoting frames from brokers, admin tools and the other controller
//! nodes. Admitted by the same listener as the NameServer's port (caps in total and per
//! address, a reserve for the group's own members, refusals logged sparingly) and served by the
//! same remoting server (`rocketmq_wire::server`: PROXY headers, TLS by `tls.server.*`, the
//! deadlines for the first frame and for silence, a frame size cap, a decode budget, a cap on
//! requests in flight per connection); the limits are the `controllerServer*` keys.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rocketmq_wire::listener::{self, admission, Admission, ConnectionBounds, Port};
use rocketmq_wire::server::{
    self as remoting, DecodeBudget, Dispatch, Origin, PortServing, Service,
};
use rocketmq_wire::RemotingCommand;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{keys, PortLimits};
use crate::handler;
use crate::node::{next_connection_id, Controller};

/// How long a node waits for its own listed name to resolve: a StatefulSet's pod is started
/// before its name is published (a moment, usually), and a node that gave up at once would
/// only be restarted by its supervisor until then.
const OWN_NAME_WAIT: Duration = Duration::from_secs(60);

/// Listens on the node's own listed address, waiting up to [`OWN_NAME_WAIT`] for its name to
/// resolve (an address that resolves but cannot be bound fails at once).
pub async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    let deadline = tokio::time::Instant::now() + OWN_NAME_WAIT;
    let mut waiting = false;
    let resolved: SocketAddr = loop {
        let why = match tokio::net::lookup_host(addr).await {
            Ok(mut found) => match found.next() {
                Some(a) => break a,
                None => "it names no address".to_string(),
            },
            Err(e) => e.to_string(),
        };
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "cannot resolve {addr} ({why}), waited {} s",
                OWN_NAME_WAIT.as_secs()
            );
        }
        if !waiting {
            tracing::warn!(%addr, error = %why, "this node's own name does not resolve yet: waiting for it");
            waiting = true;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    if waiting {
        tracing::info!(%addr, %resolved, "this node's own name resolves now");
    }
    Ok(listener::bind(resolved)?)
}

/// Serves connections until `stop` is cancelled.
pub async fn serve(listener: TcpListener, controller: Arc<Controller>, stop: CancellationToken) {
    let limits: PortLimits = controller.config().port;
    // The total is always configured (at least 16), so the open-files limit plays no part.
    let admission = Arc::new(Admission::new(admission::Limits::with_total(
        limits.max_connections as usize,
        limits.max_connections_per_address,
    )));
    // Brokers filling the port must not cut the nodes off from each other, members added
    // later included.
    let mut peer_ips = controller.group().peer_ips();
    for ip in peer_ips.borrow_and_update().iter() {
        admission.trust(*ip);
    }
    {
        let (admission, stop) = (admission.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    changed = peer_ips.changed() => if changed.is_err() { return },
                }
                for ip in peer_ips.borrow_and_update().iter() {
                    admission.trust(*ip);
                }
            }
        });
    }
    let serving = PortServing {
        bounds: ConnectionBounds {
            first_frame: Duration::from_secs(limits.first_frame_timeout_s),
            idle: Duration::from_secs(limits.idle_timeout_s),
            max_frame: limits.max_frame_length,
        },
        budget: DecodeBudget::for_frames_up_to(limits.max_frame_length),
        tls: controller.tls.clone(),
    };
    let served = Arc::new(Served(controller));
    let port = Port {
        name: "controller",
        total_key: keys::MAX_CONNECTIONS,
        per_address_key: keys::MAX_CONNECTIONS_PER_ADDRESS,
    };
    listener::accept_loop(
        listener,
        admission,
        port,
        stop.clone(),
        |_| {},
        |stream, peer, admitted| {
            let (served, stop, serving) = (served.clone(), stop.clone(), serving.clone());
            tokio::spawn(async move {
                let _admitted = admitted;
                let origin = Origin {
                    conn: next_connection_id(),
                    peer: peer.ip(),
                };
                remoting::serve_connection(&served, stream, origin, stop, &serving).await;
                served.0.on_connection_closed(origin.conn);
            });
        },
    )
    .await;
}

/// The node as its port serves it. Every request is served as a task: most wait on the group (a
/// write, a leader's read, a forward), and the rest are as cheap there.
struct Served(Arc<Controller>);

impl Service for Served {
    fn dispatch(&self, _: &RemotingCommand) -> Dispatch {
        Dispatch::Waits
    }

    /// What serving a request on a thread of its own would do (never asked: see `dispatch`).
    fn handle(&self, origin: Origin, request: &RemotingCommand) -> Option<RemotingCommand> {
        tokio::runtime::Handle::current().block_on(self.serve(origin, request))
    }

    fn serve<'a>(
        &'a self,
        origin: Origin,
        request: &'a RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send + 'a {
        handler::handle(&self.0, request, origin.conn, origin.peer)
    }
}
