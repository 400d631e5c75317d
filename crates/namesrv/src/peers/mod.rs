//! NameServers that agree (`namesrvPeers`): the layer that keeps several NameServers one
//! registry for their clients, in three parts that each take a narrow handle on this NameServer
//! ([`Local`]: its KV store, its routes and one setting), never the whole server state.
//!
//! - [`members`]: who the members are, as the config lists them;
//! - [`group`]: this NameServer's part in the members' Raft group: trust, connections, member
//!   changes, the write path (a follower passes writes on to the leader), catching up, and
//!   making this member's KV file and routes follow what the group applied;
//! - [`replicated`]: what the group's log carries: KV entries and admin topic changes;
//! - [`view`]: the group as the status page and `/metrics` show it;
//! - [`routes`]: routes exchanged between the members without consensus: digests, pulls and
//!   take-overs, following the group's membership.

pub mod group;
pub mod members;
pub mod replicated;
pub mod routes;
pub mod view;

use crate::kv::KvStore;
use crate::registry::RouteTable;

/// What of this NameServer the peers layer reads and changes.
pub trait Local: Send + Sync + 'static {
    /// The KV store the read handlers serve, which the group's table replaces.
    fn kv(&self) -> &KvStore;
    /// The routes admin changes and peers' registrations are applied to.
    fn routes(&self) -> &RouteTable;
    /// `notifyMinBrokerIdChanged`, for registrations taken over from a peer.
    fn notify_min_broker_id_changed(&self) -> bool;
}
