//! Simulated brokers: each on its own long-lived connection, registering its topics the way a
//! real broker does (full table, same data version until its topics change), re-registering
//! periodically and polling cluster info.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use futures::stream::{self, StreamExt, TryStreamExt};
use rocketmq_wire::body::{BrokerData, ClusterInfo, DataVersion, QueueData, TopicRouteData};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response, version};
use rocketmq_wire::headers::{RegisterBrokerHeader, RequestHeader};
use rocketmq_wire::RemotingCommand;
use serde::Serialize;
use tokio::task::JoinSet;

use crate::broker_body::{self, PERM_RW};
use crate::cli::{BodyForm, FleetArgs};
use crate::stats::{Failures, Latency, LatencySummary};

pub const CLUSTER: &str = "BenchCluster";
/// Real brokers give the NameServer 24 s to answer a registration.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(24);
const POLL_TIMEOUT: Duration = Duration::from_secs(5);

impl BodyForm {
    pub fn version(self) -> i32 {
        match self {
            BodyForm::Json => version::CURRENT,
            // V4_9_3: a broker that predates enableActingMaster, so compressed bodies are read.
            BodyForm::Compressed => 399,
        }
    }
}

/// Which brokers exist and which topics each carries.
#[derive(Clone, Debug, Serialize)]
pub struct Layout {
    pub brokers: usize,
    pub topics_per_broker: usize,
    /// Consecutive brokers sharing one topic set; each topic's route lists this many brokers.
    pub group_size: usize,
    pub queues: i32,
    pub slaves: bool,
    /// Every topic has a route of its own: a subset of the brokers, each with its own queue
    /// count. `topics_per_broker` is then the number of topics in all.
    pub distinct: bool,
    /// With distinct routes, on how many quarters of the brokers a topic is, about.
    pub quarters: u64,
}

/// A well-mixed number from two, so that distinct routes look random but repeat run to run.
fn mix(a: usize, b: usize) -> u64 {
    let mut x =
        (a as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (b as u64).wrapping_add(0x632B_E59B);
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl Layout {
    pub fn new(brokers: usize, topics_per_broker: usize, group_size: usize, queues: i32) -> Self {
        let brokers = brokers.max(1);
        let group_size = match group_size {
            0 => brokers,
            n => n.min(brokers),
        };
        Layout {
            brokers,
            topics_per_broker,
            group_size,
            queues,
            slaves: false,
            distinct: false,
            quarters: 2,
        }
    }

    pub fn from_args(args: &FleetArgs) -> Self {
        // Distinct routes give every broker a table of its own.
        let group_size = if args.distinct_routes {
            1
        } else {
            args.group_size
        };
        Layout {
            slaves: args.slaves,
            distinct: args.distinct_routes,
            quarters: args.route_quarters.clamp(1, 4),
            ..Layout::new(args.brokers, args.topics, group_size, args.queues)
        }
    }

    pub fn groups(&self) -> usize {
        self.brokers.div_ceil(self.group_size)
    }

    fn group_of(&self, broker: usize) -> usize {
        broker / self.group_size
    }

    pub fn topic(group: usize, i: usize) -> String {
        format!("BenchTopic-{group:03}-{i:06}")
    }

    pub fn all_topics(&self) -> Vec<String> {
        if self.distinct {
            return (0..self.topics_per_broker)
                .map(Layout::distinct_topic)
                .collect();
        }
        (0..self.groups())
            .flat_map(|g| (0..self.topics_per_broker).map(move |i| Layout::topic(g, i)))
            .collect()
    }

    /// About `n` topics spread over the groups, each with the number of brokers its route
    /// lists once every broker has registered.
    pub fn sample_routes(&self, n: usize) -> Vec<(String, usize)> {
        if self.distinct {
            // Each topic's own subset: only its presence is known without the layout's draw.
            return Vec::new();
        }
        let groups = self.groups();
        let per_group = n.div_ceil(groups).clamp(1, self.topics_per_broker.max(1));
        let step = (self.topics_per_broker / per_group).max(1);
        (0..groups)
            .flat_map(|g| {
                let brokers = self.group_size.min(self.brokers - g * self.group_size);
                (0..self.topics_per_broker)
                    .step_by(step)
                    .take(per_group)
                    .map(move |i| (Layout::topic(g, i), brokers))
            })
            .collect()
    }

    fn distinct_topic(i: usize) -> String {
        format!("BenchOwnRoute-{i:06}")
    }

    /// The topics of `group` with their queue counts.
    pub fn table(&self, group: usize) -> Vec<(String, i32)> {
        if !self.distinct {
            return (0..self.topics_per_broker)
                .map(|i| (Layout::topic(group, i), self.queues))
                .collect();
        }
        // Each topic on about `quarters` quarters of the brokers (at least one), with 1 to 16
        // queues on each.
        let on = |i: usize, broker: usize| mix(i, broker) % 4 < self.quarters;
        (0..self.topics_per_broker)
            .filter(|&i| {
                on(i, group) || (0..self.brokers).all(|b| !on(i, b)) && i % self.brokers == group
            })
            .map(|i| {
                (
                    Layout::distinct_topic(i),
                    1 + (mix(i, group) >> 8) as i32 % 16,
                )
            })
            .collect()
    }

    pub fn broker_name(broker: usize) -> String {
        format!("broker-{broker:03}")
    }

    /// Masters and slaves live on different (never contacted) hosts, as in a real cluster.
    fn broker_addr(broker: usize, id: i64) -> String {
        format!("10.{}.{}.{}:10911", 1 + id, broker / 250, broker % 250)
    }

    fn ha_addr(broker: usize, id: i64) -> String {
        format!("10.{}.{}.{}:10912", 1 + id, broker / 250, broker % 250)
    }

    /// Brokers registered in total (masters and slaves).
    pub fn members(&self) -> usize {
        self.brokers * if self.slaves { 2 } else { 1 }
    }

    /// The route a NameServer answers for a topic of the first group.
    pub fn route(&self) -> TopicRouteData {
        let mut route = TopicRouteData::default();
        for b in 0..self.group_size {
            let name = Layout::broker_name(b);
            let mut bd = BrokerData {
                cluster: CLUSTER.into(),
                broker_name: name.clone(),
                ..Default::default()
            };
            bd.broker_addrs.insert(0, Layout::broker_addr(b, 0));
            if self.slaves {
                bd.broker_addrs.insert(1, Layout::broker_addr(b, 1));
            }
            route.broker_datas.push(bd);
            route.queue_datas.push(QueueData {
                broker_name: name,
                read_queue_nums: self.queues,
                write_queue_nums: self.queues,
                perm: PERM_RW,
                topic_sys_flag: 0,
            });
        }
        route
    }

    /// The REGISTER_BROKER body of every broker of `group`.
    pub fn register_body(&self, group: usize, data_version: DataVersion, form: BodyForm) -> Bytes {
        encode(&self.table(group), data_version, form)
    }
}

fn encode(table: &[(String, i32)], data_version: DataVersion, form: BodyForm) -> Bytes {
    let table: Vec<(&str, i32)> = table.iter().map(|(t, q)| (t.as_str(), *q)).collect();
    broker_body::encode_table(&table, data_version, form)
}

pub fn fresh_data_version(counter: i64) -> DataVersion {
    let now = rocketmq_wire::clock::now_ms();
    DataVersion {
        counter,
        state_version: 0,
        timestamp: now,
    }
}

/// One registering broker process: a master (id 0) or a slave.
pub struct Member {
    pub broker: usize,
    pub id: i64,
    pub client: Client,
    /// Its own table once it has changed a topic (until then it sends its group's body).
    own: Mutex<Option<OwnTable>>,
}

struct OwnTable {
    table: Vec<(String, i32)>,
    counter: i64,
    created: usize,
    body: Bytes,
}

/// How brokers change their tables during a run.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct ChangePolicy {
    /// Of the changes, the share that creates or deletes a topic rather than changing one
    /// topic's queue count.
    pub create_delete_share: f64,
}

impl Member {
    pub fn new(broker: usize, id: i64, client: Client) -> Self {
        Member {
            broker,
            id,
            client,
            own: Mutex::new(None),
        }
    }

    pub fn register_request(&self, body: &Bytes, form: BodyForm) -> RemotingCommand {
        let broker_name = Layout::broker_name(self.broker);
        let broker_addr = Layout::broker_addr(self.broker, self.id);
        let ha_server_addr = Layout::ha_addr(self.broker, self.id);
        RegisterBrokerHeader {
            broker_name: &broker_name,
            broker_addr: &broker_addr,
            cluster_name: CLUSTER,
            ha_server_addr: Some(&ha_server_addr),
            broker_id: self.id,
            heartbeat_timeout_millis: None,
            // A 5.x broker (the JSON form) always sends it, a 4.9 broker never does.
            enable_acting_master: (form == BodyForm::Json).then_some(false),
            compressed: form == BodyForm::Compressed,
            body_crc32: Some(rocketmq_wire::body_crc32(body).into()),
            zone_name: None,
        }
        .to_command()
        .with_version(form.version())
        .with_body(body.clone())
    }

    /// Registers once; a refusal is an error carrying the server's remark.
    pub async fn register(&self, body: &Bytes, form: BodyForm) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let resp = self
            .client
            .invoke(self.register_request(body, form), REGISTER_TIMEOUT)
            .await?;
        expect_success(resp, "REGISTER_BROKER")?;
        Ok(started.elapsed())
    }
}

/// Requests of one kind made in the background, and how they went.
#[derive(Default)]
pub struct Activity {
    latency: Latency,
    failures: Failures,
}

#[derive(Debug, Serialize)]
pub struct ActivitySummary {
    pub latency: LatencySummary,
    pub failures: Failures,
}

impl Activity {
    pub fn record(&mut self, outcome: anyhow::Result<Duration>) {
        match outcome {
            Ok(elapsed) => self.latency.record(elapsed),
            Err(e) => self.failures.add(1, format!("{e:#}")),
        }
    }

    pub fn summary(&self) -> ActivitySummary {
        ActivitySummary {
            latency: self.latency.summary(),
            failures: self.failures.clone(),
        }
    }
}

/// Tasks that run until stopped, recording into one [`Activity`].
pub struct Background {
    tasks: JoinSet<()>,
    activity: Arc<Mutex<Activity>>,
}

impl Background {
    pub fn new() -> Self {
        Background {
            tasks: JoinSet::new(),
            activity: Default::default(),
        }
    }

    /// Runs `each` every `period`, the first time after `offset`.
    pub fn every<F, Fut>(&mut self, offset: Duration, period: Duration, mut each: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: std::future::Future<Output = anyhow::Result<Duration>> + Send,
    {
        let activity = self.activity.clone();
        self.tasks.spawn(async move {
            tokio::time::sleep(offset).await;
            let mut ticks = tokio::time::interval(period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let outcome = each().await;
                activity.lock().unwrap().record(outcome);
            }
        });
    }

    pub fn stop(mut self) -> ActivitySummary {
        self.tasks.abort_all();
        let summary = self.activity.lock().unwrap().summary();
        summary
    }
}

#[derive(Debug, Serialize)]
pub struct RegistrationReport {
    pub members: usize,
    pub body_bytes_per_broker: usize,
    pub seconds: f64,
    pub latency: LatencySummary,
}

/// Registered brokers and the bodies they keep re-sending.
#[derive(Clone)]
pub struct Fleet {
    pub layout: Layout,
    pub form: BodyForm,
    members: Vec<Arc<Member>>,
    bodies: Vec<Bytes>,
    tables: Arc<Vec<Vec<(String, i32)>>>,
}

/// A fleet's registration bodies and tables, built once, to register with one NameServer or
/// with several (building them is the generator's work, not a server's).
pub struct Prepared {
    layout: Layout,
    form: BodyForm,
    bodies: Vec<Bytes>,
    tables: Arc<Vec<Vec<(String, i32)>>>,
}

impl Prepared {
    pub fn new(args: &FleetArgs) -> Self {
        let layout = Layout::from_args(args);
        let data_version = fresh_data_version(1);
        let bodies = (0..layout.groups())
            .map(|g| layout.register_body(g, data_version, args.body))
            .collect();
        let tables = Arc::new((0..layout.groups()).map(|g| layout.table(g)).collect());
        Prepared {
            layout,
            form: args.body,
            bodies,
            tables,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }
}

impl Fleet {
    /// Connects every broker and registers it; every registration must succeed.
    pub async fn register(
        addr: &str,
        args: &FleetArgs,
    ) -> anyhow::Result<(Fleet, RegistrationReport)> {
        Fleet::register_prepared(addr, &Prepared::new(args), args.register_concurrency).await
    }

    /// Registers a prepared fleet with `addr`, `concurrency` registrations at once.
    pub async fn register_prepared(
        addr: &str,
        prepared: &Prepared,
        concurrency: usize,
    ) -> anyhow::Result<(Fleet, RegistrationReport)> {
        let layout = prepared.layout.clone();
        let bodies = prepared.bodies.clone();
        let ids: &[i64] = if layout.slaves { &[0, 1] } else { &[0] };
        let form = prepared.form;
        let started = Instant::now();
        // Each broker connects when it registers, as a real broker does: a connection opened long
        // before its first request looks like a silent one to a server that bounds those.
        let who: Vec<(usize, i64)> = (0..layout.brokers)
            .flat_map(|b| ids.iter().map(move |&id| (b, id)))
            .collect();
        let joined: Vec<(Arc<Member>, Duration)> =
            stream::iter(who.into_iter().map(|(broker, id)| {
                let body = bodies[layout.group_of(broker)].clone();
                async move {
                    let client = Client::connect(addr)
                        .await
                        .with_context(|| format!("connecting broker {broker} to {addr}"))?;
                    let member = Arc::new(Member::new(broker, id, client));
                    let took = member.register(&body, form).await.with_context(|| {
                        format!("registering {} id {id}", Layout::broker_name(broker))
                    })?;
                    anyhow::Ok((member, took))
                }
            }))
            .buffer_unordered(concurrency.max(1))
            .try_collect()
            .await?;
        let (mut members, latencies): (Vec<Arc<Member>>, Vec<Duration>) =
            joined.into_iter().unzip();
        members.sort_by_key(|m| (m.broker, m.id));
        let fleet = Fleet {
            form,
            members,
            bodies,
            tables: prepared.tables.clone(),
            layout,
        };
        let mut latency = Latency::default();
        latencies.iter().for_each(|d| latency.record(*d));
        let report = RegistrationReport {
            members: fleet.members.len(),
            body_bytes_per_broker: fleet.bodies[0].len(),
            seconds: started.elapsed().as_secs_f64(),
            latency: latency.summary(),
        };
        Ok((fleet, report))
    }

    fn body_of(&self, m: &Member) -> Bytes {
        match &*m.own.lock().unwrap() {
            Some(own) => own.body.clone(),
            None => self.bodies[self.layout.group_of(m.broker)].clone(),
        }
    }

    /// Changes one thing in `m`'s table, as an operator or a consumer group does: a topic's
    /// queue count, or (a `create_delete_share` of the time) a topic created or one of those
    /// created before deleted. Returns the body to register.
    fn change(&self, m: &Member, policy: ChangePolicy) -> Bytes {
        let mut own = m.own.lock().unwrap();
        let own = own.get_or_insert_with(|| OwnTable {
            table: self.tables[self.layout.group_of(m.broker)].clone(),
            counter: 1,
            created: 0,
            body: Bytes::new(),
        });
        own.counter += 1;
        let mut rng = fastrand::Rng::with_seed(mix(m.broker, own.counter as usize));
        let created_prefix = format!("BenchNew-{:03}-", m.broker);
        if rng.f64() < policy.create_delete_share {
            let created = own
                .table
                .iter()
                .position(|(t, _)| t.starts_with(&created_prefix));
            match created {
                Some(i) if rng.bool() => {
                    own.table.remove(i);
                }
                _ => {
                    own.table.push((
                        format!("{created_prefix}{:06}", own.created),
                        rng.i32(1..=16),
                    ));
                    own.created += 1;
                }
            }
        } else if !own.table.is_empty() {
            let i = rng.usize(..own.table.len());
            own.table[i].1 = own.table[i].1 % 16 + 1;
        }
        own.body = encode(&own.table, fresh_data_version(own.counter), self.form);
        own.body.clone()
    }

    /// Offsets spreading `period` evenly over the members, as independent brokers would be.
    fn phase(&self, index: usize, period: Duration) -> Duration {
        period.mul_f64(index as f64 / self.members.len() as f64)
    }

    /// Every member re-registers every `period` with its unchanged body, the first ones at once.
    pub fn reregistration(&self, period: Duration) -> Background {
        self.reregistration_changing(period, 0.0, ChangePolicy::default())
    }

    /// Every member re-registers every `period`; a `change_share` of masters' registrations
    /// change their table first.
    pub fn reregistration_changing(
        self: &Fleet,
        period: Duration,
        change_share: f64,
        policy: ChangePolicy,
    ) -> Background {
        let mut bg = Background::new();
        let fleet = Arc::new(self.clone());
        for (i, m) in self.members.iter().enumerate() {
            let (m, fleet) = (m.clone(), fleet.clone());
            let mut rng = fastrand::Rng::with_seed(i as u64);
            bg.every(self.phase(i, period), period, move || {
                let changes = m.id == 0 && rng.f64() < change_share;
                let body = if changes {
                    fleet.change(&m, policy)
                } else {
                    fleet.body_of(&m)
                };
                let m = m.clone();
                let form = fleet.form;
                async move { m.register(&body, form).await }
            });
        }
        bg
    }

    /// Masters in turn change their table and re-register, `per_sec` times a second in all.
    pub fn changes(&self, per_sec: f64, policy: ChangePolicy) -> Background {
        // Several senders, so that one slow answer does not slow the rate down.
        const SENDERS: usize = 4;
        let mut bg = Background::new();
        let fleet = Arc::new(self.clone());
        let masters: Arc<Vec<Arc<Member>>> =
            Arc::new(self.members.iter().filter(|m| m.id == 0).cloned().collect());
        let period = Duration::from_secs_f64(SENDERS as f64 / per_sec.max(0.001));
        let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for s in 0..SENDERS {
            let (fleet, masters, next) = (fleet.clone(), masters.clone(), next.clone());
            bg.every(
                period.mul_f64(s as f64 / SENDERS as f64),
                period,
                move || {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let m = masters[n % masters.len()].clone();
                    let body = fleet.change(&m, policy);
                    let form = fleet.form;
                    async move { m.register(&body, form).await }
                },
            );
        }
        bg
    }

    /// The first master creates a topic and registers its table again: a change every route
    /// table the server keeps (its snapshot, its topic lists) must show. The topic's name.
    pub async fn create_topic(&self) -> anyhow::Result<String> {
        let m = self
            .members
            .iter()
            .find(|m| m.id == 0)
            .context("the fleet has no master")?;
        let policy = ChangePolicy {
            create_delete_share: 1.0,
        };
        // A change either creates a topic or deletes one created before: change until one was
        // created.
        let created = |m: &Member| m.own.lock().unwrap().as_ref().map_or(0, |o| o.created);
        loop {
            let before = created(m);
            let body = self.change(m, policy);
            m.register(&body, self.form).await?;
            let now = created(m);
            if now > before {
                return Ok(format!("BenchNew-{:03}-{:06}", m.broker, now - 1));
            }
        }
    }

    /// Every member polls GET_BROKER_CLUSTER_INFO every `period`; an answer that lists fewer
    /// brokers than registered is a failure (a broker the server wrongly dropped).
    pub fn cluster_polls(&self, period: Duration) -> Background {
        let expected = self.members.len();
        let mut bg = Background::new();
        for (i, m) in self.members.iter().enumerate() {
            let m = m.clone();
            bg.every(self.phase(i, period), period, move || {
                let m = m.clone();
                async move { poll_cluster_info(&m.client, expected).await }
            });
        }
        bg
    }
}

/// GET_ALL_TOPIC_LIST_FROM_NAMESERVER's body; consoles poll it, and at 100k+ topics it is
/// megabytes.
pub async fn topic_list(client: &Client) -> anyhow::Result<bytes::Bytes> {
    const TOPIC_LIST_TIMEOUT: Duration = Duration::from_secs(30);
    let ask = RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER);
    let resp = client.invoke(ask, TOPIC_LIST_TIMEOUT).await?;
    let body = resp.body.clone().unwrap_or_default();
    expect_success(resp, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")?;
    Ok(body)
}

/// The number of topics GET_ALL_TOPIC_LIST_FROM_NAMESERVER lists.
pub async fn topic_count(client: &Client) -> anyhow::Result<usize> {
    let body = topic_list(client).await?;
    let list = rocketmq_wire::body::TopicList::decode(&body)?;
    Ok(list.topic_list.len())
}

/// Fails unless `resp` is SUCCESS, saying what answered otherwise and why.
pub fn expect_success(resp: RemotingCommand, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        resp.code == response::SUCCESS,
        "{what} answered {}: {}",
        resp.code,
        resp.remark.unwrap_or_default()
    );
    Ok(())
}

/// Counts the broker addresses GET_BROKER_CLUSTER_INFO lists.
pub async fn cluster_members(client: &Client) -> anyhow::Result<usize> {
    let ask = RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO);
    let resp = client.invoke(ask, POLL_TIMEOUT).await?;
    let body = resp.body.clone().unwrap_or_default();
    expect_success(resp, "GET_BROKER_CLUSTER_INFO")?;
    let info = ClusterInfo::decode(&body)?;
    Ok(info
        .broker_addr_table
        .values()
        .map(|bd| bd.broker_addrs.len())
        .sum())
}

async fn poll_cluster_info(client: &Client, expected: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let seen = cluster_members(client).await?;
    let elapsed = started.elapsed();
    anyhow::ensure!(
        seen >= expected,
        "cluster info listed {seen} of {expected} brokers"
    );
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_share_topic_sets() {
        let layout = Layout::new(300, 10, 10, 8);
        assert_eq!(layout.groups(), 30);
        assert_eq!(layout.group_of(9), 0);
        assert_eq!(layout.group_of(10), 1);
        assert_eq!(layout.all_topics().len(), 300);
        assert_eq!(Layout::new(10, 5, 0, 8).groups(), 1);
    }

    #[test]
    fn route_lists_every_broker_of_a_group() {
        let mut layout = Layout::new(4, 1, 0, 8);
        layout.slaves = true;
        let route = layout.route();
        assert_eq!(route.broker_datas.len(), 4);
        assert_eq!(route.broker_datas[3].broker_addrs.len(), 2);
        assert_eq!(route.queue_datas[0].read_queue_nums, 8);
    }
}
