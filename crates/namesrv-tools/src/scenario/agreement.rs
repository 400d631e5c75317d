//! Route agreement among NameServers that agree: a broker fleet registers, each broker with one of
//! them only (as a broker whose `namesrvAddr` names one); then changes are made on one NameServer,
//! registrations that add a topic to a broker's table and admin changes of a broker's write
//! permission, and each is timed from its request until every NameServer routes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Value};
use tokio::sync::Mutex;

use crate::broker_body::encode_table;
use crate::cli::{AgreementArgs, BodyForm};
use crate::fleet::{expect_success, fresh_data_version, Layout, Member};
use crate::stats::{Failures, Latency};

const TIMEOUT: Duration = Duration::from_secs(10);
const QUEUES: i32 = 8;
/// Java's write bit: WIPE clears it, ADD sets it.
const PERM_WRITE: i64 = 2;

/// A broker of the run: its connection to its own NameServer, its table, and the write
/// permission its topics have now.
struct Broker {
    member: Member,
    table: Vec<(String, i32)>,
    counter: i64,
    writable: bool,
}

impl Broker {
    async fn register(&mut self) -> anyhow::Result<()> {
        self.counter += 1;
        let table: Vec<(&str, i32)> = self.table.iter().map(|(t, q)| (t.as_str(), *q)).collect();
        let body = encode_table(&table, fresh_data_version(self.counter), BodyForm::Json);
        self.member.register(&body, BodyForm::Json).await?;
        // A registration with a new data version takes the table's permissions again.
        self.writable = true;
        Ok(())
    }
}

/// What every NameServer must answer once a change has reached it.
enum Expect {
    /// The topic routes to the broker.
    Routes { topic: String },
    /// The broker's queues of the topic have (or lack) the write bit.
    Writable {
        topic: String,
        broker: String,
        writable: bool,
    },
}

impl Expect {
    fn topic(&self) -> &str {
        match self {
            Expect::Routes { topic } | Expect::Writable { topic, .. } => topic,
        }
    }

    fn met_by(&self, answer: &RemotingCommand) -> bool {
        if answer.code != response::SUCCESS {
            return false;
        }
        match self {
            Expect::Routes { .. } => true,
            Expect::Writable {
                broker, writable, ..
            } => {
                let Some(body) = answer.body.as_deref() else {
                    return false;
                };
                let Ok(route) = serde_json::from_slice::<Value>(body) else {
                    return false;
                };
                route["queueDatas"].as_array().is_some_and(|qds| {
                    qds.iter().any(|qd| {
                        qd["brokerName"] == broker.as_str()
                            && qd["perm"]
                                .as_i64()
                                .is_some_and(|p| (p & PERM_WRITE != 0) == *writable)
                    })
                })
            }
        }
    }
}

/// Times to agreement, by kind of change, and the changes never agreed on.
#[derive(Default)]
struct Results {
    registrations: Latency,
    admin: Latency,
    failures: Failures,
}

pub async fn run(args: &AgreementArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(!args.addrs.is_empty(), "no NameServer addresses");
    let mut readers = Vec::new();
    for addr in &args.addrs {
        readers.push(Client::connect(addr).await?);
    }
    let readers = Arc::new(readers);
    let mut brokers = Vec::new();
    for b in 0..args.brokers {
        let client = Client::connect(&args.addrs[b % args.addrs.len()]).await?;
        let mut broker = Broker {
            member: Member::new(b, 0, client),
            table: (0..args.topics)
                .map(|t| (format!("Agree-{b}-{t}"), QUEUES))
                .collect(),
            counter: 0,
            writable: true,
        };
        broker.register().await?;
        brokers.push(Arc::new(Mutex::new(broker)));
    }
    // The fleet is on every NameServer before changes start.
    let last = Expect::Routes {
        topic: format!(
            "Agree-{}-{}",
            args.brokers - 1,
            args.topics.saturating_sub(1)
        ),
    };
    let limit = Duration::from_secs(args.limit_secs);
    anyhow::ensure!(
        agreed(&readers, &last, Instant::now() + limit, args.poll_ms).await,
        "the fleet was not routable on every NameServer within {} s",
        args.limit_secs
    );

    let results = Arc::new(std::sync::Mutex::new(Results::default()));
    let mut tasks = tokio::task::JoinSet::new();
    let mut pace = tokio::time::interval(Duration::from_secs_f64(1.0 / args.per_sec.max(0.1)));
    for k in 0..args.changes {
        pace.tick().await;
        let broker = brokers[k % brokers.len()].clone();
        let readers = readers.clone();
        let results = results.clone();
        let admin = args.admin_every > 0 && k % args.admin_every == args.admin_every - 1;
        let via = k % args.addrs.len();
        let poll_ms = args.poll_ms;
        tasks.spawn(async move {
            // One change of a broker at a time: each is judged on its own.
            let mut broker = broker.lock().await;
            let began = Instant::now();
            let outcome = if admin {
                change_permission(&mut broker, &readers[via]).await
            } else {
                add_topic(&mut broker, k).await
            };
            match outcome {
                Err(e) => results
                    .lock()
                    .expect("no task panics")
                    .failures
                    .add(1, format!("{e:#}")),
                Ok(expect) => {
                    let met = agreed(&readers, &expect, began + limit, poll_ms).await;
                    let took = began.elapsed();
                    let mut r = results.lock().expect("no task panics");
                    if !met {
                        let topic = expect.topic();
                        r.failures
                            .add(1, format!("{topic}: no agreement within the limit"));
                    } else if admin {
                        r.admin.record(took);
                    } else {
                        r.registrations.record(took);
                    }
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let Results {
        registrations,
        admin,
        failures,
    } = &*results.lock().expect("no task panics");
    let mut all = registrations.clone();
    all.add(admin);
    Ok(json!({
        "scenario": "agreement",
        "nameservers": args.addrs.len(),
        "brokers": args.brokers,
        "topics_per_broker": args.topics,
        "changes": args.changes,
        "per_sec": args.per_sec,
        "all": all.summary(),
        "registrations": registrations.summary(),
        "admin_changes": admin.summary(),
        "failures": failures,
    }))
}

/// The broker registers again with one more topic, at its own NameServer.
async fn add_topic(broker: &mut Broker, k: usize) -> anyhow::Result<Expect> {
    let topic = format!("Agree-{}-new-{k}", broker.member.broker);
    broker.table.push((topic.clone(), QUEUES));
    broker.register().await?;
    Ok(Expect::Routes { topic })
}

/// Wipes the broker's write permission if it has it, or gives it back, through `via`.
async fn change_permission(broker: &mut Broker, via: &Client) -> anyhow::Result<Expect> {
    let name = Layout::broker_name(broker.member.broker);
    let code = if broker.writable {
        request::WIPE_WRITE_PERM_OF_BROKER
    } else {
        request::ADD_WRITE_PERM_OF_BROKER
    };
    let answer = via
        .invoke(
            RemotingCommand::request(code).with_ext("brokerName", name.as_str()),
            TIMEOUT,
        )
        .await?;
    expect_success(answer, "permission change")?;
    broker.writable = !broker.writable;
    Ok(Expect::Writable {
        topic: broker.table[0].0.clone(),
        broker: name,
        writable: broker.writable,
    })
}

/// Whether every NameServer answers as `expect` says before `deadline`, asking each every
/// `poll_ms` until it does.
async fn agreed(readers: &[Client], expect: &Expect, deadline: Instant, poll_ms: u64) -> bool {
    let mut pending: Vec<&Client> = readers.iter().collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for reader in pending {
            let ask = GetRouteInfoHeader::new(expect.topic()).to_command();
            let met = matches!(reader.invoke(ask, TIMEOUT).await, Ok(a) if expect.met_by(&a));
            if !met {
                still.push(reader);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(poll_ms)).await;
    }
    true
}
