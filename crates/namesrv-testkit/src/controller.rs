//! Controller mode: a controller node's config text, NameServers that each embed a controller
//! node (the layout of Java's `cluster-3n-namesrv-plugin`), and a broker that follows the
//! controller protocol as a Java 5.x broker in controller mode does (ids from the controller,
//! heartbeats to every node, elections, sync-state sets, registration with the NameServers under
//! its role).

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rocketmq_wire::body::SyncStateSet;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::headers::controller::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, ControllerHeartbeatHeader,
    ElectMasterRequestHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader,
};
use rocketmq_wire::headers::{RequestHeader, ResponseHeader};
use rocketmq_wire::RemotingCommand;

use crate::broker::{dv, Broker};
use crate::server::{Launch, Nodes};

/// Java's broker bounds its controller requests at 3 s.
const CALL_TIMEOUT: Duration = Duration::from_secs(3);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// A node answers 1005 from what it knows, at once: one that takes longer is stopped or cut
/// off, and waiting 3 s for it would hold up finding the leader the others name.
const METADATA_TIMEOUT: Duration = Duration::from_secs(1);

/// A free loopback port (free when asked; good enough for tests on one machine).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    // Below Linux's ephemeral range (32768-60999): a port from it can become the local port of
    // some outgoing connection (a test's client, a NameServer's link to its peers) before the
    // server that was given it binds it, and that server then fails to start.
    const FIRST: u32 = 20_000;
    const COUNT: u32 = 12_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Where this process starts in the range, fixed once: the counter then hands each caller of
    // the process its own port. Taken again at each call, two tests starting at once could both
    // be given a port that was free when each looked, and the second server to bind it fail.
    static START: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    let start = *START.get_or_init(|| {
        std::process::id().wrapping_mul(7919)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
    });
    for _ in 0..COUNT {
        let n = NEXT.fetch_add(1, Ordering::Relaxed).wrapping_add(start);
        let port = (FIRST + n % COUNT) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The keys that make a process one member of a controller group, as a properties file (or a
/// NameServer's, with `enableControllerInNamesrv=true` before it) gives them:
/// `controllerDLegerGroup`, `controllerDLegerPeers` (`n0-host:port;n1-host:port`),
/// `controllerDLegerSelfId` and `controllerStorePath`, one a line, then the extra lines as given.
///
/// ```
/// # use namesrv_testkit::ControllerProps;
/// let props = ControllerProps::new(["127.0.0.1:9878", "127.0.0.1:9879"], 1, "/tmp/store")
///     .group("g")
///     .extra("scanNotActiveBrokerInterval=500\n");
/// assert_eq!(
///     props.to_string(),
///     "controllerDLegerGroup=g\ncontrollerDLegerPeers=n0-127.0.0.1:9878;n1-127.0.0.1:9879\n\
///      controllerDLegerSelfId=n1\ncontrollerStorePath=/tmp/store\nscanNotActiveBrokerInterval=500\n"
/// );
/// ```
#[derive(Clone, Debug)]
pub struct ControllerProps {
    group: Option<String>,
    /// `(id, address)` in the order the peer list names them.
    peers: Vec<(usize, String)>,
    self_id: usize,
    store: PathBuf,
    extra: String,
}

impl ControllerProps {
    /// Member `n{self_index}` of a group whose members are `addrs`, `n0` first.
    pub fn new(
        addrs: impl IntoIterator<Item = impl fmt::Display>,
        self_index: usize,
        store: impl AsRef<Path>,
    ) -> Self {
        Self::with_ids(addrs.into_iter().enumerate(), self_index, store)
    }

    /// Member `n{self_id}` of a group whose members are `(id, address)` pairs: for a group
    /// whose ids have gaps, as members removed or not yet added leave them.
    pub fn with_ids(
        members: impl IntoIterator<Item = (usize, impl fmt::Display)>,
        self_id: usize,
        store: impl AsRef<Path>,
    ) -> Self {
        ControllerProps {
            group: None,
            peers: members
                .into_iter()
                .map(|(id, addr)| (id, addr.to_string()))
                .collect(),
            self_id,
            store: store.as_ref().to_path_buf(),
            extra: String::new(),
        }
    }

    /// Without it the key is left out, so that a test can run on the node's default group.
    pub fn group(mut self, name: &str) -> Self {
        self.group = Some(name.to_string());
        self
    }

    /// Lines written as given after the group's keys, so each must end in `\n`.
    pub fn extra(mut self, lines: &str) -> Self {
        self.extra.push_str(lines);
        self
    }
}

impl fmt::Display for ControllerProps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(group) = &self.group {
            writeln!(f, "controllerDLegerGroup={group}")?;
        }
        f.write_str("controllerDLegerPeers=")?;
        for (k, (id, addr)) in self.peers.iter().enumerate() {
            let separator = if k == 0 { "" } else { ";" };
            write!(f, "{separator}n{id}-{addr}")?;
        }
        writeln!(f)?;
        writeln!(f, "controllerDLegerSelfId=n{}", self.self_id)?;
        writeln!(f, "controllerStorePath={}", self.store.display())?;
        f.write_str(&self.extra)
    }
}

/// NameServers with embedded controller nodes, on fixed ports so that a restarted node comes
/// back where its peers and brokers expect it.
pub struct ControllerCluster {
    nodes: Nodes,
    /// Each node's controller address, in node order.
    pub controllers: Vec<String>,
    /// Each node's NameServer address, in node order.
    pub namesrvs: Vec<String>,
}

impl std::ops::Deref for ControllerCluster {
    type Target = Nodes;
    fn deref(&self) -> &Nodes {
        &self.nodes
    }
}

impl std::ops::DerefMut for ControllerCluster {
    fn deref_mut(&mut self) -> &mut Nodes {
        &mut self.nodes
    }
}

impl ControllerCluster {
    /// Starts `n` nodes; `extra` is appended to every node's config file.
    pub fn start(launch: Launch, n: usize, extra: &str) -> Self {
        let controllers: Vec<String> = (0..n)
            .map(|_| format!("127.0.0.1:{}", free_port()))
            .collect();
        let namesrv_ports: Vec<u16> = (0..n).map(|_| free_port()).collect();
        let mut nodes = Nodes::new(launch);
        for (i, port) in namesrv_ports.iter().enumerate() {
            nodes.add(|home| {
                let controller = ControllerProps::new(&controllers, i, home.join("controller"))
                    .group("test")
                    .extra(extra);
                format!("listenPort={port}\nenableControllerInNamesrv=true\n{controller}")
            });
        }
        nodes.start_all();
        ControllerCluster {
            nodes,
            namesrvs: namesrv_ports
                .iter()
                .map(|p| format!("127.0.0.1:{p}"))
                .collect(),
            controllers,
        }
    }

    /// The lines of node `i`'s log files that mention the controller, for failure reports.
    pub fn controller_log(&self, i: usize) -> String {
        self.log_lines(i, "controller")
    }

    /// `host:port;host:port` of the controller nodes, as brokers' `controllerAddr` lists them.
    pub fn controller_addr(&self) -> String {
        self.controllers.join(";")
    }

    /// The node that says it leads, once a majority agrees on one, within `limit`.
    pub async fn leader(&self, limit: Duration) -> Option<usize> {
        let deadline = tokio::time::Instant::now() + limit;
        while tokio::time::Instant::now() < deadline {
            for (i, addr) in self.controllers.iter().enumerate() {
                if !self.is_running(i) {
                    continue;
                }
                if let Some(resp) = request(
                    addr,
                    RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO),
                )
                .await
                {
                    if says_it_leads(&resp) {
                        return Some(i);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }
}

/// Whether a node's answer to CONTROLLER_GET_METADATA_INFO says it leads.
fn says_it_leads(metadata: &RemotingCommand) -> bool {
    GetMetaDataResponseHeader::from_command(metadata).is_ok_and(|h| h.is_leader)
}

/// One request on a fresh connection; `None` if the node cannot be reached or does not answer.
pub async fn request(addr: &str, cmd: RemotingCommand) -> Option<RemotingCommand> {
    let client = Client::connect_within(addr, CALL_TIMEOUT).await.ok()?;
    client.invoke(cmd, CALL_TIMEOUT).await.ok()
}

/// What CONTROLLER_GET_REPLICA_INFO says of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaInfo {
    pub master_id: Option<i64>,
    pub master_addr: Option<String>,
    pub master_epoch: i32,
    pub sync_state_set: BTreeSet<i64>,
    pub sync_state_set_epoch: i32,
}

/// A broker in controller mode, reduced to its dealings with the controller and the NameServers.
pub struct ControllerBroker {
    pub cluster: &'static str,
    pub name: &'static str,
    pub addr: String,
    /// Its controller-assigned id, once it has one (kept across restarts, as the broker's
    /// metadata file keeps it).
    pub id: Option<i64>,
    pub register_check_code: String,
    pub max_offset: i64,
    /// The newest master epoch it knows of, as its heartbeats report.
    pub epoch: i32,
    pub heartbeat_timeout_ms: u64,
    /// The address its connections to the controller nodes leave from (the route's choice when
    /// none): a broker of its own on a network a test cuts.
    source: Option<std::net::IpAddr>,
    /// The node found leading last time, asked first next time.
    leader: Option<usize>,
    links: Vec<Option<Client>>,
    namesrv_links: Vec<Option<Client>>,
}

impl ControllerBroker {
    pub fn new(cluster: &'static str, name: &'static str, addr: &str) -> Self {
        ControllerBroker {
            cluster,
            name,
            addr: addr.to_string(),
            id: None,
            register_check_code: format!("{addr};{}", rocketmq_wire::clock::now_ms()),
            max_offset: 0,
            epoch: 0,
            heartbeat_timeout_ms: 10_000,
            source: None,
            leader: None,
            links: Vec::new(),
            namesrv_links: Vec::new(),
        }
    }

    /// The node it found leading last, which its requests went to.
    pub fn known_leader(&self) -> Option<usize> {
        self.leader
    }

    /// The same broker, connecting to the controller nodes from `source`.
    pub fn speaking_from(mut self, source: std::net::IpAddr) -> Self {
        self.source = Some(source);
        self
    }

    /// Drops every connection, as a killed broker's sockets close.
    pub fn disconnect(&mut self) {
        self.links.clear();
        self.namesrv_links.clear();
    }

    async fn link(&mut self, controllers: &[String], i: usize) -> Option<Client> {
        if self.links.len() < controllers.len() {
            self.links.resize(controllers.len(), None);
        }
        if self.links[i].is_none() {
            let connect = Client::connect_from(&controllers[i], self.source, CALL_TIMEOUT);
            self.links[i] = connect.await.ok();
        }
        self.links[i].clone()
    }

    /// Connects to every node it has no connection to, all at once, each within a second: a
    /// node that cannot be reached does not hold up the others.
    async fn connect_all(&mut self, controllers: &[String]) {
        if self.links.len() < controllers.len() {
            self.links.resize(controllers.len(), None);
        }
        let mut dials = tokio::task::JoinSet::new();
        for (i, addr) in controllers.iter().enumerate() {
            if self.links[i].is_none() {
                let (addr, source) = (addr.clone(), self.source);
                dials.spawn(async move {
                    let dialled = Client::connect_from(&addr, source, CONNECT_TIMEOUT).await;
                    (i, dialled.ok())
                });
            }
        }
        while let Some(Ok((i, link))) = dials.join_next().await {
            self.links[i] = link;
        }
    }

    /// Sends `cmd` to node `i` over this broker's connection to it; a failure drops the link.
    pub async fn call(
        &mut self,
        controllers: &[String],
        i: usize,
        cmd: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let client = self.link(controllers, i).await?;
        match client.invoke(cmd, CALL_TIMEOUT).await {
            Ok(resp) => Some(resp),
            Err(_) => {
                // A node that does not answer is looked for again, not asked first next time.
                self.links[i] = None;
                if self.leader == Some(i) {
                    self.leader = None;
                }
                None
            }
        }
    }

    /// The node that leads, asked as a broker asks (1005): the one found last time while it
    /// still says it leads, else the leader the first node to answer names (every node asked
    /// at once, so that one that cannot answer does not hold the broker up).
    pub async fn find_leader(&mut self, controllers: &[String]) -> Option<usize> {
        let meta = || RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
        if let Some(i) = self.leader.take().filter(|i| *i < controllers.len()) {
            let resp = self.call(controllers, i, meta()).await;
            if resp.is_some_and(|r| says_it_leads(&r)) {
                self.leader = Some(i);
                return Some(i);
            }
        }
        self.connect_all(controllers).await;
        let mut asks = tokio::task::JoinSet::new();
        for (i, link) in self.links.iter().enumerate() {
            if let Some(client) = link.clone() {
                asks.spawn(async move { (i, client.invoke(meta(), METADATA_TIMEOUT).await) });
            }
        }
        while let Some(Ok((i, answer))) = asks.join_next().await {
            let Ok(answer) = answer else {
                self.links[i] = None;
                continue;
            };
            let named = GetMetaDataResponseHeader::from_command(&answer)
                .ok()
                .and_then(|h| h.controller_leader_address);
            if let Some(pos) = named.and_then(|l| controllers.iter().position(|c| c == l)) {
                self.leader = Some(pos);
                return Some(pos);
            }
        }
        None
    }

    /// 904 to every node it can reach, oneway.
    pub async fn heartbeat(&mut self, controllers: &[String]) {
        let Some(id) = self.id else { return };
        self.connect_all(controllers).await;
        for i in 0..controllers.len() {
            let Some(client) = self.links[i].clone() else {
                continue;
            };
            let cmd = ControllerHeartbeatHeader {
                cluster_name: self.cluster,
                broker_addr: &self.addr,
                broker_name: self.name,
                broker_id: id,
                epoch: Some(self.epoch),
                max_offset: Some(self.max_offset),
                confirm_offset: Some(self.max_offset),
                heartbeat_timeout_mills: Some(self.heartbeat_timeout_ms as i64),
                election_priority: Some(0),
            }
            .to_command();
            if client.send_oneway(cmd).await.is_err() {
                self.links[i] = None;
            }
        }
    }

    /// Gets an id (1012, 1013) unless it has one, then registers (1003), all on the leader.
    /// The answer of 1003.
    pub async fn register(&mut self, controllers: &[String]) -> Option<RemotingCommand> {
        let leader = self.find_leader(controllers).await?;
        if self.id.is_none() {
            let ask = GetNextBrokerIdRequestHeader {
                cluster_name: self.cluster,
                broker_name: self.name,
            };
            let next = self.call(controllers, leader, ask.to_command()).await?;
            let id = GetNextBrokerIdResponseHeader::from_command(&next)
                .ok()?
                .next_broker_id?;
            let apply = ApplyBrokerIdRequestHeader {
                cluster_name: self.cluster,
                broker_name: self.name,
                applied_broker_id: id,
                register_check_code: &self.register_check_code,
            }
            .to_command();
            let applied = self.call(controllers, leader, apply).await?;
            if applied.code != 0 {
                return Some(applied);
            }
            self.id = Some(id);
        }
        self.heartbeat(controllers).await;
        let register = RegisterBrokerToControllerRequestHeader {
            cluster_name: self.cluster,
            broker_name: self.name,
            broker_id: self.id?,
            broker_address: &self.addr,
            invoke_time: None,
        }
        .to_command();
        self.call(controllers, leader, register).await
    }

    /// 1002 for itself, as a broker that finds no master does.
    pub async fn elect_self(&mut self, controllers: &[String]) -> Option<RemotingCommand> {
        let leader = self.find_leader(controllers).await?;
        let cmd = ElectMasterRequestHeader {
            cluster_name: Some(self.cluster),
            broker_name: self.name,
            broker_id: Some(self.id?),
            designate_elect: false,
            invoke_time: Some(0),
        }
        .to_command();
        self.call(controllers, leader, cmd).await
    }

    /// 1004 on the leader.
    pub async fn replica_info(&mut self, controllers: &[String]) -> Option<ReplicaInfo> {
        let leader = self.find_leader(controllers).await?;
        let ask = GetReplicaInfoRequestHeader {
            broker_name: self.name,
        };
        let resp = self.call(controllers, leader, ask.to_command()).await?;
        if resp.code != 0 {
            return None;
        }
        let set = SyncStateSet::decode(resp.body.as_deref().unwrap_or_default()).ok()?;
        let header = GetReplicaInfoResponseHeader::from_command(&resp).ok()?;
        let info = ReplicaInfo {
            master_id: header.master_broker_id,
            master_addr: header.master_address.map(String::from),
            master_epoch: header.master_epoch.unwrap_or(0),
            sync_state_set: set.sync_state_set,
            sync_state_set_epoch: set.sync_state_set_epoch,
        };
        self.epoch = self.epoch.max(info.master_epoch);
        Some(info)
    }

    /// 1001 as the master sends it: the new set, under the master epoch and set epoch it knows.
    pub async fn alter_sync_state_set(
        &mut self,
        controllers: &[String],
        info: &ReplicaInfo,
        set: &BTreeSet<i64>,
    ) -> Option<RemotingCommand> {
        let leader = self.find_leader(controllers).await?;
        let body = SyncStateSet {
            sync_state_set: set.clone(),
            sync_state_set_epoch: info.sync_state_set_epoch,
        };
        let cmd = AlterSyncStateSetRequestHeader {
            broker_name: self.name,
            master_broker_id: self.id?,
            master_epoch: info.master_epoch,
            invoke_time: Some(0),
        }
        .to_command()
        .with_body(body.encode());
        self.call(controllers, leader, cmd).await
    }

    /// Registers with every NameServer under the role the controller gave it: id 0 as master,
    /// its own id as a slave, the master epoch as the data version's state version.
    pub async fn register_with_namesrvs(
        &mut self,
        namesrvs: &[String],
        master: bool,
        topics: &[&str],
    ) {
        let Some(id) = self.id else { return };
        if self.namesrv_links.len() < namesrvs.len() {
            self.namesrv_links.resize(namesrvs.len(), None);
        }
        let broker = Broker::new(
            self.cluster,
            self.name,
            if master { 0 } else { id },
            &self.addr,
        );
        let topics: Vec<(&str, i32)> = topics.iter().map(|t| (*t, 6)).collect();
        for (i, addr) in namesrvs.iter().enumerate() {
            if self.namesrv_links[i].is_none() {
                let connect = Client::connect_from(addr, self.source, CALL_TIMEOUT);
                self.namesrv_links[i] = connect.await.ok();
            }
            let Some(client) = self.namesrv_links[i].clone() else {
                continue;
            };
            let request =
                broker.register_request(&topics, dv(self.max_offset + 1, self.epoch as i64));
            if client.invoke(request, CALL_TIMEOUT).await.is_err() {
                self.namesrv_links[i] = None;
            }
        }
    }
}
