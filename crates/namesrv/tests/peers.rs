//! NameServers that list each other in `namesrvPeers`: the KV config is replicated through their
//! Raft group. Three real `mqnamesrv` processes on loopback, killed with SIGKILL and restarted.

mod support;

use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use support::MQNAMESRV;

const READY: Duration = Duration::from_secs(30);

async fn get_kv(cluster: &NamesrvCluster, i: usize, ns: &str, key: &str) -> Option<String> {
    let client = cluster.client(i).await;
    let answer = call(&client, kv_request(request::GET_KV_CONFIG, ns, key)).await;
    (answer.code == response::SUCCESS)
        .then(|| answer.ext("value").map(String::from))
        .flatten()
}

/// A KV write sent to node `i`, with time for the group's deadline to pass.
async fn write(cluster: &NamesrvCluster, i: usize, cmd: RemotingCommand) -> RemotingCommand {
    let client = cluster.client(i).await;
    client
        .invoke(cmd, Duration::from_secs(15))
        .await
        .expect("the NameServer answers")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kv_write_to_any_nameserver_is_read_back_from_all_three() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    for i in 0..3 {
        let put = write(&cluster, i, put_kv_request("ns", &format!("k{i}"), "v")).await;
        assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
        // Read back at once from the NameServer that took it, leader or not.
        assert_eq!(
            get_kv(&cluster, i, "ns", &format!("k{i}")).await.as_deref(),
            Some("v")
        );
    }
    for i in 0..3 {
        for k in 0..3 {
            let key = format!("k{k}");
            eventually(
                "every write on every NameServer",
                Duration::from_secs(3),
                || {
                    let key = key.clone();
                    let cluster = &cluster;
                    async move { get_kv(cluster, i, "ns", &key).await.as_deref() == Some("v") }
                },
            )
            .await;
        }
    }
    let delete = write(
        &cluster,
        2,
        kv_request(request::DELETE_KV_CONFIG, "ns", "k0"),
    )
    .await;
    assert_eq!(delete.code, response::SUCCESS);
    eventually(
        "the delete on every NameServer",
        Duration::from_secs(3),
        || async {
            let mut gone = true;
            for i in 0..3 {
                gone &= get_kv(&cluster, i, "ns", "k0").await.is_none();
            }
            gone
        },
    )
    .await;
    // One leader, named alike by all three on the status page and in the metrics.
    let mut leaders = 0;
    let mut named = std::collections::BTreeSet::new();
    for i in 0..3 {
        let node = cluster.node(i);
        let status: serde_json::Value =
            serde_json::from_str(&node.http_get("/status.json").await).unwrap();
        let peers = &status["peers"];
        assert_eq!(peers["self_id"], format!("n{i}"));
        assert_eq!(peers["members"].as_array().unwrap().len(), 3, "{peers}");
        assert_eq!(peers["caught_up"], true);
        named.insert(peers["leader"].as_str().unwrap_or_default().to_string());
        let metrics = node.http_get("/metrics").await;
        leaders += metrics
            .lines()
            .find_map(|l| l.strip_prefix("namesrv_peers_kv_is_leader "))
            .expect("the KV group's series are exported")
            .trim()
            .parse::<u32>()
            .unwrap();
        assert!(node.http_get("/").await.contains("<h2>Peers</h2>"));
    }
    assert_eq!(leaders, 1);
    assert_eq!(named.len(), 1, "{named:?}");
    // The file a lone NameServer reads holds the replicated table, in Java's format.
    let file = std::fs::read_to_string(cluster.home(1).join("namesrv").join("kvConfig.json"))
        .unwrap_or_default();
    assert!(file.contains(r#""k1":"v""#), "{file}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nameserver_that_was_down_holds_every_write_before_it_says_it_is_ready() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    cluster.kill(2);
    for k in 0..100 {
        let put = write(
            &cluster,
            k % 2,
            put_kv_request("ns", &format!("k{k:03}"), "v"),
        )
        .await;
        assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    }
    for k in 0..10 {
        let delete = write(
            &cluster,
            1,
            kv_request(request::DELETE_KV_CONFIG, "ns", &format!("k{k:03}")),
        )
        .await;
        assert_eq!(delete.code, response::SUCCESS, "{:?}", delete.remark);
    }
    cluster.restart(2);
    cluster.node_ready(2, READY).await;
    // Ready means caught up: no waiting from here on.
    let client = cluster.client(2).await;
    let listed = call(
        &client,
        RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "ns"),
    )
    .await;
    assert_eq!(listed.code, response::SUCCESS);
    let body = body_text(&listed);
    for k in 0..100 {
        let key = format!("\"k{k:03}\"");
        assert_eq!(body.contains(&key), k >= 10, "{key} in {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_quorum_a_kv_write_fails_clearly_and_nothing_acknowledged_is_lost() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let put = write(&cluster, 0, put_kv_request("ns", "kept", "1")).await;
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    cluster.kill(1);
    cluster.kill(2);
    let began = Instant::now();
    let refused = write(&cluster, 0, put_kv_request("ns", "lost", "1")).await;
    let took = began.elapsed();
    assert_eq!(refused.code, response::SYSTEM_ERROR);
    let remark = refused.remark.unwrap_or_default();
    assert!(remark.contains("quorum"), "{remark}");
    assert!(took < Duration::from_secs(7), "answered after {took:?}");
    // Reads stay local and go on.
    assert_eq!(
        get_kv(&cluster, 0, "ns", "kept").await.as_deref(),
        Some("1")
    );
    cluster.restart(1);
    cluster.restart(2);
    cluster.ready(READY).await;
    let put = write(&cluster, 2, put_kv_request("ns", "after", "1")).await;
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    for i in 0..3 {
        eventually(
            "the acknowledged writes everywhere",
            Duration::from_secs(3),
            || async {
                get_kv(&cluster, i, "ns", "kept").await.as_deref() == Some("1")
                    && get_kv(&cluster, i, "ns", "after").await.as_deref() == Some("1")
            },
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kv_group_s_requests_are_refused_from_a_non_member_and_by_a_lone_nameserver() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    // A forged vote from another loopback address, which no member has.
    let stranger = rocketmq_wire::client::Client::connect_from(
        &cluster.addrs[0],
        Some("127.0.0.2".parse().unwrap()),
        Duration::from_secs(2),
    )
    .await
    .unwrap();
    let vote = stranger
        .invoke(
            RemotingCommand::request(1211).with_body(&b"{}"[..]),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    assert_eq!(vote.code, response::NO_PERMISSION, "{:?}", vote.remark);
    let lone = MQNAMESRV.start();
    let client = lone.client().await;
    let vote = call(
        &client,
        RemotingCommand::request(1211).with_body(&b"{}"[..]),
    )
    .await;
    assert_eq!(vote.code, response::REQUEST_CODE_NOT_SUPPORTED);
}

/// A stream of writes while each NameServer in turn, the leader among them, is killed with
/// SIGKILL and restarted: every write that was answered SUCCESS is on all three at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_kv_write_is_lost_when_any_nameserver_is_killed() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let mut acknowledged = Vec::new();
    let mut refused = 0;
    let mut n = 0;
    for victim in 0..3 {
        let writers: Vec<usize> = (0..3).filter(|i| *i != victim).collect();
        for round in 0..60 {
            if round == 20 {
                cluster.kill(victim);
            }
            let target = writers[round % 2];
            let key = format!("k{n:04}");
            n += 1;
            let answer = write(&cluster, target, put_kv_request("ns", &key, "v")).await;
            if answer.code == response::SUCCESS {
                acknowledged.push(key);
            } else {
                refused += 1;
            }
        }
        cluster.restart(victim);
        cluster.ready(READY).await;
    }
    assert!(
        acknowledged.len() >= 150,
        "{} acknowledged, {refused} refused: a group that lost one member still writes",
        acknowledged.len()
    );
    for i in 0..3 {
        let client = cluster.client(i).await;
        let listed = call(
            &client,
            RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "ns"),
        )
        .await;
        let body = body_text(&listed);
        let missing: Vec<&String> = acknowledged
            .iter()
            .filter(|k| !body.contains(&format!("\"{k}\"")))
            .collect();
        assert!(
            missing.is_empty(),
            "node {i} lacks acknowledged {missing:?}"
        );
    }
}

/// With `tls.server.mode=enforcing` the NameServers' ports take only TLS, so they speak TLS to
/// each other too, checking each other's certificate against the configured trust.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nameservers_that_take_only_tls_replicate_over_tls() {
    let certs = tempfile::tempdir().unwrap();
    let cert = write_cert(certs.path());
    let props = format!(
        "{}\ntls.server.trustCertPath={}",
        tls_props(certs.path(), "enforcing"),
        certs.path().join("server.pem").display()
    );
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, &props);
    cluster.ready(READY).await;
    let writer = tls_client(&cluster.addrs[1], &cert).await.unwrap();
    let put = writer
        .invoke(
            put_kv_request("ns", "k", "over-tls"),
            Duration::from_secs(15),
        )
        .await
        .unwrap();
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    for i in [0, 2] {
        let reader = tls_client(&cluster.addrs[i], &cert).await.unwrap();
        eventually(
            "the write read back over TLS",
            Duration::from_secs(3),
            || async {
                let got = call(&reader, kv_request(request::GET_KV_CONFIG, "ns", "k")).await;
                got.ext("value") == Some("over-tls")
            },
        )
        .await;
    }
    assert!(
        !plaintext_served(&cluster.addrs[0]).await,
        "plaintext is refused"
    );
}

async fn routes_to(cluster: &NamesrvCluster, i: usize, topic: &str, addr: &str) -> bool {
    let client = cluster.client(i).await;
    let answer = call(&client, route_request(topic, 479)).await;
    answer.code == response::SUCCESS && body_text(&answer).contains(addr)
}

/// `broker` registered with node 0 with `topics`, once all three route its first topic; its
/// connection.
async fn routable_everywhere(
    cluster: &NamesrvCluster,
    broker: &Broker,
    topics: &[&str],
) -> rocketmq_wire::client::Client {
    let conn = broker.register_on(cluster.node(0), topics).await;
    for i in 1..3 {
        eventually("routable everywhere", Duration::from_secs(3), || {
            routes_to(cluster, i, topics[0], &broker.addr)
        })
        .await;
    }
    conn
}

/// A broker that registers with and heartbeats to one NameServer only is routable on all three
/// for as long as that one hears it, well past the broker's own timeout, and expires on all three
/// within that timeout once nobody hears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_heard_by_one_nameserver_is_routable_on_all_three_until_none_hears_it() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "scanNotActiveBrokerInterval=1000");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "peer-broker", 0, "10.1.0.1:10911");
    let client = cluster.client(0).await;
    let register = broker
        .register_request(&[("PeerTopic", 6), ("PeerTopic2", 6)], dv(1, 0))
        .with_ext("heartbeatTimeoutMillis", 4000);
    assert_eq!(call(&client, register).await.code, response::SUCCESS);
    for i in 1..3 {
        eventually(
            "routable on the other NameServers",
            Duration::from_secs(3),
            || routes_to(&cluster, i, "PeerTopic", &broker.addr),
        )
        .await;
    }
    // Twice its timeout of heartbeats to the first NameServer only.
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(8) {
        call(&client, broker.heartbeat_request()).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for i in 0..3 {
        assert!(
            routes_to(&cluster, i, "PeerTopic", &broker.addr).await,
            "node {i} dropped a broker that node 0 still hears"
        );
    }
    // Silent now (its connection stays open): gone everywhere within its timeout and a scan.
    let silent = Instant::now();
    for i in 0..3 {
        eventually("expired everywhere", Duration::from_secs(10), || async {
            !routes_to(&cluster, i, "PeerTopic", &broker.addr).await
        })
        .await;
    }
    assert!(silent.elapsed() < Duration::from_secs(10));
    drop(client);
}

/// A broker whose connection to a NameServer closes leaves that NameServer at once, as before,
/// and a peer's older word of it does not bring it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_whose_connection_closed_is_not_brought_back_by_a_peer() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "leaving-broker", 0, "10.1.0.2:10911");
    let conn = broker
        .register_on(cluster.node(0), &["LeavingTopic", "LeavingTopic2"])
        .await;
    eventually("routable on node 2", Duration::from_secs(3), || {
        routes_to(&cluster, 2, "LeavingTopic", &broker.addr)
    })
    .await;
    drop(conn);
    eventually("gone from node 0", Duration::from_secs(2), || async {
        !routes_to(&cluster, 0, "LeavingTopic", &broker.addr).await
    })
    .await;
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(3) {
        assert!(
            !routes_to(&cluster, 0, "LeavingTopic", &broker.addr).await,
            "a peer brought a departed broker back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A broker that unregisters from the one NameServer it knows (a graceful shutdown) leaves all
/// three at once, not when its timeout runs out on the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_unregisters_from_one_nameserver_leaves_all_three() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "quitting-broker", 0, "10.1.0.6:10911");
    let conn = routable_everywhere(&cluster, &broker, &["QuittingTopic", "QuittingTopic2"]).await;
    let bye = call(&conn, broker.unregister_request()).await;
    assert_eq!(bye.code, response::SUCCESS);
    for i in [0, 1, 2] {
        eventually(
            &format!("gone from node {i}"),
            Duration::from_secs(3),
            || async { !routes_to(&cluster, i, "QuittingTopic", &broker.addr).await },
        )
        .await;
    }
    // And it stays gone: no peer brings it back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    for i in [0, 1, 2] {
        assert!(!routes_to(&cluster, i, "QuittingTopic", &broker.addr).await);
    }
}

/// A NameServer that was down while a broker registered elsewhere routes to it as soon as it
/// says it is ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_nameserver_holds_its_peers_routes_when_it_says_it_is_ready() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    cluster.kill(2);
    let broker = Broker::new("c", "while-down", 0, "10.1.0.3:10911");
    let _conn = broker
        .register_on(cluster.node(0), &["WhileDownTopic", "WhileDownTopic2"])
        .await;
    cluster.restart(2);
    cluster.node_ready(2, READY).await;
    assert!(routes_to(&cluster, 2, "WhileDownTopic", &broker.addr).await);
}

/// Admin changes made through one NameServer (write permission, topic deletion) reach the
/// others' routes: they travel through the KV group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_topic_changes_on_one_nameserver_reach_the_others() {
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "admin-broker", 0, "10.1.0.4:10911");
    let _conn = routable_everywhere(&cluster, &broker, &["AdminTopic", "AdminTopic2"]).await;
    let wipe = RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", broker.name);
    let wipe = write(&cluster, 1, wipe).await;
    assert_eq!(wipe.code, response::SUCCESS, "{:?}", wipe.remark);
    assert_eq!(wipe.ext("wipeTopicCount"), Some("2"));
    // At once on the NameServer that took it, within moments on the others.
    for i in [1, 0, 2] {
        let limit = Duration::from_secs(if i == 1 { 0 } else { 2 });
        eventually(&format!("writes wiped on node {i}"), limit, || async {
            let client = cluster.client(i).await;
            let route = call(&client, route_request("AdminTopic", 479)).await;
            body_text(&route).contains("\"perm\":4")
        })
        .await;
    }
    let delete =
        RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", "AdminTopic2");
    let delete = write(&cluster, 2, delete).await;
    assert_eq!(delete.code, response::SUCCESS, "{:?}", delete.remark);
    for i in [2, 0, 1] {
        let limit = Duration::from_secs(if i == 2 { 0 } else { 2 });
        eventually(&format!("the topic gone on node {i}"), limit, || async {
            let client = cluster.client(i).await;
            let route = call(&client, route_request("AdminTopic2", 479)).await;
            route.code == response::TOPIC_NOT_EXIST
        })
        .await;
    }
    // Every member's route journal names the admin who asked, also where the change arrived
    // through the KV group, and node 1 took the broker over from node 0's word.
    for i in 0..3 {
        let client = cluster.client(i).await;
        let asked =
            RemotingCommand::request(request::ROUTE_JOURNAL).with_ext("topic", "AdminTopic2");
        let answer = call(&client, asked).await;
        let answer: serde_json::Value =
            serde_json::from_slice(answer.body.as_deref().unwrap()).unwrap();
        let entries = answer["entries"].as_array().unwrap();
        let last = entries.last().unwrap();
        assert_eq!(last["cause"], "admin-deleted", "node {i}: {answer}");
        assert_eq!(last["by"], "admin from 127.0.0.1", "node {i}: {answer}");
        let first = &entries[0];
        let (cause, by) = if i == 0 {
            ("registered", None)
        } else {
            ("taken-over", Some("peer NameServer"))
        };
        assert_eq!(first["cause"], cause, "node {i}: {answer}");
        if let Some(by) = by {
            assert!(
                first["by"].as_str().unwrap().starts_with(by),
                "node {i}: {answer}"
            );
        }
    }
}

/// Members whose wall clocks differ by minutes, as separate hosts' do: node 1's is 90 s behind,
/// node 2's 10 minutes ahead. An admin change sent to either is in force on all three, and
/// stays so; no decision compares one member's clock with another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_changes_through_members_whose_clocks_differ_are_in_force_on_all_three() {
    let cluster = NamesrvCluster::start_skewed(MQNAMESRV, &[0, -90, 600], "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "skew-broker", 0, "10.1.0.7:10911");
    let _conn = routable_everywhere(&cluster, &broker, &["SkewTopic", "SkewTopic2"]).await;
    let perm_everywhere = |perm: &'static str| {
        let cluster = &cluster;
        async move {
            for i in 0..3 {
                let client = cluster.client(i).await;
                let route = call(&client, route_request("SkewTopic", 479)).await;
                if !body_text(&route).contains(perm) {
                    return false;
                }
            }
            true
        }
    };
    let wipe = RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", broker.name);
    let wipe = write(&cluster, 1, wipe).await;
    assert_eq!(wipe.code, response::SUCCESS, "{:?}", wipe.remark);
    assert_eq!(wipe.ext("wipeTopicCount"), Some("2"));
    eventually("writes wiped on all three", Duration::from_secs(2), || {
        perm_everywhere("\"perm\":4")
    })
    .await;
    // And it holds: no member takes the others' older word of the group over it.
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(12) {
        assert!(
            perm_everywhere("\"perm\":4").await,
            "a member routes the broker writable again {:?} after the wipe",
            began.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let add = RemotingCommand::request(request::ADD_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", broker.name);
    assert_eq!(write(&cluster, 2, add).await.code, response::SUCCESS);
    eventually("writes back on all three", Duration::from_secs(2), || {
        perm_everywhere("\"perm\":6")
    })
    .await;
    let delete =
        RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", "SkewTopic2");
    assert_eq!(write(&cluster, 1, delete).await.code, response::SUCCESS);
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(6) {
        for i in 0..3 {
            let client = cluster.client(i).await;
            let route = call(&client, route_request("SkewTopic2", 479)).await;
            if began.elapsed() > Duration::from_secs(2) {
                assert_eq!(
                    route.code,
                    response::TOPIC_NOT_EXIST,
                    "node {i} routes it again"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A member back from a crash, whose route snapshot still holds a topic deleted and a broker
/// whose write permission was wiped while it was down: a client asking it from its first
/// accepted connection on never gets either; until it has caught up it answers SYSTEM_ERROR
/// saying so (clients keep their last route, or ask another NameServer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_returning_member_never_answers_with_what_was_undone_while_it_was_down() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "returning-broker", 0, "10.1.0.9:10911");
    let _conn = broker
        .register_on(cluster.node(0), &["KeptTopic", "GoneTopic"])
        .await;
    eventually("routable on node 2", Duration::from_secs(3), || {
        routes_to(&cluster, 2, "GoneTopic", &broker.addr)
    })
    .await;
    // Its snapshot is saved within a second of a change.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    cluster.kill(2);
    let wipe = RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
        .with_ext("brokerName", broker.name);
    assert_eq!(write(&cluster, 0, wipe).await.code, response::SUCCESS);
    let delete =
        RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", "GoneTopic");
    assert_eq!(write(&cluster, 1, delete).await.code, response::SUCCESS);
    cluster.restart(2);
    let addr = cluster.addrs[2].clone();
    let began = Instant::now();
    let client = loop {
        if let Ok(c) = rocketmq_wire::client::Client::connect(&addr).await {
            break c;
        }
        assert!(began.elapsed() < READY, "node 2 accepts connections");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let (mut refused, mut served) = (0, 0);
    while began.elapsed() < Duration::from_secs(6) {
        let kept = call(&client, route_request("KeptTopic", 479)).await;
        match kept.code {
            response::SUCCESS => {
                served += 1;
                assert!(
                    body_text(&kept).contains("\"perm\":4"),
                    "the wiped broker served writable: {}",
                    body_text(&kept)
                );
            }
            response::SYSTEM_ERROR => {
                refused += 1;
                assert!(kept
                    .remark
                    .as_deref()
                    .unwrap_or_default()
                    .contains("not ready"));
            }
            other => panic!("answered {other}: {:?}", kept.remark),
        }
        let gone = call(&client, route_request("GoneTopic", 479)).await;
        assert_ne!(gone.code, response::SUCCESS, "the deleted topic served");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("{refused} route requests refused while catching up, {served} served after");
    assert!(served > 0, "served once caught up");
}

/// A proxy to `target` that records what its one client sends: its address and the record.
async fn recording_proxy(target: String) -> (String, std::sync::Arc<parking_lot::Mutex<Vec<u8>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = proxy.local_addr().unwrap().to_string();
    let recorded = std::sync::Arc::new(parking_lot::Mutex::new(Vec::<u8>::new()));
    let record = recorded.clone();
    tokio::spawn(async move {
        let (inbound, _) = proxy.accept().await.unwrap();
        let outbound = tokio::net::TcpStream::connect(&target).await.unwrap();
        let (mut in_r, mut in_w) = inbound.into_split();
        let (mut out_r, mut out_w) = outbound.into_split();
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut out_r, &mut in_w).await;
        });
        let mut buf = [0u8; 4096];
        while let Ok(n) = in_r.read(&mut buf).await {
            if n == 0 || out_w.write_all(&buf[..n]).await.is_err() {
                return;
            }
            record.lock().extend_from_slice(&buf[..n]);
        }
    });
    (addr, recorded)
}

/// Members that share a secret (`namesrvPeerSecretPath`) prove who they are on every peer
/// request: they replicate KV writes (a follower's passed on to the leader) and routes as
/// before, while a process on a member's own address, as every test process is here, gets
/// every peer code refused unsigned, cannot finish a handshake without the secret, and a
/// recorded sealed write replayed on a new connection is refused: nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_that_share_a_secret_refuse_every_unproven_peer_request() {
    use tokio::io::AsyncWriteExt;

    let dir = tempfile::tempdir().unwrap();
    let secret_path = dir.path().join("peer.secret");
    std::fs::write(&secret_path, "a secret every member shares\n").unwrap();
    let extra = format!("namesrvPeerSecretPath={}", secret_path.display());
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, &extra);
    cluster.ready(READY).await;
    // Through a follower as well as the leader, and routes between them.
    for i in 0..3 {
        let put = write(&cluster, i, put_kv_request("ns", &format!("k{i}"), "1")).await;
        assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    }
    let broker = Broker::new("c", "sealed-broker", 0, "10.1.0.10:10911");
    let _conn = broker
        .register_on(cluster.node(0), &["SealedTopic", "SealedTopic2"])
        .await;
    eventually("routable on node 2", Duration::from_secs(3), || {
        routes_to(&cluster, 2, "SealedTopic", &broker.addr)
    })
    .await;

    // Unsigned, from a member's address: every peer code refused.
    let stranger = cluster.client(0).await;
    let forged_put = br#"{"Put":{"namespace":"ns","key":"k0","value":"forged"}}"#;
    for code in [1210, 1211, 1212, 1214, 1216, 1220, 1221] {
        let request = RemotingCommand::request(code).with_body(forged_put.to_vec());
        let answer = call(&stranger, request).await;
        assert_eq!(
            answer.code,
            response::NO_PERMISSION,
            "code {code}: {:?}",
            answer.remark
        );
    }
    // A handshake with the wrong secret does not prove the answering member, nor this one.
    let wrong = rocketmq_raft::peer_auth::PeerSecret::from_bytes(b"not the secret at all").unwrap();
    let client = cluster.client(1).await;
    assert!(
        rocketmq_raft::peer_auth::handshake(&client, &wrong, Duration::from_secs(2))
            .await
            .is_err()
    );
    let answer = call(
        &client,
        RemotingCommand::request(1216).with_body(forged_put.to_vec()),
    )
    .await;
    assert_eq!(answer.code, response::NO_PERMISSION);

    // A sealed write recorded on its way (a proxy in the path), replayed on a new connection;
    // sent to each member in turn until one leads and takes it.
    let secret = rocketmq_raft::peer_auth::PeerSecret::load(&secret_path).unwrap();
    let put = br#"{"Put":{"namespace":"ns","key":"replayed","value":"v1"}}"#;
    let mut taken = None;
    for i in 0..3 {
        let (proxy_addr, recorded) = recording_proxy(cluster.addrs[i].clone()).await;
        let sealed = rocketmq_wire::client::Client::connect(&proxy_addr)
            .await
            .unwrap();
        rocketmq_raft::peer_auth::handshake(&sealed, &secret, Duration::from_secs(2))
            .await
            .expect("the handshake with the secret");
        let answer = call(
            &sealed,
            RemotingCommand::request(1216).with_body(put.to_vec()),
        )
        .await;
        if answer.code == response::SUCCESS {
            taken = Some((i, recorded));
            break;
        }
    }
    let (leader, recorded) = taken.expect("the leader takes a sealed write");
    let now = write(&cluster, 0, put_kv_request("ns", "replayed", "v2")).await;
    assert_eq!(now.code, response::SUCCESS);
    let bytes = recorded.lock().clone();
    // The recorded handshake first, then, once it is answered, the sealed write after it.
    let hello_len = 4 + u32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
    let replay = tokio::net::TcpStream::connect(&cluster.addrs[leader])
        .await
        .unwrap();
    let mut frames =
        tokio_util::codec::Framed::new(replay, rocketmq_wire::frame::RemotingCodec::new(1 << 20));
    use futures::StreamExt;
    frames
        .get_mut()
        .write_all(&bytes[..hello_len])
        .await
        .unwrap();
    let hello = frames.next().await.unwrap().unwrap();
    assert_eq!(
        hello.code,
        response::SUCCESS,
        "a handshake is answered to anyone"
    );
    frames
        .get_mut()
        .write_all(&bytes[hello_len..])
        .await
        .unwrap();
    let replayed = frames.next().await.unwrap().unwrap();
    assert_eq!(
        replayed.code,
        response::NO_PERMISSION,
        "{:?}",
        replayed.remark
    );
    for i in 0..3 {
        assert_eq!(
            get_kv(&cluster, i, "ns", "replayed").await.as_deref(),
            Some("v2")
        );
        assert_eq!(get_kv(&cluster, i, "ns", "k0").await.as_deref(), Some("1"));
    }
}

/// A broker registered with the member whose clock is 90 s ahead falls silent, its connection
/// open: all three drop it within its timeout and a scan or two, not when the others' clocks
/// reach what the first one's said.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_expires_on_every_member_on_time_whatever_their_clocks_say() {
    let cluster =
        NamesrvCluster::start_skewed(MQNAMESRV, &[90, 0, -90], "scanNotActiveBrokerInterval=1000");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "ahead-broker", 0, "10.1.0.8:10911");
    let client = cluster.client(0).await;
    let register = broker
        .register_request(&[("AheadTopic", 6), ("AheadTopic2", 6)], dv(1, 0))
        .with_ext("heartbeatTimeoutMillis", 3000);
    assert_eq!(call(&client, register).await.code, response::SUCCESS);
    let silent = Instant::now();
    for i in 1..3 {
        eventually("routable on the others", Duration::from_secs(2), || {
            routes_to(&cluster, i, "AheadTopic", &broker.addr)
        })
        .await;
    }
    // Its timeout, a scan, and a whole digest's round on the way.
    for i in 0..3 {
        eventually(
            &format!("expired on node {i}"),
            Duration::from_secs(8).saturating_sub(silent.elapsed()),
            || async { !routes_to(&cluster, i, "AheadTopic", &broker.addr).await },
        )
        .await;
    }
    drop(client);
}

/// Something at a member's address that answers every request with a frame announcing 2 GiB and
/// then sends hundreds of megabytes: the members drop each such link at its header, buffer
/// nothing of it, try again later, and go on serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_announcing_a_huge_answer_costs_the_others_no_memory() {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    cluster.kill(2);
    let listener = tokio::net::TcpListener::bind(&cluster.addrs[2])
        .await
        .unwrap();
    let (links, sent) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let fake = {
        let (links, sent) = (links.clone(), sent.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut link, _)) = listener.accept().await else {
                    return;
                };
                links.fetch_add(1, Ordering::Relaxed);
                let sent = sent.clone();
                tokio::spawn(async move {
                    let mut request = [0u8; 256];
                    if link.read(&mut request).await.unwrap_or(0) == 0 {
                        return;
                    }
                    // Frame length 2 GiB less a little, then up to 512 MiB of it.
                    let _ = link.write_all(&0x7fff_fff0u32.to_be_bytes()).await;
                    let chunk = vec![0u8; 1 << 20];
                    for _ in 0..512 {
                        if link.write_all(&chunk).await.is_err() {
                            return;
                        }
                        sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                });
            }
        })
    };
    let before: Vec<u64> = (0..2)
        .map(|i| cluster.node(i).memory_kib("VmRSS"))
        .collect();
    let mut peak = before.clone();
    let began = Instant::now();
    while began.elapsed() < Duration::from_secs(8) {
        for (i, p) in peak.iter_mut().enumerate() {
            *p = (*p).max(cluster.node(i).memory_kib("VmRSS"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A KV write still commits through the two real members.
    let put = write(&cluster, 0, put_kv_request("ns", "hostile", "1")).await;
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    fake.abort();
    let (links, sent) = (links.load(Ordering::Relaxed), sent.load(Ordering::Relaxed));
    println!(
        "fake member: {links} links, {} MiB sent; RSS before {before:?} KiB, peak {peak:?} KiB",
        sent >> 20
    );
    assert!(
        links >= 4,
        "the links were dropped and tried again: {links}"
    );
    for i in 0..2 {
        let grown = peak[i].saturating_sub(before[i]);
        assert!(
            grown < 64 * 1024,
            "node {i} grew by {grown} KiB while a fake member announced 2 GiB answers"
        );
    }
}

/// Topics deleted while a NameServer was down are gone from it when it says it is ready, though
/// the routes it restored from its snapshot still held them and its peers' word of the broker is
/// no newer than its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_deletions_made_while_a_nameserver_was_down_are_applied_before_it_says_it_is_ready() {
    let mut cluster = NamesrvCluster::start(MQNAMESRV, 3, "");
    cluster.ready(READY).await;
    let broker = Broker::new("c", "deleting-broker", 0, "10.1.0.5:10911");
    let topics: Vec<String> = (0..20).map(|t| format!("DownTopic{t:02}")).collect();
    let names: Vec<&str> = topics.iter().map(String::as_str).collect();
    let _conn = broker.register_on(cluster.node(0), &names).await;
    let snapshot = cluster.home(2).join("namesrv").join("routeSnapshot.json");
    eventually(
        "node 2 saved the topics",
        Duration::from_secs(15),
        || async { std::fs::read_to_string(&snapshot).is_ok_and(|s| s.contains("DownTopic19")) },
    )
    .await;
    cluster.kill(2);
    for topic in &topics[..10] {
        let delete =
            RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", topic);
        let delete = write(&cluster, 1, delete).await;
        assert_eq!(delete.code, response::SUCCESS, "{:?}", delete.remark);
    }
    cluster.restart(2);
    cluster.node_ready(2, READY).await;
    for (t, topic) in topics.iter().enumerate() {
        let client = cluster.client(2).await;
        let route = call(&client, route_request(topic, 479)).await;
        let deleted = t < 10;
        assert_eq!(
            route.code == response::TOPIC_NOT_EXIST,
            deleted,
            "{topic} on the restarted node: {}",
            body_text(&route)
        );
    }
}

/// NameServers in network namespaces, one of them cut off from the other two: both sides go on
/// serving routes and taking registrations; KV writes on the lone side fail clearly; once the
/// links heal the three agree again, and nothing acknowledged is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nameservers_cut_off_from_each_other_serve_both_sides_and_agree_after_healing() {
    let Some(mut net) = Net::new(5, 3, 0) else {
        return;
    };
    let cluster = NamesrvCluster::start_in_net(MQNAMESRV, &net, 3, "");
    cluster.ready(READY).await;
    let before = write(&cluster, 0, put_kv_request("ns", "before", "1")).await;
    assert_eq!(before.code, response::SUCCESS, "{:?}", before.remark);

    net.isolate(2, true);
    // The majority side writes and converges; the lone side refuses KV writes within the
    // deadline but takes registrations and serves routes.
    let a = Broker::new("c", "majority-side", 0, "10.2.0.1:10911");
    let _a = a.register_on(cluster.node(0), &["SideA", "SideA2"]).await;
    let b = Broker::new("c", "lone-side", 0, "10.2.0.2:10911");
    let _b = b.register_on(cluster.node(2), &["SideB", "SideB2"]).await;
    eventually(
        "the majority side converges",
        Duration::from_secs(5),
        || routes_to(&cluster, 1, "SideA", &a.addr),
    )
    .await;
    let during = write(&cluster, 1, put_kv_request("ns", "during", "1")).await;
    assert_eq!(during.code, response::SUCCESS, "{:?}", during.remark);
    let began = Instant::now();
    let refused = write(&cluster, 2, put_kv_request("ns", "refused", "1")).await;
    assert_eq!(refused.code, response::SYSTEM_ERROR);
    assert!(refused.remark.unwrap_or_default().contains("quorum"));
    assert!(began.elapsed() < Duration::from_secs(7));
    assert!(routes_to(&cluster, 2, "SideB", &b.addr).await);
    assert!(
        !routes_to(&cluster, 0, "SideB", &b.addr).await,
        "the cut holds"
    );

    net.heal();
    let healed = Instant::now();
    for i in 0..3 {
        eventually("the three agree again", Duration::from_secs(5), || async {
            routes_to(&cluster, i, "SideA", &a.addr).await
                && routes_to(&cluster, i, "SideB", &b.addr).await
                && get_kv(&cluster, i, "ns", "during").await.as_deref() == Some("1")
                && get_kv(&cluster, i, "ns", "before").await.as_deref() == Some("1")
        })
        .await;
    }
    println!("agreed {:?} after healing", healed.elapsed());
    for i in 0..3 {
        assert_eq!(get_kv(&cluster, i, "ns", "refused").await, None, "node {i}");
    }
}

/// Node 2, once ready, routes `broker` within `within`, and a KV write `key` through it commits
/// and reaches all three.
async fn routes_and_writes(cluster: &NamesrvCluster, broker: &Broker, key: &str, within: Duration) {
    cluster.node_ready(2, READY).await;
    let ready = Instant::now();
    eventually("the named member routes the broker", within, || {
        routes_to(cluster, 2, "NamedTopic", &broker.addr)
    })
    .await;
    println!("{key}: routed {:?} after ready", ready.elapsed());
    let put = write(cluster, 2, put_kv_request("ns", key, "1")).await;
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    for i in 0..3 {
        eventually(
            "the write on every member",
            Duration::from_secs(3),
            || async { get_kv(cluster, i, "ns", key).await.as_deref() == Some("1") },
        )
        .await;
    }
}

/// Members named by host name, as a StatefulSet's headless service names them, each in a
/// namespace with its own address and its own view of the names (hosts files). One name
/// resolves only after the members started; later that member is killed and started again at
/// a new address under the same name (a rescheduled pod), and for a while its old name resolves
/// nowhere. Each time it routes what the others route within a second of saying ready, and KV
/// writes through it commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_named_by_host_name_are_heard_when_their_name_resolves_late_or_moves() {
    let Some(net) = Net::new(6, 4, 0) else {
        return;
    };
    let names = [
        "nsrv-0.peers.test",
        "nsrv-1.peers.test",
        "nsrv-2.peers.test",
    ];
    let (ip0, ip1, ip2, ip3) = (
        net.node_ip(0),
        net.node_ip(1),
        net.node_ip(2),
        net.node_ip(3),
    );
    // nsrv-2 does not resolve yet.
    net.name_hosts(&[(names[0], &ip0), (names[1], &ip1)]);
    let mut cluster = NamesrvCluster::start_named_in_net(MQNAMESRV, &net, &names, "");
    let broker = Broker::new("c", "named-broker", 0, "10.3.0.1:10911");
    cluster.node_ready(0, READY).await;
    let _conn = broker
        .register_on(cluster.node(0), &["NamedTopic", "NamedTopic2"])
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    net.name_hosts(&[(names[0], &ip0), (names[1], &ip1), (names[2], &ip2)]);
    // Its peers hear it once they resolve its name again: within a refresh of it.
    routes_and_writes(&cluster, &broker, "late", Duration::from_secs(5)).await;

    // Rescheduled: killed, its name gone for a while, then at a new address.
    cluster.kill(2);
    net.name_hosts(&[(names[0], &ip0), (names[1], &ip1)]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    net.name_hosts(&[(names[0], &ip0), (names[1], &ip1), (names[2], &ip3)]);
    cluster.move_named(2, &net, 3, "");
    let restarted = Instant::now();
    let moved = Broker::new("c", "moved-broker", 0, "10.3.0.2:10911");
    let _moved = moved
        .register_on(cluster.node(1), &["MovedTopic", "MovedTopic2"])
        .await;
    cluster.node_ready(2, READY).await;
    println!("moved: ready {:?} after the restart", restarted.elapsed());
    routes_and_writes(&cluster, &broker, "moved", Duration::from_secs(1)).await;
    eventually(
        "the moved member routes what registered meanwhile",
        Duration::from_secs(1),
        || routes_to(&cluster, 2, "MovedTopic", &moved.addr),
    )
    .await;
}

/// The brokers of a schedule, each knowing some of the NameServers.
const SCHEDULE_BROKERS: [&str; 4] = ["sb0", "sb1", "sb2", "sb3"];
const SCHEDULE_TOPICS: usize = 6;

struct ScheduledBroker {
    broker: Broker,
    /// The NameServers it knows (its namesrvAddr), and its connection to each.
    knows: Vec<usize>,
    links: Vec<Option<rocketmq_wire::client::Client>>,
    up: bool,
    version: i64,
    /// Topics deleted by an admin, which it no longer carries.
    dropped: Vec<String>,
}

impl ScheduledBroker {
    /// Its topic table at its current version: two topics every broker carries, and more of
    /// the schedule's topics the higher its version, but none deleted. A broker drops a topic
    /// only when an admin deletes it (mqadmin deleteTopic deletes on the brokers first): Java's
    /// NameServer keeps routing a topic that a broker stops listing on its own.
    fn table(&self, b: usize) -> Vec<(String, i32)> {
        let grown = SCHEDULE_TOPICS.min(self.version as usize);
        BASE_TOPICS
            .iter()
            .map(|(t, p)| (t.to_string(), *p))
            .chain((0..grown).map(|i| (format!("S{}", (b + i) % SCHEDULE_TOPICS), 6)))
            .filter(|(t, _)| !self.dropped.contains(t))
            .collect()
    }

    /// Registers with every NameServer it knows that is up, as a broker does every 30 s (here
    /// every tick), reconnecting where its link broke.
    async fn register(&mut self, b: usize, cluster: &NamesrvCluster, down: &[bool]) {
        let table = self.table(b);
        let topics: Vec<(&str, i32)> = table.iter().map(|(t, p)| (t.as_str(), *p)).collect();
        for &n in &self.knows {
            if down[n] {
                self.links[n] = None;
                continue;
            }
            if self.links[n].is_none() {
                self.links[n] = rocketmq_wire::client::Client::connect(&cluster.addrs[n])
                    .await
                    .ok();
            }
            let Some(link) = &self.links[n] else {
                continue;
            };
            let register = self
                .broker
                .register_request(&topics, dv(self.version, 0))
                .with_ext("heartbeatTimeoutMillis", 3000);
            if link.invoke(register, Duration::from_secs(3)).await.is_err() {
                self.links[n] = None;
            }
        }
    }
}

/// What NameServer `i` routes, made comparable: cluster info, and each schedule topic's route
/// with its lists in name order.
async fn routing_of(cluster: &NamesrvCluster, i: usize) -> serde_json::Value {
    let client = cluster.client(i).await;
    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    // Cluster info's maps are keyed by numbers (fastjson's form): compared by what they name.
    let info = body_text(&info);
    let named: Vec<String> = (0..SCHEDULE_BROKERS.len())
        .map(|b| format!("10.2.0.{b}:10911"))
        .chain(SCHEDULE_BROKERS.iter().map(|n| format!("\"{n}\"")))
        .filter(|s| info.contains(s.as_str()))
        .collect();
    let mut out = serde_json::json!({ "cluster": named });
    for t in 0..SCHEDULE_TOPICS {
        let topic = format!("S{t}");
        let route = call(&client, route_request(&topic, 479)).await;
        let mut route: serde_json::Value = if route.code == response::SUCCESS {
            serde_json::from_str(&body_text(&route)).unwrap_or_default()
        } else {
            serde_json::Value::Null
        };
        for list in ["queueDatas", "brokerDatas"] {
            if let Some(items) = route.get_mut(list).and_then(|l| l.as_array_mut()) {
                items.sort_by_key(|x| x["brokerName"].to_string());
            }
        }
        out[topic] = route;
    }
    out
}

/// One seeded schedule: brokers that know some of three NameServers register, change their
/// tables, stop (unregistering) and crash; admin changes go to any NameServer; NameServers, each
/// with its wall clock off by a drawn skew (0, ±90 s, ±10 min), are killed with SIGKILL and
/// restarted. Once it ends, with the brokers that are up still
/// registering, all three must route alike, every broker that is up on each, none that is down.
async fn run_schedule(seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    // Each member's wall clock off by a skew of its own, as on separate hosts (drawn apart
    // from the schedule, so that a seed's steps stay what they were).
    let mut skew_rng = fastrand::Rng::with_seed(seed ^ 0x5ca1ab1e);
    let skews: Vec<i64> = (0..3)
        .map(|_| [0, 90, -90, 600, -600][skew_rng.usize(..5)])
        .collect();
    let mut cluster =
        NamesrvCluster::start_skewed(MQNAMESRV, &skews, "scanNotActiveBrokerInterval=1000");
    cluster.ready(READY).await;
    let mut down = [false; 3];
    let mut brokers: Vec<ScheduledBroker> = SCHEDULE_BROKERS
        .iter()
        .enumerate()
        .map(|(b, name)| ScheduledBroker {
            broker: Broker::new("c", name, 0, &format!("10.2.0.{b}:10911")),
            knows: vec![b % 3],
            links: vec![None, None, None],
            up: true,
            version: 1,
            dropped: Vec::new(),
        })
        .collect();
    let mut log = Vec::new();
    for step in 0..24 {
        let b = rng.usize(..brokers.len());
        let n = rng.usize(..3);
        let what = match rng.u8(..10) {
            0..=2 => {
                brokers[b].version += 1;
                format!("sb{b} changes its table (v{})", brokers[b].version)
            }
            3 if brokers[b].up => {
                for &k in &brokers[b].knows.clone() {
                    if let Some(link) = &brokers[b].links[k] {
                        let _ = link
                            .invoke(
                                brokers[b].broker.unregister_request(),
                                Duration::from_secs(3),
                            )
                            .await;
                    }
                }
                brokers[b].links = vec![None, None, None];
                brokers[b].up = false;
                format!("sb{b} stops")
            }
            4 if brokers[b].up => {
                brokers[b].links = vec![None, None, None];
                brokers[b].up = false;
                format!("sb{b} crashes")
            }
            3..=5 if !brokers[b].up => {
                let mut knows: Vec<usize> = (0..3).filter(|_| rng.bool()).collect();
                if knows.is_empty() {
                    knows.push(n);
                }
                brokers[b].knows = knows.clone();
                brokers[b].up = true;
                format!("sb{b} starts knowing {knows:?}")
            }
            6 | 7 if !down[n] => {
                let request = if rng.bool() {
                    RemotingCommand::request(if rng.bool() {
                        request::WIPE_WRITE_PERM_OF_BROKER
                    } else {
                        request::ADD_WRITE_PERM_OF_BROKER
                    })
                    .with_ext("brokerName", SCHEDULE_BROKERS[b])
                } else {
                    // As mqadmin deleteTopic: off the brokers first (they register their new
                    // tables), then off the NameServers.
                    let topic = format!("S{}", rng.usize(..SCHEDULE_TOPICS));
                    for (b, broker) in brokers.iter_mut().enumerate() {
                        broker.dropped.push(topic.clone());
                        broker.version += 1;
                        if broker.up {
                            broker.register(b, &cluster, &down).await;
                        }
                    }
                    RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV)
                        .with_ext("topic", topic)
                };
                let what = format!("{} {:?}", request.code, request.ext_fields);
                let answer = write(&cluster, n, request).await;
                format!("admin {what} via n{n}: {}", answer.code)
            }
            8 if step >= 4 && down.iter().all(|d| !d) => {
                cluster.kill(n);
                down[n] = true;
                format!("n{n} killed")
            }
            _ => match down.iter().position(|d| *d) {
                Some(k) => {
                    cluster.restart(k);
                    cluster.node_ready(k, READY).await;
                    down[k] = false;
                    format!("n{k} restarted")
                }
                None => continue,
            },
        };
        log.push(what);
        for (b, broker) in brokers.iter_mut().enumerate() {
            if broker.up {
                broker.register(b, &cluster, &down).await;
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    if let Some(k) = down.iter().position(|d| *d) {
        cluster.restart(k);
        cluster.node_ready(k, READY).await;
        down[k] = false;
        log.push(format!("n{k} restarted"));
    }
    // The brokers that are up go on registering; the others expire (3 s) where taken over.
    let began = Instant::now();
    loop {
        for (b, broker) in brokers.iter_mut().enumerate() {
            if broker.up {
                broker.register(b, &cluster, &down).await;
            }
        }
        let views = [
            routing_of(&cluster, 0).await,
            routing_of(&cluster, 1).await,
            routing_of(&cluster, 2).await,
        ];
        let alike = views[0] == views[1] && views[1] == views[2];
        let brokers_right = brokers.iter().all(|broker| {
            views
                .iter()
                .all(|v| v["cluster"].to_string().contains(&broker.broker.addr) == broker.up)
        });
        if alike && brokers_right {
            return;
        }
        if began.elapsed() >= Duration::from_secs(20) {
            let keys = views[0]
                .as_object()
                .map(|o| o.keys().cloned().collect::<Vec<_>>());
            let differing: Vec<String> = keys
                .unwrap_or_default()
                .into_iter()
                .filter(|k| views[0][k] != views[1][k] || views[1][k] != views[2][k])
                .map(|k| {
                    format!(
                        "{k}:\n  n0 {}\n  n1 {}\n  n2 {}",
                        views[0][&k], views[1][&k], views[2][&k]
                    )
                })
                .collect();
            panic!(
                "seed {seed}: the NameServers (clocks off by {skews:?} s) still disagree 20 s \
                 after the schedule\nsteps: {log:#?}\n{}",
                differing.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Seeded schedules (`PEERS_SCHEDULES`, from seed `PEERS_SEED`; two in the test command, more in
/// a long run) each end with all three NameServers routing alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_schedules_of_registrations_admin_changes_and_restarts_end_with_all_routing_alike() {
    let env = |key: &str, default: u64| {
        std::env::var(key)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let first = env("PEERS_SEED", 1);
    for seed in first..first + env("PEERS_SCHEDULES", 2) {
        run_schedule(seed).await;
    }
}

/// One config file for every pod of a StatefulSet: each member takes its id from its host's name
/// (`namesrvSelfId=auto`, `controllerDLegerSelfId=auto`), the KV group and the embedded
/// controller's group form, and a host name that names no member is refused at start.
#[tokio::test(flavor = "multi_thread")]
async fn members_that_take_their_ids_from_their_pod_names_agree() {
    let ctl: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let ctl_peers: Vec<String> = ctl
        .iter()
        .enumerate()
        .map(|(i, p)| format!("n{i}-127.0.0.1:{p}"))
        .collect();
    let extra = format!(
        "enableControllerInNamesrv=true\ncontrollerDLegerGroup=pods\n\
         controllerDLegerPeers={}\ncontrollerDLegerSelfId=auto\n\
         controllerStorePath={{home}}/controller\n",
        ctl_peers.join(";")
    );
    let cluster = NamesrvCluster::start_as_pods(MQNAMESRV, 3, "mqnamesrv", &extra);
    cluster.ready(READY).await;
    let put = write(&cluster, 2, put_kv_request("pods", "k", "v")).await;
    assert_eq!(put.code, response::SUCCESS, "{:?}", put.remark);
    for i in 0..3 {
        eventually("the write on every member", Duration::from_secs(5), || {
            let cluster = &cluster;
            async move { get_kv(cluster, i, "pods", "k").await.as_deref() == Some("v") }
        })
        .await;
    }
    // Each controller node is the one its pod name says: node i answers at its own port, and
    // all three name one leader.
    let leaders = std::sync::Mutex::new(std::collections::BTreeSet::new());
    for port in &ctl {
        let addr = format!("127.0.0.1:{port}");
        eventually("a controller leader named", Duration::from_secs(10), || {
            let (addr, leaders) = (addr.clone(), &leaders);
            async move {
                let answer = namesrv_testkit::request(
                    &addr,
                    RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO),
                )
                .await;
                match answer
                    .as_ref()
                    .and_then(|a| a.ext("controllerLeaderAddress"))
                {
                    Some(leader) if !leader.is_empty() => {
                        leaders.lock().unwrap().insert(leader.to_string());
                        true
                    }
                    _ => false,
                }
            }
        })
        .await;
    }
    let leaders = leaders.into_inner().unwrap();
    assert_eq!(leaders.len(), 1, "{leaders:?}");

    // A pod whose name ends in no ordinal names no member: it says so and does not start.
    let home = tempfile::tempdir().unwrap();
    let config = write_config(
        home.path(),
        &format!(
            "listenPort={}\nnamesrvPeers=n0-127.0.0.1:1;n1-127.0.0.1:2\nnamesrvSelfId=auto\n",
            free_port()
        ),
    );
    let mut wrap = named_host("mqnamesrv");
    wrap.push(env!("CARGO_BIN_EXE_mqnamesrv").to_string());
    let out = std::process::Command::new(&wrap[0])
        .args(&wrap[1..])
        .arg("-c")
        .arg(&config)
        .env("HOME", home.path())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "it started: {text}");
    assert!(text.contains("does not end in -N"), "{text}");
}

/// A member that refuses every link (here: closes each connection at once) is asked again with
/// a growing pause, up to a second: it costs a connection or two a second, not ten.
#[tokio::test(flavor = "multi_thread")]
async fn a_member_that_refuses_every_link_is_asked_about_once_a_second() {
    let refusing = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let refusing_addr = refusing.local_addr().unwrap();
    let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = refusing.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            drop(conn);
        }
    });
    let port = free_port();
    let _server = MQNAMESRV.start_with(&format!(
        "listenPort={port}\nnamesrvPeers=n0-127.0.0.1:{port};n1-{refusing_addr}\nnamesrvSelfId=n0\n"
    ));
    // Past the first attempts, which come quickly.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = accepted.load(std::sync::atomic::Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let during = accepted.load(std::sync::atomic::Ordering::Relaxed) - before;
    // The route exchange and the KV group's Raft links each: about one a second at most.
    assert!(during <= 15, "{during} connections in 5 s");
    assert!(
        during >= 2,
        "it stopped asking: {during} connections in 5 s"
    );
}
