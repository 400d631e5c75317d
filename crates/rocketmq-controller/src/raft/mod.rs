//! Replication of the controller's state with openraft: the type configuration, the on-disk log
//! and state machine ([`store`]) and the transport between our nodes ([`network`]).

// The error types are openraft's, fixed by the traits implemented here; boxing them locally
// would only add a conversion at every boundary.
#![allow(clippy::result_large_err)]

pub mod network;
pub mod store;

use std::io::Cursor;

use crate::replicated::{Command, CommandReply};

openraft::declare_raft_types!(
    /// Log entries are controller commands; applying one answers the request it carries.
    pub TypeConfig:
        D = Command,
        R = CommandReply,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
);

pub type Raft = openraft::Raft<TypeConfig>;

/// Request codes of the Raft traffic between our own nodes, on the peer port. Java uses
/// 1014–1018 for its JRaft internals; these are outside every range Java assigns.
pub mod codes {
    pub const RAFT_APPEND_ENTRIES: i32 = 1190;
    pub const RAFT_VOTE: i32 = 1191;
    pub const RAFT_INSTALL_SNAPSHOT: i32 = 1192;
    /// A broker's heartbeat, passed on by the follower that received it to the leader (oneway,
    /// with the heartbeat's own header).
    pub const FORWARDED_HEARTBEAT: i32 = 1193;
    /// Whether the asked node belongs to a group that has worked: the answer's body is
    /// `{"applied":N,"term":T}` (the index its state machine has applied, null for an empty
    /// store, and the term of its vote).
    /// Asked by a node that starts with an empty store before it forms a group or votes.
    pub const GROUP_PROBE: i32 = 1194;
    /// Sent by a leader handing its office on (`members::transfer_leader`) to the member that is
    /// to take it, once that member holds the leader's whole log: it stands at once.
    pub const TAKE_LEADERSHIP: i32 = 1195;
}
