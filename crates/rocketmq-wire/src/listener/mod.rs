//! The accepting side of a remoting port, one for every port the project serves (the
//! NameServer's and the controller's): a listening socket with a deep backlog, admission by
//! caps on connections in total and per source address, refusals logged at most every ten
//! seconds, and the deadlines a served connection keeps. What a connection then does with its
//! frames is the server's own.
//!
//! - [`admission`]: the caps, the reserve for trusted hosts, and the open-files limit they
//!   derive from.

pub mod admission;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio_util::sync::CancellationToken;

pub use admission::{Admission, Admitted, Limits, Refusal};

const LISTEN_BACKLOG: u32 = 1024;

/// Refused connections are logged at most this often: a flood must not flood the log too.
const REFUSAL_LOG_EVERY: Duration = Duration::from_secs(10);

/// Binds `addr` with address reuse (a restarted server must not wait out TIME_WAIT) and a
/// backlog deep enough for a cluster's brokers and clients reconnecting at once.
pub fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// How a served connection is bounded: a new one must have sent a whole frame within
/// `first_frame` (a connection that never speaks holds a place for no longer), one that has
/// spoken may then be silent for `idle`, and no frame may be longer than `max_frame` (length
/// field included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionBounds {
    pub first_frame: Duration,
    pub idle: Duration,
    pub max_frame: usize,
}

/// A port as its refusals are logged: its name and the keys that set its caps, so that an
/// operator reading the log knows what to change.
pub struct Port {
    pub name: &'static str,
    pub total_key: &'static str,
    pub per_address_key: &'static str,
}

/// Accepts connections until `shutdown`, admitting each through `admission` and handing the
/// admitted ones to `serve` (which must not block: it spawns). A refused connection is closed
/// at once and reported to `refused`.
pub async fn accept_loop(
    listener: TcpListener,
    admission: Arc<Admission>,
    port: Port,
    shutdown: CancellationToken,
    mut refused: impl FnMut(Refusal),
    mut serve: impl FnMut(TcpStream, SocketAddr, Admitted),
) {
    let mut refusal_logged: Option<Instant> = None;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.cancelled() => return,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors or similar: back off instead of spinning.
                tracing::warn!(port = port.name, error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match admission.admit(peer.ip()) {
            Ok(admitted) => serve(stream, peer, admitted),
            Err(refusal) => {
                if refusal_logged.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
                    refusal_logged = Some(Instant::now());
                    log_refusal(&port, admission.limits(), &refusal, peer);
                }
                refused(refusal);
            }
        }
    }
}

fn log_refusal(port: &Port, limits: Limits, refusal: &Refusal, peer: SocketAddr) {
    match refusal {
        Refusal::PerAddress => tracing::warn!(
            port = port.name,
            %peer,
            "refusing connections from an address over {} ({})",
            port.per_address_key,
            limits.per_address
        ),
        Refusal::Total => tracing::warn!(
            port = port.name,
            %peer,
            "refusing connections over {} ({}, {} kept for trusted hosts)",
            port.total_key,
            limits.total,
            limits.reserve
        ),
    }
}
