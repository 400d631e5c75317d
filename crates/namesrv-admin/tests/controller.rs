//! `nsadmin`'s controller commands against real NameServers with embedded controller nodes
//! (`enableControllerInNamesrv=true`, in this process) and brokers that follow the controller
//! protocol.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::codes::request::CONTROLLER_GET_METADATA_INFO;
use rocketmq_wire::RemotingCommand;

const CLUSTER: &str = "CtlCluster";
/// Quick scans. (In mqnamesrv the first key is the NameServer's own; the controller judges a
/// broker dead by the heartbeat timeout the broker gave, which tests set short where needed.)
const FAST: &str = "scanNotActiveBrokerInterval=200\nscanInactiveMasterInterval=500\n";

async fn nsadmin(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsadmin"));
    cmd.args(args).env_remove("NAMESRV_ADDR");
    run_off_runtime(cmd).await
}

/// Starts `n` nodes and waits until every one names the leader (a follower learns of it with
/// the leader's first heartbeat, a moment after the election); the cluster and the leader's
/// index.
async fn group(n: usize) -> (ControllerCluster, usize) {
    let cluster = ControllerCluster::start(Launch::IN_PROCESS, n, FAST);
    let leader = cluster
        .leader(Duration::from_secs(20))
        .await
        .expect("the controller group elects a leader");
    let leader_addr = cluster.controllers[leader].clone();
    for addr in &cluster.controllers {
        eventually(
            "every node names the leader",
            Duration::from_secs(10),
            || async {
                let meta =
                    request(addr, RemotingCommand::request(CONTROLLER_GET_METADATA_INFO)).await;
                meta.is_some_and(|m| m.ext("controllerLeaderAddress") == Some(leader_addr.as_str()))
            },
        )
        .await;
    }
    (cluster, leader)
}

/// A broker of set `name` that has its id and is registered (and heartbeating, for 10 s).
async fn joined(cluster: &ControllerCluster, name: &'static str, addr: &str) -> ControllerBroker {
    let mut b = ControllerBroker::new(CLUSTER, name, addr);
    let resp = b
        .register(&cluster.controllers)
        .await
        .expect("the controller answers the registration");
    assert_eq!(resp.code, 0, "registration: {:?}", resp.remark);
    b
}

/// Broker set `grp`: broker 1 master, broker 2 in its sync-state set (epoch 2), both alive.
async fn master_and_slave(
    cluster: &ControllerCluster,
    master_addr: &str,
    slave_addr: &str,
) -> (ControllerBroker, ControllerBroker) {
    let ctl = &cluster.controllers;
    let mut a = joined(cluster, "grp", master_addr).await;
    let mut b = joined(cluster, "grp", slave_addr).await;
    assert_eq!(a.elect_self(ctl).await.unwrap().code, 0);
    a.heartbeat(ctl).await;
    b.heartbeat(ctl).await;
    let info = a.replica_info(ctl).await.unwrap();
    let altered = a
        .alter_sync_state_set(ctl, &info, &BTreeSet::from([1, 2]))
        .await
        .unwrap();
    assert_eq!(altered.code, 0, "{:?}", altered.remark);
    (a, b)
}

fn assert_has(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "missing line {line:?} in:\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getcontrollermetadata_of_a_single_node_names_it_as_leader() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();

    let meta = nsadmin(&["getControllerMetaData", "-a", c0]).await;
    assert_eq!(meta.code, 0, "{}", meta.stderr);
    assert_eq!(
        meta.stdout,
        format!(
            "\n#ControllerGroup\ttest\n#ControllerLeaderId\tn0\n#ControllerLeaderAddress\t{c0}\n\
             #Peer:\tn0:{c0}\n"
        )
    );
    let json = nsadmin(&["getControllerMetaData", "-a", c0, "--json"])
        .await
        .json();
    assert_eq!(json[c0]["isLeader"], true);
    assert_eq!(json[c0]["controllerLeaderAddress"], c0);
    assert_eq!(json[c0]["peers"][0]["address"], c0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getcontrollermetadata_of_three_nodes_names_the_same_leader_from_each() {
    let (cluster, leader) = group(3).await;
    let leader_addr = cluster.controllers[leader].as_str();
    let follower = cluster.controllers[(leader + 1) % 3].as_str();

    let meta = nsadmin(&["getControllerMetaData", "-a", follower]).await;
    assert_eq!(meta.code, 0, "{}", meta.stderr);
    assert_has(
        &meta.stdout,
        &[
            &format!("#ControllerLeaderId\tn{leader}"),
            &format!("#ControllerLeaderAddress\t{leader_addr}"),
        ],
    );
    for (i, c) in cluster.controllers.iter().enumerate() {
        assert_has(&meta.stdout, &[&format!("#Peer:\tn{i}:{c}")]);
    }

    let all = cluster.controller_addr();
    let each = nsadmin(&["getControllerMetaData", "-a", &all]).await;
    assert_eq!(each.code, 0, "{}", each.stderr);
    assert_eq!(each.stdout.matches("============").count(), 6);
    assert_eq!(
        each.stdout
            .matches(&format!("#ControllerLeaderAddress\t{leader_addr}\n"))
            .count(),
        3,
        "{}",
        each.stdout
    );
    let json = nsadmin(&["getControllerMetaData", "-a", &all, "--json"])
        .await
        .json();
    let leaders: Vec<&String> = cluster
        .controllers
        .iter()
        .filter(|c| json[c.as_str()]["isLeader"] == true)
        .collect();
    assert_eq!(leaders, [leader_addr]);

    // A node that is down is reported, the others still shown.
    let with_dead = format!("127.0.0.1:1;{follower}");
    let partly = nsadmin(&["getControllerMetaData", "-a", &with_dead]).await;
    assert_eq!(partly.code, 1);
    assert!(partly.stderr.contains("127.0.0.1:1"), "{}", partly.stderr);
    assert!(partly.stdout.contains(&format!("============{follower}")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getsyncstateset_shows_a_broker_set_by_name_and_a_clusters_sets() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let (mut a, mut b) = master_and_slave(&cluster, "127.0.0.1:42001", "127.0.0.1:42002").await;
    let mut solo = joined(&cluster, "solo", "127.0.0.1:42011").await;
    assert_eq!(solo.elect_self(&cluster.controllers).await.unwrap().code, 0);
    // Registered with the NameServer too, which is where -c finds the cluster's broker sets
    // (with two topics: a first registration of a single topic is refused as incomplete).
    let topics = ["T1", "T2"];
    a.register_with_namesrvs(&cluster.namesrvs, true, &topics)
        .await;
    b.register_with_namesrvs(&cluster.namesrvs, false, &topics)
        .await;
    solo.register_with_namesrvs(&cluster.namesrvs, true, &topics)
        .await;

    let one = nsadmin(&["getSyncStateSet", "-a", c0, "-b", "grp"]).await;
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_has(
        &one.stdout,
        &[
            "#brokerName\tgrp",
            "#MasterBrokerId\t1",
            "#MasterAddr\t127.0.0.1:42001",
            "#MasterEpoch\t1",
            "#SyncStateSetEpoch\t2",
            "#SyncStateSetNums\t2",
            "InSyncReplica:\tReplicaIdentity{brokerName='grp', brokerId=1, brokerAddress='127.0.0.1:42001', alive=true}",
            "InSyncReplica:\tReplicaIdentity{brokerName='grp', brokerId=2, brokerAddress='127.0.0.1:42002', alive=true}",
        ],
    );
    assert!(!one.stdout.contains("solo"));

    let n = cluster.namesrvs[0].as_str();
    let of_cluster = nsadmin(&["-n", n, "getSyncStateSet", "-a", c0, "-c", CLUSTER]).await;
    assert_eq!(of_cluster.code, 0, "{}", of_cluster.stderr);
    assert_has(
        &of_cluster.stdout,
        &[
            "#brokerName\tgrp",
            "#brokerName\tsolo",
            "#MasterAddr\t127.0.0.1:42011",
        ],
    );
    let json = nsadmin(&[
        "-n",
        n,
        "getSyncStateSet",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "--json",
    ])
    .await
    .json();
    let table = &json["replicasInfoTable"];
    assert_eq!(table["grp"]["inSyncReplicas"].as_array().unwrap().len(), 2);
    assert_eq!(table["solo"]["masterBrokerId"], 1);

    let unknown = nsadmin(&["getSyncStateSet", "-a", c0, "-b", "nope"]).await;
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("no metadata of broker set nope"),
        "{}",
        unknown.stderr
    );
    let no_cluster = nsadmin(&["-n", n, "getSyncStateSet", "-a", c0, "-c", "Nope"]).await;
    assert_eq!(no_cluster.code, 1);
    assert!(
        no_cluster.stderr.contains("cluster Nope has no brokers"),
        "{}",
        no_cluster.stderr
    );
    let no_namesrv = nsadmin(&["getSyncStateSet", "-a", c0, "-c", CLUSTER]).await;
    assert_eq!(no_namesrv.code, 1);
    assert!(
        no_namesrv.stderr.contains("NAMESRV_ADDR"),
        "{}",
        no_namesrv.stderr
    );
    let neither = nsadmin(&["getSyncStateSet", "-a", c0]).await;
    assert_eq!(neither.code, 2, "clap's usage error: {}", neither.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electmaster_moves_the_master_to_the_named_broker() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let (_a, mut b) = master_and_slave(&cluster, "127.0.0.1:42101", "127.0.0.1:42102").await;

    let elect = nsadmin(&[
        "electMaster",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "2",
    ])
    .await;
    assert_eq!(elect.code, 0, "{}\n{}", elect.stdout, elect.stderr);
    assert_eq!(
        elect.stdout,
        format!(
            "\n#ClusterName\t{CLUSTER}\n#BrokerName\tgrp\n#BrokerMasterAddr\t127.0.0.1:42102\n\
             #MasterEpoch\t2\n#SyncStateSetEpoch\t3\n\
             \t#Broker\t1\t127.0.0.1:42101\n\t#Broker\t2\t127.0.0.1:42102\n"
        )
    );
    let info = b.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.master_id, Some(2));
    assert_eq!(info.master_epoch, 2);
    assert_eq!(info.sync_state_set, BTreeSet::from([2]));

    // Broker 1 left the sync-state set with the election, and a clean election takes only
    // in-sync replicas: going back is refused.
    let back = nsadmin(&[
        "electMaster",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "--brokerName",
        "grp",
        "-b",
        "1",
    ])
    .await;
    assert_eq!(back.code, 1, "{}", back.stdout);
    assert!(
        back.stderr
            .contains("CODE: 2012 (CONTROLLER_ELECT_MASTER_FAILED)"),
        "{}",
        back.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn electmaster_of_the_current_master_says_the_master_stays() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let (mut a, _b) = master_and_slave(&cluster, "127.0.0.1:42201", "127.0.0.1:42202").await;

    let stays = nsadmin(&[
        "electMaster",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "1",
    ])
    .await;
    assert_eq!(stays.code, 1, "{}", stays.stdout);
    assert_has(
        &stays.stdout,
        &[
            "#BrokerMasterAddr\t127.0.0.1:42201",
            "#MasterEpoch\t1",
            "The master stays: broker 1 (127.0.0.1:42201) already is the master of grp, no new master was elected.",
        ],
    );
    assert!(
        stays
            .stderr
            .contains("CODE: 2011 (CONTROLLER_MASTER_STILL_EXIST)"),
        "{}",
        stays.stderr
    );
    let json = nsadmin(&[
        "electMaster",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "1",
        "--json",
    ])
    .await;
    assert_eq!(json.code, 1);
    let json = json.json();
    assert_eq!(json["elected"], false);
    assert_eq!(json["code"], 2011);
    assert_eq!(json["masterBrokerId"], 1);
    assert_eq!(json["masterEpoch"], 1);
    let info = a.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!((info.master_id, info.master_epoch), (Some(1), 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cleanbrokermetadata_removes_a_dead_broker_and_refuses_a_living_one() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let ctl = &cluster.controllers;
    let mut a = joined(&cluster, "grp", "127.0.0.1:42301").await;
    assert_eq!(a.elect_self(ctl).await.unwrap().code, 0);
    let mut b = ControllerBroker::new(CLUSTER, "grp", "127.0.0.1:42302");
    b.heartbeat_timeout_ms = 500;
    assert_eq!(b.register(ctl).await.unwrap().code, 0);

    a.heartbeat(ctl).await;
    let living = nsadmin(&[
        "cleanBrokerMetadata",
        "-a",
        c0,
        "-bn",
        "grp",
        "-c",
        CLUSTER,
        "-b",
        "1",
    ])
    .await;
    assert_eq!(living.code, 1, "{}", living.stdout);
    assert!(
        living
            .stderr
            .contains("CODE: 2009 (CONTROLLER_INVALID_CLEAN_BROKER_METADATA)"),
        "{}",
        living.stderr
    );
    assert!(living.stderr.contains("still alive"), "{}", living.stderr);

    // Broker 2 stops heartbeating and is soon dead.
    eventually("broker 2 is dead", Duration::from_secs(10), || async {
        let json = nsadmin(&["getSyncStateSet", "-a", c0, "-b", "grp", "--json"])
            .await
            .json();
        json["replicasInfoTable"]["grp"]["notInSyncReplicas"][0]["alive"] == false
    })
    .await;
    a.heartbeat(ctl).await;
    let dead = nsadmin(&[
        "cleanBrokerMetadata",
        "-a",
        c0,
        "-bn",
        "grp",
        "-c",
        CLUSTER,
        "-b",
        "2",
    ])
    .await;
    assert_eq!(dead.code, 0, "{}", dead.stderr);
    assert_eq!(
        dead.stdout,
        "clear broker grp metadata from controller success!\n"
    );
    let json = nsadmin(&["getSyncStateSet", "-a", c0, "-b", "grp", "--json"])
        .await
        .json();
    let group = &json["replicasInfoTable"]["grp"];
    assert_eq!(group["inSyncReplicas"].as_array().unwrap().len(), 1);
    assert_eq!(group["notInSyncReplicas"], serde_json::json!([]));

    // mqadmin's rules for the flags: -c unless -l, ids as numbers.
    let no_cluster = nsadmin(&["cleanBrokerMetadata", "-a", c0, "-bn", "grp", "-b", "2"]).await;
    assert_eq!(no_cluster.code, 2, "{}", no_cluster.stderr);
    let bad_ids = nsadmin(&[
        "cleanBrokerMetadata",
        "-a",
        c0,
        "-bn",
        "grp",
        "-c",
        CLUSTER,
        "-b",
        "1;x",
    ])
    .await;
    assert_eq!(bad_ids.code, 2, "{}", bad_ids.stderr);
    assert!(bad_ids.stderr.contains("broker ids separated by ';'"));

    // -l cleans a living broker set whole.
    let whole = nsadmin(&[
        "cleanBrokerMetadata",
        "-a",
        c0,
        "-bn",
        "grp",
        "-l",
        "--json",
    ])
    .await;
    assert_eq!(whole.code, 0, "{}", whole.stderr);
    assert_eq!(whole.json()["cleanLivingBroker"], true);
    let gone = nsadmin(&["getSyncStateSet", "-a", c0, "-b", "grp"]).await;
    assert_eq!(gone.code, 1, "{}", gone.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getcontrollerconfig_lists_each_nodes_keys() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let config = nsadmin(&["getControllerConfig", "-a", c0]).await;
    assert_eq!(config.code, 0, "{}", config.stderr);
    assert!(
        config
            .stdout
            .starts_with(&format!("============{c0}============\n")),
        "{}",
        config.stdout
    );
    assert_has(
        &config.stdout,
        &[
            &format!("{:<50}=  test", "controllerDLegerGroup"),
            &format!("{:<50}=  n0", "controllerDLegerSelfId"),
            &format!("{:<50}=  500", "scanInactiveMasterInterval"),
        ],
    );
    let json = nsadmin(&["getControllerConfig", "-a", c0, "--json"])
        .await
        .json();
    assert_eq!(json[c0]["controllerDLegerPeers"], format!("n0-{c0}"));
    assert_eq!(json[c0]["enableElectUncleanMaster"], "false");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updatecontrollerconfig_changes_an_allowed_key_and_refuses_the_store_path() {
    let (cluster, _) = group(1).await;
    let c0 = cluster.controllers[0].as_str();
    let ctl = &cluster.controllers;
    let mut a = joined(&cluster, "grp", "127.0.0.1:42401").await;
    assert_eq!(a.elect_self(ctl).await.unwrap().code, 0);
    let mut b = joined(&cluster, "grp", "127.0.0.1:42402").await;
    a.heartbeat(ctl).await;
    b.heartbeat(ctl).await;
    let elect_b = [
        "electMaster",
        "-a",
        c0,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "2",
    ];

    // Broker 2 is alive but outside the sync-state set: only an unclean election takes it.
    let clean_only = nsadmin(&elect_b).await;
    assert_eq!(clean_only.code, 1, "{}", clean_only.stdout);
    assert!(
        clean_only.stderr.contains("CODE: 2012"),
        "{}",
        clean_only.stderr
    );

    let update = nsadmin(&[
        "updateControllerConfig",
        "-a",
        c0,
        "-k",
        "enableElectUncleanMaster",
        "-v",
        "true",
    ])
    .await;
    assert_eq!(update.code, 0, "{}", update.stderr);
    assert_eq!(
        update.stdout,
        format!("{c0}: update controller config success! enableElectUncleanMaster : true\n")
    );
    let config = nsadmin(&["getControllerConfig", "-a", c0, "--json"])
        .await
        .json();
    assert_eq!(config[c0]["enableElectUncleanMaster"], "true");
    let unclean = nsadmin(&elect_b).await;
    assert_eq!(unclean.code, 0, "{}", unclean.stderr);
    assert_has(&unclean.stdout, &["#BrokerMasterAddr\t127.0.0.1:42402"]);

    let store = config[c0]["controllerStorePath"]
        .as_str()
        .unwrap()
        .to_string();
    let refused = nsadmin(&[
        "updateControllerConfig",
        "-a",
        c0,
        "-k",
        "controllerStorePath",
        "-v",
        "/tmp/elsewhere",
        "--json",
    ])
    .await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("CODE: 16 (NO_PERMISSION)"),
        "{}",
        refused.stderr
    );
    assert_eq!(refused.json()[0]["code"], 16);
    let config = nsadmin(&["getControllerConfig", "-a", c0, "--json"])
        .await
        .json();
    assert_eq!(config[c0]["controllerStorePath"], store.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_named_alone_finds_the_leader_for_electmaster() {
    let (cluster, leader) = group(3).await;
    let follower = cluster.controllers[(leader + 1) % 3].as_str();
    let (_a, mut b) = master_and_slave(&cluster, "127.0.0.1:42501", "127.0.0.1:42502").await;

    let elect = nsadmin(&[
        "electMaster",
        "-a",
        follower,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "2",
        "--json",
    ])
    .await;
    assert_eq!(elect.code, 0, "{}\n{}", elect.stdout, elect.stderr);
    let json = elect.json();
    assert_eq!(
        json["controllerLeader"],
        cluster.controllers[leader].as_str()
    );
    assert_eq!(json["masterBrokerId"], 2);
    assert_eq!(json["masterEpoch"], 2);
    assert_eq!(json["brokerAddrs"]["1"], "127.0.0.1:42501");
    assert_eq!(json["syncStateSet"], serde_json::json!([2]));
    let info = b.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.master_id, Some(2));

    // getSyncStateSet too needs the leader, and finds it from the follower.
    let sets = nsadmin(&["getSyncStateSet", "-a", follower, "-b", "grp"]).await;
    assert_eq!(sets.code, 0, "{}", sets.stderr);
    assert_has(&sets.stdout, &["#MasterBrokerId\t2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_leader_commands_that_need_one_fail_and_say_so() {
    let (mut cluster, leader) = group(3).await;
    let survivor = (leader + 1) % 3;
    let survivor_addr = cluster.controllers[survivor].clone();
    for i in 0..3 {
        if i != survivor {
            cluster.kill(i);
        }
    }
    eventually(
        "the survivor knows no leader",
        Duration::from_secs(20),
        || async {
            let meta = nsadmin(&["getControllerMetaData", "-a", &survivor_addr]).await;
            meta.stdout.contains("#ControllerLeaderAddress\tnull")
        },
    )
    .await;

    let elect = nsadmin(&[
        "electMaster",
        "-a",
        &survivor_addr,
        "-c",
        CLUSTER,
        "-bn",
        "grp",
        "-b",
        "1",
    ])
    .await;
    assert_eq!(elect.code, 1, "{}", elect.stdout);
    assert!(
        elect.stderr.contains(&format!(
            "no controller leader: {survivor_addr}: knows no leader"
        )),
        "{}",
        elect.stderr
    );
    // Its configuration is its own and still served.
    let config = nsadmin(&["getControllerConfig", "-a", &survivor_addr]).await;
    assert_eq!(config.code, 0, "{}", config.stderr);
    let nobody = nsadmin(&["getSyncStateSet", "-a", "127.0.0.1:1", "-b", "grp"]).await;
    assert_eq!(nobody.code, 1);
    assert!(
        nobody.stderr.contains("no controller leader: 127.0.0.1:1:"),
        "{}",
        nobody.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_member_commands_list_hand_on_the_leadership_and_remove_the_leader() {
    let (cluster, leader) = group(3).await;
    let all = cluster.controller_addr();
    let listed = nsadmin(&["listControllerMembers", "-a", &all]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert_has(&listed.stdout, &[&format!("#Leader\tn{leader}")]);
    for (i, addr) in cluster.controllers.iter().enumerate() {
        let role = if i == leader { "leader" } else { "follower" };
        let row = listed
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("n{i} ")))
            .unwrap_or_else(|| panic!("no row for n{i}: {}", listed.stdout));
        assert!(row.contains(role) && row.contains(addr.as_str()), "{row}");
    }

    // Asked of a follower alone: the request goes to the leader.
    let target = (leader + 1) % 3;
    let follower = cluster.controllers[(leader + 2) % 3].as_str();
    let id = format!("n{target}");
    let moved = nsadmin(&["transferControllerLeader", "-a", follower, "-i", &id]).await;
    assert_eq!(moved.code, 0, "{}", moved.stderr);
    assert!(moved
        .stdout
        .contains(&format!("{id} ({}) leads", cluster.controllers[target])));
    assert_eq!(cluster.leader(Duration::from_secs(5)).await, Some(target));

    let removed = nsadmin(&["removeControllerMember", "-a", &all, "-i", &id]).await;
    assert_eq!(removed.code, 0, "{}", removed.stderr);
    assert!(
        removed.stdout.contains("It was the leader"),
        "{}",
        removed.stdout
    );
    assert!(
        removed.stdout.contains("the new leader is"),
        "{}",
        removed.stdout
    );
    let listed = nsadmin(&["listControllerMembers", "-a", &all, "--json"]).await;
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let members = listed.json()["members"]["members"].clone();
    let ids: Vec<&str> = members
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2);
    assert!(!ids.contains(&id.as_str()), "{ids:?}");

    // A refusal is reported with the controller's reason, and the exit code says so.
    let refused = nsadmin(&["removeControllerMember", "-a", &all, "-i", "x1"]).await;
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("not a member id"),
        "{}",
        refused.stderr
    );
}
