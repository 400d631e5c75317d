//! The RocketMQ 5.x controller (RIP-44): it assigns broker ids, elects each broker group's
//! master, keeps the sync-state sets and tells brokers when roles change. Its state is replicated
//! with openraft among the nodes of `controllerDLegerPeers`; it runs standalone (`mqcontroller`)
//! or inside the NameServer (`enableControllerInNamesrv=true`).
//!
//! - [`config`]: Java's `ControllerConfig` keys, so a Java controller config file works unchanged;
//! - `server`: the peer port (brokers, admin tools, other nodes), bounded like the NameServer's;
//! - `handler`: the controller's requests, one `match` over the request code;
//! - `node`: one node: its part in the group (`rocketmq_raft::Group`), its heartbeat table and a
//!   leader's background duties;
//! - `members`: adding, removing and listing the group's own members, and handing on its leadership;
//! - `forward`: the one task and connection that pass followers' heartbeats on to the leader;
//! - `heartbeat`: which brokers this node hears from, kept per node since liveness is not state;
//! - `replicated`: the replicated state machine (broker ids, masters, sync-state sets) and its rules;
//! - `raft`: openraft around that state, on `rocketmq_raft`'s redb log and snapshots and its
//!   transport between nodes: the group's type configuration and request codes;
//! - `notify`: NOTIFY_BROKER_ROLE_CHANGED (1008) to a group's brokers when its master changes;
//! - `recent`: the elections and leadership changes the status page lists;
//! - [`metrics`], [`page`]: the node's Prometheus series and status-page section, which the
//!   NameServer shows for an embedded node too;
//! - [`http`]: `mqcontroller`'s own HTTP port (metrics, probes, the page).

pub mod config;
mod forward;
mod handler;
mod heartbeat;
pub mod http;
mod members;
pub mod metrics;
mod node;
mod notify;
pub mod page;
mod raft;
mod recent;
mod replicated;
mod server;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

pub use config::ControllerConfig;
pub use heartbeat::LiveView;
pub use node::{Controller, ControllerView, MemberView, UNHEARD_MASTER_GRACE};
pub use recent::Happening;
pub use replicated::GroupView;

/// A running controller node.
pub struct Running {
    pub controller: Arc<Controller>,
    pub addr: std::net::SocketAddr,
    stop: CancellationToken,
    server: tokio::task::JoinHandle<()>,
}

/// Binds the node's own peer address, opens its store and starts serving.
pub async fn start(config: ControllerConfig) -> anyhow::Result<Running> {
    let self_addr = config.members.self_member().addr.clone();
    let listener = server::bind(&self_addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on {self_addr}: {e}"))?;
    let addr = listener.local_addr()?;
    let controller = Controller::start(config).await?;
    let stop = CancellationToken::new();
    let server = tokio::spawn(server::serve(listener, controller.clone(), stop.clone()));
    Ok(Running {
        controller,
        addr,
        stop,
        server,
    })
}

/// The longest a leaving leader spends handing its office on before it stops anyway.
const HAND_OVER_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

impl Running {
    /// The first step of leaving (SIGTERM, as a rolling restart sends): a leader hands its office,
    /// within a bound, to a voter that is caught up and answers, so that a node that has been
    /// hearing the brokers all along leads on. Restarted at once, a leader that just stopped may
    /// lead again from its stored vote having heard no broker yet, while the brokers' JVMs still
    /// send to its old address for as long as they cache its name (30 s), and fail over a master
    /// that is alive.
    pub async fn prepare_to_leave(&self) {
        let leaving = self.controller.group().hand_over_before_leaving();
        let _ = tokio::time::timeout(HAND_OVER_BOUND, leaving).await;
    }

    pub async fn shutdown(self) {
        // Before the server closes its connections: their closing is this node leaving.
        self.controller.leave();
        self.stop.cancel();
        let _ = self.server.await;
        self.controller.shutdown().await;
    }
}
