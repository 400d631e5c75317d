//! Brokers that follow the controller protocol as Java's `ReplicasManager` does, compressed in
//! time: find the leader (1005 to every node), take an id (1012, 1013), register (1003),
//! heartbeat every node (904), read the group (1004), elect when there is no master (1002), and
//! as master grow and shrink the sync-state set (1001). Each broker speaks from an address of its
//! own, so that the network can cut it off from some nodes only. Every answer goes to the record.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rocketmq_wire::client::{Client, ClientError};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::history::{History, Op, Seen};

pub const GROUPS: usize = 3;
pub const MEMBERS: usize = 3;
const CLUSTER: &str = "chaos";
const TICK: Duration = Duration::from_millis(250);
/// Shorter than Java's 10 s so that schedules see brokers expire and masters change.
const HEARTBEAT_TIMEOUT_MS: u64 = 4_000;
const ASK: Duration = Duration::from_secs(3);

#[derive(Clone, Debug, Default)]
struct View {
    master: Option<i64>,
    master_epoch: i64,
    set: BTreeSet<i64>,
    set_epoch: i64,
}

pub struct Broker {
    pub group: String,
    /// Its place in the fleet, which is also the index of its address on the bridge.
    pub index: usize,
    ip: IpAddr,
    addr: String,
    check_code: String,
    up: AtomicBool,
    id: Mutex<Option<i64>>,
    view: Mutex<View>,
}

impl Broker {
    pub fn up(&self) -> bool {
        self.up.load(Ordering::SeqCst)
    }

    /// Stops the broker (its connections close) or starts it again with the id it had.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    pub fn id(&self) -> Option<i64> {
        *self.id.lock().unwrap()
    }

    /// Whether the broker last read itself as its group's master.
    pub fn is_master(&self) -> bool {
        let id = self.id();
        id.is_some() && self.view.lock().unwrap().master == id
    }
}

pub struct Fleet {
    pub brokers: Arc<Vec<Arc<Broker>>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// `ips[k]` is broker `k`'s own address; `nodes` the controller nodes' addresses.
    pub fn start(ips: Vec<IpAddr>, nodes: Vec<String>, history: Arc<History>, seed: u64) -> Fleet {
        assert_eq!(ips.len(), GROUPS * MEMBERS);
        let brokers: Arc<Vec<Arc<Broker>>> = Arc::new(
            ips.iter()
                .enumerate()
                .map(|(k, ip)| {
                    let addr = format!("{ip}:10911");
                    Arc::new(Broker {
                        group: format!("g{}", k / MEMBERS),
                        index: k,
                        ip: *ip,
                        check_code: format!("{addr};{}", 1_700_000_000_000u64 + k as u64),
                        addr,
                        up: AtomicBool::new(true),
                        id: Mutex::new(None),
                        view: Mutex::new(View::default()),
                    })
                })
                .collect(),
        );
        let stop = CancellationToken::new();
        let tasks = brokers
            .iter()
            .map(|b| {
                let conns: Conns = Arc::new(Mutex::new(vec![None; nodes.len()]));
                tokio::spawn(heartbeats(
                    b.clone(),
                    nodes.clone(),
                    conns.clone(),
                    stop.clone(),
                ));
                let life = Life {
                    me: b.clone(),
                    fleet: brokers.clone(),
                    conns,
                    history: history.clone(),
                    rng: fastrand::Rng::with_seed(seed ^ (b.index as u64) << 32),
                    registered: false,
                };
                tokio::spawn(life.run(stop.clone()))
            })
            .collect();
        Fleet {
            brokers,
            stop,
            tasks,
        }
    }

    /// The broker that reads itself as `group`'s master, if one does.
    pub fn master_of(&self, group: &str) -> Option<Arc<Broker>> {
        self.brokers
            .iter()
            .find(|b| b.group == group && b.up() && b.is_master())
            .cloned()
    }

    pub async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

pub fn group_names() -> Vec<String> {
    (0..GROUPS).map(|g| format!("g{g}")).collect()
}

type Conns = Arc<Mutex<Vec<Option<Client>>>>;

struct Life {
    me: Arc<Broker>,
    fleet: Arc<Vec<Arc<Broker>>>,
    /// One connection per node, shared with the heartbeat task as a broker's channel is.
    conns: Conns,
    history: Arc<History>,
    rng: fastrand::Rng,
    registered: bool,
}

/// Ids in a JSON list, written as numbers or as quoted numbers.
fn ids(v: Option<&Value>) -> BTreeSet<i64> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|id| id.as_i64().or_else(|| id.as_str()?.parse().ok()))
        .collect()
}

fn body(answer: &RemotingCommand) -> Value {
    answer
        .body
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null)
}

fn num(answer: &RemotingCommand, key: &str) -> Option<i64> {
    answer.ext(key)?.parse().ok()
}

impl Life {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(TICK) => {}
            }
            if !self.me.up() {
                self.registered = false;
                continue;
            }
            let Some(leader) = self.find_leader().await else {
                continue;
            };
            let Some(id) = self.me.id() else {
                self.take_id(leader).await;
                continue;
            };
            if !self.registered {
                self.register(leader, id).await;
                continue;
            }
            self.read(leader).await;
            let view = self.me.view.lock().unwrap().clone();
            match view.master {
                None => self.elect(leader, id).await,
                Some(master) if master == id => self.alter(leader, id, &view).await,
                Some(_) => {}
            }
        }
    }

    async fn ask(
        &self,
        node: usize,
        cmd: RemotingCommand,
        limit: Duration,
    ) -> Option<RemotingCommand> {
        let client = self.conns.lock().unwrap()[node].clone()?;
        let code = cmd.code;
        let answer = match client.invoke(cmd, limit).await {
            Ok(answer) => Some(answer),
            Err(ClientError::Closed) => {
                self.conns.lock().unwrap()[node] = None;
                None
            }
            Err(_) => None,
        };
        if verbose() && answer.as_ref().is_none_or(|a| a.code != response::SUCCESS) {
            eprintln!(
                "{} {}#{}: {code} to n{node}: {:?}",
                self.me.group,
                self.me.index,
                self.me.id().unwrap_or(0),
                answer.as_ref().map(|a| (a.code, a.remark.clone()))
            );
        }
        answer
    }

    /// The node that says it leads, asked of every node at once.
    async fn find_leader(&self) -> Option<usize> {
        let nodes = self.conns.lock().unwrap().len();
        let asks = (0..nodes).map(|i| async move {
            let meta = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
            let answer = self.ask(i, meta, Duration::from_millis(800)).await?;
            (answer.ext("isLeader") == Some("true")).then_some(i)
        });
        futures::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .next()
    }

    async fn take_id(&mut self, leader: usize) {
        let next = RemotingCommand::request(request::CONTROLLER_GET_NEXT_BROKER_ID)
            .with_ext("clusterName", CLUSTER)
            .with_ext("brokerName", &self.me.group);
        let Some(answer) = self.ask(leader, next, ASK).await else {
            return;
        };
        let Some(id) = num(&answer, "nextBrokerId").filter(|_| answer.code == response::SUCCESS)
        else {
            return;
        };
        let apply = RemotingCommand::request(request::CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", CLUSTER)
            .with_ext("brokerName", &self.me.group)
            .with_ext("appliedBrokerId", id)
            .with_ext("registerCheckCode", &self.me.check_code);
        if let Some(answer) = self.ask(leader, apply, ASK).await {
            if answer.code == response::SUCCESS {
                self.history
                    .granted(&self.me.group, id, &self.me.check_code);
                *self.me.id.lock().unwrap() = Some(id);
            }
        }
    }

    async fn register(&mut self, leader: usize, id: i64) {
        let register = RemotingCommand::request(request::CONTROLLER_REGISTER_BROKER)
            .with_ext("clusterName", CLUSTER)
            .with_ext("brokerName", &self.me.group)
            .with_ext("brokerId", id)
            .with_ext("brokerAddress", &self.me.addr)
            .with_ext("invokeTime", now_ms());
        if let Some(answer) = self.ask(leader, register, ASK).await {
            self.registered = answer.code == response::SUCCESS;
        }
    }

    fn record(&self, op: Op, node: usize, start: Instant, seen: View) {
        self.history.saw(Seen {
            group: self.me.group.clone(),
            op,
            node,
            start,
            end: Instant::now(),
            master: seen.master,
            master_epoch: seen.master_epoch,
            set: seen.set,
            set_epoch: seen.set_epoch,
        });
    }

    async fn read(&mut self, leader: usize) {
        let read = RemotingCommand::request(request::CONTROLLER_GET_REPLICA_INFO)
            .with_ext("brokerName", &self.me.group);
        let start = Instant::now();
        let Some(answer) = self.ask(leader, read, ASK).await else {
            return;
        };
        if answer.code != response::SUCCESS {
            return;
        }
        let set = body(&answer);
        let (Some(master_epoch), Some(set_epoch)) = (
            num(&answer, "masterEpoch"),
            set["syncStateSetEpoch"].as_i64(),
        ) else {
            return;
        };
        let seen = View {
            master: num(&answer, "masterBrokerId").filter(|id| *id > 0),
            master_epoch,
            set: ids(set.get("syncStateSet")),
            set_epoch,
        };
        *self.me.view.lock().unwrap() = seen.clone();
        self.record(Op::Read, leader, start, seen);
    }

    async fn elect(&mut self, leader: usize, id: i64) {
        let elect = RemotingCommand::request(request::CONTROLLER_ELECT_MASTER)
            .with_ext("clusterName", CLUSTER)
            .with_ext("brokerName", &self.me.group)
            .with_ext("brokerId", id)
            .with_ext("designateElect", false)
            .with_ext("invokeTime", now_ms());
        let start = Instant::now();
        let Some(answer) = self.ask(leader, elect, ASK).await else {
            return;
        };
        if answer.code != response::SUCCESS {
            return;
        }
        let (Some(master_epoch), Some(set_epoch)) = (
            num(&answer, "masterEpoch"),
            num(&answer, "syncStateSetEpoch"),
        ) else {
            return;
        };
        let seen = View {
            master: num(&answer, "masterBrokerId").filter(|id| *id > 0),
            master_epoch,
            set: ids(body(&answer).get("syncStateSet")),
            set_epoch,
        };
        self.record(Op::Elect, leader, start, seen);
    }

    /// As master: shrink the set to itself, or grow it by one live member.
    async fn alter(&mut self, leader: usize, id: i64, view: &View) {
        let others: Vec<i64> = self
            .fleet
            .iter()
            .filter(|b| b.group == self.me.group && b.index != self.me.index && b.up())
            .filter_map(|b| b.id())
            .collect();
        if others.is_empty() {
            return;
        }
        let mut set = BTreeSet::from([id]);
        if view.set.len() == 1 {
            set.insert(others[self.rng.usize(..others.len())]);
        }
        let wanted = serde_json::json!({"syncStateSet": set, "syncStateSetEpoch": view.set_epoch});
        let alter = RemotingCommand::request(request::CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_ext("brokerName", &self.me.group)
            .with_ext("masterBrokerId", id)
            .with_ext("masterEpoch", view.master_epoch)
            .with_ext("invokeTime", now_ms())
            .with_body(wanted.to_string().into_bytes());
        let start = Instant::now();
        let Some(answer) = self.ask(leader, alter, ASK).await else {
            return;
        };
        if answer.code != response::SUCCESS {
            return;
        }
        let Some(set_epoch) = num(&answer, "newSyncStateSetEpoch") else {
            return;
        };
        let seen = View {
            master: Some(id),
            master_epoch: view.master_epoch,
            set: ids(body(&answer).get("syncStateSet")),
            set_epoch,
        };
        *self.me.view.lock().unwrap() = seen.clone();
        self.record(Op::Alter, leader, start, seen);
        self.history.altered(&self.me.group, Instant::now());
    }
}

/// Every 500 ms while the broker is up: connect to the nodes it lacks a connection to, and
/// heartbeat each, as the broker's own scheduled task does, whatever its main loop waits on.
/// A stopped broker's connections close, as a killed process's do.
async fn heartbeats(me: Arc<Broker>, nodes: Vec<String>, conns: Conns, stop: CancellationToken) {
    let mut offset = 0i64;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if !me.up() {
            conns.lock().unwrap().iter_mut().for_each(|c| *c = None);
            continue;
        }
        let missing: Vec<usize> = {
            let held = conns.lock().unwrap();
            (0..nodes.len()).filter(|i| held[*i].is_none()).collect()
        };
        let ip = me.ip;
        let dials = missing.iter().map(|i| {
            let addr = nodes[*i].clone();
            async move {
                Client::connect_from(&addr, Some(ip), Duration::from_millis(500))
                    .await
                    .ok()
            }
        });
        let made = futures::future::join_all(dials).await;
        {
            let mut held = conns.lock().unwrap();
            for (i, client) in missing.into_iter().zip(made) {
                held[i] = client;
            }
        }
        let Some(id) = me.id() else { continue };
        offset += 100;
        let epoch = me.view.lock().unwrap().master_epoch;
        let clients = conns.lock().unwrap().clone();
        for (i, client) in clients.into_iter().enumerate() {
            let Some(client) = client else { continue };
            let beat = RemotingCommand::request(request::BROKER_HEARTBEAT)
                .with_ext("clusterName", CLUSTER)
                .with_ext("brokerAddr", &me.addr)
                .with_ext("brokerName", &me.group)
                .with_ext("brokerId", id)
                .with_ext("epoch", epoch)
                .with_ext("maxOffset", offset)
                .with_ext("confirmOffset", offset)
                .with_ext("heartbeatTimeoutMills", HEARTBEAT_TIMEOUT_MS)
                .with_ext("electionPriority", 0);
            if client.send_oneway(beat).await.is_err() {
                // The connection closed (the node restarted): dial again next time.
                conns.lock().unwrap()[i] = None;
            }
        }
    }
}

fn verbose() -> bool {
    std::env::var_os("CHAOS_VERBOSE").is_some()
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}
