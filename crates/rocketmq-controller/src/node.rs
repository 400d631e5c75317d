//! One controller node: its Raft member, its heartbeat table, its settings and the background
//! duties of a leader (electing a master when one goes silent, announcing role changes).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ServerState};
use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::forward::Forwarder;
use crate::heartbeat::{BrokerKey, LiveTable, LiveView, Via, DEFAULT_TIMEOUT};
use crate::notify::Notifier;
use crate::raft::{codes, Applied, LogStore, Network, Raft, StateMachine, RAFT_CODES};
use crate::recent::{Happening, Recent};
use crate::replicated::{Command, CommandReply, GroupView, RoleChange};
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use rocketmq_raft::network::Answered;
use rocketmq_raft::store;
use rocketmq_wire::client::Client;
use rocketmq_wire::RemotingCommand;

pub use crate::replicated::code as response;

/// Raft timing, by default (`controllerRaftHeartbeatIntervalMs`, `controllerElectionTimeoutMs`).
/// openraft 0.9 makes a follower that knows a leader wait the longest election timeout (its view
/// of the leader's lease) plus its own random one, 1.5 + 0.75..1.5 s here, before it stands: a
/// leader that dies or is cut off is replaced in 2.3 to 3 s, so that a broker whose request to
/// the old leader timed out (3 s in Java's broker) finds a new one waiting (the fault suite's
/// pause and partition schedules measure it). openraft bounds each AppendEntries (heartbeats
/// included) by the heartbeat interval, and that round trip includes the follower's fsync:
/// nodes farther apart raise both settings (`tests/slow_links.rs` runs 150 ms apart).
///
/// The shortest election timeout is also how long a leader goes on calling itself leader after
/// a quorum last acknowledged it (its lease). openraft keeps a leader that hears from no one a
/// leader until it sees a higher term, while the others elect a new one once they have not
/// heard from it for an election timeout: a lease no longer than the shortest election timeout
/// ends before any successor can be elected, so that two nodes never claim leadership at once.
/// (openraft dates an acknowledgement from when the acknowledged request was sent, which is
/// before any follower's timer restarted.)
fn raft_timing(config: &ControllerConfig) -> (u64, Duration) {
    (
        config.raft_heartbeat_interval_ms,
        Duration::from_millis(config.election_timeout_ms),
    )
}

/// A request that needs the group gets its answer within this, as Java bounds every controller
/// request at 5 s: a leader cut off from the others answers an error instead of hanging.
const COMMIT_DEADLINE: Duration = Duration::from_secs(5);

fn raft_config(config: &ControllerConfig) -> openraft::Config {
    let snapshot_every = config.snapshot_every_entries;
    let (heartbeat, lease) = raft_timing(config);
    let election_min = lease.as_millis() as u64;
    openraft::Config {
        cluster_name: config.group.to_string(),
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(snapshot_every),
        // What a snapshot covers need not stay in the log for long: a follower that far behind
        // is sent the snapshot.
        max_in_snapshot_log_to_keep: snapshot_every.min(1_000),
        heartbeat_interval: heartbeat,
        election_timeout_min: election_min,
        election_timeout_max: 2 * election_min,
        install_snapshot_timeout: 5_000,
        // Chunks travel as JSON (about three bytes a byte): keep frames far below the port's cap.
        snapshot_max_chunk_size: 1024 * 1024,
        ..Default::default()
    }
}

/// Counters the metrics and the status page read (through [`Controller::view`]).
#[derive(Default)]
struct Counters {
    elections_new_master: AtomicU64,
    elections_kept_master: AtomicU64,
    elections_no_master: AtomicU64,
    role_notifications: AtomicU64,
    heartbeats: AtomicU64,
    commits: AtomicU64,
}

pub struct Controller {
    pub(crate) config: RwLock<ControllerConfig>,
    raft: Raft,
    applied: Arc<RwLock<Applied>>,
    live: Mutex<LiveTable>,
    notifier: Notifier,
    counters: Counters,
    /// When this node last became leader: a new leader waits one heartbeat timeout before it
    /// judges masters by its own table, so that a node that has just started never mistakes
    /// "not heard yet" for "gone".
    pub(crate) leader_since: Mutex<Option<Instant>>,
    /// The addresses of the group's members (the replicated membership's, the config's until
    /// the node has one): Raft requests and forwarded heartbeats are accepted from these only.
    pub(crate) peer_ips: tokio::sync::watch::Sender<std::collections::HashSet<std::net::IpAddr>>,
    /// The membership `peer_ips` was last resolved from.
    pub(crate) membership_seen: Mutex<Option<Option<openraft::LogId<u64>>>>,
    /// While this leader hands its office to another member: it accepts no request that would
    /// reach its followers, so that their leases run out (`members::transfer_leader`).
    pub(crate) transferring: std::sync::atomic::AtomicBool,
    /// Proposals between their leadership check and their outcome.
    pub(crate) writes_in_flight: AtomicU64,
    /// The node's own address, which its connections to peers come from.
    pub(crate) source: Option<std::net::IpAddr>,
    /// When a quorum last acknowledged this node as leader (`None` while it is not leader).
    quorum_acked_at: Mutex<Option<Instant>>,
    /// The leader's lease: the shortest election timeout (`raft_timing`).
    pub(crate) lease: Duration,
    /// When this node last took AppendEntries (heartbeats included) from a leader.
    leader_heard_at: Mutex<Option<Instant>>,
    /// While this node, started on an empty store, finds out whether its group has worked and
    /// catches up with it (`join_or_form`); `None` once it votes and stands like any member.
    rejoining: Mutex<Option<Rejoin>>,
    /// Why the Raft core stopped, once it has (a store that cannot be written): the node then
    /// names no leader and claims nothing, and whoever runs it is told through `failed`.
    fatal: Mutex<Option<String>>,
    failed: CancellationToken,
    /// Passes heartbeats brokers send this follower on to the leader.
    forwarder: Forwarder,
    /// Elections and leadership changes, for the status page.
    recent: Recent,
    /// When each member last answered this node's Raft requests.
    answered: Answered,
    /// How long proposals take to commit and apply.
    commit_seconds: Histogram,
    shutdown: CancellationToken,
}

/// Why a request could not be answered from the replicated state: the caller answers
/// CONTROLLER_NOT_LEADER for the first (the broker then looks for the leader), SYSTEM_ERROR
/// with the reason for the second.
#[derive(Debug, thiserror::Error)]
pub enum ConsensusError {
    #[error("this node is not the leader")]
    NotLeader,
    #[error("{0}")]
    Failed(String),
}

/// A remote config update that names a key it may not change.
#[derive(Debug, thiserror::Error)]
#[error("{0} cannot be updated remotely")]
pub struct BlacklistedKey(pub String);

impl Controller {
    /// Opens the node's store and joins (or, the first time, forms) the group.
    pub async fn start(config: ControllerConfig) -> anyhow::Result<Arc<Controller>> {
        let db = store::open(&config.store_path)?;
        let log = LogStore::new(db.clone());
        let sm = StateMachine::open(db)?;
        let applied = sm.shared();
        let node_id = config.self_node_id();
        let raft_cfg = Arc::new(raft_config(&config).validate()?);
        let peer_ips = resolve_peers(&config).await;
        let source = resolve(&config.self_peer().addr).await.into_iter().next();
        let network = Network::new(source, RAFT_CODES);
        let answered = network.answered();
        let raft = Raft::new(node_id, raft_cfg, network, log, sm).await?;
        let lease = raft_timing(&config).1;
        let shutdown = CancellationToken::new();
        let empty = !raft.is_initialized().await?;
        if empty {
            // Neither stand nor form a group before the peers have been asked (join_or_form).
            raft.runtime_config().elect(false);
        }
        let rejoining = empty.then_some(Rejoin::Probing);
        let controller = Arc::new(Controller {
            config: RwLock::new(config),
            raft,
            applied,
            live: Mutex::new(LiveTable::default()),
            notifier: Notifier,
            counters: Counters::default(),
            leader_since: Mutex::new(None),
            peer_ips: tokio::sync::watch::Sender::new(peer_ips),
            membership_seen: Mutex::new(None),
            transferring: Default::default(),
            writes_in_flight: AtomicU64::new(0),
            source,
            quorum_acked_at: Mutex::new(None),
            lease,
            leader_heard_at: Mutex::new(None),
            rejoining: Mutex::new(rejoining),
            fatal: Mutex::new(None),
            failed: CancellationToken::new(),
            forwarder: Forwarder::start(source, shutdown.clone()),
            recent: Recent::default(),
            answered,
            // 1 ms to about 4 s: a commit is a round trip and an fsync, and the deadline is 5 s.
            commit_seconds: Histogram::new(exponential_buckets(0.001, 2.0, 13)),
            shutdown,
        });
        if empty {
            tokio::spawn(join_or_form(controller.clone()));
        }
        tokio::spawn(watch_role(controller.clone()));
        tokio::spawn(scan_silent_brokers(controller.clone()));
        tokio::spawn(scan_inactive_masters(controller.clone()));
        Ok(controller)
    }

    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        if let Err(e) = self.raft.shutdown().await {
            tracing::warn!(error = %e, "the Raft core did not shut down cleanly");
        }
    }

    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    pub fn config(&self) -> ControllerConfig {
        self.config.read().clone()
    }

    pub fn update_config(&self, props: &[(String, String)]) -> Result<(), BlacklistedKey> {
        let mut config = self.config.write();
        if let Some((k, _)) = props.iter().find(|(k, _)| config.is_blacklisted(k)) {
            return Err(BlacklistedKey(k.clone()));
        }
        config.apply_update(props);
        Ok(())
    }

    /// Whether `ip` is an address of one of the group's members.
    pub fn is_peer(&self, ip: std::net::IpAddr) -> bool {
        self.peer_ips.borrow().contains(&ip)
    }

    /// The addresses of the group's members, kept up with the membership.
    pub fn peer_ips(
        &self,
    ) -> tokio::sync::watch::Receiver<std::collections::HashSet<std::net::IpAddr>> {
        self.peer_ips.subscribe()
    }

    /// Whether this node leads and a quorum has acknowledged it within the lease: a leader cut
    /// off from the others stops saying so before they can elect another.
    pub fn is_leader(&self) -> bool {
        self.raft.metrics().borrow().state == ServerState::Leader
            && self.holds_lease()
            && !self.transferring.load(Ordering::SeqCst)
            && self.failure().is_none()
    }

    /// Whether the node serves its part: `None` when it is a member of a group with a leader
    /// (itself, or one heard from within the lease) and is not still refilling a lost store.
    pub fn unready_reason(&self) -> Option<String> {
        if let Some(why) = self.failure() {
            return Some(format!("stopped: {why}"));
        }
        match self.rejoin_state() {
            Some(Rejoin::Probing) => {
                return Some(
                    "its store is empty: asking every member whether the group has worked"
                        .to_string(),
                )
            }
            Some(Rejoin::CatchingUp { applied, .. }) => {
                return Some(format!(
                    "refilling its store from the group, up to entry {applied}"
                ))
            }
            None => {}
        }
        if self.leader().is_none() {
            return Some("no leader known".to_string());
        }
        None
    }

    pub fn is_ready(&self) -> bool {
        self.unready_reason().is_none()
    }

    /// Why the node stopped serving, if it has: its Raft core hit a fatal error.
    pub fn failure(&self) -> Option<String> {
        self.fatal.lock().clone()
    }

    /// Resolves once the node has stopped serving for good; [`Controller::failure`] says why.
    pub async fn failed(&self) {
        self.failed.cancelled().await
    }

    fn fail(&self, why: String) {
        let mut fatal = self.fatal.lock();
        if fatal.is_none() {
            tracing::error!(reason = %why, "the controller node stopped: its Raft core failed");
            *fatal = Some(why);
            self.failed.cancel();
        }
    }

    fn holds_lease(&self) -> bool {
        self.quorum_acked_at
            .lock()
            .is_some_and(|at| at.elapsed() < self.lease)
    }

    /// (leader id, leader address) as the group's members are named in the config; `None` when
    /// this node would name itself without holding the lease, or another node it has not heard
    /// from within the lease. A follower keeps naming its leader until a successor is elected,
    /// seconds after the leader died or paused; brokers take the first node that names a leader
    /// and would be sent to a dead one. Past the lease the old leader no longer claims either.
    pub fn leader(&self) -> Option<(String, String)> {
        if self.failure().is_some() {
            return None;
        }
        let leader = self.raft.metrics().borrow().current_leader?;
        let vouched = if leader == self.config.read().self_node_id() {
            self.is_leader()
        } else {
            self.leader_heard_at
                .lock()
                .is_some_and(|at| at.elapsed() < self.lease)
        };
        if !vouched {
            return None;
        }
        self.member(leader)
    }

    /// While this node, started on an empty store, has not caught up with its group: what it
    /// knows of the group so far.
    pub(crate) fn rejoin_state(&self) -> Option<Rejoin> {
        *self.rejoining.lock()
    }

    /// The term this node's vote is in (0 on an empty store), as GROUP_PROBE reports it.
    pub(crate) fn current_term(&self) -> u64 {
        self.raft.metrics().borrow().current_term
    }

    /// The index of the last entry the state machine applied; `None` for an empty store.
    pub fn applied_index(&self) -> Option<u64> {
        self.raft.metrics().borrow().last_applied.map(|l| l.index)
    }

    /// AppendEntries from the leader, noting when a leader was last heard from.
    pub async fn append_entries(
        &self,
        rpc: openraft::raft::AppendEntriesRequest<crate::raft::TypeConfig>,
    ) -> Result<openraft::raft::AppendEntriesResponse<u64>, RaftError<u64>> {
        let answer = self.raft.append_entries(rpc).await;
        if answer
            .as_ref()
            .is_ok_and(|a| !matches!(a, openraft::raft::AppendEntriesResponse::HigherVote(_)))
        {
            *self.leader_heard_at.lock() = Some(Instant::now());
        }
        answer
    }

    pub fn raft_status(&self) -> RaftStatus {
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

    pub fn view(&self, max_groups: usize) -> ControllerView {
        let raft = self.raft_status();
        // The leader this node vouches for (its lease, or word from the leader within it), as
        // brokers are told: Raft's own view keeps naming a leader nobody has heard from.
        let leader = self.leader();
        // Before the config's lock is taken: naming members takes it too, and a second read
        // lock waits behind a queued writer.
        let members = self.members();
        let config = self.config.read();
        let mut groups = self.groups();
        let groups_total = groups.len();
        groups.truncate(max_groups);
        let c = &self.counters;
        let shown: std::collections::BTreeSet<&str> =
            groups.iter().map(|g| g.broker_name.as_str()).collect();
        let live: Vec<LiveView> = self
            .live_view()
            .into_iter()
            .filter(|l| shown.contains(l.broker_name.as_str()))
            .collect();
        ControllerView {
            members,
            quorum_contact_ms: self
                .quorum_contact()
                .map(|at| at.elapsed().as_millis() as u64),
            live,
            recent: self.recent.newest(max_groups),
            commits: c.commits.load(Ordering::Relaxed),
            group: config.group.clone(),
            self_id: config.self_id.clone(),
            address: config.self_peer().addr.clone(),
            role: raft.state,
            term: raft.term,
            leader_id: leader.as_ref().map(|(id, _)| id.clone()),
            leader_address: leader.map(|(_, addr)| addr),
            groups,
            groups_total,
            live_brokers: self.live_table().len(),
            elections_new_master: c.elections_new_master.load(Ordering::Relaxed),
            elections_kept_master: c.elections_kept_master.load(Ordering::Relaxed),
            elections_no_master: c.elections_no_master.load(Ordering::Relaxed),
            role_notifications: c.role_notifications.load(Ordering::Relaxed),
            heartbeats: c.heartbeats.load(Ordering::Relaxed),
        }
    }

    /// The group's members as this node's Raft core knows them, with its view of the leader;
    /// log lag and last answer are known on the leader only, which replicates to the others.
    fn members(&self) -> Vec<MemberView> {
        let leader = self.raft.metrics().borrow().current_leader;
        let answered = self.answered.lock().clone();
        let self_node = self.config.read().self_node_id();
        self.member_rows(leader)
            .into_iter()
            .map(|(id, member)| MemberView {
                node: id,
                this_node: id == self_node,
                last_answer_ms: (id != self_node)
                    .then(|| answered.get(&member.address))
                    .flatten()
                    .map(|at| at.elapsed().as_millis() as u64),
                member,
            })
            .collect()
    }

    /// When this node last had word from a working group: as leader, a quorum's
    /// acknowledgement; as follower, the leader's AppendEntries.
    fn quorum_contact(&self) -> Option<Instant> {
        if self.raft.metrics().borrow().state == ServerState::Leader {
            *self.quorum_acked_at.lock()
        } else {
            *self.leader_heard_at.lock()
        }
    }

    /// How long proposals took to commit, for the metrics.
    pub fn commit_seconds(&self) -> &Histogram {
        &self.commit_seconds
    }

    pub fn on_heartbeat(&self, key: BrokerKey, beat: crate::heartbeat::Heartbeat, via: Via) {
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        self.live_table()
            .on_heartbeat(key, beat, via, Instant::now());
    }

    /// Passes a heartbeat a broker sent to this follower on to the leader, so that a broker
    /// that reaches only some nodes still counts as alive where elections are decided.
    pub fn forward_heartbeat(&self, heartbeat: &RemotingCommand) {
        let Some(leader) = self.raft.metrics().borrow().current_leader else {
            return;
        };
        let self_id = self.config.read().self_node_id();
        let Some((_, addr)) = self.member(leader) else {
            return;
        };
        if leader == self_id {
            return;
        }
        let mut forwarded = RemotingCommand::request(codes::FORWARDED_HEARTBEAT).oneway();
        forwarded.ext_fields = heartbeat.ext_fields.clone();
        self.forwarder.send(leader, addr, forwarded);
    }

    /// The heartbeat table, once it has noted the time: the first look after this node was
    /// paused judges brokers as if the pause had not happened.
    fn live_table(&self) -> parking_lot::MutexGuard<'_, LiveTable> {
        let mut table = self.live.lock();
        if let Some(paused) = table.look(Instant::now()) {
            tracing::warn!(
                paused_ms = paused.as_millis() as u64,
                "this controller node was paused; brokers' silence during the pause is not counted"
            );
        }
        table
    }

    /// The brokers alive now, to judge liveness without holding the heartbeat table.
    pub fn active_brokers(&self) -> crate::heartbeat::Active {
        self.live_table().active(Instant::now())
    }

    pub fn live_view(&self) -> Vec<LiveView> {
        self.live_table().view(Instant::now())
    }

    pub fn groups(&self) -> Vec<GroupView> {
        self.applied.read().state.groups()
    }

    /// A connection closed: brokers that heartbeat on it are gone now, not in ten seconds.
    pub fn on_connection_closed(self: &Arc<Self>, connection: u64) {
        let gone = self
            .live_table()
            .on_connection_closed(connection, Instant::now());
        for key in gone {
            self.clone().on_broker_inactive(key);
        }
    }

    /// Proposes a command and waits until it is applied; the reply is the state machine's. A
    /// node without the lease refuses at once, and a proposal not committed within the deadline
    /// is answered as failed (it may still commit later, as with Java's timed-out requests).
    pub async fn write(&self, cmd: Command) -> Result<CommandReply, ConsensusError> {
        // Counted before the leadership check, so that a hand-over that begins after the check
        // still waits for this proposal (`members::transfer_leader`).
        self.writes_in_flight.fetch_add(1, Ordering::SeqCst);
        let _done = scopeguard(|| {
            self.writes_in_flight.fetch_sub(1, Ordering::SeqCst);
        });
        if !self.is_leader() {
            return Err(ConsensusError::NotLeader);
        }
        let began = Instant::now();
        let written = tokio::time::timeout(COMMIT_DEADLINE, self.raft.client_write(cmd)).await;
        if matches!(written, Ok(Ok(_))) {
            self.commit_seconds.observe(began.elapsed().as_secs_f64());
            self.counters.commits.fetch_add(1, Ordering::Relaxed);
        }
        match written {
            Err(_) => Err(ConsensusError::Failed(format!(
                "not committed within {} s: no quorum of controller nodes answered",
                COMMIT_DEADLINE.as_secs()
            ))),
            Ok(Ok(resp)) => Ok(resp.data),
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
    pub async fn read<T>(&self, f: impl FnOnce(&Applied) -> T) -> Result<T, ConsensusError> {
        let confirm = async {
            loop {
                if !self.is_leader() {
                    return Err(ConsensusError::NotLeader);
                }
                match self.raft.ensure_linearizable().await {
                    Ok(_) => return Ok(()),
                    Err(RaftError::APIError(
                        openraft::error::CheckIsLeaderError::ForwardToLeader(_),
                    )) => return Err(ConsensusError::NotLeader),
                    Err(RaftError::APIError(
                        openraft::error::CheckIsLeaderError::QuorumNotEnough(e),
                    )) => {
                        tracing::debug!(error = %e, "leadership not confirmed, trying again");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(ConsensusError::Failed(e.to_string())),
                }
            }
        };
        match tokio::time::timeout(COMMIT_DEADLINE, confirm).await {
            Err(_) => Err(ConsensusError::Failed(format!(
                "leadership not confirmed within {} s: no quorum of controller nodes answered",
                COMMIT_DEADLINE.as_secs()
            ))),
            Ok(Ok(())) => Ok(f(&self.applied.read())),
            Ok(Err(refusal)) => Err(refusal),
        }
    }

    /// The facts of a broker name's live members, fixed into an election command.
    pub fn live_of(&self, broker_name: &str) -> BTreeMap<i64, crate::replicated::LiveBroker> {
        self.live_table().live_of(broker_name, Instant::now())
    }

    pub fn alive_ids(&self, broker_name: &str) -> std::collections::BTreeSet<i64> {
        self.live_table().alive_ids(broker_name, Instant::now())
    }

    pub fn elect_unclean(&self) -> bool {
        self.config.read().elect_unclean_master
    }

    /// Counts an election's outcome, notes it with `cause` and, when a new master was chosen,
    /// tells the group.
    pub fn after_election(&self, broker_name: &str, cause: &str, reply: &CommandReply) {
        let (counter, outcome) = match reply.code {
            response::SUCCESS => (&self.counters.elections_new_master, "new master"),
            response::CONTROLLER_MASTER_STILL_EXIST => {
                (&self.counters.elections_kept_master, "master kept")
            }
            _ => (&self.counters.elections_no_master, "no master"),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let detail = match &reply.role_change {
            Some(c) if reply.code == response::SUCCESS => format!(
                "{outcome}: id {} at {}, epoch {} ({cause})",
                c.master_broker_id
                    .map_or("none".into(), |id| id.to_string()),
                c.master_address.as_deref().unwrap_or("-"),
                c.master_epoch
            ),
            _ => match &reply.remark {
                Some(remark) if !remark.is_empty() => format!("{outcome} ({cause}): {remark}"),
                _ => format!("{outcome} ({cause})"),
            },
        };
        self.recent.note("election", broker_name, detail);
        if reply.code == response::SUCCESS {
            if let Some(change) = &reply.role_change {
                self.announce(change);
            }
        }
    }

    /// Sends NOTIFY_BROKER_ROLE_CHANGED to the group's members this node hears from.
    fn announce(&self, change: &RoleChange) {
        if !self.config.read().notify_broker_role_changed || change.master_broker_id.is_none() {
            return;
        }
        let now = Instant::now();
        let targets: Vec<String> = {
            let live = self.live_table();
            change
                .members
                .iter()
                .filter(|(id, _)| {
                    live.is_active(&change.cluster_name, &change.broker_name, **id, now)
                })
                .map(|(_, addr)| addr.clone())
                .collect()
        };
        for addr in targets {
            self.counters
                .role_notifications
                .fetch_add(1, Ordering::Relaxed);
            self.notifier.notify(addr, change.clone());
        }
    }

    /// A broker went silent or its connection closed. Only the leader acts, and only when the
    /// broker was its group's master.
    fn on_broker_inactive(self: Arc<Self>, key: BrokerKey) {
        tracing::info!(
            cluster = %key.cluster_name,
            broker = %key.broker_name,
            id = key.broker_id,
            "broker inactive"
        );
        if !self.is_leader() {
            return;
        }
        let is_master = self
            .applied
            .read()
            .state
            .master_of(&key.broker_name)
            .is_some_and(|(id, _)| id == key.broker_id);
        if is_master {
            tokio::spawn(async move { self.trigger_election(&key.broker_name).await });
        }
    }

    /// Java's controller-triggered election, retried as `electMasterMaxRetryCount` says.
    async fn trigger_election(&self, broker_name: &str) {
        let retries = self.config.read().elect_master_max_retry_count;
        for attempt in 0..retries {
            let cmd = Command::ElectMaster {
                broker_name: broker_name.to_string(),
                broker_id: None,
                designate_elect: false,
                unclean: self.elect_unclean(),
                live: self.live_of(broker_name),
            };
            match self.write(cmd).await {
                Ok(reply) => {
                    self.after_election(broker_name, "its master went silent", &reply);
                    if reply.code == response::SUCCESS {
                        tracing::info!(broker = %broker_name, "elected a new master");
                        return;
                    }
                    tracing::warn!(
                        broker = %broker_name,
                        attempt = attempt + 1,
                        code = reply.code,
                        remark = reply.remark.unwrap_or_default(),
                        "election failed"
                    );
                }
                Err(ConsensusError::NotLeader) => return,
                Err(ConsensusError::Failed(e)) => {
                    tracing::warn!(broker = %broker_name, error = %e, "election not replicated");
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    fn settled_leader(&self) -> bool {
        self.is_leader()
            && self
                .leader_since
                .lock()
                .is_some_and(|t| t.elapsed() >= DEFAULT_TIMEOUT)
    }
}

/// What the status page and the metrics show of the node.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ControllerView {
    pub group: String,
    pub self_id: String,
    pub address: String,
    pub role: String,
    pub term: u64,
    pub leader_id: Option<String>,
    pub leader_address: Option<String>,
    /// Broker groups, by name, at most as many as asked for.
    pub groups: Vec<GroupView>,
    pub groups_total: usize,
    /// Brokers this node hears from.
    pub live_brokers: usize,
    pub elections_new_master: u64,
    pub elections_kept_master: u64,
    pub elections_no_master: u64,
    pub role_notifications: u64,
    /// Broker heartbeats received, directly or passed on by a follower.
    pub heartbeats: u64,
    pub members: Vec<MemberView>,
    /// Milliseconds since this node last had word from a working group (`None`: never).
    pub quorum_contact_ms: Option<u64>,
    /// The brokers of the groups shown that this node hears from.
    pub live: Vec<LiveView>,
    /// Elections and leadership changes, newest first.
    pub recent: Vec<Happening>,
    /// Proposals committed since the node started.
    pub commits: u64,
}

/// One member of the group.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MemberView {
    /// Its id in `controllerDLegerPeers`, address, role (`leader`, `follower`, `learner`) and
    /// the log entries it lacks (known on the leader), as LIST_MEMBERS answers them.
    #[serde(flatten)]
    pub member: rocketmq_wire::body::ControllerMember,
    /// Its Raft node id.
    pub node: u64,
    pub this_node: bool,
    /// Milliseconds since it last answered this node's Raft requests.
    pub last_answer_ms: Option<u64>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct RaftStatus {
    pub state: String,
    pub term: u64,
    pub leader: Option<u64>,
    pub last_applied: Option<u64>,
}

/// Notes when this node becomes leader or stops being one, and when a quorum last acknowledged
/// it. openraft reports its metrics at every turn of its loop, heartbeat rounds included.
async fn watch_role(controller: Arc<Controller>) {
    let mut metrics = controller.raft.metrics();
    loop {
        let (leader, since_ack, fatal, term) = {
            let m = metrics.borrow();
            let fatal = m.running_state.as_ref().err().map(ToString::to_string);
            (
                m.state == ServerState::Leader,
                m.millis_since_quorum_ack,
                fatal,
                m.current_term,
            )
        };
        if let Some(why) = fatal {
            controller.fail(why);
            return;
        }
        controller.follow_membership();
        {
            let acked =
                since_ack.and_then(|ms| Instant::now().checked_sub(Duration::from_millis(ms)));
            let mut at = controller.quorum_acked_at.lock();
            // Only ever later: a report is a look back from when it was made.
            *at = match (leader, *at, acked) {
                (false, ..) => None,
                (true, Some(old), Some(new)) => Some(old.max(new)),
                (true, old, new) => new.or(old),
            };
        }
        {
            let mut since = controller.leader_since.lock();
            match (leader, since.is_some()) {
                (true, false) => {
                    tracing::info!("this controller node is now the leader");
                    controller.recent.note(
                        "leadership",
                        controller.config.read().self_id.clone(),
                        format!("became the leader in term {term}"),
                    );
                    *since = Some(Instant::now());
                }
                (false, true) => {
                    tracing::info!("this controller node is no longer the leader");
                    controller.recent.note(
                        "leadership",
                        controller.config.read().self_id.clone(),
                        format!("no longer the leader (term {term})"),
                    );
                    *since = None;
                }
                _ => {}
            }
        }
        tokio::select! {
            _ = controller.shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() {
                if !controller.shutdown.is_cancelled() {
                    controller.fail("the Raft core ended".into());
                }
                return;
            },
        }
    }
}

/// Every node expires silent brokers from its own table; the leader reacts.
async fn scan_silent_brokers(controller: Arc<Controller>) {
    loop {
        // At least every second: each broker's own timeout decides when it is gone; scanning
        // more often than the configured interval only shortens how late that is noticed. It
        // also keeps the table looked at every second, which is how a pause of the node shows.
        let interval = controller
            .config
            .read()
            .scan_not_active_broker_interval_ms
            .min(1_000);
        tokio::select! {
            _ = controller.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(interval)) => {}
        }
        let gone = controller.live_table().expire(Instant::now());
        for key in gone {
            controller.clone().on_broker_inactive(key);
        }
    }
}

/// The leader looks for groups whose master is silent while another member is alive: this
/// catches a master that died while another node led, or whose election failed before.
async fn scan_inactive_masters(controller: Arc<Controller>) {
    loop {
        let interval = controller.config.read().scan_inactive_master_interval_ms;
        tokio::select! {
            _ = controller.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(interval)) => {}
        }
        if !controller.settled_leader() {
            continue;
        }
        let names = {
            let active = controller.active_brokers();
            let alive = |c: &str, n: &str, id: i64| active.contains(c, n, id);
            controller
                .applied
                .read()
                .state
                .groups_needing_reelection(&alive)
        };
        for name in names {
            controller.trigger_election(&name).await;
        }
    }
}

/// What a node that starts on an empty store does: it asks every other member whether it
/// belongs to a group that has worked (applied an entry). If one does, this node lost its store
/// (or is new to a running group): it forms nothing and stands for nothing until the leader has
/// refilled it up to what that member had applied, and meanwhile votes only for a candidate
/// whose log reaches that far (`handler::vote`). If every member
/// answers and none does, the group is new and every node proposes the same membership. While
/// a member cannot be asked and none that can has worked, it waits: the silent one may hold the
/// group's state, and two wiped stores must not form a new group without it.
async fn join_or_form(controller: Arc<Controller>) {
    let config = controller.config();
    let others: Vec<String> = config
        .peers
        .iter()
        .filter(|p| p.id != config.self_id)
        .map(|p| p.addr.clone())
        .collect();
    // The most any member has reported so far: members answer at different times.
    let mut known = GroupProbe::default();
    let mut waited = 0u32;
    let target = loop {
        // Added as a learner by the leader of a group whose members would not answer it (they
        // trust only their members' hosts): it joined. A learner neither votes nor stands.
        if controller.is_learner() {
            tracing::info!("this node was added to the group as a learner");
            let applied = known.applied.unwrap_or(0);
            *controller.rejoining.lock() = Some(Rejoin::CatchingUp { applied, term: 0 });
            break applied;
        }
        let probes = others.iter().map(|addr| probe(addr, controller.source));
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
            *controller.rejoining.lock() = Some(Rejoin::CatchingUp {
                applied,
                term: known.term,
            });
            break applied;
        }
        if worked.is_some() && controller.leader_heard_at.lock().is_some() {
            // A leader elected without this node reaches it: that leader holds every committed
            // entry, and its AppendEntries moved this node's vote into the leader's term.
            tracing::warn!(
                member_applied = worked,
                "this node's store is empty and a leader of the group reaches it: catching up"
            );
            let applied = worked.unwrap_or(0);
            *controller.rejoining.lock() = Some(Rejoin::CatchingUp { applied, term: 0 });
            break applied;
        }
        if everyone {
            let members: BTreeMap<u64, BasicNode> = config
                .peers
                .iter()
                .filter_map(|p| Some((config.node_id(&p.id)?, BasicNode::new(&p.addr))))
                .collect();
            // Every node proposes the same membership; whichever forms the group first wins
            // and the others' attempts are refused harmlessly.
            *controller.rejoining.lock() = None;
            if let Err(e) = controller.raft.initialize(members).await {
                tracing::debug!(error = %e, "group already formed");
            }
            controller.raft.runtime_config().elect(true);
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
            _ = controller.shutdown.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    };
    // Refilled once the state machine has applied what the members had.
    let mut metrics = controller.raft.metrics();
    loop {
        let applied = metrics.borrow().last_applied.map(|l| l.index);
        if applied.is_some_and(|a| a >= target) {
            break;
        }
        tokio::select! {
            _ = controller.shutdown.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
    *controller.rejoining.lock() = None;
    controller.raft.runtime_config().elect(true);
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

/// A member's answer to GROUP_PROBE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct GroupProbe {
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

/// A member's answer to GROUP_PROBE; `None` if it cannot be asked.
pub(crate) async fn probe(addr: &str, source: Option<std::net::IpAddr>) -> Option<GroupProbe> {
    let limit = Duration::from_secs(1);
    let client = Client::connect_from(addr, source, limit).await.ok()?;
    let answer = client
        .invoke(RemotingCommand::request(codes::GROUP_PROBE), limit)
        .await
        .ok()?;
    if answer.code != response::SUCCESS {
        return None;
    }
    serde_json::from_slice(answer.body.as_deref()?).ok()
}

/// The addresses a `host:port` resolves to; none if it does not.
pub(crate) async fn resolve(addr: &str) -> Vec<std::net::IpAddr> {
    match tokio::net::lookup_host(addr).await {
        Ok(found) => found.map(|a| a.ip()).collect(),
        Err(e) => {
            tracing::warn!(%addr, error = %e, "cannot resolve a controller peer");
            Vec::new()
        }
    }
}

async fn resolve_peers(config: &ControllerConfig) -> std::collections::HashSet<std::net::IpAddr> {
    let mut ips = std::collections::HashSet::new();
    for peer in &config.peers {
        ips.extend(resolve(&peer.addr).await);
    }
    ips
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

/// A connection id source for the heartbeat table.
pub fn next_connection_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
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
