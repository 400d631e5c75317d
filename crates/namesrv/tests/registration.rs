//! Broker registration rules, route assembly and liveness, against the real binary.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::body::{
    ClusterInfo, DataVersion, RegisterBrokerBody, TopicConfig, TopicConfigWrapper, TopicRouteData,
};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

const MASTER: &str = "127.0.0.1:10911";
const SLAVE: &str = "127.0.0.1:10921";

async fn route(client: &rocketmq_wire::client::Client, topic: &str) -> Option<TopicRouteData> {
    let resp = call(client, route_request(topic, 479)).await;
    match resp.code {
        response::SUCCESS => Some(TopicRouteData::decode(resp.body.as_deref().unwrap()).unwrap()),
        response::TOPIC_NOT_EXIST => None,
        other => panic!("unexpected route code {other}: {:?}", resp.remark),
    }
}

#[tokio::test]
async fn route_forms_follow_the_client_version() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("DefaultCluster", "broker-a", 0, "192.168.0.1:10911");
    let slave = Broker::new("DefaultCluster", "broker-a", 1, "192.168.0.2:10911");
    assert_eq!(master.register(&client, &BASE_TOPICS, 1).await.code, 0);
    assert_eq!(slave.register(&client, &BASE_TOPICS, 1).await.code, 0);

    let old = call(&client, route_request("TopicTest", 399)).await;
    assert_eq!(old.code, response::SUCCESS);
    assert_eq!(
        body_text(&old),
        r#"{"brokerDatas":[{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    let new = call(&client, route_request("TopicTest", 479)).await;
    assert_eq!(
        body_text(&new),
        r#"{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.1:10911","1":"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#
    );
    let asked = call(
        &client,
        route_request("TopicTest", 399).with_ext("acceptStandardJsonOnly", "true"),
    )
    .await;
    assert_eq!(body_text(&asked), body_text(&new));

    let missing = call(&client, route_request("Nope", 479)).await;
    assert_eq!(missing.code, response::TOPIC_NOT_EXIST);
    assert!(missing
        .remark
        .unwrap()
        .starts_with("No topic route info in name server for the topic: Nope\n"));

    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    assert_eq!(
        body_text(&info),
        r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.0.1:10911",1:"192.168.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}"#
    );
}

#[tokio::test]
async fn slave_learns_its_master_and_never_changes_topics() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    let slave = Broker::new("c", "b", 1, SLAVE);

    let early = slave.register(&client, &[("T1", 6), ("T2", 6)], 1).await;
    assert_eq!(early.code, response::SUCCESS);
    assert_eq!(early.ext("masterAddr"), None, "no master yet");
    assert_eq!(early.ext_fields.as_ref().map(|e| e.len()), Some(0));
    let r = route(&client, "T1")
        .await
        .expect("the lowest 5.x slave of a master-less group writes topics");
    assert_eq!(
        r.queue_datas[0].perm, 6,
        "no WRITE wipe without acting master"
    );

    assert_eq!(
        master
            .register(&client, &[("T1", 6), ("T2", 6)], 1)
            .await
            .code,
        0
    );
    let later = slave.register(&client, &[("T1", 4), ("T3", 6)], 2).await;
    assert_eq!(later.ext("masterAddr"), Some(MASTER));
    assert_eq!(later.ext("haServerAddr"), Some(master.ha_addr().as_str()));
    let r = route(&client, "T1").await.unwrap();
    assert_eq!(
        r.queue_datas[0].perm, 6,
        "a slave's registration must not change topic data"
    );
    assert!(route(&client, "T3").await.is_none());
}

#[tokio::test]
async fn prime_slave_registers_topics_while_the_master_is_absent() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let slave = Broker::new("c", "b", 1, SLAVE);
    let mut req = slave.register_request(&[("T1", 6), ("T2", 6)], dv(1, 0));
    req.ext_fields
        .as_mut()
        .unwrap()
        .insert("enableActingMaster".into(), "true".into());
    assert_eq!(call(&client, req).await.code, 0);
    let r = route(&client, "T1").await.unwrap();
    assert_eq!(r.queue_datas[0].perm, 4, "acting prime slave loses WRITE");
    assert!(r.broker_datas[0].enable_acting_master);
}

#[tokio::test]
async fn unchanged_version_keeps_perm_changes_new_version_overwrites() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "broker-a", 0, MASTER);
    master.register(&client, &BASE_TOPICS, 1).await;

    let wipe = call(
        &client,
        RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "broker-a"),
    )
    .await;
    assert_eq!(wipe.ext("wipeTopicCount"), Some("2"));
    assert_eq!(
        route(&client, "TopicTest").await.unwrap().queue_datas[0].perm,
        4
    );

    master.register(&client, &BASE_TOPICS, 1).await;
    assert_eq!(
        route(&client, "TopicTest").await.unwrap().queue_datas[0].perm,
        4,
        "a periodic re-registration must not clobber the wipe"
    );
    let add = call(
        &client,
        RemotingCommand::request(request::ADD_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "broker-a"),
    )
    .await;
    assert_eq!(add.ext("addTopicCount"), Some("2"));
    assert_eq!(
        route(&client, "TBW102").await.unwrap().queue_datas[0].perm,
        6,
        "add sets RW, dropping INHERIT"
    );

    master
        .register(&client, &[("TopicTest", 2), ("TBW102", 7)], 2)
        .await;
    assert_eq!(
        route(&client, "TopicTest").await.unwrap().queue_datas[0].perm,
        2
    );
    assert_eq!(
        route(&client, "TBW102").await.unwrap().queue_datas[0].perm,
        7
    );

    let unknown = call(
        &client,
        RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "nobody"),
    )
    .await;
    assert_eq!(unknown.ext("wipeTopicCount"), Some("0"));
}

#[tokio::test]
async fn single_topic_first_registration_is_refused() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    let refused = master.register(&client, &[("Only", 6)], 1).await;
    assert_eq!(refused.code, response::SYSTEM_ERROR);
    assert_eq!(refused.remark.as_deref(), Some("register broker failed"));
    assert!(route(&client, "Only").await.is_none());

    assert_eq!(master.register(&client, &BASE_TOPICS, 1).await.code, 0);
    let incremental = master.register(&client, &[("Only", 6)], 2).await;
    assert_eq!(incremental.code, response::SUCCESS);
    assert!(route(&client, "Only").await.is_some());
}

#[tokio::test]
async fn older_state_version_cannot_take_over_an_id() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let holder = Broker::new("c", "b", 0, MASTER);
    call(&client, holder.register_request(&BASE_TOPICS, dv(1, 5))).await;
    let newcomer = Broker::new("c", "b", 0, SLAVE);
    let resp = call(&client, newcomer.register_request(&BASE_TOPICS, dv(1, 3))).await;
    assert_eq!(resp.code, response::SUCCESS, "ignored quietly");
    assert_eq!(resp.ext("masterAddr"), None);
    let r = route(&client, "TopicTest").await.unwrap();
    assert_eq!(r.broker_datas[0].broker_addrs[&0], MASTER);

    let fresher = call(&client, newcomer.register_request(&BASE_TOPICS, dv(1, 6))).await;
    assert_eq!(fresher.code, response::SUCCESS);
    let r = route(&client, "TopicTest").await.unwrap();
    assert_eq!(r.broker_datas[0].broker_addrs[&0], SLAVE);
}

#[tokio::test]
async fn a_second_master_at_the_same_master_epoch_does_not_take_id_0() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    call(&client, master.register_request(&BASE_TOPICS, dv(1, 3))).await;
    // A demoted master whose registration as master was built before its version moved to epoch 3.
    let demoted = Broker::new("c", "b", 0, SLAVE);
    let resp = call(&client, demoted.register_request(&BASE_TOPICS, dv(9, 3))).await;
    assert_eq!(resp.code, response::SUCCESS, "ignored quietly");
    assert_eq!(resp.ext("masterAddr"), None);
    let r = route(&client, "TopicTest").await.unwrap();
    assert_eq!(r.broker_datas[0].broker_addrs[&0], MASTER);

    // The next epoch's master takes the id.
    call(&client, demoted.register_request(&BASE_TOPICS, dv(10, 4))).await;
    let r = route(&client, "TopicTest").await.unwrap();
    assert_eq!(r.broker_datas[0].broker_addrs[&0], SLAVE);
}

#[tokio::test]
async fn crc_mismatch_registers_nothing() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    let mut req = master.register_request(&BASE_TOPICS, dv(1, 0));
    req.ext_fields
        .as_mut()
        .unwrap()
        .insert("bodyCrc32".into(), "12345".into());
    let resp = call(&client, req).await;
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
    assert!(route(&client, "TopicTest").await.is_none());
}

#[tokio::test]
async fn compressed_and_old_bodies_register() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let mut tc = TopicConfig::new("Unit", 8, 6);
    tc.topic_sys_flag = 1;
    let body = RegisterBrokerBody {
        wrapper: TopicConfigWrapper {
            data_version: dv(3, 0),
            topic_configs: vec![tc.clone(), TopicConfig::new("TopicTest", 8, 6)],
            mapping_info: vec![],
        },
        filter_server_list: Some(vec![]),
    };
    let compressed = body.encode_compressed(399);
    let req = RemotingCommand::request(request::REGISTER_BROKER)
        .with_version(399)
        .with_ext("brokerName", "old-broker")
        .with_ext("brokerAddr", MASTER)
        .with_ext("clusterName", "c")
        .with_ext("haServerAddr", "h:1")
        .with_ext("brokerId", 0)
        .with_ext("compressed", true)
        .with_ext("bodyCrc32", rocketmq_wire::body_crc32(&compressed))
        .with_body(compressed);
    assert_eq!(call(&client, req).await.code, response::SUCCESS);
    let r = route(&client, "Unit").await.unwrap();
    assert_eq!(r.queue_datas[0].read_queue_nums, 8);
    assert_eq!(
        r.queue_datas[0].topic_sys_flag, 0,
        "the compressed form drops sys flags"
    );
    assert!(!r.broker_datas[0].enable_acting_master);

    // A 3.0.x broker sends the bare wrapper (and a header without version).
    let wrapper = r#"{"dataVersion":{"counter":1,"timestamp":1},"topicConfigTable":{"A":{"topicName":"A"},"B":{"topicName":"B","perm":"4"}}}"#;
    let mut ancient = RemotingCommand::request(request::REGISTER_BROKER)
        .with_version(0)
        .with_ext("brokerName", "ancient")
        .with_ext("brokerAddr", SLAVE)
        .with_ext("clusterName", "c")
        .with_ext("haServerAddr", "h:2")
        .with_ext("brokerId", 0)
        .with_body(wrapper.as_bytes().to_vec());
    ancient.language = None;
    assert_eq!(call(&client, ancient).await.code, response::SUCCESS);
    let a = route(&client, "A").await.unwrap();
    assert_eq!(
        (a.queue_datas[0].read_queue_nums, a.queue_datas[0].perm),
        (16, 6)
    );
    assert_eq!(route(&client, "B").await.unwrap().queue_datas[0].perm, 4);
}

#[tokio::test]
async fn register_answers_order_config_and_routes_carry_it_when_enabled() {
    let server = MQNAMESRV.start_with("orderMessageEnable=true");
    let client = server.client().await;
    let master = Broker::new("c", "broker-a", 0, MASTER);
    let plain = master.register(&client, &BASE_TOPICS, 1).await;
    assert_eq!(plain.body, None, "no ORDER_TOPIC_CONFIG namespace yet");
    call(
        &client,
        put_kv_request("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4"),
    )
    .await;
    let with_order = master.register(&client, &BASE_TOPICS, 1).await;
    assert_eq!(
        body_text(&with_order),
        r#"{"table":{"TopicTest":"broker-a:4"}}"#
    );
    let r = route(&client, "TopicTest").await.unwrap();
    assert_eq!(r.order_topic_conf.as_deref(), Some("broker-a:4"));
    assert_eq!(
        route(&client, "TBW102").await.unwrap().order_topic_conf,
        None
    );
}

#[tokio::test]
async fn unregistration_is_per_address_and_topics_vanish_with_their_last_group() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let a0 = Broker::new("c", "a", 0, MASTER);
    let a1 = Broker::new("c", "a", 1, SLAVE);
    let b0 = Broker::new("c", "b", 0, "127.0.0.1:10931");
    a0.register(&client, &[("Shared", 6), ("OnlyA", 6)], 1)
        .await;
    a1.register(&client, &[("Shared", 6), ("OnlyA", 6)], 1)
        .await;
    b0.register(&client, &[("Shared", 6), ("OnlyB", 6)], 1)
        .await;

    let resp = call(&client, a0.unregister_request()).await;
    assert_eq!(resp.code, response::SUCCESS);
    eventually(
        "master leaves the group",
        Duration::from_secs(3),
        || async {
            route(&client, "OnlyA")
                .await
                .is_some_and(|r| !r.broker_datas[0].broker_addrs.contains_key(&0))
        },
    )
    .await;
    call(&client, a1.unregister_request()).await;
    eventually("group a disappears", Duration::from_secs(3), || async {
        route(&client, "OnlyA").await.is_none()
    })
    .await;
    let shared = route(&client, "Shared").await.unwrap();
    assert_eq!(shared.queue_datas.len(), 1);
    assert_eq!(shared.queue_datas[0].broker_name, "b");
    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    let info = ClusterInfo::decode(info.body.as_deref().unwrap()).unwrap();
    assert_eq!(
        info.cluster_addr_table["c"].iter().collect::<Vec<_>>(),
        ["b"]
    );

    let no_id = RemotingCommand::request(request::UNREGISTER_BROKER)
        .with_ext("brokerName", "b")
        .with_ext("brokerAddr", "127.0.0.1:10931")
        .with_ext("clusterName", "c");
    assert_eq!(call(&client, no_id).await.code, response::SYSTEM_ERROR);
}

#[tokio::test]
async fn closing_the_registering_connection_removes_the_broker_at_once() {
    let server = MQNAMESRV.start();
    let observer = server.client().await;
    let broker_conn = server.client().await;
    let other_conn = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    master.register(&broker_conn, &BASE_TOPICS, 1).await;
    // Registering again from another connection moves the broker's liveness there.
    let moved = Broker::new("c", "b2", 0, SLAVE);
    moved.register(&other_conn, &BASE_TOPICS, 1).await;
    moved.register(&observer, &BASE_TOPICS, 1).await;

    drop(other_conn);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        route(&observer, "TopicTest")
            .await
            .unwrap()
            .broker_datas
            .len(),
        2,
        "closing a connection the broker no longer uses must not remove it"
    );
    drop(broker_conn);
    eventually(
        "broker removed on close",
        Duration::from_secs(2),
        || async {
            route(&observer, "TopicTest")
                .await
                .is_some_and(|r| r.broker_datas.len() == 1 && r.broker_datas[0].broker_name == "b2")
        },
    )
    .await;
}

#[tokio::test]
async fn silent_brokers_expire_by_their_own_timeout_and_heartbeats_keep_them() {
    let server = MQNAMESRV.start_with("scanNotActiveBrokerInterval=200");
    let observer = server.client().await;
    let quiet_conn = server.client().await;
    let chatty_conn = server.client().await;
    let quiet = Broker::new("c", "quiet", 0, MASTER);
    let chatty = Broker::new("c", "chatty", 0, SLAVE);
    for (b, conn) in [(&quiet, &quiet_conn), (&chatty, &chatty_conn)] {
        let req = b
            .register_request(&BASE_TOPICS, dv(1, 0))
            .with_ext("heartbeatTimeoutMillis", 1000);
        assert_eq!(call(conn, req).await.code, 0);
    }
    let started = std::time::Instant::now();
    let heartbeat = RemotingCommand::request(request::BROKER_HEARTBEAT)
        .with_ext("clusterName", "c")
        .with_ext("brokerAddr", SLAVE)
        .with_ext("brokerName", "chatty");
    loop {
        chatty_conn.send_oneway(heartbeat.clone()).await.unwrap();
        let r = route(&observer, "TopicTest").await.unwrap();
        let names: Vec<_> = r
            .broker_datas
            .iter()
            .map(|b| b.broker_name.as_str())
            .collect();
        if names == ["chatty"] {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(9),
            "quiet broker never expired"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "expired before its timeout"
    );
    let closed = call_result(&quiet_conn, route_request("TopicTest", 479)).await;
    assert!(closed.is_err(), "an expired broker's connection is closed");
}

#[tokio::test]
async fn query_data_version_reports_changes_and_refreshes() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    let query = |v: DataVersion| {
        RemotingCommand::request(request::QUERY_DATA_VERSION)
            .with_ext("brokerName", "b")
            .with_ext("brokerAddr", MASTER)
            .with_ext("clusterName", "c")
            .with_ext("brokerId", 0)
            .with_body(v.encode())
    };
    let unknown = call(&client, query(dv(1, 0))).await;
    assert_eq!(unknown.ext("changed"), Some("true"));
    assert_eq!(unknown.body, None);
    master.register(&client, &BASE_TOPICS, 1).await;
    let same = call(&client, query(dv(1, 0))).await;
    assert_eq!(same.ext("changed"), Some("false"));
    assert_eq!(
        DataVersion::decode(same.body.as_deref().unwrap()).unwrap(),
        dv(1, 0)
    );
    let newer = call(&client, query(dv(2, 0))).await;
    assert_eq!(newer.ext("changed"), Some("true"));
}

#[tokio::test]
async fn member_group_and_zone_filter() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let a = Broker::new("c", "a", 0, MASTER);
    let b = Broker::new("c", "b", 0, SLAVE);
    call(
        &client,
        a.register_request(&BASE_TOPICS, dv(1, 0))
            .with_ext("__ZONE_NAME", "zone-1"),
    )
    .await;
    call(
        &client,
        b.register_request(&BASE_TOPICS, dv(1, 0))
            .with_ext("__ZONE_NAME", "zone-2"),
    )
    .await;

    let group = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_MEMBER_GROUP)
            .with_ext("clusterName", "c")
            .with_ext("brokerName", "a"),
    )
    .await;
    assert_eq!(
        body_text(&group),
        format!(
            r#"{{"brokerMemberGroup":{{"brokerAddrs":{{0:"{MASTER}"}},"brokerName":"a","cluster":"c"}}}}"#
        )
    );

    let zoned = call(
        &client,
        route_request("TopicTest", 479)
            .with_ext("__ZONE_MODE", "true")
            .with_ext("__ZONE_NAME", "ZONE-1"),
    )
    .await;
    let text = body_text(&zoned);
    assert!(
        text.contains(r#"{0:"127.0.0.1:10911"}"#),
        "zone routes use fastjson's form: {text}"
    );
    let r = TopicRouteData::decode(text.as_bytes()).unwrap();
    assert_eq!(r.broker_datas.len(), 1);
    assert_eq!(r.broker_datas[0].zone_name.as_deref(), Some("zone-1"));
    assert_eq!(r.queue_datas.len(), 1);
    assert_eq!(r.queue_datas[0].broker_name, "a");
}

#[tokio::test]
async fn acting_master_wipes_write_and_promotes_the_lowest_slave() {
    let server = MQNAMESRV.start_with("supportActingMaster=true");
    let client = server.client().await;
    let acting = |b: &Broker| {
        let mut req = b.register_request(&BASE_TOPICS, dv(1, 0));
        req.ext_fields
            .as_mut()
            .unwrap()
            .insert("enableActingMaster".into(), "true".into());
        req
    };
    let master = Broker::new("c", "b", 0, MASTER);
    let slave = Broker::new("c", "b", 1, SLAVE);
    call(&client, acting(&master)).await;
    call(&client, acting(&slave)).await;
    call(&client, master.unregister_request()).await;
    eventually("slave acts as master", Duration::from_secs(3), || async {
        route(&client, "TopicTest").await.is_some_and(|r| {
            r.broker_datas[0].broker_addrs.get(&0).map(String::as_str) == Some(SLAVE)
                && r.queue_datas[0].perm & 2 == 0
        })
    })
    .await;
    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    assert!(
        body_text(&info).contains(&format!(r#"{{1:"{SLAVE}"}}"#)),
        "the stored table keeps the real id"
    );
}

#[tokio::test]
async fn full_registration_prunes_topics_when_configured() {
    let server = MQNAMESRV.start_with("deleteTopicWithBrokerRegistration=true");
    let client = server.client().await;
    let master = Broker::new("c", "b", 0, MASTER);
    master
        .register(&client, &[("Keep", 6), ("Drop", 6)], 1)
        .await;
    master
        .register(&client, &[("Keep", 6), ("New", 6)], 2)
        .await;
    assert!(route(&client, "Drop").await.is_none());
    assert!(route(&client, "Keep").await.is_some());
    assert!(route(&client, "New").await.is_some());
}

#[tokio::test]
async fn min_broker_id_change_is_notified_to_the_other_members() {
    let server = MQNAMESRV.start_with("notifyMinBrokerIdChanged=true");
    let client = server.client().await;
    let slave_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let slave_addr = slave_listener.local_addr().unwrap().to_string();
    let slave = Broker {
        addr: slave_addr.clone(),
        ..Broker::new("c", "b", 1, "")
    };
    call(&client, slave.register_request(&BASE_TOPICS, dv(1, 0))).await;
    let master = Broker::new("c", "b", 0, MASTER);
    master.register(&client, &BASE_TOPICS, 1).await;

    let (mut stream, _) = tokio::time::timeout(TIMEOUT, slave_listener.accept())
        .await
        .expect("no notification")
        .unwrap();
    let mut frames = tokio_util::codec::FramedRead::new(
        &mut stream,
        rocketmq_wire::frame::RemotingCodec::default(),
    );
    let notice = futures::StreamExt::next(&mut frames)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(notice.code, request::NOTIFY_MIN_BROKER_ID_CHANGE);
    assert!(notice.is_oneway());
    assert_eq!(notice.ext("minBrokerId"), Some("0"));
    assert_eq!(notice.ext("minBrokerAddr"), Some(MASTER));
    assert_eq!(notice.ext("haBrokerAddr"), Some(master.ha_addr().as_str()));
}

/// Cluster info is served from a cached body: every change it shows must reach the next
/// answer, including a known broker group joining a second cluster.
#[tokio::test]
async fn cluster_info_follows_every_change() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let info = || async {
        let resp = call(
            &client,
            RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
        )
        .await;
        ClusterInfo::decode(resp.body.as_deref().unwrap()).unwrap()
    };
    Broker::new("c1", "b", 0, MASTER)
        .register(&client, &BASE_TOPICS, 1)
        .await;
    assert!(info().await.cluster_addr_table["c1"].contains("b"));
    // The same member under another cluster name changes only the cluster table.
    Broker::new("c2", "b", 0, MASTER)
        .register(&client, &BASE_TOPICS, 1)
        .await;
    let both = info().await;
    assert!(both.cluster_addr_table["c2"].contains("b"), "{both:?}");
    Broker::new("c1", "b", 1, SLAVE)
        .register(&client, &BASE_TOPICS, 1)
        .await;
    assert_eq!(info().await.broker_addr_table["b"].broker_addrs.len(), 2);
    call(
        &client,
        Broker::new("c1", "b", 1, SLAVE).unregister_request(),
    )
    .await;
    eventually(
        "slave gone from cluster info",
        Duration::from_secs(2),
        || async { info().await.broker_addr_table["b"].broker_addrs.len() == 1 },
    )
    .await;
}

/// A changed table is read as its difference from the broker's previous one; an admin change
/// to the group in between makes the next registration apply its whole table again, as Java's
/// does.
#[tokio::test]
async fn changed_tables_apply_like_whole_ones_also_after_an_admin_change() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let master = Broker::new("c", "broker-a", 0, MASTER);
    let names: Vec<String> = (0..300).map(|i| format!("Topic-{i:03}")).collect();
    let mut table: Vec<(&str, i32)> = names.iter().map(|t| (t.as_str(), 6)).collect();
    assert_eq!(master.register(&client, &table, 1).await.code, 0);

    // One topic's permission changed, one topic added, one dropped from the table.
    table[100].1 = 2;
    table.insert(150, ("Topic-new", 6));
    table.remove(250);
    assert_eq!(master.register(&client, &table, 2).await.code, 0);
    let perm = |r: Option<TopicRouteData>| r.map(|r| r.queue_datas[0].perm);
    assert_eq!(perm(route(&client, "Topic-100").await), Some(2));
    assert_eq!(perm(route(&client, "Topic-new").await), Some(6));
    assert_eq!(perm(route(&client, "Topic-101").await), Some(6));
    assert_eq!(
        perm(route(&client, "Topic-249").await),
        Some(6),
        "a topic a broker stops listing keeps its route"
    );

    let wipe = call(
        &client,
        RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER)
            .with_ext("brokerName", "broker-a"),
    )
    .await;
    assert_eq!(wipe.ext("wipeTopicCount"), Some("301"));
    table[10].1 = 7;
    assert_eq!(master.register(&client, &table, 3).await.code, 0);
    for (topic, want) in [
        ("Topic-010", 7),
        ("Topic-011", 6),
        ("Topic-299", 6),
        ("Topic-100", 2),
    ] {
        assert_eq!(
            perm(route(&client, topic).await),
            Some(want),
            "{topic}: a new version after the wipe restores every listed topic"
        );
    }
}
