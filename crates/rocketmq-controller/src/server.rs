//! The controller's port: remoting frames from brokers, admin tools and the other controller
//! nodes. Admitted by the same listener as the NameServer's port (caps in total and per
//! address, a reserve for the group's own members, refusals logged sparingly), with the same
//! deadlines for the first frame and for silence, a frame size cap, and a cap on requests in
//! flight per connection; the limits are the `controllerServer*` keys.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use rocketmq_wire::frame::RemotingCodec;
use rocketmq_wire::listener::{self, admission, Admission, ConnectionBounds, Port};
use rocketmq_wire::RemotingCommand;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use crate::config::{keys, PortLimits};
use crate::handler;
use crate::node::{next_connection_id, Controller};

const IN_FLIGHT_PER_CONNECTION: usize = 64;

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
    let mut peer_ips = controller.peer_ips();
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
    let bounds = ConnectionBounds {
        first_frame: Duration::from_secs(limits.first_frame_timeout_s),
        idle: Duration::from_secs(limits.idle_timeout_s),
        max_frame: limits.max_frame_length,
    };
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
            let controller = controller.clone();
            let stop = stop.clone();
            tokio::spawn(async move {
                let _admitted = admitted;
                connection(stream, peer.ip(), controller, stop, bounds).await;
            });
        },
    )
    .await;
}

async fn connection(
    stream: TcpStream,
    from: IpAddr,
    controller: Arc<Controller>,
    stop: CancellationToken,
    bounds: ConnectionBounds,
) {
    let _ = stream.set_nodelay(true);
    let id = next_connection_id();
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, RemotingCodec::new(bounds.max_frame));
    let (tx, mut rx) = mpsc::channel::<RemotingCommand>(IN_FLIGHT_PER_CONNECTION);
    let max_frame = bounds.max_frame;
    let writer = tokio::spawn(async move {
        let mut sink = FramedWrite::new(write, RemotingCodec::new(max_frame));
        while let Some(cmd) = rx.recv().await {
            if sink.send(cmd).await.is_err() {
                return;
            }
        }
    });
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_PER_CONNECTION));
    let mut deadline = bounds.first_frame;
    loop {
        let next = tokio::select! {
            _ = stop.cancelled() => break,
            n = tokio::time::timeout(deadline, frames.next()) => n,
        };
        let req = match next {
            Ok(Some(Ok(req))) => req,
            // Silence, end of stream or an undecodable frame: the connection is over.
            _ => break,
        };
        deadline = bounds.idle;
        if req.is_response() {
            continue;
        }
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let (controller, tx) = (controller.clone(), tx.clone());
        tokio::spawn(async move {
            let _permit = permit;
            if let Some(resp) = handler::handle(&controller, &req, id, from).await {
                let _ = tx.send(resp).await;
            }
        });
    }
    drop(tx);
    let _ = writer.await;
    controller.on_connection_closed(id);
}
