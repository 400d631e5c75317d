//! Controller mode against the real binary: `mqnamesrv` with `enableControllerInNamesrv=true`,
//! brokers that follow the controller protocol, restarts from disk and leader failover.

mod support;
use support::MQNAMESRV;

use std::collections::BTreeSet;
use std::time::Duration;

use futures::StreamExt;
use namesrv_testkit::{request, ControllerBroker, ControllerCluster, ControllerProps};
use rocketmq_wire::codes::request::{
    CLEAN_BROKER_DATA, CONTROLLER_ALTER_SYNC_STATE_SET, CONTROLLER_APPLY_BROKER_ID,
    CONTROLLER_ELECT_MASTER, CONTROLLER_GET_METADATA_INFO, CONTROLLER_GET_NEXT_BROKER_ID,
    CONTROLLER_GET_REPLICA_INFO, CONTROLLER_GET_SYNC_STATE_DATA,
};
use rocketmq_wire::frame::RemotingCodec;
use rocketmq_wire::RemotingCommand;
use tokio_util::codec::FramedRead;

/// Quick expiry so that tests of a silent broker take seconds.
const FAST: &str = "scanNotActiveBrokerInterval=200\nscanInactiveMasterInterval=500\n";

async fn leader_of(cluster: &ControllerCluster) -> String {
    let i = cluster
        .leader(Duration::from_secs(20))
        .await
        .expect("the controller group elects a leader");
    cluster.controllers[i].clone()
}

/// A broker of group `name` that has its id, is registered and heartbeats.
async fn joined(cluster: &ControllerCluster, name: &'static str, addr: &str) -> ControllerBroker {
    joined_at(&cluster.controllers, name, addr).await
}

/// The same, with the controller nodes at `controllers`.
async fn joined_at(controllers: &[String], name: &'static str, addr: &str) -> ControllerBroker {
    let mut b = ControllerBroker::new("CtlCluster", name, addr);
    b.heartbeat_timeout_ms = 1_500;
    // A group just formed may still be settling its leader: retry as a broker does.
    let mut last = None;
    for _ in 0..25 {
        last = b.register(controllers).await;
        if last.as_ref().is_some_and(|r| r.code == 0) {
            return b;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("registration: {:?}", last.map(|r| (r.code, r.remark)));
}

/// The master elects itself and takes the slave (ids 1 and 2) into its sync-state set.
async fn in_sync(
    cluster: &ControllerCluster,
    master: &mut ControllerBroker,
    slave: &mut ControllerBroker,
) {
    master.elect_self(&cluster.controllers).await.unwrap();
    master.heartbeat(&cluster.controllers).await;
    slave.heartbeat(&cluster.controllers).await;
    let info = master.replica_info(&cluster.controllers).await.unwrap();
    let altered = master
        .alter_sync_state_set(&cluster.controllers, &info, &BTreeSet::from([1, 2]))
        .await
        .unwrap();
    assert_eq!(altered.code, 0, "{:?}", altered.remark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_get_ids_in_order_and_the_first_to_ask_becomes_master() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let mut a = joined(&cluster, "grp", "127.0.0.1:41001").await;
    let mut b = joined(&cluster, "grp", "127.0.0.1:41002").await;
    assert_eq!((a.id, b.id), (Some(1), Some(2)));

    let elected = a.elect_self(&cluster.controllers).await.unwrap();
    assert_eq!(elected.code, 0, "{:?}", elected.remark);
    assert_eq!(elected.ext("masterBrokerId"), Some("1"));
    assert_eq!(elected.ext("masterAddress"), Some("127.0.0.1:41001"));
    assert_eq!(elected.ext("masterEpoch"), Some("1"));

    // The second asks too late: the master stands (MASTER_STILL_EXIST, which brokers take as
    // an answer).
    let again = b.elect_self(&cluster.controllers).await.unwrap();
    assert_eq!(again.code, 2011);
    assert_eq!(again.ext("masterBrokerId"), Some("1"));

    // The master takes the slave into its sync-state set.
    a.heartbeat(&cluster.controllers).await;
    b.heartbeat(&cluster.controllers).await;
    let info = a.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.sync_state_set, BTreeSet::from([1]));
    let altered = a
        .alter_sync_state_set(&cluster.controllers, &info, &BTreeSet::from([1, 2]))
        .await
        .unwrap();
    assert_eq!(altered.code, 0, "{:?}", altered.remark);
    let info = b.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.sync_state_set, BTreeSet::from([1, 2]));
    assert_eq!(info.sync_state_set_epoch, 2);

    // A stale master epoch is fenced.
    let mut stale = info.clone();
    stale.master_epoch = 0;
    let fenced = a
        .alter_sync_state_set(&cluster.controllers, &stale, &BTreeSet::from([1]))
        .await
        .unwrap();
    assert_eq!(fenced.code, 2000);

    // What mqadmin getSyncStateSet shows.
    let leader = leader_of(&cluster).await;
    let data = request(
        &leader,
        RemotingCommand::request(CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"[\"grp\"]"[..]),
    )
    .await
    .unwrap();
    assert_eq!(data.code, 0);
    let body: serde_json::Value = serde_json::from_slice(data.body.as_deref().unwrap()).unwrap();
    let group = &body["replicasInfoTable"]["grp"];
    assert_eq!(group["masterBrokerId"], 1);
    assert_eq!(group["inSyncReplicas"].as_array().unwrap().len(), 2);
    assert_eq!(group["inSyncReplicas"][0]["alive"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_master_is_replaced_and_the_survivor_is_told_of_its_new_role() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    // The slave listens where it says it does, to receive NOTIFY_BROKER_ROLE_CHANGED.
    let slave_port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slave_addr = slave_port.local_addr().unwrap().to_string();
    let mut master = joined(&cluster, "grp", "127.0.0.1:41011").await;
    let mut slave = joined(&cluster, "grp", &slave_addr).await;
    slave.heartbeat_timeout_ms = 10_000;
    in_sync(&cluster, &mut master, &mut slave).await;

    // The master's process dies: its connections close.
    master.disconnect();
    // Each notice comes on a connection of its own. The first is of the first election
    // (master 1); the one that counts follows.
    let notice = loop {
        let (conn, _) = tokio::time::timeout(Duration::from_secs(10), slave_port.accept())
            .await
            .expect("the controller tells the survivor within seconds")
            .unwrap();
        let mut frames = FramedRead::new(conn, RemotingCodec::new(1 << 20));
        let notice = tokio::time::timeout(Duration::from_secs(5), frames.next())
            .await
            .expect("a notice on the connection")
            .unwrap()
            .unwrap();
        if notice.ext("masterEpoch") != Some("1") {
            break notice;
        }
    };
    assert_eq!(notice.code, 1008);
    assert!(notice.is_oneway());
    assert_eq!(notice.ext("masterBrokerId"), Some("2"));
    assert_eq!(notice.ext("masterAddress"), Some(slave_addr.as_str()));
    assert_eq!(notice.ext("masterEpoch"), Some("2"));
    let body: serde_json::Value = serde_json::from_slice(notice.body.as_deref().unwrap()).unwrap();
    assert_eq!(body["syncStateSet"], serde_json::json!([2]));

    let info = slave.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.master_id, Some(2));
    assert_eq!(info.master_epoch, 2);
}

/// Java's client closes a connection whenever one of its requests times out. A master that did
/// so but still listens at its address is alive, and keeps its role; once nothing listens there
/// (its process died), the close of its connection elects a new master at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_closes_its_connection_but_still_listens_keeps_its_role() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let master_port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let master_addr = master_port.local_addr().unwrap().to_string();
    let mut master = joined(&cluster, "grp", &master_addr).await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41021").await;
    master.heartbeat_timeout_ms = 10_000;
    slave.heartbeat_timeout_ms = 10_000;
    in_sync(&cluster, &mut master, &mut slave).await;

    master.disconnect();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let info = slave.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(
        (info.master_id, info.master_epoch),
        (Some(1), 1),
        "a closed connection of a broker that listens elects no one"
    );

    // Its process dies: it spoke last on a connection that now closes, and its port refuses.
    master.heartbeat(&cluster.controllers).await;
    drop(master_port);
    master.disconnect();
    let mut elected = None;
    for _ in 0..40 {
        let info = slave.replica_info(&cluster.controllers).await.unwrap();
        if info.master_id == Some(2) {
            elected = Some(info.master_epoch);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        elected,
        Some(2),
        "the survivor is master within seconds, not after the dead one's 10 s timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_and_epochs_survive_a_restart_of_the_node() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let mut a = joined(&cluster, "grp", "127.0.0.1:41021").await;
    joined(&cluster, "grp", "127.0.0.1:41022").await;
    a.elect_self(&cluster.controllers).await.unwrap();
    let before = a.replica_info(&cluster.controllers).await.unwrap();

    cluster.kill(0);
    cluster.restart(0);
    let leader = leader_of(&cluster).await;
    let mut after = None;
    for _ in 0..50 {
        after = a.replica_info(&cluster.controllers).await;
        if after.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        after.as_ref(),
        Some(&before),
        "the group's state after the restart"
    );
    let next = request(
        &leader,
        RemotingCommand::request(CONTROLLER_GET_NEXT_BROKER_ID)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", "grp"),
    )
    .await
    .unwrap();
    assert_eq!(
        next.ext("nextBrokerId"),
        Some("3"),
        "ids are never handed out twice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_takes_over_within_seconds_and_followers_send_brokers_to_it() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    let first = cluster.leader(Duration::from_secs(20)).await.unwrap();
    let follower = (first + 1) % 3;
    let refused = request(
        &cluster.controllers[follower],
        RemotingCommand::request(CONTROLLER_GET_NEXT_BROKER_ID)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", "grp"),
    )
    .await
    .unwrap();
    assert_eq!(refused.code, 2007, "a follower does not serve brokers");
    // A follower learns who leads from the leader's first heartbeat.
    let mut meta = None;
    for _ in 0..50 {
        let m = request(
            &cluster.controllers[follower],
            RemotingCommand::request(CONTROLLER_GET_METADATA_INFO),
        )
        .await
        .unwrap();
        if m.ext("controllerLeaderAddress").is_some() {
            meta = Some(m);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let meta = meta.expect("the follower names the leader");
    assert_eq!(meta.ext("isLeader"), Some("false"));
    assert_eq!(
        meta.ext("controllerLeaderAddress"),
        Some(cluster.controllers[first].as_str())
    );

    let mut a = joined(&cluster, "grp", "127.0.0.1:41031").await;
    a.elect_self(&cluster.controllers).await.unwrap();
    let started = std::time::Instant::now();
    cluster.kill(first);
    let second = cluster
        .leader(Duration::from_secs(10))
        .await
        .expect("a new leader within 10 s");
    assert_ne!(second, first);
    println!("controller leader failover: {:?}", started.elapsed());
    let mut b = ControllerBroker::new("CtlCluster", "grp", "127.0.0.1:41032");
    let mut resp = None;
    for _ in 0..20 {
        resp = b.register(&cluster.controllers).await;
        if resp.as_ref().is_some_and(|r| r.code == 0) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(resp.map(|r| r.code), Some(0));
    assert_eq!(
        b.id,
        Some(2),
        "the new leader knows the ids the old one gave"
    );
    let info = b.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(info.master_epoch, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_controller_requests_get_an_error_and_change_nothing() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    let leader = leader_of(&cluster).await;
    let mut a = joined(&cluster, "grp", "127.0.0.1:41041").await;
    a.elect_self(&cluster.controllers).await.unwrap();
    let before = a.replica_info(&cluster.controllers).await.unwrap();
    let id = a.id.expect("an id");
    // An epoch that only fits in 64 bits: cut to 32 bits it would be the master's epoch.
    let wrapped_epoch = (1i64 << 32) + i64::from(before.master_epoch);
    let set = format!(
        "{{\"syncStateSet\":[{id}],\"syncStateSetEpoch\":{}}}",
        before.sync_state_set_epoch
    );
    let hostile = [
        RemotingCommand::request(CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_ext("brokerName", "grp")
            .with_ext("masterBrokerId", id)
            .with_ext("masterEpoch", wrapped_epoch)
            .with_body(set.into_bytes()),
        RemotingCommand::request(rocketmq_wire::codes::request::BROKER_HEARTBEAT)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", "grp")
            .with_ext("brokerAddr", "127.0.0.1:41041")
            .with_ext("brokerId", id)
            .with_ext("epoch", wrapped_epoch),
        RemotingCommand::request(CONTROLLER_ALTER_SYNC_STATE_SET)
            .with_ext("brokerName", "grp")
            .with_ext("masterBrokerId", 1)
            .with_ext("masterEpoch", 1)
            .with_body(&b"{\"syncStateSet\":"[..]),
        RemotingCommand::request(CONTROLLER_ALTER_SYNC_STATE_SET),
        RemotingCommand::request(CONTROLLER_ELECT_MASTER),
        // Headers far longer than any broker sends: they would become a log entry as big.
        RemotingCommand::request(CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", "grp")
            .with_ext("appliedBrokerId", 2)
            .with_ext("registerCheckCode", "x".repeat(20_000)),
        RemotingCommand::request(CONTROLLER_APPLY_BROKER_ID).with_ext("brokerName", "grp"),
        RemotingCommand::request(CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", "grp")
            .with_ext("appliedBrokerId", 1)
            .with_ext("registerCheckCode", "127.0.0.9:1;1"),
        RemotingCommand::request(CLEAN_BROKER_DATA)
            .with_ext("brokerName", "grp")
            .with_ext("brokerControllerIdsToClean", "1;x"),
        RemotingCommand::request(CONTROLLER_GET_REPLICA_INFO),
        RemotingCommand::request(1190).with_body(&b"not json"[..]),
        RemotingCommand::request(1191).with_body(&b"{}"[..]),
        RemotingCommand::request(4242),
    ];
    for req in hostile {
        let code = req.code;
        let resp = request(&leader, req).await.expect("an answer, not a hang");
        assert_ne!(resp.code, 0, "request {code} must be refused");
    }
    let after = a.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(after, before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_shows_on_metrics_and_on_the_status_page() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let mut a = joined(&cluster, "grp<b>", "127.0.0.1:41051").await;
    a.elect_self(&cluster.controllers).await.unwrap();
    let node = cluster.nodes[0].as_ref().unwrap();
    let metrics = node.http_get("/metrics").await;
    assert!(
        metrics.contains("namesrv_controller_is_leader 1"),
        "{metrics}"
    );
    let heartbeats = metrics
        .lines()
        .find_map(|l| l.strip_prefix("namesrv_controller_heartbeats_total "))
        .and_then(|n| n.trim().parse::<u64>().ok());
    assert!(
        heartbeats.is_some_and(|n| n >= 1),
        "the broker's heartbeat is counted: {metrics}"
    );
    assert!(
        metrics.contains(
            "namesrv_controller_master_epoch{cluster=\"CtlCluster\",broker_name=\"grp<b>\"} 1"
        ),
        "{metrics}"
    );
    let page = node.http_get("/").await;
    assert!(page.contains("<h2>Controller</h2>"));
    assert!(page.contains("grp&lt;b&gt;"), "names are escaped");
    // The same section and script as a standalone mqcontroller's page.
    assert!(page.contains("<table id=controller-members>"), "{page}");
    assert!(page.contains("function showController"), "{page}");
    let json: serde_json::Value =
        serde_json::from_str(&node.http_get("/status.json").await).unwrap();
    assert_eq!(json["controller"]["groups"][0]["master_broker_id"], 1);
    assert_eq!(json["controller"]["members"][0]["role"], "leader");
    let recent = json["controller"]["recent"].as_array().unwrap();
    assert!(
        recent
            .iter()
            .any(|e| e["kind"] == "election" && e["of"] == "grp<b>"),
        "{recent:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_embedded_controller_reads_the_keys_it_shares_with_the_name_server() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    let leader = leader_of(&cluster).await;
    let config = request(&leader, RemotingCommand::request(1010))
        .await
        .unwrap();
    let listing = String::from_utf8_lossy(config.body.as_deref().unwrap()).into_owned();
    assert!(
        listing.contains("scanNotActiveBrokerInterval=200\n"),
        "{listing}"
    );
    assert!(listing.contains("controllerDLegerSelfId=n0\n"), "{listing}");
}

/// Java's #10812: after a controller leader change the slave's heartbeats reached only followers
/// and the new leader never counted it alive. Here every node keeps its own table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_leader_change_the_new_leader_counts_every_heartbeating_broker_alive() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    let first = cluster.leader(Duration::from_secs(20)).await.unwrap();
    let mut master = joined(&cluster, "grp", "127.0.0.1:41061").await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41062").await;
    master.heartbeat_timeout_ms = 10_000;
    slave.heartbeat_timeout_ms = 10_000;
    in_sync(&cluster, &mut master, &mut slave).await;

    cluster.kill(first);
    let second = cluster.leader(Duration::from_secs(10)).await.unwrap();
    // One round of heartbeats, as brokers send each second, reaches the survivors.
    master.heartbeat(&cluster.controllers).await;
    slave.heartbeat(&cluster.controllers).await;
    let data = request(
        &cluster.controllers[second],
        RemotingCommand::request(CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"[\"grp\"]"[..]),
    )
    .await
    .unwrap();
    assert_eq!(data.code, 0, "{:?}", data.remark);
    let body: serde_json::Value = serde_json::from_slice(data.body.as_deref().unwrap()).unwrap();
    let in_sync = body["replicasInfoTable"]["grp"]["inSyncReplicas"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(in_sync.len(), 2);
    assert!(in_sync.iter().all(|r| r["alive"] == true), "{in_sync:?}");
}

/// Every node restarted at once, as a StatefulSet's pods deleted together come back: the new
/// leader has heard no broker yet. The slave, heard first, asks to be master; the master is only
/// late (on Kubernetes its JVM resolves the nodes' names to the old pods for up to 30 s, and a
/// failed lookup for 10 s more). Within the grace of the new leadership the master keeps its
/// role, past one heartbeat timeout too; once the grace has passed without a word from it, the
/// slave is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_whole_group_restarts_a_master_not_heard_yet_is_kept_for_the_grace() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    leader_of(&cluster).await;
    let mut master = joined(&cluster, "grp", "127.0.0.1:41081").await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41082").await;
    master.heartbeat_timeout_ms = 10_000;
    slave.heartbeat_timeout_ms = 10_000;
    in_sync(&cluster, &mut master, &mut slave).await;

    for i in 0..3 {
        cluster.kill(i);
    }
    for i in 0..3 {
        cluster.restart(i);
    }
    leader_of(&cluster).await;
    let led_from = std::time::Instant::now();
    slave.heartbeat(&cluster.controllers).await;
    let asked = slave.elect_self(&cluster.controllers).await.unwrap();
    assert_eq!(
        asked.code,
        rocketmq_wire::codes::response::CONTROLLER_MASTER_STILL_EXIST,
        "{:?}",
        asked.remark
    );
    let info = slave.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(
        info.master_id,
        Some(1),
        "the master kept at first: {info:?}"
    );

    let grace = rocketmq_controller::UNHEARD_MASTER_GRACE;
    let mut elected = None;
    while led_from.elapsed() < grace + Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        slave.heartbeat(&cluster.controllers).await;
        if slave
            .elect_self(&cluster.controllers)
            .await
            .is_some_and(|r| r.code == 0)
            || slave
                .replica_info(&cluster.controllers)
                .await
                .is_some_and(|i| i.master_id == Some(2))
        {
            elected = Some(led_from.elapsed());
            break;
        }
    }
    let took = elected.expect("the slave is elected once the master stayed silent");
    // The leader began to lead a moment before `led_from`.
    assert!(
        took >= grace - Duration::from_secs(2),
        "not before the new leader has led for the grace: {took:?}"
    );
    drop(master);
}

/// A master that stops heartbeating but keeps its connections (a frozen process, SIGSTOP) is
/// replaced once its own heartbeat timeout passes (Java's JRaft scan never ran: #10416).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_master_is_replaced_after_its_heartbeat_timeout() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let mut master = joined(&cluster, "grp", "127.0.0.1:41071").await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41072").await;
    slave.heartbeat_timeout_ms = 30_000;
    slave.heartbeat(&cluster.controllers).await;
    master.elect_self(&cluster.controllers).await.unwrap();
    master.heartbeat(&cluster.controllers).await;
    let info = master.replica_info(&cluster.controllers).await.unwrap();
    master
        .alter_sync_state_set(&cluster.controllers, &info, &BTreeSet::from([1, 2]))
        .await
        .unwrap();
    // The master goes quiet; its connections stay open.
    let frozen_at = std::time::Instant::now();
    let mut elected = None;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let info = slave.replica_info(&cluster.controllers).await.unwrap();
        if info.master_id == Some(2) {
            elected = Some(frozen_at.elapsed());
            break;
        }
    }
    let took = elected.expect("the slave is elected");
    assert!(
        took >= Duration::from_millis(1_400),
        "not before the master's 1.5 s timeout: {took:?}"
    );
    drop(master);
}

/// The other half of #10812: a broker that can reach only the followers (its `controllerAddr`
/// lacks the leader, or the leader's link is down) is alive where elections are decided, because
/// followers pass its heartbeats on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_heard_only_by_followers_is_alive_on_the_leader() {
    let cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    let leader = cluster.leader(Duration::from_secs(20)).await.unwrap();
    // Followers learn the leader from its first heartbeat.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let mut master = joined(&cluster, "grp", "127.0.0.1:41081").await;
    master.heartbeat_timeout_ms = 10_000;
    master.elect_self(&cluster.controllers).await.unwrap();
    master.heartbeat(&cluster.controllers).await;
    let slave = joined(&cluster, "grp", "127.0.0.1:41082").await;
    // From now on the slave speaks to the followers only, on connections of its own.
    let followers: Vec<String> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| cluster.controllers[i].clone())
        .collect();
    let mut cut_off = ControllerBroker::new("CtlCluster", "grp", &slave.addr);
    cut_off.id = slave.id;
    cut_off.heartbeat_timeout_ms = 10_000;
    drop(slave);
    // Past its direct heartbeats' timeout, and past the grace in which a forwarded heartbeat
    // cannot revive a broker whose own connection closed.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    assert!(
        !alive_on(&cluster.controllers[leader], 2).await,
        "its direct heartbeats have expired"
    );
    cut_off.heartbeat(&followers).await;
    let mut alive = false;
    for _ in 0..20 {
        if alive_on(&cluster.controllers[leader], 2).await {
            alive = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        alive,
        "the leader counts the slave alive through the followers"
    );
    let info = master.replica_info(&cluster.controllers).await.unwrap();
    let altered = master
        .alter_sync_state_set(&cluster.controllers, &info, &BTreeSet::from([1, 2]))
        .await
        .unwrap();
    assert_eq!(altered.code, 0, "{:?}", altered.remark);
}

/// Whether `broker_id` of `grp` is alive on the node at `addr`, as 1006 reports it.
async fn alive_on(addr: &str, broker_id: i64) -> bool {
    let data = request(
        addr,
        RemotingCommand::request(CONTROLLER_GET_SYNC_STATE_DATA).with_body(&b"[\"grp\"]"[..]),
    )
    .await
    .unwrap();
    let body: serde_json::Value =
        serde_json::from_slice(data.body.as_deref().unwrap_or(b"{}")).unwrap_or_default();
    let group = &body["replicasInfoTable"]["grp"];
    ["inSyncReplicas", "notInSyncReplicas"].iter().any(|list| {
        group[list]
            .as_array()
            .into_iter()
            .flatten()
            .any(|r| r["brokerId"] == broker_id && r["alive"] == true)
    })
}

/// Deleting a node's files is what operators do to Java's controller when its metadata is stale
/// (#6586). A node that comes back empty must be refilled by the leader, not break the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_store_was_deleted_is_refilled_and_the_group_goes_on() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    let leader = cluster.leader(Duration::from_secs(20)).await.unwrap();
    let mut a = joined(&cluster, "grp", "127.0.0.1:41091").await;
    a.elect_self(&cluster.controllers).await.unwrap();
    let wiped = (leader + 1) % 3;
    cluster.kill(wiped);
    std::fs::remove_dir_all(cluster.home(wiped).join("controller")).unwrap();
    cluster.restart(wiped);
    // The empty node learns the group's state from the leader.
    let node = cluster.nodes[wiped].as_ref().unwrap();
    let mut refilled = false;
    for _ in 0..100 {
        let json: serde_json::Value =
            serde_json::from_str(&node.http_get("/status.json").await).unwrap();
        if json["controller"]["groups"][0]["broker_name"] == "grp" {
            refilled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refilled, "the wiped node holds the group again");
    // And it counts in a majority: without the old leader the group still serves.
    cluster.kill(leader);
    let mut next = None;
    for _ in 0..50 {
        if let Some(i) = cluster.leader(Duration::from_secs(1)).await {
            let resp = request(
                &cluster.controllers[i],
                RemotingCommand::request(CONTROLLER_GET_NEXT_BROKER_ID)
                    .with_ext("clusterName", "CtlCluster")
                    .with_ext("brokerName", "grp"),
            )
            .await;
            if let Some(r) = resp.filter(|r| r.code == 0) {
                next = r.ext("nextBrokerId").map(String::from);
                break;
            }
        }
    }
    assert_eq!(next.as_deref(), Some("2"));
}

/// A node frozen (SIGSTOP) for longer than its brokers' heartbeat timeout judges them, once it
/// runs again, by the heartbeats they sent meanwhile, not by the silence it caused: no broker is
/// failed over because the controller itself stood still.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_resumed_after_a_pause_fails_over_no_broker_that_kept_heartbeating() {
    let cluster = ControllerCluster::start(MQNAMESRV, 1, FAST);
    leader_of(&cluster).await;
    let mut master = joined(&cluster, "grp", "127.0.0.1:41091").await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41092").await;
    in_sync(&cluster, &mut master, &mut slave).await;
    let before = master.replica_info(&cluster.controllers).await.unwrap();
    // Both go on heartbeating every 300 ms (a 1.5 s timeout) from their own connections.
    let beating = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let mut beats = Vec::new();
    for (addr, id) in [
        ("127.0.0.1:41091", master.id),
        ("127.0.0.1:41092", slave.id),
    ] {
        let mut b = ControllerBroker::new("CtlCluster", "grp", addr);
        (b.id, b.heartbeat_timeout_ms) = (id, 1_500);
        let (controllers, beating) = (cluster.controllers.clone(), beating.clone());
        beats.push(tokio::spawn(async move {
            while beating.load(std::sync::atomic::Ordering::Relaxed) {
                b.heartbeat(&controllers).await;
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }));
    }
    let pid = cluster.nodes[0].as_ref().unwrap().pid().to_string();
    let signal = |sig: &str| {
        let status = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    };
    signal("-STOP");
    tokio::time::sleep(Duration::from_secs(4)).await;
    signal("-CONT");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = master.replica_info(&cluster.controllers).await.unwrap();
    beating.store(false, std::sync::atomic::Ordering::Relaxed);
    for b in beats {
        b.await.unwrap();
    }
    assert_eq!(after.master_id, before.master_id, "{after:?}");
    assert_eq!(
        after.master_epoch, before.master_epoch,
        "no failover: {after:?}"
    );
}

/// An embedded controller whose store's disk fills up stops, and says so: /readyz answers 503
/// and the status page names the reason, while the NameServer goes on serving routes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_controller_whose_disk_fills_up_stops_while_routes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk");
    std::fs::create_dir_all(&disk).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4m", "tmpfs"])
        .arg(&disk)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if namesrv_testkit::needs(mounted.then_some(()), "mounting a tmpfs (root)").is_none() {
        return;
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
    let _unmount = Unmount(disk.clone());
    let port = namesrv_testkit::free_port();
    let controller =
        ControllerProps::new([format!("127.0.0.1:{port}")], 0, disk.join("store")).group("disk");
    let server = MQNAMESRV.start_with(&format!("enableControllerInNamesrv=true\n{controller}"));
    let controller = format!("127.0.0.1:{port}");
    joined_at(std::slice::from_ref(&controller), "grp", "127.0.0.1:41101").await;
    let (status, _) = server.http_request("GET /readyz HTTP/1.0\r\n\r\n").await;
    assert_eq!(status, 200);

    let mut filler = std::fs::File::create(disk.join("filler")).unwrap();
    while std::io::Write::write_all(&mut filler, &[0u8; 4096]).is_ok() {}
    let mut stopped = false;
    for n in 0..2_000 {
        let apply = RemotingCommand::request(CONTROLLER_APPLY_BROKER_ID)
            .with_ext("clusterName", "CtlCluster")
            .with_ext("brokerName", format!("filler-{n}-{}", "x".repeat(200)))
            .with_ext("appliedBrokerId", 1)
            .with_ext("registerCheckCode", format!("127.0.0.1:{n};1"));
        request(&controller, apply).await;
        if server.http_request("GET /readyz HTTP/1.0\r\n\r\n").await.0 == 503 {
            stopped = true;
            break;
        }
    }
    assert!(stopped, "/readyz says the controller stopped");
    let status: serde_json::Value =
        serde_json::from_str(&server.http_get("/status.json").await).unwrap();
    let role = status["controller"]["role"].as_str().unwrap_or_default();
    assert!(
        role.starts_with("Stopped") && role.contains("No space left"),
        "{role}"
    );
    let meta = request(
        &controller,
        RemotingCommand::request(CONTROLLER_GET_METADATA_INFO),
    )
    .await
    .expect("the port still answers");
    assert_eq!(meta.ext("isLeader"), Some("false"));
    assert_eq!(meta.ext("controllerLeaderId"), None);
    // The NameServer part goes on: a route request is answered.
    let route = request(
        &server.addr,
        namesrv_testkit::route_request("TopicTest", 479),
    )
    .await
    .expect("routes are still served");
    assert_eq!(
        route.code, 17,
        "TOPIC_NOT_EXIST for a topic nobody registered"
    );
}

/// Node `i`'s own copy of the replicated state, as its status page shows it: its broker groups.
async fn groups_on(cluster: &ControllerCluster, i: usize) -> usize {
    let node = cluster.nodes[i].as_ref().expect("running");
    let status: serde_json::Value =
        serde_json::from_str(&node.http_get("/status.json").await).unwrap();
    status["controller"]["groups_total"].as_u64().unwrap_or(0) as usize
}

/// With a snapshot every 10 entries, a node that was down while the group moved on finds the
/// log it missed purged and is sent a snapshot; every node then restarts from its snapshot and
/// the entries after it, with nothing lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_are_built_installed_on_a_node_far_behind_and_restarted_from() {
    let mut cluster = ControllerCluster::start(
        MQNAMESRV,
        3,
        &format!("{FAST}controllerSnapshotEveryEntries=10\n"),
    );
    let leader = cluster
        .leader(Duration::from_secs(20))
        .await
        .expect("a leader");
    let behind = (leader + 1) % 3;
    cluster.kill(behind);
    const GROUPS: usize = 30;
    let names: Vec<&'static str> = (0..GROUPS)
        .map(|i| &*Box::leak(format!("snap-{i}").into_boxed_str()))
        .collect();
    for (i, name) in names.iter().enumerate() {
        joined(&cluster, name, &format!("127.0.0.1:{}", 42_000 + i)).await;
    }
    cluster.restart(behind);
    let mut caught_up = false;
    for _ in 0..100 {
        if groups_on(&cluster, behind).await == GROUPS {
            caught_up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(caught_up, "the node far behind holds every group");
    let log = cluster.controller_log(behind);
    assert!(
        log.contains("snapshot"),
        "it was sent a snapshot, not the purged log: {log}"
    );
    for i in 0..3 {
        cluster.kill(i);
    }
    for i in 0..3 {
        cluster.restart(i);
    }
    cluster
        .leader(Duration::from_secs(20))
        .await
        .expect("a leader again");
    for i in 0..3 {
        assert_eq!(
            groups_on(&cluster, i).await,
            GROUPS,
            "node {i} after a restart"
        );
    }
    // Ids survive: a broker that asks again keeps its id.
    let mut again = ControllerBroker::new("CtlCluster", names[0], "127.0.0.1:42000");
    again.heartbeat_timeout_ms = 1_500;
    let info = again
        .replica_info(&cluster.controllers)
        .await
        .expect("replica info");
    assert_eq!(info.master_id, None, "no election was asked for");
}

/// Controller nodes that share a secret (`controllerPeerSecretPath`) prove who they are on their
/// Raft requests, probes, hand-overs and forwarded heartbeats: the group elects, a broker joins
/// through any node and is elected master; a process on a member's own address (every test
/// process here) gets every peer code refused unsigned, and the leader still leads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_nodes_that_share_a_secret_refuse_every_unproven_peer_request() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("controller.secret");
    std::fs::write(&secret, "the controller group's own secret\n").unwrap();
    let extra = format!("{FAST}controllerPeerSecretPath={}\n", secret.display());
    let cluster = ControllerCluster::start(MQNAMESRV, 3, &extra);
    let leader = leader_of(&cluster).await;
    // Heartbeats sent to followers reach the leader (forwarded, sealed).
    let follower = cluster
        .controllers
        .iter()
        .find(|a| **a != leader)
        .unwrap()
        .clone();
    let mut a = joined(&cluster, "sealed", "127.0.0.1:41101").await;
    // Twice its 1.5 s timeout of heartbeats to a follower only: alive on the leader only if
    // they were forwarded (sealed) to it.
    let began = std::time::Instant::now();
    while began.elapsed() < Duration::from_secs(3) {
        a.heartbeat(std::slice::from_ref(&follower)).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let elected = a.elect_self(&cluster.controllers).await.unwrap();
    assert_eq!(elected.code, 0, "{:?}", elected.remark);
    let forged_vote = br#"{"vote":{"leader_id":{"term":1000000,"node_id":1},"committed":false},"last_log_id":null}"#;
    for code in [1190, 1191, 1192, 1194, 1195] {
        let answer = request(
            &leader,
            RemotingCommand::request(code).with_body(forged_vote.to_vec()),
        )
        .await
        .expect("an answer");
        assert_eq!(answer.code, 16, "code {code}: {:?}", answer.remark);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(leader_of(&cluster).await, leader, "the leader still leads");
}

/// A rolling restart stops the leader with SIGTERM. It hands its office to another node first,
/// which leads as soon as it has exited (an election would take seconds). On its way out it closes
/// the connections its brokers heartbeat on: that is the node leaving, not the brokers, and the
/// master keeps its role and its epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_with_sigterm_hands_over_and_fails_over_none_of_the_masters_it_served() {
    let mut cluster = ControllerCluster::start(MQNAMESRV, 3, FAST);
    let first = cluster.leader(Duration::from_secs(20)).await.unwrap();
    let mut master = joined(&cluster, "grp", "127.0.0.1:41071").await;
    let mut slave = joined(&cluster, "grp", "127.0.0.1:41072").await;
    master.heartbeat_timeout_ms = 10_000;
    slave.heartbeat_timeout_ms = 10_000;
    in_sync(&cluster, &mut master, &mut slave).await;
    let before = master.replica_info(&cluster.controllers).await.unwrap();
    assert_eq!(before.master_id, Some(1));

    // Both brokers heartbeat on connections of their own to every node, the leader included.
    master.heartbeat(&cluster.controllers).await;
    slave.heartbeat(&cluster.controllers).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = cluster.nodes[first].as_mut().unwrap().terminate();
    assert!(status.success(), "{status:?}");
    let said = cluster.controller_log(first);
    cluster.nodes[first] = None;
    let next = cluster.leader(Duration::from_millis(500)).await;
    assert!(
        next.is_some_and(|n| n != first),
        "no other node leads right after the leader exited; it said:\n{said}"
    );
    assert!(
        said.contains("handed the leadership over before leaving"),
        "{said}"
    );

    // Brokers go on heartbeating the nodes left, as they do each second, while the group settles.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
    while tokio::time::Instant::now() < deadline {
        master.heartbeat(&cluster.controllers).await;
        slave.heartbeat(&cluster.controllers).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let after = master
        .replica_info(&cluster.controllers)
        .await
        .expect("the two nodes left answer");
    assert_eq!(
        after, before,
        "the group's master after its controller leader stopped; the stopped node said:\n{said}"
    );
}
