//! One controller node: its Raft member, its heartbeat table, its settings and the background
//! duties of a leader (electing a master when one goes silent, announcing role changes).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use tokio_util::sync::CancellationToken;

use crate::config::ControllerConfig;
use crate::forward::Forwarder;
use crate::heartbeat::{BrokerKey, LiveTable, LiveView, Via, DEFAULT_TIMEOUT};
use crate::raft::{codes, RAFT_CODES};
use crate::recent::{Happening, Recent};
use crate::replicated::{Command, CommandReply, ControllerState, GroupView, RoleChange};
use rocketmq_raft::peer_auth::{PeerSecret, PeerSessions};
use rocketmq_raft::Connect;
pub use rocketmq_raft::{ConsensusError, Group, Settings};
use rocketmq_wire::server::tls::{Tls, TlsSettings};
use rocketmq_wire::RemotingCommand;

pub use crate::replicated::code as response;

/// How long a leader counts a group's master it has never heard as alive, from when it began to
/// lead. Brokers find a group that moved late: a JVM keeps what a name resolved to for 30 s
/// (`networkaddress.cache.ttl`) and a failed lookup for 10 s (the negative cache), so after
/// every node restarted at new addresses (a StatefulSet's pods deleted together) a live master
/// can go unheard by every node for that long. A master heard once is judged by its heartbeats
/// as always; only one that died while the whole group was down is failed over this late.
pub const UNHEARD_MASTER_GRACE: Duration = Duration::from_secs(40);

/// Raft timing, by default (`controllerRaftHeartbeatIntervalMs`, `controllerElectionTimeoutMs`).
/// openraft 0.9 makes a follower that knows a leader wait the longest election timeout (its view
/// of the leader's lease) plus its own random one, 1 + 0.75..1 s here (and up to a 375 ms tick),
/// before it stands: a leader that dies or is cut off is replaced in about 2 s, so that a broker
/// whose request to the old leader timed out (3 s in Java's broker) finds a new one waiting (the
/// fault suite's pause and partition schedules measure it). openraft bounds each AppendEntries
/// (heartbeats included) by the heartbeat interval, and that round trip includes the follower's
/// fsync: nodes farther apart raise both settings (`tests/slow_links.rs` runs 150 ms apart).
///
/// The shortest election timeout is also how long a leader goes on calling itself leader after
/// a quorum last acknowledged it (its lease, `rocketmq_raft::group`).
fn group_settings(config: &ControllerConfig, connect: Connect) -> Settings {
    Settings {
        name: config.group.to_string(),
        members_are: "controller nodes",
        self_id: config.members.self_node(),
        id_prefix: config.members.prefix().to_string(),
        members: config
            .members
            .by_node()
            .map(|(id, addr)| (id, addr.to_string()))
            .collect(),
        store_path: config.store_path.clone(),
        heartbeat_ms: config.raft_heartbeat_interval_ms,
        election_timeout: Duration::from_millis(config.election_timeout_ms),
        snapshot_every: config.snapshot_every_entries,
        codes: RAFT_CODES,
        connect,
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
}

pub struct Controller {
    pub(crate) config: RwLock<ControllerConfig>,
    /// The node's part in the controller group: the replicated state, the lease, the deadlines.
    group: Arc<ControllerGroup>,
    live: Mutex<LiveTable>,
    counters: Counters,
    /// With `controllerPeerSecretPath`: the sealed links other nodes opened to this one.
    pub(crate) peer_sessions: Option<PeerSessions>,
    /// Passes heartbeats brokers send this follower on to the leader.
    forwarder: Forwarder,
    /// The port's TLS (`tls.server.*`, as the NameServer's).
    pub(crate) tls: Arc<Tls>,
    /// Elections and leadership changes, for the status page.
    recent: Recent,
    shutdown: CancellationToken,
}

pub type ControllerGroup = Group<ControllerState>;

/// A remote config update that names a key it may not change.
#[derive(Debug, thiserror::Error)]
#[error("{0} cannot be updated remotely")]
pub struct BlacklistedKey(pub String);

impl Controller {
    /// Opens the node's store and joins (or, the first time, forms) the group.
    pub async fn start(config: ControllerConfig) -> anyhow::Result<Arc<Controller>> {
        let peer_secret = match &config.peer_secret_path {
            Some(path) => Some(PeerSecret::load(path).map_err(anyhow::Error::msg)?),
            None => None,
        };
        let tls = Arc::new(Tls::new(TlsSettings::from_properties(|k| {
            config.extra(k).map(String::from)
        })?)?);
        // Links to the other nodes: over TLS when this port takes only TLS (theirs do too),
        // sealed with the group's secret when it has one.
        let connect = rocketmq_raft::connector(&tls)?;
        let connect = match &peer_secret {
            Some(secret) => rocketmq_raft::peer_auth::sealed(connect, secret.clone()),
            None => connect,
        };
        let group = Group::start(group_settings(&config, connect.clone())).await?;
        let shutdown = CancellationToken::new();
        tls.clone().spawn_reloader(shutdown.clone());
        let controller = Arc::new(Controller {
            forwarder: Forwarder::start(group.source(), connect, shutdown.clone()),
            tls,
            peer_sessions: peer_secret.map(PeerSessions::new),
            config: RwLock::new(config),
            group,
            live: Mutex::new(LiveTable::default()),
            counters: Counters::default(),
            recent: Recent::default(),
            shutdown,
        });
        tokio::spawn(watch_role(controller.clone()));
        tokio::spawn(scan_silent_brokers(controller.clone()));
        tokio::spawn(scan_inactive_masters(controller.clone()));
        Ok(controller)
    }

    /// The node is on its way out: from now on the connections it closes, and the silence of
    /// brokers it no longer listens to, are its own going, not the brokers'. Without this a
    /// leader stopped for a rolling restart fails over every master whose connection it closes.
    pub fn leave(&self) {
        self.shutdown.cancel();
    }

    pub async fn shutdown(&self) {
        self.leave();
        self.group.shutdown().await;
    }

    pub fn group(&self) -> &Arc<ControllerGroup> {
        &self.group
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

    /// (leader id, leader address) as the group's members are named in the config, for the
    /// leader this node vouches for (`Group::leader`).
    pub fn leader(&self) -> Option<(String, String)> {
        self.member(self.group.leader()?)
    }

    pub fn view(&self, max_groups: usize) -> ControllerView {
        let raft = self.group.status();
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
                .group
                .quorum_contact()
                .map(|at| at.elapsed().as_millis() as u64),
            live,
            recent: self.recent.newest(max_groups),
            commits: self.group.commits(),
            group: config.group.clone(),
            self_id: config.members.self_id().to_string(),
            address: config.members.self_member().addr.clone(),
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
        let leader = self.group.raft_leader();
        self.group
            .members(leader)
            .into_iter()
            .map(|m| MemberView {
                node: m.node,
                this_node: m.this_node,
                last_answer_ms: m.last_answer_ms,
                member: self.group.member_row(&m),
            })
            .collect()
    }

    pub fn on_heartbeat(&self, key: BrokerKey, beat: crate::heartbeat::Heartbeat, via: Via) {
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        self.live_table()
            .on_heartbeat(key, beat, via, Instant::now());
    }

    /// Passes a heartbeat a broker sent to this follower on to the leader, so that a broker
    /// that reaches only some nodes still counts as alive where elections are decided.
    pub fn forward_heartbeat(&self, heartbeat: &RemotingCommand) {
        let Some(leader) = self.group.raft_leader() else {
            return;
        };
        let self_id = self.config.read().members.self_node();
        let Some((_, addr)) = self.member(leader) else {
            return;
        };
        if leader == self_id {
            return;
        }
        // Sent oneway, or as a request now and then to prove the link alive: the forwarder picks.
        let mut forwarded = RemotingCommand::request(codes::FORWARDED_HEARTBEAT);
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
        self.group.applied().read().state.groups()
    }

    /// A connection closed. A broker that heartbeats on it is gone now, not in ten seconds, once
    /// nothing accepts connections at its address (its process died). One that still listens
    /// closed only this connection (Java's client closes a connection whenever a request times
    /// out, as when the broker's own resolver stalled its event loop): electing a new master
    /// would stop its sends for nothing, so it stays until its own timeout or its next
    /// heartbeat.
    pub fn on_connection_closed(self: &Arc<Self>, connection: u64) {
        if let Some(sessions) = &self.peer_sessions {
            sessions.closed(connection);
        }
        if self.shutdown.is_cancelled() {
            return;
        }
        // Not looped over under the table's lock, which the tasks take.
        let heard = self.live_table().heard_on(connection);
        for (key, addr) in heard {
            let node = self.clone();
            tokio::spawn(async move {
                if crate::heartbeat::listens(&addr).await {
                    tracing::info!(
                        cluster = %key.cluster_name,
                        broker = %key.broker_name,
                        id = key.broker_id,
                        %addr,
                        "a broker closed its connection but still listens: alive until its own timeout"
                    );
                    return;
                }
                if node
                    .live_table()
                    .gone_with(&key, connection, Instant::now())
                {
                    node.on_broker_inactive(key);
                }
            });
        }
    }

    /// The live members of a broker group, as elections and registrations weigh them. A leader
    /// that has led for less than [`UNHEARD_MASTER_GRACE`] may not have heard every broker yet:
    /// when the whole group restarted (a StatefulSet's pods deleted at once, back at new
    /// addresses), a master that is only late would lose to the member heard first, and clients
    /// would send to a slave until their next route update. Until then a master this node has
    /// never heard counts as alive.
    pub fn live_of(&self, broker_name: &str) -> BTreeMap<i64, crate::replicated::LiveBroker> {
        let mut live = self.live_table().live_of(broker_name, Instant::now());
        if let Some((master, epoch)) = self.unheard_master(broker_name) {
            live.entry(master).or_insert(crate::replicated::LiveBroker {
                broker_id: master,
                epoch,
                max_offset: 0,
                election_priority: 0,
            });
        }
        live
    }

    pub fn alive_ids(&self, broker_name: &str) -> std::collections::BTreeSet<i64> {
        self.live_of(broker_name).into_keys().collect()
    }

    /// The group's master, while this node leads but has not led for [`UNHEARD_MASTER_GRACE`]
    /// and has never heard that master (see `live_of`).
    fn unheard_master(&self, broker_name: &str) -> Option<(i64, i32)> {
        if !self.keeps_unheard_masters() {
            return None;
        }
        let (master, epoch) = self.group.applied().read().state.master_of(broker_name)?;
        (!self.live_table().ever_heard(broker_name, master)).then_some((master, epoch))
    }

    /// Every group's master that counts as alive though this node has never heard it (see
    /// `live_of`), by broker name.
    fn unheard_masters(&self) -> Vec<(String, i64)> {
        if !self.keeps_unheard_masters() {
            return Vec::new();
        }
        let masters = self.group.applied().read().state.masters();
        let live = self.live_table();
        masters
            .into_iter()
            .filter(|(name, id)| !live.ever_heard(name, *id))
            .collect()
    }

    fn keeps_unheard_masters(&self) -> bool {
        self.group.is_leader()
            && self
                .group
                .leading_for()
                .is_some_and(|t| t < UNHEARD_MASTER_GRACE)
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
            crate::notify::notify(addr, change.clone());
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
        if !self.group.is_leader() || self.shutdown.is_cancelled() {
            return;
        }
        let is_master = self
            .group
            .applied()
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
            match self.group.write(cmd).await {
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
        self.group.is_leader()
            && self
                .group
                .leading_for()
                .is_some_and(|t| t >= DEFAULT_TIMEOUT)
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
    pub member: rocketmq_wire::body::GroupMember,
    /// Its Raft node id.
    pub node: u64,
    pub this_node: bool,
    /// Milliseconds since it last answered this node's Raft requests.
    pub last_answer_ms: Option<u64>,
}

/// Notes when this node becomes leader or stops being one, for the status page (the group
/// follows its membership itself). openraft reports its metrics at every turn of its loop.
async fn watch_role(controller: Arc<Controller>) {
    let mut changes = controller.group.changes();
    let mut leading = false;
    loop {
        let (leader, term) = (
            controller.group.raft_leads(),
            controller.group.current_term(),
        );
        if leader != leading {
            leading = leader;
            let (said, note) = if leader {
                (
                    "this controller node is now the leader",
                    format!("became the leader in term {term}"),
                )
            } else {
                (
                    "this controller node is no longer the leader",
                    format!("no longer the leader (term {term})"),
                )
            };
            tracing::info!("{said}");
            let self_id = controller.config.read().members.self_id().to_string();
            controller.recent.note("leadership", self_id, note);
        }
        tokio::select! {
            _ = controller.shutdown.cancelled() => return,
            more = changes.next() => if !more { return },
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
        let unheard = controller.unheard_masters();
        let names = {
            let active = controller.active_brokers();
            let alive = |c: &str, n: &str, id: i64| {
                active.contains(c, n, id) || unheard.iter().any(|(un, uid)| un == n && *uid == id)
            };
            controller
                .group
                .applied()
                .read()
                .state
                .groups_needing_reelection(&alive)
        };
        for name in names {
            controller.trigger_election(&name).await;
        }
    }
}

/// A connection id source for the heartbeat table.
pub fn next_connection_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
