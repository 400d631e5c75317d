//! The openraft plumbing a replicated group of our nodes runs on, whatever its state: the
//! controller's group is one user, and the NameServers' KV group (the KV config and admin topic
//! changes) the other. A user declares its own openraft type configuration and implements
//! [`Machine`] for its state; this crate keeps that state and the log durable and carries the
//! Raft traffic between nodes.
//!
//! - [`group`]: the group's life on one node: forming or rejoining it, the leader's lease,
//!   writes and reads within a deadline, waits for an entry to be applied, the other members'
//!   Raft requests, fail-stop; and its members changed while it runs (added, removed, the
//!   leadership handed over), the trusted addresses following them;
//! - [`members`]: who the members are, as a config file lists them, and which of them this node is;
//! - [`figures`]: what a group's series and status page show of it, read at scrape time;
//! - [`store`]: the node's log, vote and snapshots in one redb database (written on threads of
//!   its own, never queued behind the host's blocking work), and the in-memory state machine
//!   rebuilt from them;
//! - [`network`]: Raft requests as remoting frames on the peer port, under the codes of [`Codes`];
//! - [`trust`]: which addresses speak for the members now, their names resolved again and again;
//! - [`peer_auth`]: links between members sealed with a cluster secret, so that a member proves
//!   who it is.

// The error types are openraft's, fixed by the traits implemented here; boxing them locally
// would only add a conversion at every boundary.
#![allow(clippy::result_large_err)]

pub mod figures;
pub mod group;
pub mod members;
pub mod network;
pub mod peer_auth;
pub mod store;
pub mod trust;

use std::io::Cursor;

use openraft::impls::OneshotResponder;
use openraft::{BasicNode, Entry, RaftTypeConfig};
use serde::de::DeserializeOwned;
use serde::Serialize;

pub use group::{ChangeError, ConsensusError, Group, MemberChange, Membership, Settings};
pub use network::Network;
pub use store::{Applied, LogStore, StateMachine};

/// Members are numbered; a member's address is its peer address.
pub type NodeId = u64;

/// The type configurations this crate serves: the log and the snapshots are stored as JSON, a
/// snapshot travels whole, as one buffer, and a write is answered through a oneshot channel.
pub trait Config:
    RaftTypeConfig<
    NodeId = NodeId,
    Node = BasicNode,
    Entry = Entry<Self>,
    SnapshotData = Cursor<Vec<u8>>,
    Responder = OneshotResponder<Self>,
>
{
}

impl<C> Config for C where
    C: RaftTypeConfig<
        NodeId = NodeId,
        Node = BasicNode,
        Entry = Entry<C>,
        SnapshotData = Cursor<Vec<u8>>,
        Responder = OneshotResponder<C>,
    >
{
}

/// A replicated state: it starts empty, is snapshotted as JSON, and applying a log entry's
/// command to it is deterministic, so every member that applies the same log holds the same
/// state. Entries that carry no command (a new leader's blank entry, a membership change) are
/// answered with the reply's default.
pub trait Machine: Default + Serialize + DeserializeOwned + Send + Sync + 'static {
    type C: Config<R: Default>;

    /// What the node's log lines call this state ("the controller state").
    const NAME: &'static str;

    fn apply(&mut self, cmd: &<Self::C as RaftTypeConfig>::D) -> <Self::C as RaftTypeConfig>::R;
}

/// Declares an openraft type configuration of the kind this crate serves ([`Config`]): only the
/// command an entry carries (`D`) and the reply applying it gives (`R`) are the group's own.
#[macro_export]
macro_rules! declare_config {
    ($(#[$attr:meta])* $vis:vis $name:ident: D = $d:ty, R = $r:ty $(,)?) => {
        $crate::openraft::declare_raft_types!(
            $(#[$attr])*
            $vis $name:
                D = $d,
                R = $r,
                NodeId = $crate::NodeId,
                Node = $crate::openraft::BasicNode,
                Entry = $crate::openraft::Entry<$name>,
                SnapshotData = std::io::Cursor<Vec<u8>>,
        );
    };
}

// For `declare_config!`, whose expansion names openraft through this crate.
#[doc(hidden)]
pub use openraft;

/// How a node opens a connection to another member: to `addr`, from `source`, within `deadline`.
/// Plaintext ([`plaintext`]) unless the user's port takes only TLS, in which case the user
/// gives a connector that speaks it.
pub type Connect = std::sync::Arc<
    dyn Fn(
            String,
            Option<std::net::IpAddr>,
            std::time::Duration,
        )
            -> futures::future::BoxFuture<'static, Result<rocketmq_wire::client::Client, String>>
        + Send
        + Sync,
>;

/// The longest answer a member takes from another: far above any Raft message (snapshots travel
/// in chunks of 1 MiB, about 3 MiB as JSON) or route pull (16 MiB of topic lists at most), and a
/// bound on what a process at a member's address can make a member buffer per connection.
pub const PEER_FRAME_LIMIT: usize = 64 * 1024 * 1024;

/// Connections in plaintext, answers capped at [`PEER_FRAME_LIMIT`].
pub fn plaintext() -> Connect {
    std::sync::Arc::new(|addr, source, deadline| {
        Box::pin(async move {
            rocketmq_wire::client::Client::connect_capped(&addr, source, deadline, PEER_FRAME_LIMIT)
                .await
                .map_err(|e| e.to_string())
        })
    })
}

/// How a member connects to the others given its port's TLS: plaintext ([`plaintext`]), or
/// over TLS when its port takes only TLS, since the others' then do too.
pub fn connector(
    tls: &rocketmq_wire::server::tls::Tls,
) -> Result<Connect, rocketmq_wire::server::tls::TlsError> {
    let Some(config) = tls.peer_client_config()? else {
        return Ok(plaintext());
    };
    Ok(std::sync::Arc::new(move |addr, source, deadline| {
        let config = config.clone();
        Box::pin(async move {
            rocketmq_wire::client::Client::connect_tls_capped(
                &addr,
                source,
                deadline,
                PEER_FRAME_LIMIT,
                config,
            )
            .await
        })
    }))
}

/// The request codes a group's Raft traffic travels under on the peer port: each group has its
/// own, so that two groups can share a port and a node tell their traffic apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codes {
    pub append_entries: i32,
    pub vote: i32,
    pub install_snapshot: i32,
    /// Whether the asked member belongs to a group that has worked
    /// ([`group::GroupProbe`]), asked by a node that starts on an empty store.
    pub probe: i32,
    /// Sent by a leader handing its office on to the member that is to take it, once that
    /// member holds the leader's whole log: it stands at once.
    pub take_leadership: i32,
}
