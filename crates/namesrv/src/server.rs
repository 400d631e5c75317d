//! The remoting port: the accept loop, and each connection served by the wire crate's server
//! (`rocketmq_wire::server`) with the NameServer's handlers as its `Service`; a connection's
//! end is reported so that brokers registered on it leave.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rocketmq_wire::listener::{self, ConnectionBounds, Port};
use rocketmq_wire::server::{self as remoting, Dispatch, Origin, PortServing, Service};
use rocketmq_wire::RemotingCommand;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use crate::handler;
use crate::state::State;

pub async fn accept_loop(
    state: Arc<State>,
    listener: TcpListener,
    shutdown: CancellationToken,
    tracker: TaskTracker,
) {
    let next_id = AtomicU64::new(1);
    let port = Port {
        name: "remoting",
        total_key: "serverMaxConnections",
        per_address_key: "serverMaxConnectionsPerAddress",
    };
    let admission = state.admission.clone();
    let metrics_state = state.clone();
    let stopping = shutdown.clone();
    listener::accept_loop(
        listener,
        admission,
        port,
        shutdown.clone(),
        |_| metrics_state.metrics.connection_refused(),
        |stream, peer, admitted| {
            let conn = next_id.fetch_add(1, Ordering::Relaxed);
            let close = shutdown.child_token();
            state.connections.insert(conn, close.clone());
            let state = state.clone();
            let stopping = stopping.clone();
            tracker.spawn(async move {
                let _admitted = admitted;
                debug!(%peer, conn, "connection opened");
                state.metrics.connection_opened();
                let origin = Origin {
                    conn,
                    peer: peer.ip(),
                };
                remoting::serve_connection(&state, stream, origin, close, &serving(&state)).await;
                state.metrics.connection_closed();
                // Connections closed by our own shutdown say nothing about the brokers: they
                // stay in the final route snapshot.
                if stopping.is_cancelled() {
                    state.connections.remove(&conn);
                } else {
                    state.connection_closed(conn);
                }
                debug!(%peer, conn, "connection closed");
            });
        },
    )
    .await;
}

/// How a connection is served, by the settings in force when it opened.
fn serving(state: &State) -> PortServing {
    let s = state.config.settings();
    PortServing {
        bounds: ConnectionBounds {
            idle: Duration::from_secs(s.server.server_channel_max_idle_time_seconds.max(1) as u64),
            first_frame: Duration::from_secs(
                s.server.server_first_frame_timeout_seconds.max(1) as u64
            ),
            max_frame: s.server.max_frame_length.clamp(1024, i32::MAX as i64) as usize,
        },
        budget: state.decode_budget.clone(),
        tls: state.tls.clone(),
    }
}

/// The NameServer's requests as the one table of request codes (`handler::facts`) says to serve
/// them.
impl Service for State {
    fn dispatch(&self, request: &RemotingCommand) -> Dispatch {
        handler::dispatch(request)
    }

    fn handle(&self, origin: Origin, request: &RemotingCommand) -> Option<RemotingCommand> {
        handler::handle(self, origin, request)
    }

    fn serve<'a>(
        &'a self,
        origin: Origin,
        request: &'a RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>> + Send + 'a {
        handler::serve(self, origin, request)
    }
}
