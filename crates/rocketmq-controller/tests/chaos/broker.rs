//! The fleet of brokers a schedule runs: nine of the test kit's controller-mode brokers (three
//! groups of three), each speaking from an address of its own so that the network can cut it off
//! from some nodes only. Each runs the broker flow compressed in time: an id and a registration,
//! a 1004 read of its group every tick, 1002 when there is no master, and as master a 1001 that
//! shrinks the set to itself or grows it by a live member; heartbeats go out from a task of their
//! own, as the broker's scheduled heartbeat does, whatever the main loop waits on. Each listens on
//! its address for the controller's role-change notices (1008). Every answer and every notice
//! goes to the record.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use namesrv_testkit::ControllerBroker;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::frame::RemotingCodec;
use rocketmq_wire::RemotingCommand;
use tokio_util::sync::CancellationToken;

use super::history::{History, Op, Seen};

pub const GROUPS: usize = 3;
pub const MEMBERS: usize = 3;
const CLUSTER: &str = "chaos";
const GROUP_NAMES: [&str; GROUPS] = ["g0", "g1", "g2"];
const TICK: Duration = Duration::from_millis(250);
/// Shorter than Java's 10 s so that schedules see brokers expire and masters change.
const HEARTBEAT_TIMEOUT_MS: u64 = 4_000;
/// The port of each broker's address, where it registers from and takes notices.
const BROKER_PORT: u16 = 10_911;

/// What the rest of the test may know of a broker while its own task runs it.
pub struct Broker {
    pub group: &'static str,
    /// Its place in the fleet, which is also the index of its address on the bridge.
    pub index: usize,
    up: AtomicBool,
    id: Mutex<Option<i64>>,
    /// The master epoch it last read, and whether it read itself as master.
    seen: Mutex<(i32, bool)>,
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
        self.seen.lock().unwrap().1
    }
}

pub struct Fleet {
    pub brokers: Arc<Vec<Arc<Broker>>>,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Fleet {
    /// `ips[k]` is broker `k`'s own address; `nodes` the controller nodes' addresses;
    /// `namesrvs` the NameServers brokers register with (none when the controller nodes stand
    /// alone).
    pub fn start(
        ips: Vec<IpAddr>,
        nodes: Vec<String>,
        namesrvs: Vec<String>,
        history: Arc<History>,
        seed: u64,
    ) -> Fleet {
        assert_eq!(ips.len(), GROUPS * MEMBERS);
        let brokers: Arc<Vec<Arc<Broker>>> = Arc::new(
            (0..ips.len())
                .map(|k| {
                    Arc::new(Broker {
                        group: GROUP_NAMES[k / MEMBERS],
                        index: k,
                        up: AtomicBool::new(true),
                        id: Mutex::new(None),
                        seen: Mutex::new((0, false)),
                    })
                })
                .collect(),
        );
        let stop = CancellationToken::new();
        let mut tasks = Vec::new();
        for (b, ip) in brokers.iter().zip(ips) {
            tasks.push(tokio::spawn(notices(
                b.clone(),
                ip,
                history.clone(),
                stop.clone(),
            )));
            let make = || {
                let mut kit =
                    ControllerBroker::new(CLUSTER, b.group, &format!("{ip}:{BROKER_PORT}"))
                        .speaking_from(ip);
                kit.heartbeat_timeout_ms = HEARTBEAT_TIMEOUT_MS;
                kit
            };
            if !namesrvs.is_empty() {
                tasks.push(tokio::spawn(registrations(
                    b.clone(),
                    make(),
                    namesrvs.clone(),
                    stop.clone(),
                )));
            }
            let beat = make();
            tasks.push(tokio::spawn(heartbeats(
                b.clone(),
                beat,
                nodes.clone(),
                stop.clone(),
            )));
            let life = Life {
                me: b.clone(),
                kit: make(),
                fleet: brokers.clone(),
                nodes: nodes.clone(),
                history: history.clone(),
                rng: fastrand::Rng::with_seed(seed ^ ((b.index as u64) << 32)),
                registered: false,
            };
            tasks.push(tokio::spawn(life.run(stop.clone())));
        }
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

pub fn group_names() -> [&'static str; GROUPS] {
    GROUP_NAMES
}

struct Life {
    me: Arc<Broker>,
    kit: ControllerBroker,
    fleet: Arc<Vec<Arc<Broker>>>,
    nodes: Vec<String>,
    history: Arc<History>,
    rng: fastrand::Rng,
    registered: bool,
}

/// The ids of the `syncStateSet` list in an answer's body, numbers or quoted numbers. Read
/// from the text, not as JSON: the Java controller's 1002 body is not JSON (its member map has
/// bare numeric keys), and the same checks must read both controllers' answers.
fn set_of(answer: &RemotingCommand) -> BTreeSet<i64> {
    let text = String::from_utf8_lossy(answer.body.as_deref().unwrap_or_default()).into_owned();
    let Some(list) = text
        .split_once("\"syncStateSet\"")
        .and_then(|(_, rest)| rest.split_once('['))
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(list, _)| list)
    else {
        return BTreeSet::new();
    };
    list.split(',')
        .filter_map(|id| id.trim().trim_matches('"').parse().ok())
        .collect()
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
                // A stopped broker's connections close, as a killed process's do.
                self.kit.disconnect();
                self.registered = false;
                continue;
            }
            if !self.registered {
                self.register().await;
                continue;
            }
            let Some(seen) = self.read().await else {
                continue;
            };
            match seen.master {
                None => self.elect().await,
                Some(master) if Some(master) == self.kit.id => self.alter(&seen).await,
                Some(_) => {}
            }
        }
    }

    /// An id (1012, 1013) unless it has one, then 1003.
    async fn register(&mut self) {
        let had = self.kit.id;
        let answer = self.kit.register(&self.nodes).await;
        if let (None, Some(id)) = (had, self.kit.id) {
            self.history
                .granted(self.me.group, id, &self.kit.register_check_code);
            *self.me.id.lock().unwrap() = Some(id);
        }
        self.registered = answer.is_some_and(|a| a.code == response::SUCCESS);
    }

    fn record(&self, op: Op, start: Instant, seen: Seen) {
        self.history.saw(Seen {
            op,
            start,
            end: Instant::now(),
            ..seen
        });
    }

    fn seen(
        &self,
        master: Option<i64>,
        master_epoch: i64,
        set: BTreeSet<i64>,
        set_epoch: i64,
    ) -> Seen {
        Seen {
            group: self.me.group.to_string(),
            node: self.kit.known_leader(),
            op: Op::Read,
            start: Instant::now(),
            end: Instant::now(),
            master: master.filter(|id| *id > 0),
            master_epoch,
            set,
            set_epoch,
        }
    }

    async fn read(&mut self) -> Option<Seen> {
        let start = Instant::now();
        let info = self.kit.replica_info(&self.nodes).await?;
        let seen = self.seen(
            info.master_id,
            info.master_epoch.into(),
            info.sync_state_set,
            info.sync_state_set_epoch.into(),
        );
        *self.me.seen.lock().unwrap() = (
            info.master_epoch,
            seen.master.is_some() && seen.master == self.kit.id,
        );
        self.record(Op::Read, start, seen.clone());
        Some(seen)
    }

    async fn elect(&mut self) {
        let start = Instant::now();
        let Some(answer) = self.kit.elect_self(&self.nodes).await else {
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
        let seen = self.seen(
            num(&answer, "masterBrokerId"),
            master_epoch,
            set_of(&answer),
            set_epoch,
        );
        self.record(Op::Elect, start, seen);
    }

    /// As master: shrink the set to itself, or grow it by one live member.
    async fn alter(&mut self, seen: &Seen) {
        let (Some(id), Ok(master_epoch), Ok(set_epoch)) = (
            self.kit.id,
            i32::try_from(seen.master_epoch),
            i32::try_from(seen.set_epoch),
        ) else {
            return;
        };
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
        if seen.set.len() == 1 {
            set.insert(others[self.rng.usize(..others.len())]);
        }
        let info = namesrv_testkit::ReplicaInfo {
            master_id: Some(id),
            master_addr: None,
            master_epoch,
            sync_state_set: seen.set.clone(),
            sync_state_set_epoch: set_epoch,
        };
        let start = Instant::now();
        let Some(answer) = self
            .kit
            .alter_sync_state_set(&self.nodes, &info, &set)
            .await
        else {
            return;
        };
        if answer.code != response::SUCCESS {
            return;
        }
        let Some(new_epoch) = num(&answer, "newSyncStateSetEpoch") else {
            return;
        };
        let changed = self.seen(Some(id), seen.master_epoch, set_of(&answer), new_epoch);
        self.record(Op::Alter, start, changed);
        self.history.altered(self.me.group, Instant::now());
    }
}

/// The role-change notices (1008) the controller sends to the broker's address, recorded as
/// answers: a notice names a master and a set with their epochs like a 1004 answer does, so it
/// must agree with every other answer of the same epoch. Notices are pushed from tasks of their
/// own, each on a new connection, so one can arrive after a newer one: they take no part in the
/// check that epochs never go back in real time.
async fn notices(me: Arc<Broker>, ip: IpAddr, history: Arc<History>, stop: CancellationToken) {
    let listener = tokio::net::TcpListener::bind((ip, BROKER_PORT))
        .await
        .expect("the broker's address on the bridge");
    loop {
        let stream = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
        };
        let (me, history) = (me.clone(), history.clone());
        tokio::spawn(async move {
            let mut frames =
                tokio_util::codec::FramedRead::new(stream, RemotingCodec::new(1 << 20));
            while let Some(Ok(notice)) = frames.next().await {
                if notice.code != request::NOTIFY_BROKER_ROLE_CHANGED {
                    continue;
                }
                let at = Instant::now();
                history.saw(Seen {
                    group: me.group.to_string(),
                    op: Op::Notice,
                    node: None,
                    start: at,
                    end: at,
                    master: num(&notice, "masterBrokerId").filter(|id| *id > 0),
                    master_epoch: num(&notice, "masterEpoch").unwrap_or(0),
                    set: set_of(&notice),
                    set_epoch: num(&notice, "syncStateSetEpoch").unwrap_or(0),
                });
            }
        });
    }
}

/// Every 500 ms while the broker is up, 904 to every node it reaches, with the id and master
/// epoch its main loop last learnt; a stopped broker's connections close.
async fn heartbeats(
    me: Arc<Broker>,
    mut kit: ControllerBroker,
    nodes: Vec<String>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
        if !me.up() {
            kit.disconnect();
            continue;
        }
        kit.id = me.id();
        kit.epoch = me.seen.lock().unwrap().0;
        kit.max_offset += 100;
        kit.heartbeat(&nodes).await;
    }
}

/// Every second while the broker is up, a registration with every NameServer under the role its
/// main loop last read (id 0 as master), as a broker does after a role change and periodically;
/// in a task of its own, as Java's broker registers from a thread pool.
async fn registrations(
    me: Arc<Broker>,
    mut kit: ControllerBroker,
    namesrvs: Vec<String>,
    stop: CancellationToken,
) {
    // A topic of its own and one every group serves (a NameServer refuses a first
    // registration of a single topic, as Java's does).
    let topic = format!("chaos-{}", me.group);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        if !me.up() {
            kit.disconnect();
            continue;
        }
        kit.id = me.id();
        let (epoch, master) = *me.seen.lock().unwrap();
        kit.epoch = epoch;
        kit.max_offset += 100;
        kit.register_with_namesrvs(&namesrvs, master, &[topic.as_str(), "chaos"])
            .await;
    }
}
