//! Registry rules checked directly, without a server: refused registrations change nothing,
//! and after any sequence of registrations, unregistrations, connection losses and expiries
//! every broker address clients can be routed to is alive (so it expires when it goes silent).

use proptest::prelude::*;
use rocketmq_wire::body::{DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper};

use super::*;

const CLUSTERS: [&str; 2] = ["c0", "c1"];
const GROUPS: [&str; 3] = ["g0", "g1", "g2"];
const ADDRS: [&str; 4] = [
    "10.0.0.1:10911",
    "10.0.0.2:10911",
    "10.0.0.3:10911",
    "10.0.0.4:10911",
];
const TOPICS: [&str; 4] = ["t0", "t1", "t2", "t3"];
const TIMEOUT_MS: i64 = 10_000;

/// A registration of `(cluster, broker name, id, address)`.
fn registration(
    (cluster, group, id, addr): (&str, &str, i64, &str),
    topics: &[&str],
    counter: i64,
    conn: ConnId,
    now_ms: i64,
) -> Registration {
    Registration {
        from: Registrant {
            cluster: cluster.into(),
            broker_addr: addr.into(),
            broker_name: group.into(),
            broker_id: id,
            conn,
            now_ms,
        },
        ha_server_addr: String::new(),
        zone_name: None,
        timeout_ms: Some(TIMEOUT_MS),
        enable_acting_master: Some(false),
        body: RegisterBrokerBody {
            wrapper: TopicConfigWrapper {
                data_version: DataVersion {
                    counter,
                    state_version: 0,
                    timestamp: counter,
                },
                topic_configs: topics.iter().map(|t| TopicConfig::new(t, 4, 6)).collect(),
                mapping_info: vec![],
            },
            filter_server_list: Some(vec![]),
        },
        version: 479,
    }
}

/// Registers as the route table does: plan, then apply.
fn register(r: &mut Registry, reg: Registration) -> RegisterOutcome {
    let policy = RegisterPolicy::default();
    let plan = r.plan(&reg, policy);
    r.register(reg, plan, policy).0
}

/// What clients and brokers can see of the registry.
fn visible(r: &Registry) -> (Vec<u8>, Vec<Option<Vec<u8>>>) {
    let routes = TOPICS
        .iter()
        .map(|t| {
            r.route(t, false)
                .map(|route| route.encode(JsonStyle::Standard))
        })
        .collect();
    (r.cluster_info().encode(), routes)
}

#[test]
fn a_refused_first_registration_changes_nothing() {
    let mut r = Registry::default();
    let before = visible(&r);
    for i in 0..100 {
        let name = format!("refused-{i}");
        let reg = registration(("c0", &name, 0, ADDRS[0]), &["only"], 1, 1, 0);
        assert_eq!(register(&mut r, reg), RegisterOutcome::Refused);
        assert!(r.take_changes().is_empty());
    }
    assert_eq!(visible(&r), before);
    assert_eq!(
        r.groups().count() + r.clusters().count() + r.live_entries().count(),
        0
    );
}

#[test]
fn an_address_in_two_groups_leaves_both_when_its_connection_closes() {
    let mut r = Registry::default();
    register(
        &mut r,
        registration(("c0", "old-name", 0, ADDRS[0]), &TOPICS[..2], 1, 7, 0),
    );
    register(
        &mut r,
        registration(("c0", "new-name", 0, ADDRS[0]), &TOPICS[..2], 1, 7, 0),
    );
    let keys = r.registered_on(7);
    let departures = r.departures(&keys);
    let mut names: Vec<&str> = departures.iter().map(|d| d.broker_name.as_str()).collect();
    names.sort();
    assert_eq!(names, ["new-name", "old-name"]);
    r.unregister(&departures, false);
    assert_eq!(r.groups().count(), 0, "no group keeps the address");
    assert_eq!(r.live_entries().count(), 0);
    assert!(TOPICS.iter().all(|t| r.route(t, false).is_none()));
}

#[test]
fn unregistering_one_group_keeps_the_address_alive_for_the_other() {
    let mut r = Registry::default();
    register(
        &mut r,
        registration(("c0", "a", 0, ADDRS[0]), &TOPICS[..2], 1, 1, 0),
    );
    register(
        &mut r,
        registration(("c0", "b", 0, ADDRS[0]), &TOPICS[..2], 1, 1, 0),
    );
    let explicit = Unregistration {
        cluster: "c0".into(),
        broker_addr: ADDRS[0].into(),
        broker_name: "a".into(),
        broker_id: 0,
    };
    r.unregister(&[explicit], false);
    assert!(
        r.live("c0", ADDRS[0]).is_some(),
        "group b still lists the address"
    );
    r.members_are_alive().unwrap();
}

#[test]
fn snapshot_members_without_a_live_entry_are_dropped() {
    let mut r = Registry::default();
    register(
        &mut r,
        registration(("c0", "a", 0, ADDRS[0]), &TOPICS[..2], 1, 1, 0),
    );
    // A snapshot whose group lists a second address that has no live entry.
    let mut group = r.group("a").unwrap().clone();
    group.broker_addrs.insert(1, ADDRS[1].into());
    r.restore_group(group);
    assert!(r.drop_members_without_live());
    r.members_are_alive().unwrap();
    assert_eq!(r.group("a").unwrap().broker_addrs.len(), 1);
    assert!(!r.drop_members_without_live());
}

#[derive(Clone, Debug)]
enum Step {
    Register {
        cluster: usize,
        group: usize,
        id: i64,
        addr: usize,
        topics: Vec<usize>,
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
    WipeWritePerm(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..2usize, 0..3usize, 0..3i64, 0..4usize, prop::collection::vec(0..4usize, 0..4), 0..3i64, 0..3u64)
            .prop_map(|(cluster, group, id, addr, topics, counter, conn)| Step::Register {
                cluster, group, id, addr, topics, counter, conn,
            }),
        1 => (0..2usize, 0..3usize, 0..3i64, 0..4usize)
            .prop_map(|(cluster, group, id, addr)| Step::Unregister { cluster, group, id, addr }),
        1 => (0..3u64).prop_map(Step::Close),
        1 => (0..15_000i64).prop_map(Step::Expire),
        1 => (0..4usize).prop_map(Step::DeleteTopic),
        1 => (0..3usize).prop_map(Step::WipeWritePerm),
    ]
}

proptest! {
    #[test]
    fn every_routable_broker_is_alive_after_any_sequence(steps in prop::collection::vec(step(), 1..40)) {
        let mut r = Registry::default();
        let mut now = 0i64;
        for step in steps {
            match step {
                Step::Register { cluster, group, id, addr, topics, counter, conn } => {
                    let topics: Vec<&str> = topics.iter().map(|t| TOPICS[*t]).collect();
                    let reg = registration((CLUSTERS[cluster], GROUPS[group], id, ADDRS[addr]), &topics, counter, conn, now);
                    register(&mut r, reg);
                }
                Step::Unregister { cluster, group, id, addr } => {
                    r.unregister(&[Unregistration {
                        cluster: CLUSTERS[cluster].into(),
                        broker_addr: ADDRS[addr].into(),
                        broker_name: GROUPS[group].into(),
                        broker_id: id,
                    }], false);
                }
                Step::Close(conn) => {
                    let keys = r.registered_on(conn);
                    let departures = r.departures(&keys);
                    r.unregister(&departures, false);
                }
                Step::Expire(advance) => {
                    now += advance;
                    let keys: Vec<BrokerAddrKey> = r.expired(now).into_iter().map(|(k, _)| k).collect();
                    let departures = r.departures(&keys);
                    r.unregister(&departures, false);
                }
                Step::DeleteTopic(t) => {
                    r.delete_topic(TOPICS[t], None);
                }
                Step::WipeWritePerm(g) => {
                    r.change_write_perm(GROUPS[g], true);
                }
            }
            prop_assert!(r.members_are_alive().is_ok(), "{:?}", r.members_are_alive());
        }
    }
}
