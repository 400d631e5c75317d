use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::code::*;
use super::*;

const CLUSTER: &str = "DefaultCluster";
const GROUP: &str = "broker-a";

fn addr(id: i64) -> String {
    format!("127.0.0.1:{}", 30900 + id)
}

fn check_code(id: i64) -> String {
    format!("{};{}", addr(id), 1_700_000_000_000i64 + id)
}

fn ids(list: &[i64]) -> BTreeSet<i64> {
    list.iter().copied().collect()
}

/// A reply's header fields, as a command carries them.
fn fields(pairs: &[(&str, &str)]) -> rocketmq_wire::ExtFields {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn live_broker(id: i64, epoch: i32, max_offset: i64, election_priority: i32) -> (i64, LiveBroker) {
    (
        id,
        LiveBroker {
            broker_id: id,
            epoch,
            max_offset,
            election_priority,
        },
    )
}

/// Live brokers that the ranking cannot tell apart.
fn live(list: &[i64]) -> BTreeMap<i64, LiveBroker> {
    list.iter().map(|id| live_broker(*id, 0, 0, 0)).collect()
}

fn apply_id(s: &mut ControllerState, id: i64) -> CommandReply {
    s.apply(&Command::ApplyBrokerId {
        cluster_name: CLUSTER.into(),
        broker_name: GROUP.into(),
        applied_broker_id: id,
        register_check_code: check_code(id),
    })
}

fn register(s: &mut ControllerState, id: i64, address: &str, alive: &[i64]) -> CommandReply {
    s.apply(&Command::RegisterBroker {
        cluster_name: CLUSTER.into(),
        broker_name: GROUP.into(),
        broker_id: id,
        broker_address: address.into(),
        alive: ids(alive),
    })
}

fn elect_cmd(
    broker_id: Option<i64>,
    designate_elect: bool,
    unclean: bool,
    live: BTreeMap<i64, LiveBroker>,
) -> Command {
    Command::ElectMaster {
        broker_name: GROUP.into(),
        broker_id,
        designate_elect,
        unclean,
        live,
    }
}

fn elect(s: &mut ControllerState, broker_id: Option<i64>, alive: &[i64]) -> CommandReply {
    s.apply(&elect_cmd(broker_id, false, false, live(alive)))
}

fn alter(
    s: &mut ControllerState,
    master: i64,
    master_epoch: i32,
    set: &[i64],
    set_epoch: i32,
    alive: &[i64],
) -> CommandReply {
    s.apply(&Command::AlterSyncStateSet {
        broker_name: GROUP.into(),
        master_broker_id: master,
        master_epoch,
        new_sync_state_set: ids(set),
        sync_state_set_epoch: set_epoch,
        alive: ids(alive),
    })
}

fn clean(
    s: &mut ControllerState,
    ids_to_clean: Option<&str>,
    living: bool,
    alive: &[i64],
) -> CommandReply {
    s.apply(&Command::CleanBrokerData {
        cluster_name: Some(CLUSTER.into()),
        broker_name: GROUP.into(),
        ids_to_clean: ids_to_clean.map(str::to_string),
        clean_living_broker: living,
        alive: ids(alive),
    })
}

fn body(reply: &CommandReply) -> String {
    String::from_utf8(reply.body.clone().expect("a body")).unwrap()
}

fn group(s: &ControllerState) -> &Group {
    s.groups.get(GROUP).expect("the group exists")
}

/// Brokers 1..=n hold ids; broker 1 won the first election (master epoch 1, set {1} at epoch 1).
fn group_with_master(n: i64) -> ControllerState {
    let mut s = ControllerState::default();
    for id in 1..=n {
        assert_eq!(apply_id(&mut s, id).code, SUCCESS);
        assert_eq!(register(&mut s, id, &addr(id), &[]).code, SUCCESS);
    }
    assert_eq!(elect(&mut s, Some(1), &[]).code, SUCCESS);
    s
}

/// `group_with_master(n)` with every broker in sync (set epoch 2).
fn group_in_sync(n: i64) -> ControllerState {
    let mut s = group_with_master(n);
    let all: Vec<i64> = (1..=n).collect();
    if n > 1 {
        assert_eq!(alter(&mut s, 1, 1, &all, 1, &all).code, SUCCESS);
    }
    s
}

// ---------------------------------------------------------------- broker ids

#[test]
fn a_new_group_starts_at_id_one() {
    let s = ControllerState::default();
    let reply = s.next_broker_id(CLUSTER, GROUP);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(
        reply.fields,
        fields(&[
            ("brokerName", GROUP),
            ("clusterName", CLUSTER),
            ("nextBrokerId", "1"),
        ])
    );
}

#[test]
fn a_second_broker_gets_id_two() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    assert_eq!(
        s.next_broker_id(CLUSTER, GROUP).field("nextBrokerId"),
        Some("2")
    );
    assert_eq!(apply_id(&mut s, 2).code, SUCCESS);
    assert_eq!(
        s.next_broker_id(CLUSTER, GROUP).field("nextBrokerId"),
        Some("3")
    );
}

#[test]
fn applying_for_an_id_follows_the_java_rules() {
    // (name, ids already held, applied id, check code (None: the applier's own), expected code,
    // next id afterwards (None: no group))
    #[rustfmt::skip]
    type Row = (&'static str, &'static [i64], i64, Option<&'static str>, i32, Option<i64>);
    #[rustfmt::skip]
    let cases: [Row; 8] = [
        ("unknown group, id 2", &[], 2, None, CONTROLLER_BROKER_ID_INVALID, None),
        ("unknown group, id 1", &[], 1, None, SUCCESS, Some(2)),
        ("same broker again", &[1], 1, None, SUCCESS, Some(2)),
        ("id held by another broker", &[1], 1, Some("10.0.0.9:10911;5"), CONTROLLER_BROKER_ID_INVALID, Some(2)),
        ("free id", &[1], 2, None, SUCCESS, Some(3)),
        ("id 0", &[1], 0, None, CONTROLLER_BROKER_ID_INVALID, Some(2)),
        ("id -1", &[1], -1, None, CONTROLLER_BROKER_ID_INVALID, Some(2)),
        ("id ahead of the counter", &[1], 5, None, SUCCESS, Some(6)),
    ];
    for (name, existing, applied, code_text, expected, next_after) in cases {
        let mut s = ControllerState::default();
        for id in existing {
            apply_id(&mut s, *id);
        }
        let reply = s.apply(&Command::ApplyBrokerId {
            cluster_name: CLUSTER.into(),
            broker_name: GROUP.into(),
            applied_broker_id: applied,
            register_check_code: code_text.map_or_else(|| check_code(applied), str::to_string),
        });
        assert_eq!(reply.code, expected, "{name}");
        assert_eq!(reply.remark.is_some(), expected != SUCCESS, "{name}");
        assert_eq!(reply.field("clusterName"), Some(CLUSTER), "{name}");
        assert_eq!(reply.field("brokerName"), Some(GROUP), "{name}");
        let next = s.groups.get(GROUP).map(|g| g.next_assign_broker_id);
        assert_eq!(next, next_after, "{name}");
    }
}

#[test]
fn an_id_held_by_another_broker_keeps_its_owner() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    let reply = s.apply(&Command::ApplyBrokerId {
        cluster_name: CLUSTER.into(),
        broker_name: GROUP.into(),
        applied_broker_id: 1,
        register_check_code: "10.0.0.9:10911;5".into(),
    });
    assert_eq!(reply.code, CONTROLLER_BROKER_ID_INVALID);
    assert_eq!(group(&s).brokers[&1].register_check_code, check_code(1));
    assert_eq!(s.broker_id_of(GROUP, "10.0.0.9:10911"), None);
}

#[test]
fn the_address_is_the_check_code_up_to_the_first_semicolon() {
    let mut s = ControllerState::default();
    for (id, code_text, address) in [
        (1, "10.0.0.1:10911;1700000000000;extra", "10.0.0.1:10911"),
        (2, "10.0.0.2:10911", "10.0.0.2:10911"),
    ] {
        let reply = s.apply(&Command::ApplyBrokerId {
            cluster_name: CLUSTER.into(),
            broker_name: GROUP.into(),
            applied_broker_id: id,
            register_check_code: code_text.into(),
        });
        assert_eq!(reply.code, SUCCESS);
        assert_eq!(s.broker_id_of(GROUP, address), Some(id));
    }
}

#[test]
fn an_id_applied_ahead_of_the_counter_is_not_handed_out_again() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    apply_id(&mut s, 3);
    // Java's counter would say 3 here, and the broker asking for it could never get an id.
    assert_eq!(
        s.next_broker_id(CLUSTER, GROUP).field("nextBrokerId"),
        Some("4")
    );
}

// ---------------------------------------------------------------- register

#[test]
fn registering_follows_the_java_rules() {
    let cases: [(&str, &str, i64, i32); 3] = [
        (
            "unknown group",
            "broker-z",
            1,
            CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ),
        (
            "unknown id",
            GROUP,
            7,
            CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
        ),
        ("known id", GROUP, 1, SUCCESS),
    ];
    for (name, broker_name, id, expected) in cases {
        let mut s = ControllerState::default();
        apply_id(&mut s, 1);
        let reply = s.apply(&Command::RegisterBroker {
            cluster_name: CLUSTER.into(),
            broker_name: broker_name.into(),
            broker_id: id,
            broker_address: addr(id),
            alive: ids(&[1]),
        });
        assert_eq!(reply.code, expected, "{name}");
        assert_eq!(reply.field("clusterName"), Some(CLUSTER), "{name}");
        assert_eq!(reply.field("brokerName"), Some(broker_name), "{name}");
        assert_eq!(reply.field("masterBrokerId"), None, "{name}");
        if expected == SUCCESS {
            assert_eq!(body(&reply), r#"{"syncStateSet":[],"syncStateSetEpoch":0}"#);
        } else {
            assert_eq!(reply.body, None, "{name}");
        }
    }
}

#[test]
fn registering_from_a_new_address_moves_the_id() {
    let mut s = group_with_master(2);
    let reply = register(&mut s, 2, "10.9.9.9:10911", &[1, 2]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.broker_id_of(GROUP, "10.9.9.9:10911"), Some(2));
    assert_eq!(s.broker_id_of(GROUP, &addr(2)), None);
    // The id still belongs to the broker that applied for it.
    assert_eq!(group(&s).brokers[&2].register_check_code, check_code(2));
}

#[test]
fn a_moved_master_is_answered_with_its_new_address() {
    let mut s = group_with_master(2);
    let reply = register(&mut s, 1, "10.9.9.9:10911", &[1, 2]);
    assert_eq!(reply.field("masterAddress"), Some("10.9.9.9:10911"));
}

#[test]
fn register_names_the_master_only_while_it_is_alive() {
    let mut s = group_with_master(2);
    let reply = register(&mut s, 2, &addr(2), &[1, 2]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(reply.field("masterBrokerId"), Some("1"));
    assert_eq!(reply.field("masterAddress"), Some(addr(1).as_str()));
    assert_eq!(reply.field("masterEpoch"), Some("1"));
    assert_eq!(reply.field("syncStateSetEpoch"), Some("1"));
    assert_eq!(
        body(&reply),
        r#"{"syncStateSet":[1],"syncStateSetEpoch":1}"#
    );

    let reply = register(&mut s, 2, &addr(2), &[2]);
    assert_eq!(reply.code, SUCCESS);
    for field in [
        "masterBrokerId",
        "masterAddress",
        "masterEpoch",
        "syncStateSetEpoch",
    ] {
        assert_eq!(reply.field(field), None, "{field}");
    }
    assert_eq!(
        body(&reply),
        r#"{"syncStateSet":[1],"syncStateSetEpoch":1}"#
    );
}

// ---------------------------------------------------------------- alter sync-state set

#[test]
fn alter_sync_state_set_checks_in_java_order() {
    const FAILED: i32 = CONTROLLER_ALTER_SYNC_STATE_SET_FAILED;
    // (name, broker name, master, master epoch, new set, set epoch, alive, expected code)
    #[rustfmt::skip]
    type Row = (&'static str, &'static str, i64, i32, &'static [i64], i32, &'static [i64], i32);
    // The group: brokers 1..=3, master 1 at master epoch 1, set {1} at set epoch 1.
    #[rustfmt::skip]
    let cases: [Row; 13] = [
        ("unknown group", "broker-z", 1, 1, &[1, 2], 1, &[1, 2], FAILED),
        ("same set", GROUP, 1, 1, &[1], 1, &[1], FAILED),
        ("same set beats wrong master", GROUP, 2, 0, &[1], 0, &[], FAILED),
        ("wrong master", GROUP, 2, 1, &[1, 2], 1, &[1, 2], CONTROLLER_INVALID_MASTER),
        ("wrong master beats stale epochs", GROUP, 2, 0, &[1, 2], 0, &[1, 2], CONTROLLER_INVALID_MASTER),
        ("stale master epoch", GROUP, 1, 0, &[1, 2], 1, &[1, 2], CONTROLLER_FENCED_MASTER_EPOCH),
        ("master epoch beats set epoch", GROUP, 1, 2, &[1, 2], 0, &[1, 2], CONTROLLER_FENCED_MASTER_EPOCH),
        ("stale set epoch", GROUP, 1, 1, &[1, 2], 0, &[1, 2], CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH),
        ("unknown replica", GROUP, 1, 1, &[1, 4], 1, &[1, 4], CONTROLLER_INVALID_REPLICAS),
        ("dead replica", GROUP, 1, 1, &[1, 2], 1, &[1], CONTROLLER_BROKER_NOT_ALIVE),
        ("dead replica before unknown one", GROUP, 1, 1, &[1, 2, 4], 1, &[1], CONTROLLER_BROKER_NOT_ALIVE),
        ("set without the master", GROUP, 1, 1, &[2, 3], 1, &[1, 2, 3], FAILED),
        ("empty set", GROUP, 1, 1, &[], 1, &[1], FAILED),
    ];
    let start = group_with_master(3);
    for (name, broker_name, master, master_epoch, set, set_epoch, alive, expected) in cases {
        let mut s = start.clone();
        let reply = s.apply(&Command::AlterSyncStateSet {
            broker_name: broker_name.into(),
            master_broker_id: master,
            master_epoch,
            new_sync_state_set: ids(set),
            sync_state_set_epoch: set_epoch,
            alive: ids(alive),
        });
        assert_eq!(reply.code, expected, "{name}");
        assert!(reply.remark.is_some(), "{name}");
        assert_eq!(reply.field("newSyncStateSetEpoch"), Some("0"), "{name}");
        assert_eq!(reply.body, None, "{name}");
        assert_eq!(s, start, "{name} must change nothing");
    }
}

#[test]
fn a_group_without_a_master_refuses_any_alter() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    apply_id(&mut s, 2);
    let reply = alter(&mut s, 1, 0, &[1, 2], 0, &[1, 2]);
    assert_eq!(reply.code, CONTROLLER_INVALID_MASTER);
    assert!(group(&s).sync_state_set.is_empty());
}

#[test]
fn a_valid_alter_bumps_the_set_epoch_and_answers_the_new_set() {
    let mut s = group_with_master(3);
    let reply = alter(&mut s, 1, 1, &[1, 2], 1, &[1, 2]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(reply.remark, None);
    assert_eq!(reply.field("newSyncStateSetEpoch"), Some("2"));
    assert_eq!(
        body(&reply),
        r#"{"syncStateSet":[1,2],"syncStateSetEpoch":2}"#
    );
    assert_eq!(group(&s).sync_state_set, ids(&[1, 2]));
    assert_eq!(group(&s).sync_state_set_epoch, 2);
    assert_eq!(group(&s).master_epoch, 1, "the master epoch stays");
    // The same request again is now stale.
    assert_eq!(
        alter(&mut s, 1, 1, &[1, 2, 3], 1, &[1, 2, 3]).code,
        CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    );
}

// ---------------------------------------------------------------- elect master

#[test]
fn electing_in_an_unknown_group_asks_to_register() {
    let mut s = ControllerState::default();
    let reply = elect(&mut s, Some(1), &[1]);
    assert_eq!(reply.code, CONTROLLER_BROKER_NEED_TO_BE_REGISTERED);
    assert!(reply.fields.is_empty());
    assert_eq!(s, ControllerState::default());
}

#[test]
fn the_first_election_goes_to_the_asking_broker() {
    let mut s = ControllerState::default();
    for id in 1..=3 {
        apply_id(&mut s, id);
    }
    // Nobody is known to be alive and broker 3 would rank higher; the asker still wins.
    let mut ranked = live(&[]);
    ranked.extend([live_broker(3, 9, 9, 0)]);
    let reply = s.apply(&elect_cmd(Some(2), false, false, ranked));
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(reply.remark, None);
    assert_eq!(reply.field("masterBrokerId"), Some("2"));
    assert_eq!(reply.field("masterAddress"), Some(addr(2).as_str()));
    assert_eq!(reply.field("masterEpoch"), Some("1"));
    assert_eq!(reply.field("syncStateSetEpoch"), Some("1"));
    assert_eq!(
        body(&reply),
        format!(
            r#"{{"brokerMemberGroup":{{"brokerAddrs":{{"1":"{}","2":"{}","3":"{}"}},"brokerName":"broker-a","cluster":"DefaultCluster"}},"syncStateSet":[2]}}"#,
            addr(1),
            addr(2),
            addr(3)
        )
    );
    let change = reply.role_change.expect("a role change to announce");
    assert_eq!(
        change,
        RoleChange {
            cluster_name: CLUSTER.into(),
            broker_name: GROUP.into(),
            master_broker_id: Some(2),
            master_address: Some(addr(2)),
            master_epoch: 1,
            sync_state_set_epoch: 1,
            sync_state_set: ids(&[2]),
            members: (1..=3).map(|id| (id, addr(id))).collect(),
        }
    );
    assert_eq!(s.master_of(GROUP), Some((2, 1)));
}

#[test]
fn a_first_election_asked_for_by_an_unknown_id_fails() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    let before = s.clone();
    let reply = elect(&mut s, Some(9), &[1, 9]);
    assert_eq!(reply.code, CONTROLLER_ELECT_MASTER_FAILED);
    assert_eq!(s, before);
}

#[test]
fn a_live_master_stays_and_is_reported() {
    let mut s = group_in_sync(3);
    let before = s.clone();
    let reply = elect(&mut s, Some(2), &[1, 2, 3]);
    assert_eq!(reply.code, CONTROLLER_MASTER_STILL_EXIST);
    assert!(reply.remark.is_some());
    assert_eq!(reply.field("masterBrokerId"), Some("1"));
    assert_eq!(reply.field("masterAddress"), Some(addr(1).as_str()));
    assert_eq!(reply.field("masterEpoch"), Some("1"));
    assert_eq!(reply.field("syncStateSetEpoch"), Some("2"));
    assert_eq!(body(&reply), r#"{"syncStateSet":[1,2,3]}"#);
    assert_eq!(reply.role_change, None);
    assert_eq!(s, before);
}

#[test]
fn a_new_master_is_the_best_ranked_live_in_sync_replica() {
    // (name, live brokers as (id, epoch, max offset, priority), expected master)
    type Row = (&'static str, &'static [(i64, i32, i64, i32)], i64);
    #[rustfmt::skip]
    let cases: [Row; 6] = [
        ("higher epoch beats larger offset", &[(2, 3, 10, 0), (3, 2, 99, 0)], 2),
        ("same epoch: larger offset", &[(2, 3, 10, 0), (3, 3, 11, 0)], 3),
        ("same offset: lower priority number", &[(2, 3, 10, 2), (3, 3, 10, 1)], 3),
        ("full tie: lowest id", &[(4, 3, 10, 1), (2, 3, 10, 1), (3, 3, 10, 1)], 2),
        ("offsets more than 2^31 apart", &[(2, 1, 3_000_000_000, 0), (3, 1, 0, 0)], 2),
        ("extreme priorities", &[(2, 1, 0, i32::MAX), (3, 1, 0, i32::MIN)], 3),
    ];
    for (name, brokers, expected) in cases {
        let mut s = group_in_sync(4);
        let live: BTreeMap<i64, LiveBroker> = brokers
            .iter()
            .map(|(id, epoch, offset, priority)| live_broker(*id, *epoch, *offset, *priority))
            .collect();
        // The master (1) is not among the live ones: the controller noticed it died.
        let reply = s.apply(&elect_cmd(None, false, false, live));
        assert_eq!(reply.code, SUCCESS, "{name}");
        assert_eq!(
            reply.field("masterBrokerId"),
            Some(expected.to_string().as_str()),
            "{name}"
        );
        assert_eq!(reply.field("masterEpoch"), Some("2"), "{name}");
        assert_eq!(reply.field("syncStateSetEpoch"), Some("3"), "{name}");
        assert_eq!(group(&s).sync_state_set, ids(&[expected]), "{name}");
        assert_eq!(s.master_of(GROUP), Some((expected, 2)), "{name}");
    }
}

/// Brokers 1..=3, master 1, set {1, 2} (epochs 1 and 2); broker 3 is out of sync.
fn group_with_laggard() -> ControllerState {
    let mut s = group_with_master(3);
    assert_eq!(alter(&mut s, 1, 1, &[1, 2], 1, &[1, 2]).code, SUCCESS);
    s
}

#[test]
fn only_in_sync_replicas_are_candidates_unless_unclean() {
    let mut s = group_with_laggard();
    let clean_reply = s.clone().apply(&elect_cmd(None, false, false, live(&[3])));
    assert_eq!(clean_reply.code, CONTROLLER_MASTER_NOT_AVAILABLE);
    let reply = s.apply(&elect_cmd(None, false, true, live(&[3])));
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((3, 2)));
    assert_eq!(group(&s).sync_state_set, ids(&[3]));
}

#[test]
fn an_unclean_election_still_prefers_the_in_sync_replicas() {
    let mut s = group_with_laggard();
    let mut ranked = live(&[2]);
    ranked.extend([live_broker(3, 9, 1 << 40, 0)]);
    let reply = s.apply(&elect_cmd(None, false, true, ranked));
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((2, 2)));
}

#[test]
fn a_controller_election_with_nobody_electable_clears_the_master() {
    let mut s = group_with_laggard();
    let reply = elect(&mut s, None, &[3]);
    assert_eq!(reply.code, CONTROLLER_MASTER_NOT_AVAILABLE);
    assert!(reply.fields.is_empty());
    assert_eq!(reply.body, None);
    assert_eq!(reply.role_change, None);
    let g = group(&s);
    assert_eq!(g.master_broker_id, None);
    assert_eq!(
        g.master_epoch, 2,
        "clearing the master is a new master epoch"
    );
    assert_eq!(g.sync_state_set, ids(&[1, 2]), "the set is kept");
    assert_eq!(g.sync_state_set_epoch, 2);

    // Broker 2 comes back: the next election (asked by the laggard) picks it from the kept set.
    let reply = elect(&mut s, Some(3), &[2, 3]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((2, 3)));
}

#[test]
fn minus_one_is_a_controller_trigger() {
    let mut s = group_with_laggard();
    let reply = elect(&mut s, Some(-1), &[3]);
    assert_eq!(reply.code, CONTROLLER_MASTER_NOT_AVAILABLE);
    assert_eq!(s.master_of(GROUP), None);
}

#[test]
fn a_broker_election_with_nobody_electable_changes_nothing() {
    let mut s = group_with_laggard();
    let before = s.clone();
    let reply = elect(&mut s, Some(3), &[3]);
    assert_eq!(reply.code, CONTROLLER_ELECT_MASTER_FAILED);
    assert!(reply.fields.is_empty());
    assert_eq!(s, before);
}

#[test]
fn a_designated_broker_must_be_a_live_candidate() {
    // (name, designated id, unclean, live ids, expected code, expected master afterwards)
    type Row = (&'static str, i64, bool, &'static [i64], i32, i64);
    const STAYS: i32 = CONTROLLER_MASTER_STILL_EXIST;
    const FAILS: i32 = CONTROLLER_ELECT_MASTER_FAILED;
    // The group: brokers 1..=3, master 1, set {1, 2}.
    #[rustfmt::skip]
    let cases: [Row; 7] = [
        ("live in-sync replica", 2, false, &[1, 2, 3], SUCCESS, 2),
        ("the master itself", 1, false, &[1, 2, 3], STAYS, 1),
        ("dead replica", 2, false, &[1, 3], FAILS, 1),
        ("unknown id", 7, false, &[1, 2, 3, 7], FAILS, 1),
        ("out of sync", 3, false, &[1, 2, 3], FAILS, 1),
        ("out of sync, unclean", 3, true, &[1, 2, 3], SUCCESS, 3),
        ("-1 designates nobody", -1, false, &[1, 2, 3], STAYS, 1),
    ];
    for (name, designated, unclean, alive, expected, master) in cases {
        let mut s = group_with_laggard();
        let reply = s.apply(&elect_cmd(Some(designated), true, unclean, live(alive)));
        assert_eq!(reply.code, expected, "{name}");
        assert_eq!(s.master_of(GROUP).map(|(m, _)| m), Some(master), "{name}");
        assert_eq!(reply.role_change.is_some(), expected == SUCCESS, "{name}");
    }
}

#[test]
fn without_designation_the_asking_broker_has_no_preference() {
    let mut s = group_in_sync(3);
    let mut ranked = live(&[2]);
    ranked.extend([live_broker(3, 5, 0, 0)]);
    // Master 1 is dead; broker 2 asks but broker 3 ranks higher.
    let reply = s.apply(&elect_cmd(Some(2), false, false, ranked));
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((3, 2)));
}

// ---------------------------------------------------------------- clean broker data

#[test]
fn cleaning_broker_data_follows_the_java_rules() {
    const INVALID: i32 = CONTROLLER_INVALID_CLEAN_BROKER_METADATA;
    const ALL: Option<&[i64]> = Some(&[1, 2, 3]);
    // (name, ids, clean living, alive, expected code, ids left (None: group gone))
    #[rustfmt::skip]
    type Row = (&'static str, Option<&'static str>, bool, &'static [i64], i32, Option<&'static [i64]>);
    // The group: brokers 1..=3 in sync, master 1.
    #[rustfmt::skip]
    let cases: [Row; 12] = [
        ("group with a master", None, false, &[], INVALID, ALL),
        ("blank list with a master", Some("  "), false, &[], INVALID, ALL),
        ("unparsable list", Some("2;x"), false, &[], INVALID, ALL),
        ("spaces in the list", Some("2; 3"), false, &[], INVALID, ALL),
        ("empty part inside", Some("2;;3"), false, &[], INVALID, ALL),
        ("no id at all", Some(";"), true, &[], INVALID, ALL),
        ("a named id is alive", Some("2;3"), false, &[3], INVALID, ALL),
        ("dead ids", Some("2;3"), false, &[1], SUCCESS, Some(&[1])),
        ("trailing separator", Some("3;"), false, &[1, 2], SUCCESS, Some(&[1, 2])),
        ("unknown ids", Some("8;9"), false, &[1, 2, 3], SUCCESS, ALL),
        ("living group, no ids", None, true, &[1, 2, 3], SUCCESS, None),
        ("living ids", Some("2"), true, &[1, 2, 3], SUCCESS, Some(&[1, 3])),
    ];
    let start = group_in_sync(3);
    for (name, list, living, alive, expected, left) in cases {
        let mut s = start.clone();
        let reply = clean(&mut s, list, living, alive);
        assert_eq!(reply.code, expected, "{name}");
        assert_eq!(reply.remark.is_some(), expected != SUCCESS, "{name}");
        let ids_left: Option<Vec<i64>> = s
            .groups
            .get(GROUP)
            .map(|g| g.brokers.keys().copied().collect());
        assert_eq!(ids_left.as_deref(), left, "{name}");
        if let Some(g) = s.groups.get(GROUP) {
            assert!(
                g.sync_state_set.iter().all(|id| g.brokers.contains_key(id)),
                "{name}"
            );
        }
    }
}

#[test]
fn cleaning_an_unknown_group_fails() {
    let mut s = ControllerState::default();
    assert_eq!(
        clean(&mut s, None, true, &[]).code,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    );
    assert_eq!(
        clean(&mut s, Some("1"), false, &[]).code,
        CONTROLLER_INVALID_CLEAN_BROKER_METADATA
    );
}

#[test]
fn a_group_without_a_master_can_be_cleaned_whole() {
    let mut s = group_with_laggard();
    elect(&mut s, None, &[]);
    assert_eq!(s.master_of(GROUP), None);
    assert_eq!(clean(&mut s, None, false, &[]).code, SUCCESS);
    assert_eq!(s.cluster_of(GROUP), None);
    assert_eq!(
        s.next_broker_id(CLUSTER, GROUP).field("nextBrokerId"),
        Some("1")
    );
}

#[test]
fn cleaning_the_master_clears_it_under_a_new_epoch() {
    let mut s = group_in_sync(3);
    assert_eq!(clean(&mut s, Some("1"), false, &[2, 3]).code, SUCCESS);
    let g = group(&s);
    assert_eq!(g.master_broker_id, None);
    assert_eq!(g.master_epoch, 2);
    assert_eq!(g.sync_state_set, ids(&[2, 3]));
    let reply = elect(&mut s, None, &[2, 3]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((2, 3)));
}

#[test]
fn a_group_whose_set_is_cleaned_empty_keeps_its_other_brokers() {
    let mut s = group_with_master(3);
    // The set is {1}: cleaning 1 empties it, brokers 2 and 3 stay registered.
    assert_eq!(clean(&mut s, Some("1"), false, &[2, 3]).code, SUCCESS);
    assert_eq!(register(&mut s, 2, &addr(2), &[2, 3]).code, SUCCESS);
    assert_eq!(s.replica_info(GROUP).code, SUCCESS);
}

// ---------------------------------------------------------------- reads

#[test]
fn replica_info_of_an_unknown_group_is_metadata_not_exist() {
    let reply = ControllerState::default().replica_info(GROUP);
    assert_eq!(reply.code, CONTROLLER_BROKER_METADATA_NOT_EXIST);
    assert!(reply.fields.is_empty());
    assert_eq!(reply.body, None);
}

#[test]
fn replica_info_reports_the_master_and_the_set() {
    let mut s = ControllerState::default();
    apply_id(&mut s, 1);
    let reply = s.replica_info(GROUP);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(reply.fields, fields(&[("masterEpoch", "0")]));
    assert_eq!(body(&reply), r#"{"syncStateSet":[],"syncStateSetEpoch":0}"#);

    let s = group_in_sync(2);
    let reply = s.replica_info(GROUP);
    assert_eq!(reply.field("masterBrokerId"), Some("1"));
    assert_eq!(reply.field("masterAddress"), Some(addr(1).as_str()));
    assert_eq!(reply.field("masterEpoch"), Some("1"));
    assert_eq!(
        body(&reply),
        r#"{"syncStateSet":[1,2],"syncStateSetEpoch":2}"#
    );
}

#[test]
fn sync_state_data_splits_members_by_the_sync_state_set() {
    let mut s = group_with_laggard();
    s.apply(&Command::ApplyBrokerId {
        cluster_name: "other".into(),
        broker_name: "broker-b".into(),
        applied_broker_id: 1,
        register_check_code: "10.0.0.1:10911;1".into(),
    });
    let alive = |cluster: &str, name: &str, id: i64| cluster == CLUSTER && name == GROUP && id != 2;
    let names = vec![
        GROUP.to_string(),
        "nope".to_string(),
        "broker-b".to_string(),
    ];
    let reply = s.sync_state_data(&names, &alive);
    assert_eq!(reply.code, SUCCESS);
    let expected = format!(
        concat!(
            r#"{{"replicasInfoTable":{{"#,
            r#""broker-a":{{"inSyncReplicas":[{{"alive":true,"brokerAddress":"{a1}","brokerId":1,"brokerName":"broker-a"}},"#,
            r#"{{"alive":false,"brokerAddress":"{a2}","brokerId":2,"brokerName":"broker-a"}}],"#,
            r#""masterAddress":"{a1}","masterBrokerId":1,"masterEpoch":1,"#,
            r#""notInSyncReplicas":[{{"alive":true,"brokerAddress":"{a3}","brokerId":3,"brokerName":"broker-a"}}],"#,
            r#""syncStateSetEpoch":2}},"#,
            r#""broker-b":{{"inSyncReplicas":[],"masterEpoch":0,"#,
            r#""notInSyncReplicas":[{{"alive":false,"brokerAddress":"10.0.0.1:10911","brokerId":1,"brokerName":"broker-b"}}],"#,
            r#""syncStateSetEpoch":0}}}}}}"#
        ),
        a1 = addr(1),
        a2 = addr(2),
        a3 = addr(3)
    );
    assert_eq!(body(&reply), expected);
    let parsed: serde_json::Value = serde_json::from_slice(reply.body.as_ref().unwrap()).unwrap();
    assert_eq!(parsed["replicasInfoTable"]["broker-a"]["masterBrokerId"], 1);
}

#[test]
fn groups_needing_reelection_have_a_dead_master_and_a_live_member() {
    let mut s = ControllerState::default();
    // g1: master 1 dead, 2 alive → listed. g2: master 1 dead, nobody alive. g3: master alive.
    // g4: no master.
    for name in ["g1", "g2", "g3", "g4"] {
        for id in 1..=2 {
            s.apply(&Command::ApplyBrokerId {
                cluster_name: CLUSTER.into(),
                broker_name: name.into(),
                applied_broker_id: id,
                register_check_code: format!("{name}-{id};0"),
            });
        }
        if name != "g4" {
            s.apply(&Command::ElectMaster {
                broker_name: name.into(),
                broker_id: Some(1),
                designate_elect: false,
                unclean: false,
                live: live(&[1]),
            });
        }
    }
    let alive = |_: &str, name: &str, id: i64| match name {
        "g1" => id == 2,
        "g3" => true,
        "g4" => true,
        _ => false,
    };
    assert_eq!(s.groups_needing_reelection(&alive), vec!["g1".to_string()]);
}

#[test]
fn the_read_views_show_the_state() {
    let mut s = group_with_laggard();
    s.apply(&Command::ApplyBrokerId {
        cluster_name: "c2".into(),
        broker_name: "broker-b".into(),
        applied_broker_id: 1,
        register_check_code: "10.0.0.1:10911;1".into(),
    });
    assert_eq!(s.cluster_of(GROUP), Some(CLUSTER));
    assert_eq!(s.cluster_of("broker-b"), Some("c2"));
    assert_eq!(s.cluster_of("none"), None);
    assert_eq!(s.master_of(GROUP), Some((1, 1)));
    assert_eq!(s.master_of("broker-b"), None);
    assert_eq!(s.broker_id_of(GROUP, &addr(3)), Some(3));
    assert_eq!(s.broker_id_of(GROUP, "10.0.0.1:10911"), None);
    assert_eq!(
        s.groups(),
        vec![
            GroupView {
                cluster_name: CLUSTER.into(),
                broker_name: GROUP.into(),
                master_broker_id: Some(1),
                master_epoch: 1,
                sync_state_set_epoch: 2,
                sync_state_set: vec![1, 2],
                brokers: (1..=3).map(|id| (id, addr(id))).collect(),
            },
            GroupView {
                cluster_name: "c2".into(),
                broker_name: "broker-b".into(),
                master_broker_id: None,
                master_epoch: 0,
                sync_state_set_epoch: 0,
                sync_state_set: vec![],
                brokers: vec![(1, "10.0.0.1:10911".into())],
            },
        ]
    );
}

// ---------------------------------------------------------------- the whole life of a group

#[test]
fn a_group_lives_through_ids_election_failover_and_cleanup() {
    let mut s = ControllerState::default();
    // Three brokers get ids and register.
    for expected in 1..=3 {
        let next = s.next_broker_id(CLUSTER, GROUP);
        assert_eq!(
            next.field("nextBrokerId"),
            Some(expected.to_string().as_str())
        );
        assert_eq!(apply_id(&mut s, expected).code, SUCCESS);
        let reply = register(&mut s, expected, &addr(expected), &[1, 2, 3]);
        assert_eq!(reply.code, SUCCESS);
        assert_eq!(reply.field("masterBrokerId"), None, "no master yet");
    }
    // Broker 2 asks first and becomes master.
    let reply = elect(&mut s, Some(2), &[1, 2, 3]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((2, 1)));
    // The others then see the master.
    assert_eq!(
        elect(&mut s, Some(1), &[1, 2, 3]).code,
        CONTROLLER_MASTER_STILL_EXIST
    );
    assert_eq!(
        register(&mut s, 3, &addr(3), &[1, 2, 3]).field("masterBrokerId"),
        Some("2")
    );
    // The master lets its slaves into the set.
    let reply = alter(&mut s, 2, 1, &[1, 2, 3], 1, &[1, 2, 3]);
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(reply.field("newSyncStateSetEpoch"), Some("2"));
    // The master dies; the inactive-master scan finds it; broker 3 is furthest ahead.
    let alive = |_: &str, _: &str, id: i64| id != 2;
    assert_eq!(s.groups_needing_reelection(&alive), vec![GROUP.to_string()]);
    let reply = s.apply(&elect_cmd(
        None,
        false,
        false,
        [live_broker(1, 1, 100, 0), live_broker(3, 1, 200, 0)]
            .into_iter()
            .collect(),
    ));
    assert_eq!(reply.code, SUCCESS);
    assert_eq!(s.master_of(GROUP), Some((3, 2)));
    assert!(s.groups_needing_reelection(&alive).is_empty());
    // The old master's stale change is fenced.
    assert_eq!(
        alter(&mut s, 2, 1, &[2, 3], 3, &[1, 3]).code,
        CONTROLLER_INVALID_MASTER
    );
    // The dead broker's data is cleaned; the group carries on.
    assert_eq!(clean(&mut s, Some("2"), false, &[1, 3]).code, SUCCESS);
    assert_eq!(s.broker_id_of(GROUP, &addr(2)), None);
    assert_eq!(
        s.next_broker_id(CLUSTER, GROUP).field("nextBrokerId"),
        Some("4")
    );
    assert_eq!(alter(&mut s, 3, 2, &[1, 3], 3, &[1, 3]).code, SUCCESS);
    // Finally the whole group goes.
    assert_eq!(clean(&mut s, None, true, &[1, 3]).code, SUCCESS);
    assert_eq!(
        s.replica_info(GROUP).code,
        CONTROLLER_BROKER_METADATA_NOT_EXIST
    );
}

// ---------------------------------------------------------------- determinism

fn sample_commands() -> Vec<Command> {
    let mut cmds = Vec::new();
    for id in 1..=3 {
        cmds.push(Command::ApplyBrokerId {
            cluster_name: CLUSTER.into(),
            broker_name: GROUP.into(),
            applied_broker_id: id,
            register_check_code: check_code(id),
        });
    }
    cmds.push(elect_cmd(Some(1), false, false, live(&[1, 2, 3])));
    cmds.push(Command::AlterSyncStateSet {
        broker_name: GROUP.into(),
        master_broker_id: 1,
        master_epoch: 1,
        new_sync_state_set: ids(&[1, 2, 3]),
        sync_state_set_epoch: 1,
        alive: ids(&[1, 2, 3]),
    });
    cmds.push(elect_cmd(None, false, false, live(&[2, 3])));
    cmds.push(Command::CleanBrokerData {
        cluster_name: None,
        broker_name: GROUP.into(),
        ids_to_clean: Some("1".into()),
        clean_living_broker: false,
        alive: ids(&[2, 3]),
    });
    cmds
}

#[test]
fn the_same_commands_give_the_same_states_and_replies() {
    let (mut a, mut b) = (ControllerState::default(), ControllerState::default());
    for cmd in sample_commands() {
        assert_eq!(a.apply(&cmd), b.apply(&cmd));
        assert_eq!(a, b);
    }
    assert_ne!(a, ControllerState::default());
}

#[test]
fn the_state_survives_a_serde_round_trip() {
    let mut s = ControllerState::default();
    for cmd in sample_commands() {
        s.apply(&cmd);
    }
    let text = serde_json::to_vec(&s).unwrap();
    let back: ControllerState = serde_json::from_slice(&text).unwrap();
    assert_eq!(back, s);
    // And it keeps working the same way after the trip.
    let cmd = elect_cmd(None, false, false, live(&[3]));
    let (mut x, mut y) = (s.clone(), back);
    assert_eq!(x.apply(&cmd), y.apply(&cmd));
    assert_eq!(
        serde_json::to_vec(&x).unwrap(),
        serde_json::to_vec(&y).unwrap()
    );
}

#[test]
fn commands_survive_a_serde_round_trip() {
    for cmd in sample_commands() {
        let back: Command = serde_json::from_slice(&serde_json::to_vec(&cmd).unwrap()).unwrap();
        assert_eq!(back, cmd);
    }
}

// ---------------------------------------------------------------- any command sequence

/// Mostly ids a group hands out, sometimes ones it never does.
fn arb_id() -> impl Strategy<Value = i64> {
    prop_oneof![8 => 1i64..5, 1 => -1i64..1, 1 => 5i64..7]
}

fn arb_ids() -> impl Strategy<Value = BTreeSet<i64>> {
    prop::collection::btree_set(arb_id(), 0..5)
}

fn arb_live() -> impl Strategy<Value = BTreeMap<i64, LiveBroker>> {
    prop::collection::btree_map(-1i64..6, (0i32..3, 0i64..3, -1i32..2), 0..5).prop_map(|m| {
        m.into_iter()
            .map(|(id, (epoch, offset, priority))| live_broker(id, epoch, offset, priority))
            .collect()
    })
}

fn arb_name() -> impl Strategy<Value = String> {
    prop_oneof![Just("a".to_string()), Just("b".to_string())]
}

fn arb_command() -> impl Strategy<Value = Command> {
    let check_codes = prop_oneof![
        Just("h1:1;1".to_string()),
        Just("h2:1;2".to_string()),
        Just("h3:1".to_string()),
        Just(String::new()),
        Just(";".to_string()),
    ];
    let id_lists = prop::option::of(prop_oneof![
        Just("1".to_string()),
        Just("2;3".to_string()),
        Just("1;2;3;4;5".to_string()),
        Just("x".to_string()),
        Just(";".to_string()),
        Just(" ".to_string()),
        Just("9223372036854775807".to_string()),
    ]);
    let apply = (arb_name(), arb_id(), check_codes).prop_map(|(broker_name, id, code_text)| {
        Command::ApplyBrokerId {
            cluster_name: "c".into(),
            broker_name,
            applied_broker_id: id,
            register_check_code: code_text,
        }
    });
    let addresses = prop_oneof![Just("h1:1"), Just("h9:9")];
    let register = (arb_name(), arb_id(), addresses, arb_ids()).prop_map(
        |(broker_name, broker_id, address, alive)| Command::RegisterBroker {
            cluster_name: "c".into(),
            broker_name,
            broker_id,
            broker_address: address.into(),
            alive,
        },
    );
    let alter = (arb_name(), arb_id(), 0i32..4, arb_ids(), 0i32..4, arb_ids()).prop_map(
        |(broker_name, master, master_epoch, set, set_epoch, alive)| Command::AlterSyncStateSet {
            broker_name,
            master_broker_id: master,
            master_epoch,
            new_sync_state_set: set,
            sync_state_set_epoch: set_epoch,
            alive,
        },
    );
    let elect = (
        arb_name(),
        prop::option::of(arb_id()),
        any::<bool>(),
        any::<bool>(),
        arb_live(),
    )
        .prop_map(|(broker_name, broker_id, designate_elect, unclean, live)| {
            Command::ElectMaster {
                broker_name,
                broker_id,
                designate_elect,
                unclean,
                live,
            }
        });
    let clean = (arb_name(), id_lists, any::<bool>(), arb_ids()).prop_map(
        |(broker_name, ids_to_clean, clean_living_broker, alive)| Command::CleanBrokerData {
            cluster_name: None,
            broker_name,
            ids_to_clean,
            clean_living_broker,
            alive,
        },
    );
    prop_oneof![3 => apply, 2 => register, 3 => alter, 3 => elect, 1 => clean]
}

/// How far a generated command is fitted to the state before it is applied.
#[derive(Clone, Copy, Debug)]
enum Aim {
    /// As generated.
    Raw,
    /// A sync-state change names the current master and epochs, as a real master's would.
    Current,
    /// ... and every replica it names is alive.
    CurrentAndAlive,
}

fn arb_aim() -> impl Strategy<Value = Aim> {
    prop_oneof![
        Just(Aim::Raw),
        Just(Aim::Current),
        Just(Aim::CurrentAndAlive)
    ]
}

/// Fits a command to the state so that sequences get past the fencing checks and reach deeper
/// states.
fn aim(state: &ControllerState, cmd: Command, how: Aim) -> Command {
    match (cmd, how) {
        (cmd, Aim::Raw) => cmd,
        (
            Command::AlterSyncStateSet {
                broker_name,
                new_sync_state_set,
                mut alive,
                ..
            },
            how,
        ) => {
            let group = state.groups.get(&broker_name);
            let master = group.and_then(|g| g.master_broker_id).unwrap_or(1);
            alive.insert(master);
            if matches!(how, Aim::CurrentAndAlive) {
                alive.extend(new_sync_state_set.iter().copied());
            }
            Command::AlterSyncStateSet {
                master_broker_id: master,
                master_epoch: group.map_or(0, |g| g.master_epoch),
                sync_state_set_epoch: group.map_or(0, |g| g.sync_state_set_epoch),
                new_sync_state_set: new_sync_state_set.into_iter().chain([master]).collect(),
                alive,
                broker_name,
            }
        }
        (other, _) => other,
    }
}

/// Both groups with ids 1..=3 held, as most sequences start, so they do not spend themselves
/// getting the first id.
fn seeded() -> ControllerState {
    let mut state = ControllerState::default();
    for name in ["a", "b"] {
        for id in 1..=3 {
            state.apply(&Command::ApplyBrokerId {
                cluster_name: "c".into(),
                broker_name: name.into(),
                applied_broker_id: id,
                register_check_code: format!("h{id}:1;{id}"),
            });
        }
    }
    state
}

fn check_invariants(
    before: &ControllerState,
    after: &ControllerState,
) -> Result<(), TestCaseError> {
    for (name, g) in &after.groups {
        if let Some(master) = g.master_broker_id {
            prop_assert!(
                g.sync_state_set.contains(&master),
                "{name}: master {master} outside the set"
            );
            prop_assert!(
                g.brokers.contains_key(&master),
                "{name}: master {master} without an id"
            );
        }
        prop_assert!(
            g.sync_state_set.iter().all(|id| g.brokers.contains_key(id)),
            "{name}: set member without an id"
        );
        prop_assert!(
            g.brokers
                .keys()
                .all(|id| *id >= FIRST_BROKER_ID && *id < g.next_assign_broker_id),
            "{name}: an id the counter could hand out again"
        );
        if let Some(old) = before.groups.get(name) {
            prop_assert!(
                g.master_epoch >= old.master_epoch,
                "{name}: master epoch went back"
            );
            prop_assert!(
                g.sync_state_set_epoch >= old.sync_state_set_epoch,
                "{name}: set epoch went back"
            );
            prop_assert!(g.next_assign_broker_id >= old.next_assign_broker_id);
            for (id, broker) in &g.brokers {
                if let Some(old_broker) = old.brokers.get(id) {
                    prop_assert_eq!(
                        &broker.register_check_code,
                        &old_broker.register_check_code,
                        "{}: id {} changed hands",
                        name,
                        id
                    );
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_command_sequence_keeps_the_invariants(
        seed in prop::bool::weighted(0.8),
        cmds in prop::collection::vec((arb_command(), arb_aim()), 0..40)
    ) {
        let mut state = if seed { seeded() } else { ControllerState::default() };
        let mut twin = state.clone();
        for (cmd, how) in cmds {
            let cmd = &aim(&state, cmd, how);
            let before = state.clone();
            let reply = state.apply(cmd);
            prop_assert_eq!(&reply, &twin.apply(cmd));
            prop_assert_eq!(&state, &twin);
            if reply.code != SUCCESS {
                // A refusal changes nothing, except the controller's own failed election, which
                // records that the master is gone.
                let records_loss = reply.code == CONTROLLER_MASTER_NOT_AVAILABLE;
                prop_assert!(records_loss || state == before, "{:?} refused but changed the state", cmd);
            }
            if let Some(change) = &reply.role_change {
                prop_assert_eq!(change.master_broker_id, state.master_of(&change.broker_name).map(|(m, _)| m));
            }
            check_invariants(&before, &state)?;
        }
        let back: ControllerState = serde_json::from_slice(&serde_json::to_vec(&state).unwrap()).unwrap();
        prop_assert_eq!(back, state);
    }
}
