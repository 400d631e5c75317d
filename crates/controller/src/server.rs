//! The controller's port: remoting frames from brokers, admin tools and the other controller
//! nodes. Bounded like the NameServer's port: a cap on connections, a deadline for the first
//! frame and for silence, a frame size limit, and a cap on requests in flight per connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::codec::{FramedRead, FramedWrite};
use tokio_util::sync::CancellationToken;

use rocketmq_wire::frame::RemotingCodec;
use rocketmq_wire::RemotingCommand;

use crate::handler;
use crate::node::{next_connection_id, Controller};

/// Raft snapshots travel in chunks of a few MiB; nothing else comes close.
const MAX_FRAME: usize = 16 * 1024 * 1024;
const MAX_CONNECTIONS: usize = 1024;
/// Kept for the group's own members beyond the cap: brokers filling the port must not cut the
/// nodes off from each other.
const PEER_CONNECTIONS: usize = 64;
const IN_FLIGHT_PER_CONNECTION: usize = 64;
const FIRST_FRAME_TIMEOUT: Duration = Duration::from_secs(30);
/// Java closes a channel idle for 120 s; brokers heartbeat every second.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

pub async fn bind(addr: &str) -> anyhow::Result<TcpListener> {
    let addr: SocketAddr = tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {addr}"))?;
    Ok(TcpListener::bind(addr).await?)
}

/// Serves connections until `stop` is cancelled.
pub async fn serve(listener: TcpListener, controller: Arc<Controller>, stop: CancellationToken) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let peer_slots = Arc::new(Semaphore::new(PEER_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e, "controller accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) if controller.is_peer(peer.ip()) => match peer_slots.clone().try_acquire_owned()
            {
                Ok(slot) => slot,
                Err(_) => continue,
            },
            Err(_) => {
                tracing::warn!(%peer, "controller port full: connection refused");
                continue;
            }
        };
        let controller = controller.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let _slot = slot;
            connection(stream, peer.ip(), controller, stop).await;
        });
    }
}

async fn connection(
    stream: TcpStream,
    from: std::net::IpAddr,
    controller: Arc<Controller>,
    stop: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    let id = next_connection_id();
    let (read, write) = stream.into_split();
    let mut frames = FramedRead::new(read, RemotingCodec::new(MAX_FRAME));
    let (tx, mut rx) = mpsc::channel::<RemotingCommand>(IN_FLIGHT_PER_CONNECTION);
    let writer = tokio::spawn(async move {
        let mut sink = FramedWrite::new(write, RemotingCodec::new(MAX_FRAME));
        while let Some(cmd) = rx.recv().await {
            if sink.send(cmd).await.is_err() {
                return;
            }
        }
    });
    let in_flight = Arc::new(Semaphore::new(IN_FLIGHT_PER_CONNECTION));
    let mut deadline = FIRST_FRAME_TIMEOUT;
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
        deadline = IDLE_TIMEOUT;
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
