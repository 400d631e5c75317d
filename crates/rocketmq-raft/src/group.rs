//! A replicated group's life on one node, whatever state it replicates: forming the group, or
//! rejoining it after the store was lost; the leader's lease, so that a leader cut off from the
//! others stops claiming before a successor can be elected; writes and reads bounded by a
//! deadline; answering the Raft traffic of the other members; and stopping for good when the
//! store fails. What the replicated state means is the user's.

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{CheckIsLeaderError, ClientWriteError, RaftError};
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse, VoteRequest};
use openraft::{BasicNode, RaftTypeConfig, ServerState};
use parking_lot::{Mutex, RwLock};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::figures::{Figures, Member};
use crate::network::Answered;
use crate::trust::MemberAddresses;
use crate::{store, Applied, Codes, Connect, LogStore, Machine, Network, NodeId, StateMachine};

mod consensus;
mod membership;
pub use membership::{ChangeError, MemberChange, Membership};

/// A request that needs the group gets its answer within this (Java bounds every controller
/// request at 5 s): a leader cut off from the others answers an error instead of hanging.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// What a node needs to know of its group.
#[derive(Clone)]
pub struct Settings {
    /// Names the group in openraft's configuration.
    pub name: String,
    /// What the members are, as remarks and log lines name them ("controller nodes").
    pub members_are: &'static str,
    pub self_id: NodeId,
    /// What member ids start with (`n` of `n0`): how remarks and log lines name members.
    pub id_prefix: String,
    /// The members the configuration lists, each a node id and its peer address: the group
    /// every node proposes when the group is formed.
    pub members: BTreeMap<NodeId, String>,
    pub store_path: PathBuf,
    pub heartbeat_ms: u64,
    /// The shortest election timeout, which is also the leader's lease; the longest is one
    /// heartbeat interval more (`longest_election_timeout`).
    pub election_timeout: Duration,
    /// Entries between snapshots.
    pub snapshot_every: u64,
    pub codes: Codes,
    /// How connections to the other members are opened ([`crate::plaintext`] by default).
    pub connect: Connect,
}

impl Settings {
    /// The longest election timeout. openraft 0.9 also makes it a follower's lease of the
    /// leader it last heard: it refuses votes for that long, and stands only that long plus its
    /// own timeout after the leader fell silent. Each of those waits comes again in every round
    /// an election needs after a failure heals (a vote refused for the lease, a candidate that
    /// saw a longer log waiting twice this), so the range stays narrow: the shortest plus one
    /// heartbeat interval, which still spreads the nodes' timeouts by more than a vote's round
    /// trip. It must stay longer than the leader's own lease (the shortest) for leases to be
    /// safe.
    pub fn longest_election_timeout(&self) -> Duration {
        self.election_timeout + Duration::from_millis(self.heartbeat_ms)
    }

    fn raft_config(&self) -> openraft::Config {
        let election_min = self.election_timeout.as_millis() as u64;
        openraft::Config {
            cluster_name: self.name.clone(),
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            // What a snapshot covers need not stay in the log for long: a follower that far
            // behind is sent the snapshot.
            max_in_snapshot_log_to_keep: self.snapshot_every.min(1_000),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: election_min,
            election_timeout_max: self.longest_election_timeout().as_millis() as u64,
            install_snapshot_timeout: 5_000,
            // Chunks travel as JSON (about three bytes a byte): keep frames far below the
            // port's cap.
            snapshot_max_chunk_size: 1024 * 1024,
            ..Default::default()
        }
    }
}

/// Why a request could not be answered from the replicated state: the caller sends the first to
/// the leader (or tells its client to look for it), and answers the second as an error with
/// the reason.
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    #[error("this node is not the leader")]
    NotLeader,
    #[error("{0}")]
    Failed(String),
}

/// The answer to a Raft request from another member.
#[derive(Debug)]
pub enum Served {
    /// The JSON of the local Raft's result, error included, for the sender's Raft.
    Answer(Vec<u8>),
    /// Not passed to Raft: the remark says why.
    Refused(String),
    /// The body is not the request the code names.
    Malformed,
}

type Raft<M> = openraft::Raft<<M as Machine>::C>;

pub struct Group<M: Machine> {
    settings: Settings,
    raft: Raft<M>,
    applied: Arc<RwLock<Applied<M>>>,
    /// The node's own address, which its connections to peers come from.
    source: Option<IpAddr>,
    /// The leader's lease: the shortest election timeout. openraft keeps a leader that hears
    /// from no one a leader until it sees a higher term, while the others elect a new one once
    /// they have not heard from it for an election timeout: a lease no longer than that ends
    /// before any successor can be elected, so two nodes never claim leadership at once.
    /// (openraft dates an acknowledgement from when the acknowledged request was sent, which is
    /// before any follower's timer restarted.)
    lease: Duration,
    /// When a quorum last acknowledged this node as leader (`None` while it is not leader).
    quorum_acked_at: Mutex<Option<Instant>>,
    /// When this node last took AppendEntries (heartbeats included) from a leader.
    leader_heard_at: Mutex<Option<Instant>>,
    /// When this node last became leader; `None` while it is not.
    leader_since: Mutex<Option<Instant>>,
    /// While this node, started on an empty store, finds out whether its group has worked and
    /// catches up with it (`join_or_form`); `None` once it votes and stands like any member.
    rejoining: Mutex<Option<Rejoin>>,
    /// Why the Raft core stopped, once it has (a store that cannot be written): the node then
    /// names no leader and claims nothing, and whoever runs it is told through `failed`.
    fatal: Mutex<Option<String>>,
    failed: CancellationToken,
    /// While this leader hands its office to another member: it accepts no request that would
    /// reach its followers, so that their leases run out.
    transferring: AtomicBool,
    /// Proposals between their leadership check and their outcome.
    writes_in_flight: AtomicU64,
    /// When each member last answered this node's Raft requests.
    answered: Answered,
    /// The addresses of the group's members: the membership's once the node holds one, the
    /// config's until then, their names resolved again and again.
    addresses: Arc<MemberAddresses>,
    /// The membership `addresses` was last given.
    membership_seen: Mutex<Option<Option<openraft::LogId<NodeId>>>>,
    /// How long proposals take to commit and apply.
    commit_seconds: Histogram,
    commits: AtomicU64,
    shutdown: CancellationToken,
}

impl<M: Machine> Group<M> {
    /// Opens the node's store and joins (or, the first time, forms) the group.
    pub async fn start(settings: Settings) -> anyhow::Result<Arc<Self>> {
        let db = store::open(&settings.store_path)?;
        let log = LogStore::<M::C>::new(db.clone());
        let sm = StateMachine::<M>::open(db)?;
        let applied = sm.shared();
        let raft_cfg = Arc::new(settings.raft_config().validate()?);
        let own_addr = settings.members.get(&settings.self_id).cloned();
        let source = match own_addr {
            Some(addr) => resolve(&addr).await.into_iter().next(),
            None => None,
        };
        let network = Network::<M::C>::new(source, settings.codes, settings.connect.clone());
        let answered = network.answered();
        // The core and its replication streams run on the consensus threads (`consensus`).
        let self_id = settings.self_id;
        let raft = consensus::run(async move {
            openraft::Raft::new(self_id, raft_cfg, network, log, sm).await
        })
        .await??;
        let empty = !raft.is_initialized().await?;
        if empty {
            // Neither stand nor form a group before the peers have been asked (join_or_form).
            raft.runtime_config().elect(false);
        }
        let addresses =
            MemberAddresses::resolve(settings.members.values().cloned().collect()).await;
        let shutdown = CancellationToken::new();
        addresses.keep_fresh(shutdown.clone());
        let group = Arc::new(Group {
            lease: settings.election_timeout,
            settings,
            raft,
            applied,
            source,
            quorum_acked_at: Mutex::new(None),
            leader_heard_at: Mutex::new(None),
            leader_since: Mutex::new(None),
            rejoining: Mutex::new(empty.then_some(Rejoin::Probing)),
            fatal: Mutex::new(None),
            failed: CancellationToken::new(),
            transferring: AtomicBool::new(false),
            writes_in_flight: AtomicU64::new(0),
            answered,
            addresses,
            membership_seen: Mutex::new(None),
            // 1 ms to about 4 s: a commit is a round trip and an fsync, and the deadline is 5 s.
            commit_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 13)),
            commits: AtomicU64::new(0),
            shutdown,
        });
        if empty {
            consensus::spawn(join_or_form(group.clone()));
        }
        // The lease is dated by this watch: on the consensus threads, it is not late because
        // the host's workers are busy.
        consensus::spawn(watch_role(group.clone()));
        Ok(group)
    }

    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "the Raft core did not shut down cleanly");
        }
    }

    /// The replicated state as this node has applied it.
    pub fn applied(&self) -> &Arc<RwLock<Applied<M>>> {
        &self.applied
    }

    pub fn source(&self) -> Option<IpAddr> {
        self.source
    }

    /// Whether this node leads and a quorum has acknowledged it within the lease: a leader cut
    /// off from the others stops saying so before they can elect another.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
            && self.holds_lease()
            && !self.transferring.load(Ordering::SeqCst)
            && self.failure().is_none()
    }

    fn holds_lease(&self) -> bool {
        self.quorum_acked_at
            .lock()
            .is_some_and(|at| at.elapsed() < self.lease)
    }

    /// The leader this node vouches for: itself while it holds the lease, another node it has
    /// heard from within the lease. A follower keeps naming its leader until a successor is
    /// elected, seconds after the leader died or paused; clients that take the first node
    /// naming a leader would be sent to a dead one. Past the lease the old leader no longer
    /// claims either.
    pub fn leader(&self) -> Option<NodeId> {
        if self.failure().is_some() {
            return None;
        }
        let leader = self.raft.metrics().borrow().current_leader?;
        let vouched = if leader == self.settings.self_id {
            self.is_leader()
        } else {
            self.leader_heard_at
                .lock()
                .is_some_and(|at| at.elapsed() < self.lease)
        };
        vouched.then_some(leader)
    }

    /// How long this node has led; `None` while it does not.
    pub fn leading_for(&self) -> Option<Duration> {
        self.leader_since.lock().map(|at| at.elapsed())
    }

    /// Why the node does not serve its part yet: stopped, still refilling a lost store, or no
    /// leader known.
    pub fn unready_reason(&self) -> Option<String> {
        if let Some(why) = self.failure() {
            return Some(format!("stopped: {why}"));
        }
        match self.rejoin_state() {
            Some(Rejoin::Probing) => {
                Some("its store is empty: asking every member whether the group has worked".into())
            }
            Some(Rejoin::CatchingUp { applied, .. }) => Some(format!(
                "refilling its store from the group, up to entry {applied}"
            )),
            None if self.leader().is_none() => Some("no leader known".to_string()),
            None => None,
        }
    }

    /// Why the node stopped serving, if it has: its Raft core hit a fatal error.
    pub fn failure(&self) -> Option<String> {
        self.fatal.lock().clone()
    }

    /// Resolves once the node has stopped serving for good; [`Group::failure`] says why.
    pub async fn failed(&self) {
        self.failed.cancelled().await
    }

    fn fail(&self, why: String) {
        let mut fatal = self.fatal.lock();
        if fatal.is_none() {
            tracing::error!(
                reason = %why,
                group = %self.settings.name,
                "this node stopped serving its group: its Raft core failed"
            );
            *fatal = Some(why);
            self.failed.cancel();
        }
    }

    /// While this node, started on an empty store, has not caught up with its group: what it
    /// knows of the group so far.
    pub fn rejoin_state(&self) -> Option<Rejoin> {
        *self.rejoining.lock()
    }

    /// The leader this node's Raft core names, vouched for or not: where a follower passes on
    /// what only the leader takes, as soon as it has heard of one. [`Group::leader`] is the one
    /// to tell clients.
    pub fn raft_leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this node's Raft core is in the leader's state, lease or not: when a node
    /// became leader, or stopped being one.
    pub fn raft_leads(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
    }

    /// The index of the last entry of this node's log; `None` for an empty log.
    pub fn last_log_index(&self) -> Option<u64> {
        self.raft.metrics().borrow().last_log_index
    }

    /// Waits until this node has applied the entry at `index` (at once for `None`), at most
    /// until `until`; whether it has.
    pub async fn wait_applied(&self, index: Option<u64>, until: Instant) -> bool {
        let mut metrics = self.raft.metrics();
        loop {
            if metrics.borrow_and_update().last_applied.map(|l| l.index) >= index {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero()
                || !matches!(
                    tokio::time::timeout(left, metrics.changed()).await,
                    Ok(Ok(()))
                )
            {
                return metrics.borrow().last_applied.map(|l| l.index) >= index;
            }
        }
    }

    /// Turns of the node's Raft core (an entry applied, a heartbeat round, a role or
    /// membership change), for whoever follows the group.
    pub fn changes(&self) -> Changes {
        Changes(self.raft.metrics())
    }

    /// Whether `ip` is an address of one of the group's members now: one that moved is heard
    /// as soon as its name resolves there.
    pub async fn admits(&self, ip: IpAddr) -> bool {
        self.addresses.admits(ip).await
    }

    /// The addresses of the group's members, kept up with the membership and their names.
    pub fn peer_ips(&self) -> tokio::sync::watch::Receiver<HashSet<IpAddr>> {
        self.addresses.subscribe()
    }

    /// The term this node's vote is in (0 on an empty store), as a probe reports it.
    pub fn current_term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The index of the last entry the state machine applied; `None` for an empty store.
    pub fn applied_index(&self) -> Option<u64> {
        self.raft.metrics().borrow().last_applied.map(|l| l.index)
    }

    /// When this node last had word from a working group: as leader, a quorum's
    /// acknowledgement; as follower, the leader's AppendEntries.
    pub fn quorum_contact(&self) -> Option<Instant> {
        if self.raft.metrics().borrow().state == ServerState::Leader {
            *self.quorum_acked_at.lock()
        } else {
            *self.leader_heard_at.lock()
        }
    }

    pub fn status(&self) -> RaftStatus {
        let m = self.raft.metrics().borrow().clone();
        RaftStatus {
            state: match self.failure() {
                Some(why) => format!("Stopped ({why})"),
                None => format!("{:?}", m.state),
            },
            term: m.current_term,
            leader: m.current_leader,
            last_applied: m.last_applied.map(|l| l.index),
        }
    }

    /// How long proposals took to commit, for the metrics.
    pub fn commit_seconds(&self) -> &Histogram {
        &self.commit_seconds
    }

    /// Proposals committed since the node started.
    pub fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Each member as this node's Raft core knows the membership, `leader` named the leader;
    /// what each holds of the log is known on the leader only (and this node holds its own).
    pub fn members(&self, leader: Option<NodeId>) -> Vec<Member> {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership().clone();
        let voters: HashSet<NodeId> = membership.voter_ids().collect();
        let last = m.last_log_index;
        let replication = m.replication.clone().unwrap_or_default();
        let answered = self.answered.lock().clone();
        membership
            .nodes()
            .map(|(id, node)| {
                let this_node = *id == m.id;
                let matched_index = if this_node {
                    last
                } else {
                    replication.get(id).copied().flatten().map(|l| l.index)
                };
                let role = if Some(*id) == leader {
                    "leader"
                } else if voters.contains(id) {
                    "follower"
                } else {
                    "learner"
                };
                Member {
                    node: *id,
                    address: node.addr.clone(),
                    role,
                    matched_index,
                    lag: matched_index.map(|i| last.unwrap_or(0).saturating_sub(i)),
                    last_answer_ms: (!this_node)
                        .then(|| answered.get(&node.addr))
                        .flatten()
                        .map(|at| at.elapsed().as_millis() as u64),
                    this_node,
                }
            })
            .collect()
    }

    /// What the group's series show now (`rocketmq_http::group_series::encode`).
    pub fn figures(&self) -> Figures {
        let status = self.status();
        let leader = self.raft.metrics().borrow().current_leader;
        Figures {
            role: status.state,
            is_leader: self.is_leader(),
            has_leader: self.leader().is_some(),
            term: status.term,
            quorum_contact_ms: self
                .quorum_contact()
                .map(|at| at.elapsed().as_millis() as u64),
            members: self.members(leader),
        }
    }

    /// Whether this node is in the membership as a learner (added, not yet a voter).
    pub fn is_learner(&self) -> bool {
        let stored = self.raft.metrics().borrow().membership_config.clone();
        let m = stored.membership();
        m.get_node(&self.settings.self_id).is_some()
            && !m.voter_ids().any(|id| id == self.settings.self_id)
    }

    /// Marks the start or the end of handing the office to another member: meanwhile this
    /// leader claims nothing and takes no proposal.
    pub fn set_transferring(&self, on: bool) {
        self.transferring.store(on, Ordering::SeqCst);
    }

    /// Proposals that passed their leadership check and have no outcome yet.
    pub fn writes_in_flight(&self) -> u64 {
        self.writes_in_flight.load(Ordering::SeqCst)
    }

    /// Answers a Raft request from another member when `code` is one of the group's; `None`
    /// otherwise.
    pub async fn serve(&self, code: i32, body: Option<&[u8]>) -> Option<Served> {
        let codes = self.settings.codes;
        let body = body.unwrap_or_default();
        let served = if code == codes.append_entries {
            answer(body, |rpc| self.append_entries(rpc)).await
        } else if code == codes.vote {
            self.vote(body).await
        } else if code == codes.install_snapshot {
            answer(body, |rpc| self.raft.install_snapshot(rpc)).await
        } else if code == codes.take_leadership {
            match self.take_leadership().await {
                Ok(()) => Served::Answer(Vec::new()),
                Err(why) => Served::Refused(why),
            }
        } else if code == codes.probe {
            let probe = GroupProbe {
                applied: self.applied_index(),
                term: self.current_term(),
            };
            Served::Answer(serde_json::to_vec(&probe).unwrap_or_default())
        } else {
            return None;
        };
        Some(served)
    }

    /// AppendEntries from the leader, noting when a leader was last heard from.
    async fn append_entries(
        &self,
        rpc: AppendEntriesRequest<M::C>,
    ) -> Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        let answer = self.raft.append_entries(rpc).await;
        if answer
            .as_ref()
            .is_ok_and(|a| !matches!(a, AppendEntriesResponse::HigherVote(_)))
        {
            *self.leader_heard_at.lock() = Some(Instant::now());
        }
        answer
    }

    /// A vote request. A node that lost its store would, with its empty log, vote for any
    /// candidate, one that lacks committed entries included, and it has forgotten whom it voted
    /// for: until it has caught up it votes only for a candidate whose log reaches what the
    /// group had applied when it asked (which any member that outlived the loss has).
    async fn vote(&self, body: &[u8]) -> Served {
        if let Some(rejoin) = self.rejoin_state() {
            let asked = serde_json::from_slice::<VoteRequest<NodeId>>(body).ok();
            let term = asked.as_ref().map_or(0, |v| v.vote.leader_id.term);
            let last = asked.and_then(|v| v.last_log_id).map(|l| l.index);
            if let Some(why) = rejoin.refuses_vote(term, last) {
                return Served::Refused(why.to_string());
            }
        }
        answer(body, |rpc| self.raft.vote(rpc)).await
    }

    /// Proposes a command and waits until it is applied; the reply is the state machine's. A
    /// node without the lease refuses at once, and a proposal not committed within the deadline
    /// is answered as failed (it may still commit later, as with Java's timed-out requests).
    pub async fn write(
        &self,
        cmd: <M::C as RaftTypeConfig>::D,
    ) -> Result<<M::C as RaftTypeConfig>::R, ConsensusError> {
        self.write_logged(cmd).await.map(|(reply, _)| reply)
    }

    /// [`Group::write`], with the index the command took in the log: a member that reads its
    /// own state after a write another member made waits until it applied that index. (The
    /// applied index in the metrics may not have moved yet when the write's reply comes.)
    pub async fn write_logged(
        &self,
        cmd: <M::C as RaftTypeConfig>::D,
    ) -> Result<(<M::C as RaftTypeConfig>::R, u64), ConsensusError> {
        // Counted before the leadership check, so that a hand-over that begins after the check
        // still waits for this proposal.
        self.writes_in_flight.fetch_add(1, Ordering::SeqCst);
        let _done = scopeguard(|| {
            self.writes_in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        if !self.is_leader() {
            return Err(ConsensusError::NotLeader);
        }
        let began = Instant::now();
        let written = tokio::time::timeout(DEADLINE, self.raft.client_write(cmd)).await;
        if matches!(written, Ok(Ok(_))) {
            self.commit_seconds.observe(began.elapsed().as_secs_f64());
            self.commits.fetch_add(1, Ordering::Relaxed);
        }
        match written {
            Err(_) => Err(ConsensusError::Failed(format!(
                "not committed within {} s: no quorum of {} answered",
                DEADLINE.as_secs(),
                self.settings.members_are
            ))),
            Ok(Ok(resp)) => Ok((resp.data, resp.log_id.index)),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                Err(ConsensusError::NotLeader)
            }
            Ok(Err(e)) => Err(ConsensusError::Failed(e.to_string())),
        }
    }

    /// Runs `f` on the state once this node has confirmed it is still the leader and has
    /// applied everything committed before the call, within the deadline. A confirmation round
    /// that misses its quorum (one heartbeat lost on a lossy link) is tried again while the
    /// deadline lasts and the node still holds its lease.
    pub async fn read<T>(&self, f: impl FnOnce(&Applied<M>) -> T) -> Result<T, ConsensusError> {
        let confirm = async {
            loop {
                if !self.is_leader() {
                    return Err(ConsensusError::NotLeader);
                }
                match self.raft.ensure_linearizable().await {
                    Ok(_) => return Ok(()),
                    Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(_))) => {
                        return Err(ConsensusError::NotLeader)
                    }
                    Err(RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e))) => {
                        tracing::debug!(error = %e, "leadership not confirmed, trying again");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(ConsensusError::Failed(e.to_string())),
                }
            }
        };
        match tokio::time::timeout(DEADLINE, confirm).await {
            Err(_) => Err(ConsensusError::Failed(format!(
                "leadership not confirmed within {} s: no quorum of {} answered",
                DEADLINE.as_secs(),
                self.settings.members_are
            ))),
            Ok(Ok(())) => Ok(f(&self.applied.read())),
            Ok(Err(refusal)) => Err(refusal),
        }
    }

    /// A connection to the member at `addr`, opened as the group's members talk.
    pub async fn connect(&self, addr: &str, deadline: Duration) -> Result<Client, String> {
        (self.settings.connect)(addr.to_string(), self.source, deadline).await
    }

    /// A member's answer to a probe; `None` if it cannot be asked within a second.
    pub async fn probe(&self, addr: &str) -> Option<GroupProbe> {
        let limit = Duration::from_secs(1);
        let client = self.connect(addr, limit).await.ok()?;
        let answer = client
            .invoke(RemotingCommand::request(self.settings.codes.probe), limit)
            .await
            .ok()?;
        if answer.code != 0 {
            return None;
        }
        serde_json::from_slice(answer.body.as_deref()?).ok()
    }
}

/// Decodes a Raft request, passes it to `call` and encodes the local result.
async fn answer<Req, Resp, E, Fut>(body: &[u8], call: impl FnOnce(Req) -> Fut) -> Served
where
    Req: DeserializeOwned,
    Resp: Serialize,
    E: Serialize,
    Fut: std::future::Future<Output = Result<Resp, E>>,
{
    let Ok(rpc) = serde_json::from_slice::<Req>(body) else {
        return Served::Malformed;
    };
    let result = call(rpc).await;
    match serde_json::to_vec(&result) {
        Ok(body) => Served::Answer(body),
        Err(e) => Served::Refused(e.to_string()),
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RaftStatus {
    pub state: String,
    pub term: u64,
    pub leader: Option<u64>,
    pub last_applied: Option<u64>,
}

/// Turns of a node's Raft core ([`Group::changes`]).
pub struct Changes(tokio::sync::watch::Receiver<openraft::RaftMetrics<NodeId, BasicNode>>);

impl Changes {
    /// Waits for the next turn; `false` once the core has ended.
    pub async fn next(&mut self) -> bool {
        self.0.changed().await.is_ok()
    }
}

/// Notes when this node becomes leader or stops being one, when a quorum last acknowledged it,
/// and when its Raft core failed. openraft reports its metrics at every turn of its loop,
/// heartbeat rounds included.
async fn watch_role<M: Machine>(group: Arc<Group<M>>) {
    let mut metrics = group.raft.metrics();
    loop {
        group.follow_membership();
        let (leader, since_ack, fatal) = {
            let m = metrics.borrow();
            let fatal = m.running_state.as_ref().err().map(ToString::to_string);
            (
                m.state == ServerState::Leader,
                m.millis_since_quorum_ack,
                fatal,
            )
        };
        if let Some(why) = fatal {
            group.fail(why);
            return;
        }
        {
            let acked =
                since_ack.and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)));
            let mut at = group.quorum_acked_at.lock();
            // Only ever later: a report is a look back from when it was made.
            *at = match (leader, *at, acked) {
                (false, ..) => None,
                (true, Some(old), Some(new)) => Some(old.max(new)),
                (true, old, new) => new.or(old),
            };
        }
        // Locked twice, not held across the `select!` below; only this task writes it.
        let since = *group.leader_since.lock();
        *group.leader_since.lock() = leader.then(|| since.unwrap_or_else(Instant::now));
        tokio::select! {
            _ = group.shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() {
                if !group.shutdown.is_cancelled() {
                    group.fail("the Raft core ended".into());
                }
                return;
            },
        }
    }
}

/// What a node that starts on an empty store does: it asks every other member whether it
/// belongs to a group that has worked (applied an entry). If one does, this node lost its store
/// (or is new to a running group): it forms nothing and stands for nothing until the leader has
/// refilled it up to what that member had applied, and meanwhile votes only for a candidate
/// whose log reaches that far (`Group::vote`). If every member answers and none does, the group
/// is new and every node proposes the same membership. While a member cannot be asked and none
/// that can has worked, it waits: the silent one may hold the group's state, and two wiped
/// stores must not form a new group without it.
async fn join_or_form<M: Machine>(group: Arc<Group<M>>) {
    let settings = group.settings.clone();
    let others: Vec<String> = settings
        .members
        .iter()
        .filter(|(id, _)| **id != settings.self_id)
        .map(|(_, addr)| addr.clone())
        .collect();
    // The most any member has reported so far: members answer at different times.
    let mut known = GroupProbe::default();
    let mut waited = 0u32;
    let (applied, term) = loop {
        // Added as a learner by the leader of a group whose members would not answer it (they
        // trust only their members' hosts): it joined. A learner neither votes nor stands.
        if group.is_learner() {
            tracing::info!("this node was added to the group as a learner");
            break (known.applied.unwrap_or(0), 0);
        }
        let probes = others.iter().map(|addr| group.probe(addr));
        let answers = futures::future::join_all(probes).await;
        for answer in answers.iter().flatten() {
            known.merge(answer);
        }
        // Index 0 is the membership every node proposes at first: a group has worked once a
        // leader's first entry (index 1) was applied.
        let worked = known.applied.filter(|a| *a >= 1);
        let everyone = answers.iter().all(Option::is_some);
        if let (Some(applied), true) = (worked, everyone) {
            // Every member answered, so the most applied covers every committed entry this
            // node may have held, and the highest term every vote it may have cast.
            tracing::warn!(
                member_applied = applied,
                member_term = known.term,
                "this node's store is empty but the group has worked: joining without forming a \
                 group, no vote until refilled"
            );
            break (applied, known.term);
        }
        if worked.is_some() && group.leader_heard_at.lock().is_some() {
            // A leader elected without this node reaches it: that leader holds every committed
            // entry, and its AppendEntries moved this node's vote into the leader's term.
            tracing::warn!(
                member_applied = worked,
                "this node's store is empty and a leader of the group reaches it: catching up"
            );
            break (worked.unwrap_or(0), 0);
        }
        if everyone {
            let members: BTreeMap<NodeId, BasicNode> = settings
                .members
                .iter()
                .map(|(id, addr)| (*id, BasicNode::new(addr)))
                .collect();
            // Every node proposes the same membership; whichever forms the group first wins
            // and the others' attempts are refused harmlessly.
            *group.rejoining.lock() = None;
            if let Err(e) = group.raft.initialize(members).await {
                tracing::debug!(error = %e, "group already formed");
            }
            group.raft.runtime_config().elect(true);
            return;
        }
        if waited.is_multiple_of(20) {
            tracing::warn!(
                "this node's store is empty and a member cannot be asked whether the group has \
                 worked or what it holds: waiting for every member before it forms a group or \
                 votes"
            );
        }
        waited += 1;
        tokio::select! {
            _ = group.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    };
    *group.rejoining.lock() = Some(Rejoin::CatchingUp { applied, term });
    // Refilled once the state machine has applied what the members had.
    let mut metrics = group.raft.metrics();
    loop {
        let done = metrics.borrow().last_applied.map(|l| l.index);
        if done.is_some_and(|a| a >= applied) {
            break;
        }
        tokio::select! {
            _ = group.shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
    *group.rejoining.lock() = None;
    group.raft.runtime_config().elect(true);
    tracing::info!("this node has caught up with the group: it votes and may stand again");
}

/// Where a node started on an empty store stands with its group (`join_or_form`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejoin {
    /// Not every member has been asked yet: it votes for no one, since a member that cannot be
    /// asked may hold entries this node acknowledged, or the vote this node has forgotten.
    Probing,
    /// The group has worked: it votes only for a candidate whose log reaches `applied` (what
    /// the members had applied) in a term past `term` (the highest any member had reached).
    CatchingUp { applied: u64, term: u64 },
}

impl Rejoin {
    /// Why this node refuses a vote for a candidate in `term` whose log ends at `last_index`.
    pub fn refuses_vote(&self, term: u64, last_index: Option<u64>) -> Option<&'static str> {
        match *self {
            Rejoin::Probing => Some(
                "this node lost its store and has not yet heard from every member: it votes \
                 for no one",
            ),
            Rejoin::CatchingUp {
                applied,
                term: seen,
            } => (last_index.is_none_or(|l| l < applied) || term <= seen).then_some(
                "this node lost its store and has not caught up with the group: it votes \
                     only for a candidate that has what the group applied, in a newer term",
            ),
        }
    }
}

/// A member's answer to a probe: whether it belongs to a group that has worked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GroupProbe {
    /// The index its state machine applied; `None` for an empty store.
    pub applied: Option<u64>,
    /// The term of its vote. Older nodes did not report it.
    #[serde(default)]
    pub term: u64,
}

impl GroupProbe {
    fn merge(&mut self, other: &GroupProbe) {
        self.applied = self.applied.max(other.applied);
        self.term = self.term.max(other.term);
    }
}

/// The addresses a `host:port` resolves to; none if it does not.
pub async fn resolve(addr: &str) -> Vec<IpAddr> {
    match tokio::net::lookup_host(addr).await {
        Ok(found) => found.map(|a| a.ip()).collect(),
        Err(e) => {
            tracing::warn!(%addr, error = %e, "cannot resolve a group member's address");
            Vec::new()
        }
    }
}

/// Runs `f` when dropped, however the scope ends.
fn scopeguard(f: impl FnOnce()) -> impl Drop {
    struct Guard<F: FnOnce()>(Option<F>);
    impl<F: FnOnce()> Drop for Guard<F> {
        fn drop(&mut self) {
            if let Some(f) = self.0.take() {
                f();
            }
        }
    }
    Guard(Some(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_still_asking_its_members_votes_for_no_one() {
        assert!(Rejoin::Probing.refuses_vote(9, Some(100)).is_some());
    }

    #[test]
    fn a_rejoining_node_votes_only_for_a_candidate_holding_what_was_applied_in_a_newer_term() {
        let rejoin = Rejoin::CatchingUp {
            applied: 10,
            term: 4,
        };
        assert!(rejoin.refuses_vote(5, Some(9)).is_some(), "log too short");
        assert!(rejoin.refuses_vote(5, None).is_some(), "empty log");
        assert!(
            rejoin.refuses_vote(4, Some(10)).is_some(),
            "a term it may have voted in"
        );
        assert!(rejoin.refuses_vote(5, Some(10)).is_none());
    }

    #[test]
    fn probe_answers_merge_to_the_most_applied_and_the_highest_term() {
        let mut known = GroupProbe::default();
        known.merge(&GroupProbe {
            applied: Some(7),
            term: 2,
        });
        known.merge(&GroupProbe {
            applied: None,
            term: 5,
        });
        assert_eq!(
            known,
            GroupProbe {
                applied: Some(7),
                term: 5
            }
        );
        // An answer from a node that did not report its term still reads.
        let old: GroupProbe = serde_json::from_str(r#"{"applied":3}"#).unwrap();
        assert_eq!(old.applied, Some(3));
    }
}
