//! The serving side of a remoting port, one for every port the project serves (the NameServer's
//! and the controller's), behind the [`Service`] a server implements. A connection the
//! [`crate::listener`] let in is served by [`serve_connection`]: a PROXY header is skipped, TLS
//! is taken as the port's [`tls::TlsMode`] says, frames are read within the connection's bounds
//! and the server-wide [`DecodeBudget`], and requests are answered as their [`Dispatch`] says —
//! cheap ones on the reader, every frame already received answered in one write; ones that may
//! block on the blocking pool; ones that wait (on a consensus group, on other nodes) as tasks
//! that hold no thread — with a fixed number in flight per connection.
//!
//! - `connection`: the per-connection loop: reading, dispatching, batching answers;
//! - `frames`: reading frames, large ones only once the decode budget has room;
//! - [`offload`]: moving work that takes milliseconds off the async worker it would stall;
//! - [`proxy`]: HAProxy PROXY headers before the first frame;
//! - [`tls`]: TLS modes, certificates (reloaded when they change) and the client side of links
//!   between a group's members;
//! - [`watch`]: reloading files that operators replace while the server runs.

mod connection;
mod frames;
pub mod offload;
pub mod proxy;
pub mod tls;
pub mod watch;

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tracing::debug;

use crate::listener::ConnectionBounds;
use crate::RemotingCommand;

/// Where a request came from: the connection (numbered by the server) and its peer's address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    pub conn: u64,
    pub peer: IpAddr,
}

/// How a request is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dispatch {
    /// Cheap: answered on the connection's reader.
    Inline,
    /// Cheap in the common case, and moves its own expensive steps off the worker
    /// ([`offload::now`]) when it has them: answered on the reader, even from a large frame of
    /// ordinary size.
    MovesItsOwnWork,
    /// Disk writes, large bodies or walks over everything: answered on the blocking pool, where
    /// it delays no other request of the connection.
    Blocking,
    /// Waits on something else (a consensus group, another node): answered by a task of its own,
    /// which holds no thread while it waits and never queues on the blocking pool.
    Waits,
}

/// What a server does with the requests of its port.
pub trait Service: Send + Sync + 'static {
    /// How `request` is served; decided from its code before anything else.
    fn dispatch(&self, request: &RemotingCommand) -> Dispatch;

    /// Answers a request dispatched [`Dispatch::Inline`], [`Dispatch::MovesItsOwnWork`] or
    /// [`Dispatch::Blocking`]; `None` for a oneway request, which is never answered.
    fn handle(&self, origin: Origin, request: &RemotingCommand) -> Option<RemotingCommand>;

    /// Answers a request dispatched [`Dispatch::Waits`].
    fn serve<'a>(
        &'a self,
        origin: Origin,
        request: &'a RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send + 'a;
}

/// What large frames may hold in memory at once, across a port's connections, in KiB: a frame
/// beyond [`frames::SMALL_FRAME`] is read only once the budget has room for it and for what
/// decoding it builds, so that many connections sending large frames at once wait their turn in
/// their sockets instead of all being held in memory.
#[derive(Clone)]
pub struct DecodeBudget {
    permits: Arc<Semaphore>,
    kib: u32,
}

impl DecodeBudget {
    /// Room for one frame of the largest size `max_frame` and what decoding it builds, and never
    /// less than a few medium ones.
    pub fn for_frames_up_to(max_frame: usize) -> Self {
        let max_frame_kib = (max_frame as u64 / 1024).max(1);
        let kib = u32::try_from((max_frame_kib * 5).max(80 * 1024)).unwrap_or(u32::MAX);
        DecodeBudget {
            permits: Arc::new(Semaphore::new(kib as usize)),
            kib,
        }
    }
}

/// How a port serves its connections.
#[derive(Clone)]
pub struct PortServing {
    pub bounds: ConnectionBounds,
    pub budget: DecodeBudget,
    pub tls: Arc<tls::Tls>,
}

/// Serves one admitted connection until it ends, it breaks a bound, or `close` is cancelled.
pub async fn serve_connection<S: Service>(
    service: &Arc<S>,
    mut stream: TcpStream,
    origin: Origin,
    close: CancellationToken,
    port: &PortServing,
) {
    let _ = stream.set_nodelay(true);
    let bounds = port.bounds;
    let first_frame_by = Instant::now() + bounds.first_frame.min(bounds.idle);
    let peer = origin.peer;
    if let Err(e) = proxy::skip_header(
        &mut stream,
        first_frame_by.saturating_duration_since(Instant::now()),
    )
    .await
    {
        debug!(%peer, "closing connection with a bad PROXY header: {e}");
        return;
    }
    let mut first = [0u8; 1];
    let starts_tls =
        match tokio::time::timeout_at(first_frame_by.into(), stream.peek(&mut first)).await {
            Ok(Ok(1)) => first[0] == tls::HANDSHAKE_BYTE,
            Ok(Ok(_)) => false,
            _ => return,
        };
    let serving = connection::Serving {
        service,
        origin,
        close,
        bounds,
        budget: &port.budget,
        first_frame_by,
    };
    match (starts_tls, port.tls.mode()) {
        (false, tls::TlsMode::Enforcing) => {
            debug!(%peer, "closing plaintext connection: TLS is enforced")
        }
        (true, tls::TlsMode::Disabled) => {
            debug!(%peer, "closing TLS connection: TLS is disabled")
        }
        (false, _) => {
            let (read, write) = stream.into_split();
            serving.frames(read, write).await;
        }
        (true, _) => {
            let Some(acceptor) = port.tls.acceptor() else {
                return;
            };
            match tokio::time::timeout_at(first_frame_by.into(), acceptor.accept(stream)).await {
                Ok(Ok(tls)) => {
                    let (read, write) = tokio::io::split(tls);
                    serving.frames(read, write).await;
                }
                Ok(Err(e)) => debug!(%peer, "TLS handshake failed: {e}"),
                Err(_) => debug!(%peer, "TLS handshake timed out"),
            }
        }
    }
}
