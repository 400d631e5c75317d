//! The registry's tests: the registration rules and the change log, case by case, on the
//! registry alone; after any sequence of changes, the route cache checked against freshly built
//! routes and every routable broker checked to be alive (so that it expires when it goes
//! silent); and topics with the same route sharing one cached body.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use rocketmq_wire::body::{
    BrokerData, DataVersion, QueueData, RegisterBrokerBody, TableIndex, TopicConfig,
    TopicConfigWrapper,
};

use super::*;

const MASTER: &str = "10.0.0.1:10911";
const SLAVE: &str = "10.0.0.2:10911";

/// A registration as a broker sends it; topics are (name, queues, perm).
struct Reg {
    cluster: &'static str,
    name: &'static str,
    id: i64,
    addr: &'static str,
    topics: Vec<(&'static str, i32, i32)>,
    counter: i64,
    state_version: i64,
    acting_master: Option<bool>,
    filter_servers: Option<Vec<String>>,
    now_ms: i64,
}

fn reg(name: &'static str, id: i64, addr: &'static str, topics: &[(&'static str, i32)]) -> Reg {
    Reg {
        cluster: "c",
        name,
        id,
        addr,
        topics: topics.iter().map(|(t, q)| (*t, *q, 6)).collect(),
        counter: 1,
        state_version: 0,
        acting_master: Some(false),
        filter_servers: Some(vec![]),
        now_ms: 0,
    }
}

impl Reg {
    fn cluster(mut self, cluster: &'static str) -> Self {
        self.cluster = cluster;
        self
    }

    fn version(mut self, counter: i64) -> Self {
        self.counter = counter;
        self
    }

    fn state_version(mut self, v: i64) -> Self {
        self.state_version = v;
        self
    }

    fn acting_master(mut self, on: Option<bool>) -> Self {
        self.acting_master = on;
        self
    }

    /// Sent at `ms`.
    fn at(mut self, ms: i64) -> Self {
        self.now_ms = ms;
        self
    }

    fn filter_servers(mut self, servers: &[&str]) -> Self {
        self.filter_servers = Some(servers.iter().map(|s| s.to_string()).collect());
        self
    }

    fn build(&self) -> Registration {
        Registration {
            from: Registrant {
                cluster: self.cluster.into(),
                broker_addr: self.addr.into(),
                broker_name: self.name.into(),
                broker_id: self.id,
                conn: 1,
                now_ms: self.now_ms,
            },
            ha_server_addr: format!("{}-ha", self.addr),
            zone_name: None,
            timeout_ms: None,
            enable_acting_master: self.acting_master,
            body: RegisterBrokerBody {
                wrapper: TopicConfigWrapper {
                    data_version: DataVersion {
                        counter: self.counter,
                        state_version: self.state_version,
                        timestamp: self.counter,
                    },
                    topic_configs: self
                        .topics
                        .iter()
                        .map(|(t, q, perm)| TopicConfig::new(t, *q, *perm))
                        .collect(),
                    mapping_info: vec![],
                },
                filter_server_list: self.filter_servers.clone(),
            },
            version: 479,
            listed: self.topics.len(),
            changes_since: None,
            headers: 0,
            table: None,
        }
    }
}

fn apply(r: &mut Registry, reg: &Reg, policy: RegisterPolicy) -> RegisterOutcome {
    let reg = reg.build();
    let plan = r.plan(&reg, policy);
    r.register(reg, plan, policy).0
}

fn changes(topics: &[&str], shared: bool, cluster_info: bool, topic_list: bool) -> Changes {
    Changes {
        topics: topics.iter().map(|t| t.to_string()).collect(),
        all_topics: false,
        topic_changes: 0,
        shared,
        cluster_info,
        topic_list,
    }
}

/// The registry's changes but how many topic changes were counted.
fn taken(r: &mut Registry) -> Changes {
    Changes {
        topic_changes: 0,
        ..r.take_changes()
    }
}

/// The broker at `addr` of `cluster` leaves (its connection closed), as the server applies it.
fn depart(r: &mut Registry, cluster: &str, addr: &str) {
    let leaving = r.departures(&[BrokerAddrKey {
        cluster: cluster.into(),
        addr: addr.into(),
    }]);
    r.unregister(&leaving, false);
}

/// `(perm, read queues)` of `group` in `topic`'s route.
fn queues_of(r: &Registry, topic: &str, group: &str) -> Option<(i32, i32)> {
    let route = r.route(topic, false)?;
    let qd = route.queue_datas.iter().find(|q| q.broker_name == group)?;
    Some((qd.perm, qd.read_queue_nums))
}

struct Case {
    name: &'static str,
    /// Registrations made first; their changes are not checked.
    before: Vec<Reg>,
    policy: RegisterPolicy,
    register: Reg,
    outcome: RegisterOutcome,
    changes: Changes,
    /// A topic and group with the `(perm, read queues)` expected after, or `None` for absent.
    then: (&'static str, &'static str, Option<(i32, i32)>),
}

fn registered(master: Option<&str>) -> RegisterOutcome {
    RegisterOutcome::Registered {
        master_addr: master.map(String::from),
        ha_server_addr: master.map(|m| format!("{m}-ha")),
    }
}

fn cases() -> Vec<Case> {
    let base = || reg("b", 0, MASTER, &[("t1", 4), ("t2", 4)]);
    let delete_unlisted = RegisterPolicy {
        delete_unlisted_topics: true,
        ..Default::default()
    };
    vec![
        Case {
            name: "a master's first registration creates its group and topics",
            before: vec![],
            policy: RegisterPolicy::default(),
            register: base(),
            outcome: registered(None),
            changes: changes(&["t1", "t2"], true, true, true),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "the same registration again changes nothing",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: base(),
            outcome: registered(None),
            changes: Changes::default(),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "a new version changing one topic's queues changes that topic only",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, MASTER, &[("t1", 8), ("t2", 4)]).version(2),
            outcome: registered(None),
            changes: changes(&["t1"], false, false, false),
            then: ("t1", "b", Some((6, 8))),
        },
        Case {
            name: "a new topic changes that topic and the topic list",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, MASTER, &[("t1", 4), ("t2", 4), ("t3", 2)]).version(2),
            outcome: registered(None),
            changes: changes(&["t3"], false, false, true),
            then: ("t3", "b", Some((6, 2))),
        },
        Case {
            name: "an unchanged version does not overwrite queues it already has",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, MASTER, &[("t1", 8), ("t2", 4)]),
            outcome: registered(None),
            changes: Changes::default(),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "a single-topic first registration is refused and changes nothing",
            before: vec![],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, MASTER, &[("only", 4)]),
            outcome: RegisterOutcome::Refused,
            changes: Changes::default(),
            then: ("only", "b", None),
        },
        Case {
            name: "a single topic from a known id is accepted",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, MASTER, &[("t1", 2)]).version(2),
            outcome: registered(None),
            changes: changes(&["t1"], false, false, false),
            then: ("t1", "b", Some((6, 2))),
        },
        Case {
            name: "a slave joins the group and learns its master, topics untouched",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 1, SLAVE, &[("t1", 8), ("t2", 8)]),
            outcome: registered(Some(MASTER)),
            changes: changes(&[], true, true, false),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "an older state version than the id's holder is stale",
            before: vec![base().state_version(5)],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, SLAVE, &[("t1", 8), ("t2", 8)]).state_version(3),
            outcome: RegisterOutcome::Stale,
            changes: Changes::default(),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "a second master at the holder's master epoch is stale, the first keeps id 0",
            before: vec![base().state_version(5)],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, SLAVE, &[("t1", 8), ("t2", 8)]).state_version(5),
            outcome: RegisterOutcome::Stale,
            changes: Changes::default(),
            then: ("t1", "b", Some((6, 4))),
        },
        Case {
            name: "without an epoch (state version 0) the last master to register holds id 0",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, SLAVE, &[("t1", 8), ("t2", 8)]),
            outcome: registered(None),
            changes: changes(&["t1", "t2"], true, true, false),
            then: ("t1", "b", Some((6, 8))),
        },
        Case {
            name: "a newer state version takes the id over",
            before: vec![base().state_version(5)],
            policy: RegisterPolicy::default(),
            register: reg("b", 0, SLAVE, &[("t1", 8), ("t2", 8)]).state_version(6),
            outcome: registered(None),
            changes: changes(&["t1", "t2"], true, true, false),
            then: ("t1", "b", Some((6, 8))),
        },
        Case {
            name: "a master's full registration drops unlisted topics when told to",
            before: vec![base()],
            policy: delete_unlisted,
            register: reg("b", 0, MASTER, &[("t1", 4), ("t3", 4)]).version(2),
            outcome: registered(None),
            changes: changes(&["t2", "t3"], false, false, true),
            then: ("t2", "b", None),
        },
        Case {
            name:
                "the lowest 5.x slave of a master-less acting-master group speaks for it, read-only",
            before: vec![],
            policy: RegisterPolicy::default(),
            register: reg("b", 1, SLAVE, &[("t1", 4), ("t2", 4)]).acting_master(Some(true)),
            outcome: registered(None),
            changes: changes(&["t1", "t2"], true, true, true),
            then: ("t1", "b", Some((4, 4))),
        },
        Case {
            name: "a 4.x slave never speaks for its group's topics",
            before: vec![],
            policy: RegisterPolicy::default(),
            register: reg("b", 1, SLAVE, &[("t1", 4), ("t2", 4)]).acting_master(None),
            outcome: registered(None),
            changes: changes(&[], true, true, false),
            then: ("t1", "b", None),
        },
        Case {
            name: "new filter servers change what every route of the group may show",
            before: vec![base()],
            policy: RegisterPolicy::default(),
            register: base().filter_servers(&["10.0.0.9:1"]),
            outcome: registered(None),
            changes: changes(&[], true, false, false),
            then: ("t1", "b", Some((6, 4))),
        },
    ]
}

#[test]
fn every_registration_rule_reports_exactly_what_it_changed() {
    for case in cases() {
        let mut r = Registry::default();
        for before in &case.before {
            apply(&mut r, before, case.policy);
        }
        r.take_changes();
        let outcome = apply(&mut r, &case.register, case.policy);
        assert_eq!(outcome, case.outcome, "{}", case.name);
        assert_eq!(taken(&mut r), case.changes, "{}", case.name);
        let (topic, group, expected) = case.then;
        assert_eq!(queues_of(&r, topic, group), expected, "{}", case.name);
    }
}

#[test]
fn admin_changes_and_departures_report_what_they_changed() {
    let setup = || {
        let mut r = Registry::default();
        apply(
            &mut r,
            &reg("a", 0, MASTER, &[("shared", 4), ("only-a", 4)]),
            RegisterPolicy::default(),
        );
        apply(
            &mut r,
            &reg("b", 0, SLAVE, &[("shared", 4), ("only-b", 4)]),
            RegisterPolicy::default(),
        );
        r.take_changes();
        r
    };

    let mut r = setup();
    assert!(r.delete_topic("only-a", None));
    assert_eq!(taken(&mut r), changes(&["only-a"], false, false, true));
    assert!(r.delete_topic("shared", Some("c")));
    assert_eq!(taken(&mut r), changes(&["shared"], false, false, true));

    let mut r = setup();
    assert_eq!(r.change_write_perm("a", true), 2);
    assert_eq!(
        taken(&mut r),
        changes(&["only-a", "shared"], false, false, false)
    );
    assert_eq!(queues_of(&r, "shared", "a"), Some((4, 4)));
    r.change_write_perm("a", true);
    assert!(r.take_changes().is_empty(), "wiping twice changes nothing");

    let mut r = setup();
    r.touch("c", MASTER, 99);
    assert!(
        r.take_changes().is_empty(),
        "a heartbeat is no route change"
    );
    depart(&mut r, "c", MASTER);
    assert_eq!(
        taken(&mut r),
        changes(&["only-a", "shared"], true, true, true)
    );
    assert_eq!(queues_of(&r, "shared", "b"), Some((6, 4)));
}

#[test]
fn a_departing_master_leaves_its_acting_master_group_read_only_and_others_writable() {
    let mut r = Registry::default();
    let policy = RegisterPolicy::default();
    let acting = |id, addr| reg("a", id, addr, &[("t1", 4), ("t2", 4)]).acting_master(Some(true));
    apply(&mut r, &acting(0, MASTER), policy);
    apply(&mut r, &acting(1, SLAVE), policy);
    let plain = |id, addr| reg("b", id, addr, &[("t1", 4), ("t3", 4)]).cluster("d");
    apply(&mut r, &plain(0, MASTER), policy);
    apply(&mut r, &plain(1, SLAVE), policy);
    r.take_changes();

    depart(&mut r, "c", MASTER);
    assert_eq!(queues_of(&r, "t1", "a"), Some((4, 4)), "read-only now");
    assert_eq!(queues_of(&r, "t2", "a"), Some((4, 4)));
    assert_eq!(
        queues_of(&r, "t1", "b"),
        Some((6, 4)),
        "another cluster's group"
    );

    depart(&mut r, "d", MASTER);
    assert_eq!(
        queues_of(&r, "t1", "b"),
        Some((6, 4)),
        "a group without acting master keeps its permission"
    );
    depart(&mut r, "c", SLAVE);
    assert_eq!(
        queues_of(&r, "t2", "a"),
        None,
        "the group's last address left"
    );
    assert_eq!(queues_of(&r, "t1", "b"), Some((6, 4)));
}

#[test]
fn a_repeated_registration_stays_cheap_while_others_change_the_cluster() {
    let mut r = Registry::default();
    let policy = RegisterPolicy::default();
    let a = reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]);
    let from = |reg: &Reg| reg.build().from;
    apply(&mut r, &a, policy);
    r.remember(&from(&a), 42, 0, None);
    assert!(r.repeat(&from(&a), 42).is_some());
    assert!(r.repeat(&from(&a), 43).is_none(), "another fingerprint");

    // Another group changing its topics does not matter to `a`.
    apply(&mut r, &reg("b", 0, SLAVE, &[("t1", 8), ("t9", 1)]), policy);
    assert!(r.repeat(&from(&a), 42).is_some());

    // An admin taking a topic from `a` does: the full path would bring it back.
    r.delete_topic("t2", None);
    assert!(r.repeat(&from(&a), 42).is_none());
    apply(&mut r, &a, policy);
    assert_eq!(queues_of(&r, "t2", "a"), Some((6, 4)));
}

#[test]
fn refused_first_registrations_change_nothing() {
    let mut r = Registry::default();
    for name in ["r0", "r1", "r2"] {
        let refused = apply(
            &mut r,
            &reg(name, 0, MASTER, &[("only", 4)]),
            RegisterPolicy::default(),
        );
        assert_eq!(refused, RegisterOutcome::Refused);
        assert!(r.take_changes().is_empty());
    }
    assert_eq!(
        r.groups().count() + r.clusters().count() + r.live_entries().count(),
        0
    );
}

/// A broker renamed on the same host and port: its old and new names both list the address.
fn register_under(r: &mut Registry, name: &'static str) {
    apply(
        r,
        &reg(name, 0, MASTER, &[("t1", 4), ("t2", 4)]),
        RegisterPolicy::default(),
    );
}

#[test]
fn an_address_in_two_groups_leaves_both_when_its_connection_closes() {
    let mut r = Registry::default();
    register_under(&mut r, "old-name");
    register_under(&mut r, "new-name");
    let keys = r.registered_on(1);
    let departures = r.departures(&keys);
    let names: BTreeSet<&str> = departures.iter().map(|d| d.broker_name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["new-name", "old-name"]));
    r.unregister(&departures, false);
    assert_eq!(r.groups().count(), 0, "no group keeps the address");
    assert_eq!(r.live_entries().count(), 0);
    assert!(r.route("t1", false).is_none());
}

#[test]
fn unregistering_one_group_keeps_the_address_alive_for_the_other() {
    let mut r = Registry::default();
    let policy = RegisterPolicy::default();
    apply(
        &mut r,
        &reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]),
        policy,
    );
    apply(
        &mut r,
        &reg("b", 0, MASTER, &[("t1", 4), ("t2", 4)]),
        policy,
    );
    let leaving = r.unregistration("c", MASTER, "a", 0);
    r.unregister(&[leaving], false);
    assert!(
        r.live("c", MASTER).is_some(),
        "group b still lists the address"
    );
    r.members_are_alive().unwrap();
}

#[test]
fn snapshot_members_without_a_live_entry_are_dropped() {
    let mut r = Registry::default();
    apply(
        &mut r,
        &reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]),
        RegisterPolicy::default(),
    );
    // A snapshot whose group lists a second address that has no live entry.
    let mut group = r.group("a").unwrap().clone();
    group.broker_addrs.insert(1, SLAVE.into());
    r.restore_group(group);
    assert!(r.drop_members_without_live());
    r.members_are_alive().unwrap();
    assert_eq!(r.group("a").unwrap().broker_addrs.len(), 1);
    assert!(!r.drop_members_without_live());
}

// ---- after any sequence ----

const CLUSTERS: [&str; 2] = ["c0", "c1"];
const TOPICS: [&str; 5] = ["t0", "t1", "t2", "t3", "t4"];
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const ADDRS: [&str; 4] = [
    "10.0.1.1:10911",
    "10.0.1.2:10911",
    "10.0.1.3:10911",
    "10.0.1.4:10911",
];

#[derive(Clone, Debug)]
enum Step {
    Register {
        cluster: usize,
        group: usize,
        id: i64,
        addr: usize,
        topics: Vec<(usize, i32)>,
        counter: i64,
        conn: ConnId,
    },
    Unregister {
        cluster: usize,
        group: usize,
        id: i64,
        addr: usize,
    },
    Close(ConnId),
    Expire(i64),
    DeleteTopic(usize),
    WritePerm(usize, bool),
    RegisterTopic(usize, usize, i32),
    /// A peer's word of a group's topics (`peers::routes`).
    Mirror(usize, Vec<(usize, i32)>),
    Extras,
    Read(usize, bool),
    /// An earlier registration again, the `back`-th latest (counting round), with one thing
    /// changed: what brokers that restart, move or fail over do, and what a uniform draw of
    /// every field rarely makes. Played as the registration it names ([`played`]).
    Again {
        back: usize,
        vary: Vary,
    },
}

/// What [`Step::Again`] changes of the registration it repeats.
#[derive(Clone, Debug)]
enum Vary {
    Nothing,
    Cluster,
    Group(usize),
    Id(i64),
    Addr(usize),
    Conn(ConnId),
    /// The data-version counter moved back, as a broker restarted without its store sends.
    CounterBack,
    CounterUp,
    /// Other topics at the same counter, or at the next.
    Topics(Vec<(usize, i32)>, bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => ((0..2usize, 0..3usize, 0..3i64, 0..4usize), prop::collection::vec((0..5usize, 1..4i32), 0..5), 0..3i64, 0..3u64)
            .prop_map(|((cluster, group, id, addr), topics, counter, conn)| Step::Register { cluster, group, id, addr, topics, counter, conn }),
        1 => (0..2usize, 0..3usize, 0..3i64, 0..4usize).prop_map(|(cluster, group, id, addr)| Step::Unregister { cluster, group, id, addr }),
        1 => (0..3u64).prop_map(Step::Close),
        1 => (0..15_000i64).prop_map(Step::Expire),
        1 => (0..5usize).prop_map(Step::DeleteTopic),
        1 => (0..3usize, any::<bool>()).prop_map(|(g, wipe)| Step::WritePerm(g, wipe)),
        1 => (0..5usize, 0..3usize, 1..4i32).prop_map(|(t, g, q)| Step::RegisterTopic(t, g, q)),
        1 => (0..3usize, prop::collection::vec((0..5usize, 1..4i32), 0..5)).prop_map(|(g, topics)| Step::Mirror(g, topics)),
        1 => Just(Step::Extras),
        4 => (0..5usize, any::<bool>()).prop_map(|(t, standard)| Step::Read(t, standard)),
    ]
}

/// Steps weighted towards registrations that vary earlier ones (see [`Step::Again`]).
fn varied_step() -> impl Strategy<Value = Step> {
    let vary = prop_oneof![
        1 => Just(Vary::Nothing),
        2 => Just(Vary::Cluster),
        1 => (0..3usize).prop_map(Vary::Group),
        2 => (0..3i64).prop_map(Vary::Id),
        2 => (0..4usize).prop_map(Vary::Addr),
        2 => (0..3u64).prop_map(Vary::Conn),
        2 => Just(Vary::CounterBack),
        1 => Just(Vary::CounterUp),
        3 => (prop::collection::vec((0..5usize, 1..4i32), 0..5), any::<bool>())
            .prop_map(|(topics, up)| Vary::Topics(topics, up)),
    ];
    prop_oneof![
        3 => step(),
        3 => (0..4usize, vary).prop_map(|(back, vary)| Step::Again { back, vary }),
    ]
}

/// `steps` with each [`Step::Again`] made the registration it names; one with no registration
/// before it is dropped.
fn played(steps: &[Step]) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::with_capacity(steps.len());
    for step in steps {
        let Step::Again { back, ref vary } = *step else {
            out.push(step.clone());
            continue;
        };
        let earlier: Vec<&Step> = out
            .iter()
            .rev()
            .filter(|s| matches!(s, Step::Register { .. }))
            .collect();
        let Some(Step::Register {
            mut cluster,
            mut group,
            mut id,
            mut addr,
            mut topics,
            mut counter,
            mut conn,
        }) = (!earlier.is_empty()).then(|| earlier[back % earlier.len()].clone())
        else {
            continue;
        };
        match vary {
            Vary::Nothing => {}
            Vary::Cluster => cluster = 1 - cluster,
            Vary::Group(g) => group = *g,
            Vary::Id(i) => id = *i,
            Vary::Addr(a) => addr = *a,
            Vary::Conn(c) => conn = *c,
            Vary::CounterBack => counter -= 1,
            Vary::CounterUp => counter += 1,
            Vary::Topics(t, up) => {
                topics = t.clone();
                counter += i64::from(*up);
            }
        }
        out.push(Step::Register {
            cluster,
            group,
            id,
            addr,
            topics,
            counter,
            conn,
        });
    }
    out
}

fn extras() -> RouteExtras {
    RouteExtras {
        acting_master: false,
        order_topic_conf: None,
    }
}

fn style(standard: bool) -> JsonStyle {
    if standard {
        JsonStyle::Standard
    } else {
        JsonStyle::Fastjson
    }
}

/// The topics of each broker's last applied registration, by (cluster, address), to register
/// the next one as its difference, as the handler does with a table's index.
type LastTables = std::collections::HashMap<(usize, usize), Vec<(&'static str, i32, i32)>>;

fn take_step(table: &RouteTable, step: &Step, now: &mut i64, applied: Option<&mut LastTables>) {
    match *step {
        Step::Register {
            cluster,
            group,
            id,
            addr,
            ref topics,
            counter,
            conn,
        } => {
            let mut seen = BTreeSet::new();
            let topics: Vec<(&'static str, i32, i32)> = topics
                .iter()
                .filter(|(t, _)| seen.insert(*t))
                .map(|(t, q)| (TOPICS[*t], *q, 6))
                .collect();
            let build = || {
                let mut r = reg(GROUPS[group], id, ADDRS[addr], &[])
                    .cluster(CLUSTERS[cluster])
                    .version(counter)
                    .build();
                r.body.wrapper.topic_configs = topics
                    .iter()
                    .map(|(t, q, p)| TopicConfig::new(t, *q, *p))
                    .collect();
                r.listed = topics.len();
                r.from.conn = conn;
                r.from.now_ms = *now;
                r.timeout_ms = Some(10_000);
                r.headers = (cluster * 1000 + group * 100 + addr * 10) as u128 + id as u128;
                r
            };
            let Some(applied) = applied else {
                table.register(build(), RegisterPolicy::default(), 0);
                return;
            };
            let mut registration = build();
            registration.table = Some(Arc::new(TableIndex::default()));
            let base = table.read(|r| r.table_base(&registration.from, registration.headers));
            if let (Some(base), Some(last)) = (base, applied.get(&(cluster, addr))) {
                registration.body.wrapper.topic_configs.retain(|tc| {
                    let t = tc.topic_name.as_deref().unwrap_or_default();
                    !last.contains(&(t, tc.read_queue_nums, tc.perm))
                });
                registration.changes_since = Some(base);
            }
            let outcome = match table.register(registration, RegisterPolicy::default(), 0) {
                Some((outcome, _)) => outcome,
                None => {
                    // Refused as a difference: registered whole, as the handler does.
                    let mut again = build();
                    again.table = Some(Arc::new(TableIndex::default()));
                    let applied = table.register(again, RegisterPolicy::default(), 0);
                    applied.expect("a whole registration is applied").0
                }
            };
            if matches!(outcome, RegisterOutcome::Registered { .. }) {
                applied.insert((cluster, addr), topics);
            }
        }
        Step::Unregister {
            cluster,
            group,
            id,
            addr,
        } => {
            table.change(|r| {
                let leaving = r.unregistration(CLUSTERS[cluster], ADDRS[addr], GROUPS[group], id);
                r.unregister(&[leaving], false)
            });
        }
        Step::Close(conn) => {
            table.change(|r| {
                let leaving = r.closed(conn);
                r.unregister(&leaving, false)
            });
        }
        Step::Expire(advance) => {
            *now += advance;
            let now = *now;
            table.change(|r| {
                let leaving = r.expire(now).leaving;
                r.unregister(&leaving, false)
            });
        }
        Step::DeleteTopic(t) => {
            table.change(|r| r.delete_topic(TOPICS[t], None));
        }
        Step::WritePerm(g, wipe) => {
            table.change(|r| r.change_write_perm(GROUPS[g], wipe));
        }
        Step::Mirror(g, ref topics) => {
            let topics: Vec<(&str, super::Queues)> = topics
                .iter()
                .map(|&(t, q)| (TOPICS[t], super::queues::rw(q)))
                .collect();
            table.change(|r| {
                let plan = r.plan_mirror(GROUPS[g], &topics);
                r.apply_mirror(GROUPS[g], &topics, plan)
            });
        }
        Step::RegisterTopic(t, g, q) => {
            let qd = rocketmq_wire::body::QueueData {
                broker_name: GROUPS[g].into(),
                read_queue_nums: q,
                write_queue_nums: q,
                perm: 6,
                topic_sys_flag: 0,
            };
            table.change(|r| r.register_topic(TOPICS[t], &[qd]));
        }
        Step::Extras => table.invalidate(),
        Step::Read(t, standard) => {
            table.route_body(TOPICS[t], style(standard), extras);
        }
        Step::Again { .. } => unreachable!("played as a registration"),
    }
}

proptest! {
    #[test]
    fn every_cached_body_is_fresh_and_every_routable_broker_alive(steps in prop::collection::vec(step(), 1..60)) {
        let table = RouteTable::default();
        table.change(Registry::hash_topics);
        let mut now = 0i64;
        for step in steps {
            take_step(&table, &step, &mut now, None);
            let alive = table.read(Registry::members_are_alive);
            prop_assert!(alive.is_ok(), "{:?}", alive);
            let (kept, counted) = table.read(|r| (r.topic_sums.clone(), r.counted_topic_sums()));
            prop_assert_eq!(kept, Some(counted), "group hashes after {:?}", step);
            for topic in TOPICS {
                for standard in [true, false] {
                    let cached = table.route_body(topic, style(standard), extras);
                    let fresh = table.route(topic, extras()).map(|r| r.encode(style(standard)));
                    prop_assert_eq!(cached.as_deref(), fresh.as_deref(), "{} after {:?}", topic, standard);
                }
            }
        }
    }

    #[test]
    fn registrations_applied_as_differences_leave_the_routes_of_whole_ones(steps in prop::collection::vec(step(), 1..80)) {
        differences_agree_with_whole_reads(&steps)?;
    }

    #[test]
    fn registrations_that_vary_earlier_ones_read_as_differences_leave_the_routes_of_whole_ones(steps in prop::collection::vec(varied_step(), 1..80)) {
        differences_agree_with_whole_reads(&played(&steps))?;
    }
}

/// Plays `steps` on two tables, one reading every registration whole and one reading each as
/// its difference from the broker's previous table where the registry allows it; after each
/// step both route every topic alike.
fn differences_agree_with_whole_reads(steps: &[Step]) -> Result<(), TestCaseError> {
    let (whole, by_difference) = (RouteTable::default(), RouteTable::default());
    let (mut now_whole, mut now_diff) = (0i64, 0i64);
    let mut applied = LastTables::new();
    for step in steps {
        take_step(&whole, step, &mut now_whole, None);
        take_step(&by_difference, step, &mut now_diff, Some(&mut applied));
        for topic in TOPICS {
            prop_assert_eq!(
                whole.route(topic, extras()),
                by_difference.route(topic, extras()),
                "{} after {:?}",
                topic,
                step
            );
        }
        prop_assert_eq!(
            whole.read(|r| r.cluster_info()),
            by_difference.read(|r| r.cluster_info())
        );
    }
    Ok(())
}

/// A registration step of the sequences below, on connection 0.
fn register_step(
    cluster: usize,
    group: usize,
    id: i64,
    addr: usize,
    topics: &[(usize, i32)],
    counter: i64,
) -> Step {
    Step::Register {
        cluster,
        group,
        id,
        addr,
        topics: topics.to_vec(),
        counter,
        conn: 0,
    }
}

#[test]
fn a_table_kept_at_an_unchanged_data_version_is_not_a_base_for_differences() {
    // The second registration changes t2 without a new data version, which Java (and we)
    // leave as the table holds it; the third, with a new version, must apply it.
    let steps = [
        register_step(0, 2, 2, 3, &[(3, 1), (2, 1)], 0),
        register_step(0, 2, 2, 3, &[(2, 2)], 0),
        register_step(0, 2, 2, 3, &[(2, 2)], 1),
    ];
    differences_agree_with_whole_reads(&steps).unwrap();
}

#[test]
fn a_group_moving_onto_an_address_another_group_registered_reads_its_table_whole() {
    // g2 registers in c0; g0 registers the same address in c1 at version 2; g2 joins c1 on
    // that address at version 2 (the address's version did not move, so t0 keeps 1 queue);
    // then g2 registers t0 with 3 queues at version 0, as a restarted broker would.
    let steps = [
        register_step(0, 2, 0, 0, &[(1, 1), (0, 1)], 0),
        register_step(1, 0, 0, 0, &[(0, 1), (1, 1)], 2),
        register_step(1, 2, 0, 0, &[(0, 3)], 2),
        register_step(1, 2, 0, 0, &[(0, 3)], 0),
    ];
    differences_agree_with_whole_reads(&steps).unwrap();
    let table = RouteTable::default();
    let mut now = 0;
    for step in &steps {
        take_step(&table, step, &mut now, None);
    }
    assert_eq!(
        table.read(|r| queues_of(r, "t0", "g2")),
        Some((6, 3)),
        "as registered last"
    );
}

#[test]
fn a_group_emptied_and_registered_anew_does_not_match_an_old_kept_table() {
    // g0's id 1 at address 2 registers in c1 (t3:3, t0:1); the address moves to id 0 in c0,
    // id 0 moves to address 0 on connection 2, which closes: g0 is gone with its topics. g0
    // is created again by id 1 at address 2 in c0; then the c1 registration of that member
    // comes with t3:3, which its kept table lists. Its group counted its epochs afresh and
    // matched the kept one, so t3 was stepped over as applied already.
    let steps = [
        register_step(1, 0, 1, 2, &[(3, 3), (0, 1)], 1),
        register_step(0, 0, 0, 2, &[], 0),
        Step::Register {
            cluster: 0,
            group: 0,
            id: 0,
            addr: 0,
            topics: vec![],
            counter: 0,
            conn: 2,
        },
        Step::Close(2),
        register_step(0, 0, 1, 2, &[(2, 1), (0, 1)], 0),
        register_step(1, 0, 1, 2, &[(3, 3)], 0),
    ];
    differences_agree_with_whole_reads(&steps).unwrap();
}

#[test]
fn a_member_registered_in_two_clusters_reads_whole_after_the_other_changed_its_topics() {
    // One member of g0 registers in c0 and c1 on one address; its c0 registration changes t0
    // to 2 queues; its next c1 registration lists t0:1 as its kept c1 table did, at a new data
    // version, so read whole it sets t0 back to 1 queue.
    let steps = [
        register_step(0, 0, 0, 0, &[(0, 1), (1, 1)], 0),
        register_step(1, 0, 0, 0, &[(0, 1), (1, 1)], 0),
        register_step(0, 0, 0, 0, &[(0, 2), (1, 1)], 1),
        register_step(1, 0, 0, 0, &[(0, 1), (1, 1)], 1),
    ];
    differences_agree_with_whole_reads(&steps).unwrap();
    let table = RouteTable::default();
    let mut now = 0;
    for step in &steps {
        take_step(&table, step, &mut now, None);
    }
    assert_eq!(table.read(|r| queues_of(r, "t0", "g0")), Some((6, 1)));
}

/// What people are told, as (kind, subject).
fn told(r: &mut Registry) -> Vec<(&'static str, String)> {
    r.take_events()
        .into_iter()
        .map(|e| (e.kind.key(), e.what))
        .collect()
}

#[test]
fn mutations_tell_what_happened_once_not_once_per_topic() {
    let mut r = Registry::default();
    let topics = [("t1", 4), ("t2", 4), ("t3", 4), ("t4", 4)];
    let policy = RegisterPolicy::default();
    apply(&mut r, &reg("a", 0, MASTER, &topics), policy);
    assert_eq!(
        told(&mut r),
        vec![
            ("broker-joined", MASTER.to_string()),
            ("topics-created", "4 topics".to_string())
        ]
    );
    apply(&mut r, &reg("a", 0, MASTER, &topics).version(2), policy);
    assert!(told(&mut r).is_empty(), "a re-registration is no news");
    apply(&mut r, &reg("a", 1, SLAVE, &topics), policy);
    assert_eq!(told(&mut r), vec![("broker-joined", SLAVE.to_string())]);

    r.change_write_perm("a", true);
    assert_eq!(told(&mut r), vec![("write-perm-wiped", "a".to_string())]);
    r.delete_topic("t1", None);
    assert_eq!(told(&mut r), vec![("topics-deleted", "t1".to_string())]);

    let keys: Vec<BrokerAddrKey> = [MASTER, SLAVE]
        .iter()
        .map(|addr| BrokerAddrKey {
            cluster: "c".into(),
            addr: addr.to_string(),
        })
        .collect();
    let leaving = r.departures(&keys);
    r.unregister(&leaving, false);
    assert_eq!(
        told(&mut r),
        vec![
            ("broker-left", MASTER.to_string()),
            ("broker-left", SLAVE.to_string()),
            ("topics-deleted", "3 topics".to_string())
        ]
    );
}

// ---- removals decided before a newer registration ----

/// A's master registered with topics t1 and t2 (data version `counter`) on `conn`, at `now_ms`.
fn register_at(r: &mut Registry, counter: i64, conn: ConnId, now_ms: i64) {
    let mut registration = reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)])
        .version(counter)
        .build();
    registration.from.conn = conn;
    registration.from.now_ms = now_ms;
    registration.timeout_ms = Some(10_000);
    let policy = RegisterPolicy::default();
    let plan = r.plan(&registration, policy);
    r.register(registration, plan, policy);
}

fn routable(r: &Registry, group: &str, addr: &str) -> bool {
    r.group(group)
        .is_some_and(|bd| bd.broker_addrs.values().any(|a| a == addr))
        && r.route("t1", false)
            .is_some_and(|route| route.broker_datas.iter().any(|bd| bd.broker_name == group))
}

#[test]
fn an_unregistration_overtaken_by_a_new_registration_leaves_it_alone() {
    let mut r = Registry::default();
    register_at(&mut r, 1, 1, 0);
    // UNREGISTER_BROKER is answered and queued; the broker registers again at once.
    let leaving = r.unregistration("c", MASTER, "a", 0);
    register_at(&mut r, 2, 2, 0);
    r.take_events();
    let done = r.unregister(&[leaving], false);
    assert_eq!(done.stale, 1);
    assert!(routable(&r, "a", MASTER), "the newer registration stands");
    r.members_are_alive().unwrap();
    assert_eq!(
        told(&mut r),
        vec![("stale-unregistration-ignored", "a".to_string())]
    );
    // An unregistration decided after the registration removes it.
    let leaving = r.unregistration("c", MASTER, "a", 0);
    assert_eq!(r.unregister(&[leaving], false).stale, 0);
    assert!(!routable(&r, "a", MASTER));
    assert_eq!(r.live_entries().count(), 0);
}

/// The journal's notes, their moves unpacked as the journal's writer does.
fn unpacked(r: &mut Registry) -> Vec<crate::journal::Entry> {
    let mut notes = r.take_notes();
    notes.iter_mut().for_each(crate::journal::Entry::unpack);
    notes
}

#[test]
fn the_journal_is_told_each_cause_with_the_topics_it_moved() {
    use crate::journal::Cause;
    let causes = |notes: &[crate::journal::Entry]| -> Vec<Cause> {
        notes.iter().map(|e| e.cause()).collect()
    };
    let mut r = Registry::default();
    r.keep_notes(true);
    register_at(&mut r, 1, 1, 0);
    let notes = unpacked(&mut r);
    assert_eq!(causes(&notes), [Cause::Registered]);
    let moved: Vec<(&str, bool)> = notes[0]
        .topics
        .iter()
        .map(|m| {
            (
                m.topic.as_str(),
                m.was.is_none() && m.now == Some([4, 4, 6]),
            )
        })
        .collect();
    assert_eq!(moved, [("t1", true), ("t2", true)]);
    // A repeat of the same table notes nothing; a queued unregistration overtaken by a newer
    // registration is noted as left unapplied, and the one after it as the broker leaving.
    register_at(&mut r, 1, 1, 0);
    assert!(r.take_notes().is_empty());
    let leaving = r.unregistration("c", MASTER, "a", 0);
    register_at(&mut r, 2, 2, 0);
    r.take_notes();
    r.unregister(&[leaving], false);
    assert_eq!(causes(&r.take_notes()), [Cause::StaleUnregistration]);
    let leaving = r.unregistration("c", MASTER, "a", 0);
    r.unregister(&[leaving], false);
    let notes = unpacked(&mut r);
    assert_eq!(causes(&notes), [Cause::Unregistered]);
    assert_eq!(notes[0].addr.as_deref(), Some(MASTER));
    assert!(notes[0].topics.iter().all(|m| m.is_removal()));
    assert_eq!(notes[0].topics.len(), 2);
    // An admin's deletion names who asked; the registry without notes keeps none.
    register_at(&mut r, 3, 3, 0);
    r.take_notes();
    r.asked_by(Some("admin from 10.9.9.9".into()), |r| {
        r.delete_topic("t1", None)
    });
    let notes = unpacked(&mut r);
    assert_eq!(causes(&notes), [Cause::AdminDeleted]);
    assert_eq!(notes[0].by.as_deref(), Some("admin from 10.9.9.9"));
    assert_eq!(notes[0].topics[0].topic, "t1");
    r.keep_notes(false);
    r.delete_topic("t2", None);
    assert!(r.take_notes().is_empty());
}

#[test]
fn an_identical_registration_also_overtakes_a_queued_unregistration() {
    let table = RouteTable::default();
    let registration = || {
        let mut registration = reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]).build();
        registration.from.conn = 1;
        registration
    };
    let from = registration().from;
    table.register(registration(), RegisterPolicy::default(), 7);
    let leaving = table.read(|r| r.unregistration("c", MASTER, "a", 0));
    assert!(
        table.change(|r| r.repeat(&from, 7)).is_some(),
        "served as a repeat"
    );
    let done = table.change(|r| r.unregister(&[leaving], false));
    assert_eq!(done.stale, 1);
    assert!(table.read(|r| routable(r, "a", MASTER)));
}

#[test]
fn a_closed_connection_removes_only_what_is_still_registered_on_it() {
    let mut r = Registry::default();
    register_at(&mut r, 1, 1, 0);
    // Registered again on a new connection before the old one's close is handled.
    register_at(&mut r, 2, 2, 0);
    assert!(r.closed(1).is_empty());
    // The close is decided first, the registration on the new connection lands before the
    // removals are applied.
    let leaving = r.closed(2);
    assert_eq!(leaving.len(), 1);
    register_at(&mut r, 3, 3, 0);
    assert_eq!(r.unregister(&leaving, false).stale, 1);
    assert!(routable(&r, "a", MASTER));
    r.members_are_alive().unwrap();
}

#[test]
fn an_expiry_does_not_remove_a_registration_that_landed_at_the_deadline() {
    let mut r = Registry::default();
    register_at(&mut r, 1, 1, 0);
    assert!(
        r.expire(10_000).expired.is_empty(),
        "not past the deadline yet"
    );
    let expiry = r.expire(10_001);
    assert_eq!(expiry.expired.len(), 1);
    assert_eq!(expiry.expired[0].silent_ms, 10_001);
    // The broker's registration lands between the decision and the removal.
    register_at(&mut r, 1, 1, 10_001);
    assert_eq!(r.unregister(&expiry.leaving, false).stale, 1);
    assert!(routable(&r, "a", MASTER));
    assert!(
        r.expire(20_001).expired.is_empty(),
        "the new deadline counts"
    );
    let expiry = r.expire(20_002);
    r.unregister(&expiry.leaving, false);
    assert!(!routable(&r, "a", MASTER));
}

#[test]
fn a_batch_removing_a_whole_group_spares_the_member_that_registered_again() {
    let mut r = Registry::default();
    let policy = RegisterPolicy::default();
    let topics = [("t1", 4), ("t2", 4)];
    apply(&mut r, &reg("a", 0, MASTER, &topics), policy);
    apply(&mut r, &reg("a", 1, SLAVE, &topics), policy);
    let batch = [
        r.unregistration("c", MASTER, "a", 0),
        r.unregistration("c", SLAVE, "a", 1),
    ];
    apply(&mut r, &reg("a", 1, SLAVE, &topics).version(2), policy);
    let done = r.unregister(&batch, false);
    assert_eq!(done.stale, 1);
    let group = r.group("a").expect("the slave keeps the group");
    assert_eq!(group.broker_addrs.values().collect::<Vec<_>>(), vec![SLAVE]);
    r.members_are_alive().unwrap();
}

#[test]
fn another_group_registering_on_the_same_address_does_not_fence_a_removal() {
    let mut r = Registry::default();
    register_under(&mut r, "old-name");
    let leaving = r.unregistration("c", MASTER, "old-name", 0);
    register_under(&mut r, "new-name");
    assert_eq!(r.unregister(&[leaving], false).stale, 0);
    assert!(r.group("old-name").is_none());
    assert!(routable(&r, "new-name", MASTER));
}

#[test]
fn admin_changes_and_registrations_take_effect_in_the_order_they_were_applied() {
    let mut r = Registry::default();
    register_at(&mut r, 1, 1, 0);
    r.delete_topic("t1", None);
    assert!(
        r.route("t1", false).is_none(),
        "deleted after the registration"
    );
    register_at(&mut r, 1, 1, 0);
    assert_eq!(
        queues_of(&r, "t1", "a"),
        Some((6, 4)),
        "registered after the delete"
    );
    r.change_write_perm("a", true);
    register_at(&mut r, 1, 1, 0);
    assert_eq!(
        queues_of(&r, "t1", "a"),
        Some((4, 4)),
        "an unchanged data version keeps the wipe, as Java does"
    );
    register_at(&mut r, 2, 1, 0);
    assert_eq!(
        queues_of(&r, "t1", "a"),
        Some((6, 4)),
        "a new version restores it"
    );
}

// ---- topics sharing route bodies ----

fn table(topics: &[(&str, i32)]) -> RouteTable {
    let mut registry = Registry::default();
    registry.restore_group(BrokerData {
        cluster: "c".into(),
        broker_name: "b".into(),
        broker_addrs: BTreeMap::from([(0, "10.0.0.1:10911".into())]),
        ..Default::default()
    });
    for (topic, queues) in topics {
        let qd = QueueData {
            broker_name: "b".into(),
            read_queue_nums: *queues,
            write_queue_nums: *queues,
            perm: 6,
            topic_sys_flag: 0,
        };
        registry.set_queues(topic, &qd);
    }
    RouteTable::with_registry(registry)
}

fn body(table: &RouteTable, topic: &str) -> Bytes {
    let extras = || RouteExtras {
        acting_master: false,
        order_topic_conf: None,
    };
    table
        .route_body(topic, JsonStyle::Standard, extras)
        .unwrap()
}

#[test]
fn topics_with_the_same_route_share_one_body() {
    let t = table(&[("a", 8), ("b", 8), ("c", 4)]);
    let (a, b, c) = (body(&t, "a"), body(&t, "b"), body(&t, "c"));
    assert_eq!(a, b);
    assert_eq!(a.as_ptr(), b.as_ptr());
    assert_ne!(a, c);
    t.invalidate();
    let rebuilt = body(&t, "b");
    assert_eq!(rebuilt, a);
    assert_eq!(body(&t, "a").as_ptr(), rebuilt.as_ptr());
}

#[test]
fn the_set_of_distinct_bodies_stays_bounded() {
    let topics: Vec<(String, i32)> = (0..DISTINCT_KEPT as i32 + 500)
        .map(|i| (format!("t{i}"), i + 1))
        .collect();
    let refs: Vec<(&str, i32)> = topics.iter().map(|(t, q)| (t.as_str(), *q)).collect();
    let t = table(&refs);
    for (topic, _) in &refs {
        body(&t, topic);
    }
    let kept = t.distinct.lock().len();
    assert!(kept <= DISTINCT_KEPT.max(refs.len()), "{kept} kept");
    // Every body is still served from the cache.
    assert_eq!(t.standard.len(), refs.len());
}

/// Peers are told of brokers that said they were leaving, not of closed connections; a peer
/// removes a broker only if it holds it on another's word and heard of it no later.
#[test]
fn only_a_broker_that_said_it_was_leaving_is_passed_on_and_only_where_held_on_word() {
    let policy = RegisterPolicy::default();
    let mut here = Registry::default();
    apply(
        &mut here,
        &reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]),
        policy,
    );
    apply(
        &mut here,
        &reg("b", 0, SLAVE, &[("t1", 4), ("t2", 4)]),
        policy,
    );
    let leaving = here.unregistration("c", MASTER, "a", 0);
    here.unregister(&[leaving], false);
    depart(&mut here, "c", SLAVE);
    let told: Vec<_> = here
        .announced_departures()
        .map(|(k, _)| k.addr.clone())
        .collect();
    assert_eq!(told, vec![MASTER.to_string()]);
    let (_, at_ms) = here.announced_departures().next().unwrap();
    assert!(here.departed_at("c", SLAVE).is_some());

    // The peer's copy was registered on connection 1 (`Reg::build`) at time 0.
    let mut peer = Registry::default();
    apply(
        &mut peer,
        &reg("a", 0, MASTER, &[("t1", 4), ("t2", 4)]),
        policy,
    );
    assert!(peer.live_entries().next().is_some());
    assert!(
        peer.left_at_peer("c", MASTER, at_ms, 2).is_empty(),
        "registered there itself"
    );
    assert!(
        peer.left_at_peer("c", MASTER, -1, 1).is_empty(),
        "heard of after it left"
    );
    let gone = peer.left_at_peer("c", MASTER, at_ms, 1);
    assert_eq!(gone.len(), 1);
    peer.unregister(&gone, false);
    assert_eq!(peer.live_entries().count(), 0);
    assert_eq!(peer.announced_departures().count(), 1, "passed on in turn");
}

#[test]
fn a_change_to_more_topics_than_are_named_one_by_one_still_drops_every_cached_route() {
    let table = RouteTable::default();
    let names: Vec<&'static str> = (0..5000)
        .map(|i| &*Box::leak(format!("t{i}").into_boxed_str()))
        .collect();
    let topics = |q| names.iter().map(|t| (*t, q)).collect::<Vec<_>>();
    let policy = RegisterPolicy::default();
    table.register(reg("a", 0, MASTER, &topics(4)).build(), policy, 1);
    let cached = table
        .route_body("t4999", JsonStyle::Standard, extras)
        .unwrap();
    assert!(std::str::from_utf8(&cached)
        .unwrap()
        .contains("\"readQueueNums\":4"));
    let again = reg("a", 0, MASTER, &topics(8)).version(2).build();
    table.register(again, policy, 2);
    let fresh = table
        .route_body("t4999", JsonStyle::Standard, extras)
        .unwrap();
    assert!(std::str::from_utf8(&fresh)
        .unwrap()
        .contains("\"readQueueNums\":8"));
}

// ---- registration rounds (`rounds`) ----

fn routed(r: &Registry, topic: &str) -> bool {
    queues_of(r, topic, "b").is_some()
}

/// A registry holding group b's topics t1..t4 as a snapshot restores them.
fn restored() -> Registry {
    let mut r = Registry::default();
    let old = [("t1", 4), ("t2", 4), ("t3", 4), ("t4", 4)];
    apply(
        &mut r,
        &reg("b", 0, MASTER, &old),
        RegisterPolicy::default(),
    );
    let r = r.with_routes_restored();
    assert_eq!(r.provisional_topics("b"), 4);
    r
}

/// One registration of group b's master: a chunk of its round at data version `version`.
fn chunk(topics: &[(&'static str, i32)], version: i64, at: i64) -> Reg {
    reg("b", 0, MASTER, topics).version(version).at(at)
}

impl Registry {
    /// As a start from the snapshot leaves it: no registration remembered, topics provisional.
    fn with_routes_restored(mut self) -> Registry {
        for live in self.live.values_mut() {
            live.last_registration = None;
        }
        self.hold_restored_topics();
        self.take_changes();
        self
    }
}

#[test]
fn restored_topics_a_lone_registration_leaves_out_go_once_its_round_is_quiet() {
    let mut r = restored();
    let policy = RegisterPolicy::default();
    apply(
        &mut r,
        &reg("b", 0, MASTER, &[("t1", 4), ("t2", 4), ("t5", 4)]).at(1_000),
        policy,
    );
    assert!(routed(&r, "t3"), "served from the snapshot meanwhile");
    r.end_quiet_rounds(1_000 + rounds::QUIET_MS);
    assert!(routed(&r, "t3"), "a next chunk may still come");
    r.end_quiet_rounds(1_001 + rounds::QUIET_MS);
    assert!(!routed(&r, "t3") && !routed(&r, "t4"));
    assert!(routed(&r, "t1") && routed(&r, "t2") && routed(&r, "t5"));
    assert_eq!(r.provisional_topics("b"), 0);
}

#[test]
fn a_split_round_ends_at_its_short_last_chunk_and_keeps_what_any_chunk_listed() {
    let mut r = restored();
    let policy = RegisterPolicy::default();
    apply(&mut r, &chunk(&[("t1", 4), ("t5", 4)], 2, 1_000), policy);
    apply(&mut r, &chunk(&[("t2", 4), ("t6", 4)], 2, 1_100), policy);
    assert_eq!(r.provisional_topics("b"), 2, "t3 and t4 not listed yet");
    apply(&mut r, &chunk(&[("t4", 4)], 2, 1_200), policy);
    assert!(!routed(&r, "t3"), "no chunk of the round listed it");
    for t in ["t1", "t2", "t4", "t5", "t6"] {
        assert!(routed(&r, t), "{t} was listed by a chunk");
    }
}

#[test]
fn a_split_round_that_loses_its_last_chunk_removes_nothing_until_a_complete_one() {
    let mut r = restored();
    let policy = RegisterPolicy::default();
    apply(&mut r, &chunk(&[("t1", 4), ("t2", 4)], 2, 1_000), policy);
    apply(&mut r, &chunk(&[("t5", 4), ("t6", 4)], 2, 1_100), policy);
    r.end_quiet_rounds(60_000);
    assert!(
        routed(&r, "t3") && routed(&r, "t4"),
        "an incomplete round proves nothing"
    );
    apply(&mut r, &chunk(&[("t1", 4), ("t2", 4)], 2, 90_000), policy);
    apply(&mut r, &chunk(&[("t3", 4), ("t5", 4)], 2, 90_100), policy);
    apply(&mut r, &chunk(&[], 2, 90_200), policy);
    assert!(routed(&r, "t3"));
    assert!(!routed(&r, "t4"), "the complete round did not list it");
}

#[test]
fn a_single_topic_increment_vouches_for_its_topic_but_completes_no_round() {
    let mut r = restored();
    let policy = RegisterPolicy::default();
    apply(
        &mut r,
        &reg("b", 0, MASTER, &[("t3", 4)]).version(2).at(1_000),
        policy,
    );
    r.end_quiet_rounds(60_000);
    assert!(routed(&r, "t4"), "no round went by");
    assert_eq!(r.provisional_topics("b"), 3);
    apply(
        &mut r,
        &reg("b", 0, MASTER, &[("t1", 4), ("t2", 4)])
            .version(2)
            .at(61_000),
        policy,
    );
    r.end_quiet_rounds(70_000);
    assert!(routed(&r, "t3"), "its increment listed it");
    assert!(!routed(&r, "t4"));
}

#[test]
fn a_restored_group_is_read_whole_until_its_round_settles() {
    let mut r = restored();
    let from = reg("b", 0, MASTER, &[("t1", 4)]).build().from;
    let all = [("t1", 4), ("t2", 4), ("t3", 4), ("t4", 4)];
    let whole = reg("b", 0, MASTER, &all).at(1_000).build();
    let plan = r.plan(&whole, RegisterPolicy::default());
    r.register(whole, plan, RegisterPolicy::default());
    r.remember(
        &from,
        1,
        7,
        Some(std::sync::Arc::new(TableIndex::default())),
    );
    assert!(
        r.table_base(&from, 7).is_none(),
        "its round needs every name"
    );
    r.end_quiet_rounds(60_000);
    assert_eq!(r.provisional_topics("b"), 0);
    assert!(r.table_base(&from, 7).is_some(), "settled, nothing left");
}

#[test]
fn pruning_a_split_broker_removes_only_what_no_chunk_of_its_round_listed() {
    let prune = RegisterPolicy {
        delete_unlisted_topics: true,
        ..Default::default()
    };
    let mut r = Registry::default();
    apply(
        &mut r,
        &chunk(&[("a", 4), ("b", 4), ("c", 4), ("d", 4), ("e", 4)], 1, 0),
        prune,
    );
    // It turns split registration on: chunks of two.
    apply(&mut r, &chunk(&[("a", 4), ("b", 4)], 2, 60_000), prune);
    assert!(!routed(&r, "c"), "its first chunk prunes as Java does");
    apply(&mut r, &chunk(&[("c", 4), ("f", 4)], 2, 60_100), prune);
    assert!(
        routed(&r, "d") && routed(&r, "e"),
        "a second chunk puts back what the first pruned"
    );
    apply(&mut r, &chunk(&[("d", 4)], 2, 60_200), prune);
    for t in ["a", "b", "c", "d", "f"] {
        assert!(routed(&r, t), "{t} was listed by a chunk");
    }
    assert!(!routed(&r, "e"), "no chunk listed it");
    // The next round defers from its first chunk on.
    apply(&mut r, &chunk(&[("a", 4), ("b", 4)], 2, 90_000), prune);
    assert!(
        routed(&r, "c") && routed(&r, "f"),
        "nothing pruned before the round ends"
    );
    apply(&mut r, &chunk(&[("c", 4), ("d", 4)], 2, 90_100), prune);
    apply(&mut r, &chunk(&[], 2, 90_200), prune);
    assert!(!routed(&r, "f"));
    assert!(routed(&r, "a") && routed(&r, "d"));
    // A lone registration later (the table shrank below a chunk) prunes once it goes quiet.
    apply(&mut r, &chunk(&[("a", 4), ("b", 4)], 3, 120_000), prune);
    assert!(routed(&r, "c"), "it may still be a first chunk");
    r.end_quiet_rounds(130_000);
    assert!(!routed(&r, "c") && !routed(&r, "d"));
    assert!(routed(&r, "a"));
}

/// A change that waits for the registry's lock (another change holds it) leaves the async
/// worker to its other tasks meanwhile: with one worker, a task spawned after it still runs.
#[test]
fn a_change_waiting_for_the_lock_does_not_hold_up_the_worker() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let table = Arc::new(RouteTable::default());
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let table = table.clone();
        std::thread::spawn(move || {
            let _held = table.registry.write();
            held_tx.send(()).unwrap();
            let _ = release_rx.recv_timeout(std::time::Duration::from_secs(10));
        })
    };
    held_rx.recv().unwrap();
    let ran_meanwhile = runtime.block_on(async {
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let waiting = {
            let table = table.clone();
            tokio::spawn(async move {
                let _ = started_tx.send(());
                table.change(|_| ())
            })
        };
        started_rx.await.unwrap();
        let other = tokio::spawn(async {});
        let ran = tokio::time::timeout(std::time::Duration::from_secs(3), other)
            .await
            .is_ok();
        release_tx.send(()).unwrap();
        waiting.await.unwrap();
        ran
    });
    holder.join().unwrap();
    assert!(ran_meanwhile, "the worker waited with the change");
}
