//! Brokers restarting, unregistering and losing connections while the server expires them,
//! changes topics for admins and applies removals from a queue, explored over thread
//! interleavings by shuttle's randomized schedulers (random and PCT). Every operation takes the
//! path the server takes: a removal is decided under the registry's lock and applied later by
//! the queue's worker, so any registration can land in between.
//!
//! The rule checked after every interleaving: a broker is routable exactly when its latest
//! acknowledged operation was a registration that neither expired nor lost its connection
//! since. What "latest" means is written down by an oracle at each operation's acknowledgement,
//! in the order the operations took the registry's lock; the expected outcome is worked out
//! from those facts alone, not from the registry.
//!
//! `INTERLEAVINGS=N` explores N schedules per scheduler (default 1,000; the long run behind
//! `scripts/bench` uses far more), `INTERLEAVINGS_SEED` replays another seed.

use std::sync::Arc;

use rocketmq_wire::body::{
    DataVersion, QueueData, RegisterBrokerBody, TopicConfig, TopicConfigWrapper,
};
use rocketmq_wire::json::JsonStyle;
use shuttle::scheduler::{PctScheduler, RandomScheduler};
use shuttle::sync::{mpsc, Mutex};
use shuttle::{thread, Config, Runner};

use super::*;

const CLUSTER: &str = "c";
/// A broker silent this long (in the oracle's clock) expires.
const TIMEOUT_MS: i64 = 10;
/// The topic every group serves, and the one the admin deletes, served by group `gb` alone.
const SHARED_TOPIC: &str = "t";
const ADMIN_TOPIC: &str = "t-gb";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Member {
    group: &'static str,
    id: i64,
    addr: &'static str,
}

const A: Member = Member {
    group: "ga",
    id: 0,
    addr: "10.0.0.1:10911",
};
/// A's slave: a batch of removals takes A's whole group.
const S: Member = Member {
    group: "ga",
    id: 1,
    addr: "10.0.0.2:10911",
};
const B: Member = Member {
    group: "gb",
    id: 0,
    addr: "10.0.0.3:10911",
};

#[derive(Clone, Copy, Debug)]
enum Op {
    /// REGISTER_BROKER on a connection with a data version counter; the same connection and
    /// counter twice in a row is an identical registration, served as a repeat.
    Register {
        conn: ConnId,
        counter: i64,
    },
    Unregister,
    /// The broker's connection closes.
    Close {
        conn: ConnId,
    },
}

/// A fact the oracle writes at an operation's acknowledgement.
#[derive(Clone, Copy, Debug)]
enum Fact {
    Registered {
        member: Member,
        conn: ConnId,
        at_ms: i64,
    },
    Unregistered(Member),
    Closed(ConnId),
    ExpiredAt(i64),
    AdminTopicDeleted,
}

#[derive(Default)]
struct Oracle {
    now_ms: i64,
    facts: Vec<Fact>,
}

impl Oracle {
    /// Whether `member` must be routable after every fact.
    fn expects_routable(&self, member: Member) -> bool {
        let mut registered: Option<(ConnId, i64)> = None;
        for fact in &self.facts {
            registered = match *fact {
                Fact::Registered {
                    member: m,
                    conn,
                    at_ms,
                } if m == member => Some((conn, at_ms)),
                Fact::Unregistered(m) if m == member => None,
                Fact::Closed(closed) => registered.filter(|(conn, _)| *conn != closed),
                Fact::ExpiredAt(now) => registered.filter(|(_, at)| at + TIMEOUT_MS >= now),
                _ => registered,
            };
        }
        registered.is_some()
    }

    /// Whether B's own topic must be in the table: B is routable and registered after the
    /// admin last deleted it (B's registrations list it, and a registration brings back a topic
    /// the broker is missing from).
    fn expects_admin_topic(&self) -> bool {
        let registered_last = self.facts.iter().rev().find_map(|fact| match fact {
            Fact::Registered { member, .. } if *member == B => Some(true),
            Fact::AdminTopicDeleted => Some(false),
            _ => None,
        });
        registered_last == Some(true) && self.expects_routable(B)
    }
}

struct World {
    table: RouteTable,
    oracle: Mutex<Oracle>,
    queue: mpsc::Sender<Option<Unregistration>>,
}

impl World {
    /// Decides something under the oracle's lock (so that facts are in the registry's order)
    /// and queues the removals decided, after the lock: the window the server has too.
    fn decide(&self, decision: impl FnOnce(&RouteTable, &mut Oracle) -> Vec<Unregistration>) {
        let removals = {
            let mut oracle = self.oracle.lock().unwrap();
            decision(&self.table, &mut oracle)
        };
        for removal in removals {
            self.queue.send(Some(removal)).unwrap();
        }
    }

    fn broker(&self, member: Member, op: Op) {
        match op {
            Op::Register { conn, counter } => self.decide(|table, oracle| {
                let registration = registration(member, conn, counter, oracle.now_ms);
                let fingerprint = (conn as u128) << 64 | counter as u128;
                if table
                    .change(|r| r.repeat(&registration.from, fingerprint))
                    .is_none()
                {
                    table.register(registration, RegisterPolicy::default(), fingerprint);
                }
                oracle.facts.push(Fact::Registered {
                    member,
                    conn,
                    at_ms: oracle.now_ms,
                });
                Vec::new()
            }),
            Op::Unregister => {
                self.decide(|table, oracle| {
                    oracle.facts.push(Fact::Unregistered(member));
                    vec![table
                        .read(|r| r.unregistration(CLUSTER, member.addr, member.group, member.id))]
                })
            }
            Op::Close { conn } => self.decide(|table, oracle| {
                oracle.facts.push(Fact::Closed(conn));
                table.change(|r| r.closed(conn))
            }),
        }
    }

    fn expire(&self, advance_ms: i64) {
        self.decide(|table, oracle| {
            oracle.now_ms += advance_ms;
            oracle.facts.push(Fact::ExpiredAt(oracle.now_ms));
            table.change(|r| r.expire(oracle.now_ms)).leaving
        });
    }

    fn delete_admin_topic(&self) {
        self.decide(|table, oracle| {
            table.change(|r| r.delete_topic(ADMIN_TOPIC, None));
            oracle.facts.push(Fact::AdminTopicDeleted);
            Vec::new()
        });
    }
}

fn registration(member: Member, conn: ConnId, counter: i64, now_ms: i64) -> Registration {
    let topics: Vec<TopicConfig> = [SHARED_TOPIC, &format!("t-{}", member.group)]
        .iter()
        .map(|t| TopicConfig::new(t, 4, 6))
        .collect();
    Registration {
        from: Registrant {
            cluster: CLUSTER.into(),
            broker_addr: member.addr.into(),
            broker_name: member.group.into(),
            broker_id: member.id,
            conn,
            now_ms,
        },
        ha_server_addr: String::new(),
        zone_name: None,
        timeout_ms: Some(TIMEOUT_MS),
        enable_acting_master: Some(false),
        listed: topics.len(),
        body: RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter,
                    state_version: 0,
                    timestamp: counter,
                },
                topic_configs: topics,
                mapping_info: vec![],
            },
            filter_server_list: Some(vec![]),
        },
        version: 479,
        changes_since: None,
        headers: 0,
        table: None,
    }
}

/// The queue's worker: applies whatever is queued as one batch, as the server's does.
fn worker(table: &RouteTable, queue: mpsc::Receiver<Option<Unregistration>>) {
    while let Ok(Some(first)) = queue.recv() {
        let mut batch = vec![first];
        let mut stop = false;
        while let Ok(more) = queue.try_recv() {
            match more {
                Some(more) => batch.push(more),
                None => stop = true,
            }
        }
        table.change(|r| r.unregister(&batch, false));
        if stop {
            return;
        }
    }
}

/// One interleaving of the brokers' restarts with expiry, an admin and the queue's worker.
fn scenario() {
    let (queue, pending) = mpsc::channel();
    let world = Arc::new(World {
        table: RouteTable::default(),
        oracle: Mutex::new(Oracle::default()),
        queue,
    });
    let programs: [(Member, Vec<Op>); 3] = [
        // Restarts on a new connection; the old one closes after.
        (
            A,
            vec![
                Op::Register {
                    conn: 1,
                    counter: 1,
                },
                Op::Unregister,
                Op::Register {
                    conn: 2,
                    counter: 2,
                },
                Op::Close { conn: 1 },
            ],
        ),
        // Restarts on the connection it keeps.
        (
            S,
            vec![
                Op::Register {
                    conn: 3,
                    counter: 1,
                },
                Op::Unregister,
                Op::Register {
                    conn: 3,
                    counter: 2,
                },
            ],
        ),
        // Repeats itself, restarts on a new connection, and its old connection closes late.
        (
            B,
            vec![
                Op::Register {
                    conn: 4,
                    counter: 1,
                },
                Op::Register {
                    conn: 4,
                    counter: 1,
                },
                Op::Unregister,
                Op::Register {
                    conn: 5,
                    counter: 1,
                },
                Op::Close { conn: 4 },
            ],
        ),
    ];
    let mut threads = Vec::new();
    for (member, ops) in programs {
        let world = world.clone();
        threads.push(thread::spawn(move || {
            for op in ops {
                world.broker(member, op);
            }
        }));
    }
    let expiry = world.clone();
    threads.push(thread::spawn(move || {
        expiry.expire(TIMEOUT_MS / 2);
        expiry.expire(TIMEOUT_MS);
    }));
    let admin = world.clone();
    threads.push(thread::spawn(move || {
        admin.delete_admin_topic();
        admin.table.change(|r| r.change_write_perm(B.group, true));
    }));
    let applier = world.clone();
    let applying = thread::spawn(move || worker(&applier.table, pending));
    for t in threads {
        t.join().unwrap();
    }
    world.queue.send(None).unwrap();
    applying.join().unwrap();

    let oracle = world.oracle.lock().unwrap();
    let table = &world.table;
    for member in [A, S, B] {
        let routable = table.read(|r| {
            r.group(member.group)
                .is_some_and(|bd| bd.broker_addrs.get(&member.id) == Some(&member.addr.to_string()))
        });
        assert_eq!(
            routable,
            oracle.expects_routable(member),
            "{member:?} after {:?}",
            oracle.facts
        );
    }
    let admin_topic = table.route(ADMIN_TOPIC, extras()).is_some_and(|route| {
        route
            .queue_datas
            .iter()
            .any(|q: &QueueData| q.broker_name == B.group)
    });
    assert_eq!(
        admin_topic,
        oracle.expects_admin_topic(),
        "{ADMIN_TOPIC} after {:?}",
        oracle.facts
    );
    table.read(Registry::members_are_alive).unwrap();
    for topic in [SHARED_TOPIC, ADMIN_TOPIC, "t-ga"] {
        let cached = table.route_body(topic, JsonStyle::Standard, extras);
        let fresh = table
            .route(topic, extras())
            .map(|r| r.encode(JsonStyle::Standard));
        assert_eq!(cached.as_deref(), fresh.as_deref(), "{topic}");
    }
}

fn extras() -> RouteExtras {
    RouteExtras {
        acting_master: false,
        order_topic_conf: None,
    }
}

fn iterations() -> usize {
    std::env::var("INTERLEAVINGS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000)
}

fn seed() -> u64 {
    std::env::var("INTERLEAVINGS_SEED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0x5eed)
}

#[test]
fn a_broker_is_routable_exactly_when_its_latest_operation_was_a_live_registration() {
    let random = RandomScheduler::new_from_seed(seed(), iterations());
    Runner::new(random, Config::default()).run(scenario);
    // PCT finds the orderings that need a few unlikely preemptions in a row.
    let pct = PctScheduler::new_from_seed(seed(), 3, iterations());
    Runner::new(pct, Config::default()).run(scenario);
}
