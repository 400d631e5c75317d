//! This NameServer's part in the group of NameServers that agree: with `namesrvPeers` set,
//! PUT_KV_CONFIG, DELETE_KV_CONFIG and the admin topic changes go through an openraft group of the
//! members (`rocketmq_raft`, the controller's engine and store) and are answered SUCCESS only once
//! a majority has them. Any member takes a write: a follower passes it to the leader. Reads stay
//! local: every member writes the state it applied into its own KV store (`kvConfig.json`, Java's
//! file), which the read handlers serve as before, and applies the admin changes to its routes.
//! Members are added and removed while the group runs (`change_members`).
//!
//! A member's own KV file is offered to the group before the group's state overwrites it
//! (`Seed`): keys the group lacks are taken, keys it has keep the group's value. So turning
//! peers on over existing NameServers loses no entry any of them held.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rocketmq_raft::group::{Served, DEADLINE};
use rocketmq_raft::{ConsensusError, Group, NodeId, Settings};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::members::Peers;
use super::replicated::{AdminChange, AdminOp, Command, KvAndAdmin, ADMIN_KEPT};
use super::Local;

/// A change id no two proposals share in practice: the clock's nanoseconds and a counter.
fn change_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos ^ NEXT.fetch_add(1, Ordering::Relaxed).rotate_left(48)
}

// The KV group's request codes, beside the route exchange's, in the wire crate.
use rocketmq_wire::codes::peer::keys;
use rocketmq_wire::codes::peer::namesrv as codes;

const RAFT_CODES: rocketmq_raft::Codes = rocketmq_raft::Codes {
    append_entries: codes::APPEND_ENTRIES,
    vote: codes::VOTE,
    install_snapshot: codes::INSTALL_SNAPSHOT,
    probe: codes::PROBE,
    take_leadership: codes::TAKE_LEADERSHIP,
};

/// Raft timing: as the controller's defaults (`controllerRaftHeartbeatIntervalMs`,
/// `controllerElectionTimeoutMs`), which suit nodes on one network.
const HEARTBEAT_MS: u64 = 250;
const ELECTION_TIMEOUT: Duration = Duration::from_millis(750);
const SNAPSHOT_EVERY: u64 = 5_000;
/// How long one attempt to pass a write on to the leader may take: a commit is milliseconds.
const FORWARD_ATTEMPT: Duration = Duration::from_millis(1500);
/// How long a NameServer that started waits for its group before it serves its own KV file
/// and says it is ready: its peers may all be down.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(10);

/// Why a KV write failed: answered SYSTEM_ERROR with this remark.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct WriteFailed(pub String);

pub struct PeerGroup {
    pub(super) group: Arc<Group<KvAndAdmin>>,
    pub(super) self_id: NodeId,
    stop: tokio_util::sync::CancellationToken,
    /// The connection to the leader writes are passed on over.
    to_leader: Mutex<Option<(String, Client)>>,
    /// The applied index the KV store was last made from: stores are made in order.
    synced: Mutex<Option<u64>>,
    /// The results of the latest admin changes applied to this member's routes, by change id.
    admin_applied: Mutex<BTreeMap<u64, i64>>,
    /// Once this node has caught up with its group, or given up waiting for it.
    caught_up: AtomicBool,
    started: Instant,
}

impl PeerGroup {
    pub async fn start(
        peers: Peers,
        store_path: &str,
        connect: rocketmq_raft::Connect,
    ) -> anyhow::Result<Arc<PeerGroup>> {
        let settings = Settings {
            name: "namesrv-kv".into(),
            members_are: "NameServers",
            self_id: peers.self_id,
            id_prefix: peers.prefix.clone(),
            members: peers.members.clone(),
            store_path: store_path.into(),
            heartbeat_ms: HEARTBEAT_MS,
            election_timeout: ELECTION_TIMEOUT,
            snapshot_every: SNAPSHOT_EVERY,
            codes: RAFT_CODES,
            connect,
        };
        let group = Group::start(settings).await?;
        Ok(Arc::new(PeerGroup {
            group,
            self_id: peers.self_id,
            stop: tokio_util::sync::CancellationToken::new(),
            to_leader: Mutex::new(None),
            synced: Mutex::new(None),
            admin_applied: Mutex::new(BTreeMap::new()),
            caught_up: AtomicBool::new(false),
            started: Instant::now(),
        }))
    }

    pub async fn shutdown(&self) {
        self.stop.cancel();
        self.group.shutdown().await;
    }

    /// The raft group itself: membership, addresses and leadership hand-over, as its own
    /// methods say.
    pub fn raft(&self) -> &Group<KvAndAdmin> {
        &self.group
    }

    /// The address of the leader this node vouches for, when another member leads: where a
    /// member change refused here goes.
    pub fn leader_address(&self) -> Option<String> {
        let leader = self.group.leader()?;
        (leader != self.self_id)
            .then(|| self.group.member_addr(leader))
            .flatten()
    }

    /// Whether this node has caught up with its group since it started (or given up waiting).
    pub fn caught_up(&self) -> bool {
        self.caught_up.load(Ordering::Acquire)
    }

    /// Why this node has not caught up yet.
    pub fn unready_reason(&self) -> Option<String> {
        if self.caught_up() {
            return None;
        }
        Some(match self.group.unready_reason() {
            Some(why) => format!("KV group: {why}"),
            None => "KV group: its own KV file not yet offered to the group".into(),
        })
    }

    /// Applies `cmd` through the group: on the leader, or passed on to it. Answers once the
    /// command is committed and this node's KV store holds it, or with why not within the
    /// deadline.
    pub async fn write(&self, local: &dyn Local, cmd: Command) -> Result<(), WriteFailed> {
        let deadline = Instant::now() + DEADLINE;
        let mut last_error;
        loop {
            let attempt = match self.group.leader() {
                Some(leader) if leader == self.self_id => {
                    let written = self.group.write_logged(cmd.clone()).await;
                    written.map(|((), index)| Some(index))
                }
                Some(leader) => self.forward(leader, &cmd, deadline).await,
                None => Err(ConsensusError::Failed("no leader known".into())),
            };
            match attempt {
                Ok(applied) => return self.await_applied(local, applied, deadline).await,
                Err(e) => last_error = e.to_string(),
            }
            if Instant::now() + Duration::from_millis(100) >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(WriteFailed(format!(
            "KV write not committed within {} s: no quorum of NameServers ({}) answered; last: {}",
            DEADLINE.as_secs(),
            self.group.others().len() + 1,
            last_error
        )))
    }

    /// Passes `cmd` to the leader; the index it took in the log once it is committed.
    async fn forward(
        &self,
        leader: NodeId,
        cmd: &Command,
        deadline: Instant,
    ) -> Result<Option<u64>, ConsensusError> {
        let failed = |why: String| ConsensusError::Failed(why);
        let addr = self
            .group
            .member_addr(leader)
            .ok_or_else(|| failed(format!("leader {leader} is not a member")))?;
        // One attempt never takes the whole deadline: a leader cut off since it was last heard
        // from holds its answer forever, and another is elected within a few election
        // timeouts; the retry goes to that one. A write applied twice does no harm.
        let left = deadline
            .saturating_duration_since(Instant::now())
            .min(FORWARD_ATTEMPT);
        let pooled = self
            .to_leader
            .lock()
            .as_ref()
            .filter(|(a, _)| *a == addr)
            .map(|(_, c)| c.clone());
        let client = match pooled {
            Some(c) => c,
            None => {
                let c = self
                    .group
                    .connect(&addr, left)
                    .await
                    .map_err(|e| failed(format!("cannot reach the leader {addr}: {e}")))?;
                *self.to_leader.lock() = Some((addr.clone(), c.clone()));
                c
            }
        };
        let body = serde_json::to_vec(cmd).map_err(|e| failed(e.to_string()))?;
        let request = RemotingCommand::request(codes::FORWARDED_WRITE).with_body(body);
        let answer = match client.invoke(request, left).await {
            Ok(a) => a,
            Err(e) => {
                *self.to_leader.lock() = None;
                return Err(failed(format!("the leader {addr} did not answer: {e}")));
            }
        };
        if answer.code != resp::SUCCESS {
            return Err(failed(answer.remark.unwrap_or_default()));
        }
        Ok(answer.ext_i64(keys::APPLIED).map(|a| a as u64))
    }

    /// A write another member passed on: applied if this node leads.
    pub async fn serve_forwarded(&self, r: &RemotingCommand) -> RemotingCommand {
        let answer = |code| RemotingCommand::response_to(r, code);
        let Some(cmd) = r
            .body
            .as_deref()
            .and_then(|b| serde_json::from_slice::<Command>(b).ok())
        else {
            return answer(resp::SYSTEM_ERROR).with_remark("malformed KV command");
        };
        match self.group.write_logged(cmd).await {
            Ok(((), index)) => answer(resp::SUCCESS).with_ext(keys::APPLIED, index),
            Err(e) => answer(resp::SYSTEM_ERROR).with_remark(e.to_string()),
        }
    }

    /// A Raft request from another member.
    pub async fn serve_raft(&self, r: &RemotingCommand) -> RemotingCommand {
        let answer = |code| RemotingCommand::response_to(r, code);
        match self.group.serve(r.code, r.body.as_deref()).await {
            Some(Served::Answer(body)) => answer(resp::SUCCESS).with_body(body),
            Some(Served::Refused(why)) => answer(resp::SYSTEM_ERROR).with_remark(why),
            Some(Served::Malformed) | None => {
                answer(resp::SYSTEM_ERROR).with_remark("malformed raft message")
            }
        }
    }

    /// Waits (within the deadline) until this node has applied `applied`, then makes its KV
    /// store from the group's state: what was just written is read back from this node. A
    /// write committed but not applied here by the deadline is not answered SUCCESS: a read
    /// from this node would not see it yet.
    async fn await_applied(
        &self,
        local: &dyn Local,
        applied: Option<u64>,
        deadline: Instant,
    ) -> Result<(), WriteFailed> {
        let held = self.group.wait_applied(applied, deadline).await;
        // A file write: not on a worker other connections wait for.
        if let Err(e) = rocketmq_wire::server::offload::now(|| self.sync(local)) {
            tracing::error!(error = %e, "cannot write the replicated KV config to the KV file");
            return Err(WriteFailed(format!(
                "KV write committed, but this NameServer cannot write its KV file: {e}"
            )));
        }
        if !held {
            return Err(WriteFailed(format!(
                "KV write committed by the group but not yet applied by this NameServer within \
                 {} s: it is not served here yet",
                DEADLINE.as_secs()
            )));
        }
        Ok(())
    }

    /// Proposes an admin change and waits until this member applied it; how many topics it
    /// touched here.
    pub async fn admin(
        &self,
        local: &dyn Local,
        op: AdminOp,
        by: String,
    ) -> Result<i64, WriteFailed> {
        let id = change_id();
        let change = AdminChange {
            id,
            at_ms: rocketmq_wire::clock::now_ms(),
            op,
            by: Some(by),
        };
        let began = Instant::now();
        self.write(local, Command::Admin(change)).await?;
        // Committed is not yet applied here when the leader's index came back unknown, or when
        // the node's own loop applies it first: the answer waits for this node's routes.
        let mut changes = self.group.changes();
        loop {
            if let Some(touched) = self.admin_applied.lock().get(&id).copied() {
                return Ok(touched);
            }
            let left = (began + DEADLINE).saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(WriteFailed(format!(
                    "admin change committed but not applied here within {} s",
                    DEADLINE.as_secs()
                )));
            }
            let _ = tokio::time::timeout(left.min(Duration::from_millis(50)), changes.next()).await;
            if let Err(e) = rocketmq_wire::server::offload::now(|| self.sync(local)) {
                tracing::error!(error = %e, "cannot write the replicated KV config to the KV file");
            }
        }
    }

    /// Makes the KV store the group's state as applied here, once this node's own file has
    /// been offered to the group, never an older state over a newer one; and applies the admin
    /// changes its routes lack to its routes ([`PeerGroup::apply_admin`]).
    fn sync(&self, local: &dyn Local) -> Result<(), crate::kv::KvError> {
        let mut synced = self.synced.lock();
        let (index, state) = {
            let applied = self.group.applied().read();
            let index = applied.last_applied.map(|l| l.index);
            // Looked at every heartbeat: nothing new is the common case, and costs no copy.
            if synced.is_some() && *synced >= index {
                return Ok(());
            }
            (index, applied.state.clone())
        };
        self.apply_admin(local, &state);
        if state.seeded.contains(&self.self_id) {
            local.kv().replace(state.table)?;
        }
        *synced = index;
        Ok(())
    }

    /// Applies to this member's routes the admin changes after the position they reflect, each
    /// once, in log order, moving the position with them under the same lock (so the route
    /// snapshot holds the two together). Changes committed before this member caught up with
    /// its group are applied late: only to groups whose topics are as restored, undated, so
    /// that whatever this member heard since (a broker registering here, a peer's word, which
    /// carries the change already) stands. Routes with no position (a start without a route
    /// snapshot) hold nothing such a change could act on until they come from brokers and
    /// peers, which carry the changes made: the position is taken where the log stands.
    fn apply_admin(&self, local: &dyn Local, state: &KvAndAdmin) {
        // Nearly every log entry applied is a KV write: no write lock on the routes for those.
        let position = local.routes().read(|r| r.admin_position());
        if position.is_some_and(|from| state.admin_seq <= from) {
            return;
        }
        let late = !self.caught_up();
        let mut admin = self.admin_applied.lock();
        local.routes().change(|r| {
            let Some(from) = r.admin_position() else {
                r.set_admin_position(state.admin_seq);
                return;
            };
            for (seq, change) in state.admin.iter().filter(|(seq, _)| *seq > from) {
                let by = change.by.clone();
                let touched = if late {
                    r.asked_by(by, |r| r.late(|r| change.op.apply_to(r)))
                } else {
                    r.asked_by(by, |r| change.op.apply_to(r))
                };
                admin.insert(change.id, touched);
                r.set_admin_position(*seq);
            }
        });
        while admin.len() > ADMIN_KEPT {
            admin.pop_first();
        }
    }

    /// Whether this node has a leader and has applied what that leader had applied when asked:
    /// a node back from a crash is ready only once it holds every write acknowledged before.
    async fn holds_what_the_leader_applied(&self) -> bool {
        if self.group.unready_reason().is_some() {
            return false;
        }
        let Some(leader) = self.group.leader() else {
            return false;
        };
        if leader == self.self_id {
            return true;
        }
        let Some(addr) = self.group.member_addr(leader) else {
            return false;
        };
        let probe = self.group.probe(&addr).await;
        probe.is_some_and(|p| self.group.applied_index() >= p.applied)
    }

    /// Offers this node's own KV file to the group once, keeps the KV store up with what this
    /// node applies, and notes when it has caught up.
    pub async fn follow(
        self: Arc<Self>,
        local: Arc<dyn Local>,
        stop: tokio_util::sync::CancellationToken,
    ) {
        let mut changes = self.group.changes();
        loop {
            let seeded = self
                .group
                .applied()
                .read()
                .state
                .seeded
                .contains(&self.self_id);
            if !seeded && self.group.leader().is_some() {
                let cmd = Command::Seed {
                    member: self.self_id,
                    table: local.kv().table(),
                };
                match self.write(local.as_ref(), cmd).await {
                    Ok(()) => tracing::info!("this NameServer's KV file was offered to its group"),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot offer the KV file to the group yet")
                    }
                }
            }
            let this = self.clone();
            let state = local.clone();
            let synced = tokio::task::spawn_blocking(move || this.sync(state.as_ref())).await;
            if let Ok(Err(e)) = synced {
                tracing::error!(error = %e, "cannot write the replicated KV config to the KV file");
            }
            if !self.caught_up() {
                let ready = seeded && self.holds_what_the_leader_applied().await;
                if ready || self.started.elapsed() >= CATCH_UP_LIMIT {
                    if !ready {
                        tracing::warn!(
                            "no KV group reached within {} s: serving this NameServer's own KV \
                             file until it is",
                            CATCH_UP_LIMIT.as_secs()
                        );
                    }
                    self.caught_up.store(true, Ordering::Release);
                }
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                more = changes.next() => if !more { return },
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }
}
