//! Raft messages between our nodes travel as remoting frames on the peer port (the port brokers
//! and clients use), with private request codes and JSON bodies, so a node needs no port of its
//! own for them, as Java's controller needs none. The receiving side is the user's: its request
//! handler passes a frame under one of its [`Codes`](crate::Codes) to its `openraft::Raft`.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{AnyError, BasicNode};
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{Codes, Config, Connect, NodeId};

/// Connections to peers, from the node's own address (peers accept Raft traffic only from the
/// addresses the group lists), kept and shared: openraft asks for a fresh client for every
/// linearizable read and every election, and each would otherwise open a connection of its own.
pub struct Network<C> {
    source: Option<std::net::IpAddr>,
    codes: Codes,
    connect: Connect,
    pool: Arc<Mutex<HashMap<String, Client>>>,
    answered: Answered,
    config: PhantomData<fn() -> C>,
}

// Derived, this would ask the same of the type configuration, which only names types.
impl<C> Clone for Network<C> {
    fn clone(&self) -> Self {
        Network {
            source: self.source,
            codes: self.codes,
            connect: self.connect.clone(),
            pool: self.pool.clone(),
            answered: self.answered.clone(),
            config: PhantomData,
        }
    }
}

/// When each peer address last answered a Raft request: the leader's view of who it reaches,
/// for the status page and the metrics.
pub type Answered = Arc<Mutex<HashMap<String, std::time::Instant>>>;

impl<C> Network<C> {
    /// A group's traffic, sent under its `codes` from the node's own address `source`, over
    /// connections `connect` opens.
    pub fn new(source: Option<std::net::IpAddr>, codes: Codes, connect: Connect) -> Self {
        Network {
            source,
            codes,
            connect,
            pool: Arc::default(),
            answered: Arc::default(),
            config: PhantomData,
        }
    }

    pub fn answered(&self) -> Answered {
        self.answered.clone()
    }
}

impl<C: Config> RaftNetworkFactory<C> for Network<C> {
    type Network = PeerLink<C>;

    async fn new_client(&mut self, _target: NodeId, node: &BasicNode) -> Self::Network {
        PeerLink {
            addr: node.addr.clone(),
            net: self.clone(),
        }
    }
}

pub struct PeerLink<C> {
    addr: String,
    net: Network<C>,
}

/// Which connection a call goes on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Link {
    /// The kept one, opened if there is none.
    Kept,
    /// A new one, which then replaces the kept one. For votes: an election follows a spell in
    /// which the leader was not heard, and a kept connection may have lost packets then; TCP
    /// retransmits them only after its backed-off timeout (seconds after a slow or lossy spell),
    /// while the vote's own timeout is the election timeout, so on such a connection the first
    /// election after the network heals fails. Elections are rare: a connection each costs
    /// nothing.
    Fresh,
}

/// How a call failed before the peer could answer.
enum Failure {
    Unreachable(String),
    Network(String),
}

impl<C> PeerLink<C> {
    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &mut self,
        code: i32,
        req: &Req,
        timeout: Duration,
        link: Link,
    ) -> Result<Resp, Failure> {
        let body = serde_json::to_vec(req).map_err(|e| Failure::Network(e.to_string()))?;
        let pooled = match link {
            Link::Kept => self.net.pool.lock().get(&self.addr).cloned(),
            Link::Fresh => None,
        };
        let client = match pooled {
            Some(c) => c,
            None => {
                let c = (self.net.connect)(self.addr.clone(), self.net.source, timeout)
                    .await
                    .map_err(Failure::Unreachable)?;
                self.net.pool.lock().insert(self.addr.clone(), c.clone());
                c
            }
        };
        let request = RemotingCommand::request(code).with_body(body);
        let resp = match client.invoke(request, timeout).await {
            Ok(r) => r,
            Err(e) => {
                // A timed-out call may leave the connection fine, but a broken one must go:
                // the next call starts afresh either way, and dropping it stops its reader.
                self.net.pool.lock().remove(&self.addr);
                // A connection that closed before the answer (the peer went away, or sent
                // what this side refused, such as a frame over the cap) is unreachable for
                // openraft, which then backs off instead of reconnecting at once.
                return Err(match e {
                    rocketmq_wire::client::ClientError::Closed => {
                        Failure::Unreachable(e.to_string())
                    }
                    _ => Failure::Network(e.to_string()),
                });
            }
        };
        self.net
            .answered
            .lock()
            .insert(self.addr.clone(), std::time::Instant::now());
        if resp.code != 0 {
            return Err(Failure::Network(format!(
                "peer answered {}: {}",
                resp.code,
                resp.remark.unwrap_or_default()
            )));
        }
        let body = resp.body.unwrap_or_default();
        serde_json::from_slice(&body).map_err(|e| Failure::Network(e.to_string()))
    }

    /// A Raft call: the receiving node's own result, error included, or how the call failed.
    async fn rpc<Req: Serialize, T, E: std::error::Error>(
        &mut self,
        code: i32,
        req: &Req,
        option: RPCOption,
        link: Link,
    ) -> Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Answer<T, E>: DeserializeOwned,
    {
        match self
            .call::<_, Answer<T, E>>(code, req, option.hard_ttl(), link)
            .await
        {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(RPCError::RemoteError(RemoteError::new(0, e))),
            Err(f) => Err(rpc_error(f)),
        }
    }
}

fn rpc_error<E: std::error::Error>(f: Failure) -> RPCError<NodeId, BasicNode, E> {
    match f {
        Failure::Unreachable(m) => RPCError::Unreachable(Unreachable::new(&AnyError::error(m))),
        Failure::Network(m) => RPCError::Network(NetworkError::new(&AnyError::error(m))),
    }
}

/// The answer to a Raft call: the receiving node's own result, error included.
type Answer<T, E> = Result<T, RaftError<NodeId, E>>;

impl<C: Config> RaftNetwork<C> for PeerLink<C> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.rpc(self.net.codes.append_entries, &rpc, option, Link::Kept)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.rpc(self.net.codes.install_snapshot, &rpc, option, Link::Kept)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.rpc(self.net.codes.vote, &rpc, option, Link::Fresh)
            .await
    }
}
