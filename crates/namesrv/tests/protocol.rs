//! KV, config, topic lists and the generic answers, against the real binary.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::body::{KvTable, TopicList};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

fn topics(resp: &RemotingCommand) -> Vec<String> {
    let mut list = TopicList::decode(resp.body.as_deref().unwrap())
        .unwrap()
        .topic_list;
    list.sort();
    list
}

#[tokio::test]
async fn kv_round_trip_persists_in_the_java_file_format() {
    let mut server = MQNAMESRV.start();
    let client = server.client().await;
    let put = call(
        &client,
        kv_request(request::PUT_KV_CONFIG, "ns", "k").with_ext("value", "v1"),
    )
    .await;
    assert_eq!(put.code, response::SUCCESS);
    let got = call(&client, kv_request(request::GET_KV_CONFIG, "ns", "k")).await;
    assert_eq!(got.ext("value"), Some("v1"));

    let miss = call(&client, kv_request(request::GET_KV_CONFIG, "ns", "nope")).await;
    assert_eq!(miss.code, response::QUERY_NOT_FOUND);
    assert_eq!(
        miss.remark.as_deref(),
        Some("No config item, Namespace: ns Key: nope")
    );
    assert_eq!(miss.ext_fields.as_ref().map(|e| e.len()), Some(0));

    let no_key = call(
        &client,
        RemotingCommand::request(request::PUT_KV_CONFIG).with_ext("namespace", "ns"),
    )
    .await;
    assert_eq!(no_key.code, response::SYSTEM_ERROR);
    assert_eq!(no_key.remark.as_deref(), Some("namespace or key is null"));

    let list = call(
        &client,
        RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "ns"),
    )
    .await;
    assert_eq!(body_text(&list), r#"{"table":{"k":"v1"}}"#);
    call(&client, kv_request(request::DELETE_KV_CONFIG, "ns", "k")).await;
    let emptied = call(
        &client,
        RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "ns"),
    )
    .await;
    assert_eq!(
        emptied.code,
        response::SUCCESS,
        "an emptied namespace stays"
    );
    assert_eq!(
        KvTable::decode(emptied.body.as_deref().unwrap())
            .unwrap()
            .table
            .len(),
        0
    );
    let absent = call(
        &client,
        RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE).with_ext("namespace", "none"),
    )
    .await;
    assert_eq!(absent.code, response::QUERY_NOT_FOUND);
    assert_eq!(
        absent.remark.as_deref(),
        Some("No config item, Namespace: none")
    );

    call(
        &client,
        kv_request(request::PUT_KV_CONFIG, "ORDER_TOPIC_CONFIG", "T").with_ext("value", "a:4"),
    )
    .await;
    let file = server.home.join("namesrv/kvConfig.json");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"a:4"},"ns":{}}}"#
    );
    server.kill();
    let home = server.home.clone();
    let restarted = MQNAMESRV.start_in(&home, "");
    let client = restarted.client().await;
    let got = call(
        &client,
        kv_request(request::GET_KV_CONFIG, "ORDER_TOPIC_CONFIG", "T"),
    )
    .await;
    assert_eq!(got.ext("value"), Some("a:4"), "KV survives a kill -9");
}

#[tokio::test]
async fn kv_write_failure_is_an_error_not_a_silent_loss() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let server = MQNAMESRV.start_with(&format!("kvConfigPath={}/kv.json", blocker.display()));
    let client = server.client().await;
    let put = call(
        &client,
        kv_request(request::PUT_KV_CONFIG, "ns", "k").with_ext("value", "v"),
    )
    .await;
    assert_eq!(put.code, response::SYSTEM_ERROR);
    assert!(put.remark.unwrap().contains("cannot write KV file"));
    let got = call(&client, kv_request(request::GET_KV_CONFIG, "ns", "k")).await;
    assert_eq!(
        got.code,
        response::QUERY_NOT_FOUND,
        "nothing acknowledged, nothing kept"
    );
}

#[tokio::test]
async fn config_get_update_blacklist_and_persistence() {
    let server = MQNAMESRV.start_with("customKey=1");
    let client = server.client().await;
    let get = || RemotingCommand::request(request::GET_NAMESRV_CONFIG);
    let listing = body_text(&call(&client, get()).await);
    assert!(listing.contains("\nenableAllTopicList=true\n"));
    assert!(listing.contains("\ncustomKey=1\n"));
    assert!(listing.contains(&format!("\nconfigStorePath={}\n", server.config.display())));

    let update = |body: &str| {
        RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG).with_body(body.as_bytes().to_vec())
    };
    for key in [
        "kvConfigPath",
        "configStorePath",
        "configBlackList",
        "rocketmqHome",
    ] {
        let refused = call(
            &client,
            update(&format!("enableTopicList=false\n{key}=/tmp/x\n")),
        )
        .await;
        assert_eq!(refused.code, response::NO_PERMISSION, "{key}");
        assert_eq!(
            refused.remark.as_deref(),
            Some("Can not update config in black list.")
        );
    }
    assert!(
        body_text(&call(&client, get()).await).contains("\nenableTopicList=true\n"),
        "nothing applied"
    );

    let ok = call(
        &client,
        update("enableTopicList=false\ncustomKey=2\nunknownKey=3\n"),
    )
    .await;
    assert_eq!(ok.code, response::SUCCESS);
    let listing = body_text(&call(&client, get()).await);
    assert!(listing.contains("\nenableTopicList=false\n"));
    assert!(listing.contains("\ncustomKey=2\n"));
    assert!(!listing.contains("unknownKey"));
    assert_eq!(
        std::fs::read_to_string(&server.config).unwrap(),
        listing,
        "persisted to the -c file"
    );

    let gated = call(
        &client,
        RemotingCommand::request(request::GET_TOPICS_BY_CLUSTER).with_ext("cluster", "c"),
    )
    .await;
    assert_eq!(gated.code, response::SYSTEM_ERROR);
    assert_eq!(gated.remark.as_deref(), Some("disable"));
    let empty = call(
        &client,
        RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG),
    )
    .await;
    assert_eq!(empty.code, response::SUCCESS);
}

#[tokio::test]
async fn topic_lists_and_topic_changes() {
    let server = MQNAMESRV.start();
    let client = server.client().await;
    let a = Broker::new("c1", "a", 0, "127.0.0.1:10911");
    let b = Broker::new("c2", "b", 0, "127.0.0.1:10921");
    a.register(&client, &[("A1", 6), ("Both", 6)], 1).await;
    b.register(&client, &[("B1", 6), ("Both", 6)], 1).await;

    let all = call(
        &client,
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    )
    .await;
    assert_eq!(topics(&all), ["A1", "B1", "Both"]);
    let by_cluster =
        |c: &str| RemotingCommand::request(request::GET_TOPICS_BY_CLUSTER).with_ext("cluster", c);
    assert_eq!(
        topics(&call(&client, by_cluster("c1")).await),
        ["A1", "Both"]
    );
    assert_eq!(
        body_text(&call(&client, by_cluster("nope")).await),
        r#"{"topicList":[]}"#
    );

    let system = call(
        &client,
        RemotingCommand::request(request::GET_SYSTEM_TOPIC_LIST_FROM_NS),
    )
    .await;
    assert_eq!(topics(&system), ["a", "b", "c1", "c2"]);
    assert_eq!(
        TopicList::decode(system.body.as_deref().unwrap())
            .unwrap()
            .broker_addr
            .as_deref(),
        Some("127.0.0.1:10911")
    );

    let delete = |topic: &str, cluster: Option<&str>| {
        let r = RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", topic);
        match cluster {
            Some(c) => r.with_ext("clusterName", c),
            None => r,
        }
    };
    assert_eq!(
        call(&client, delete("Both", Some("c1"))).await.code,
        response::SUCCESS
    );
    let both = call(&client, route_request("Both", 479)).await;
    assert!(
        !body_text(&both).contains("\"a\""),
        "only c1's queue data is gone"
    );
    // The lists follow a topic leaving one cluster's brokers at once, though it stays listed.
    assert_eq!(topics(&call(&client, by_cluster("c1")).await), ["A1"]);
    assert_eq!(
        topics(&call(&client, by_cluster("c2")).await),
        ["B1", "Both"]
    );
    call(&client, delete("Both", None)).await;
    assert_eq!(
        call(&client, route_request("Both", 479)).await.code,
        response::TOPIC_NOT_EXIST
    );

    // Brokers with enableSingleTopicRegister send this body.
    let body = r#"{"brokerDatas":[],"filterServerTable":{},"queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":2,"topicSysFlag":1,"writeQueueNums":2},{"brokerName":"ghost","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#;
    let reg = RemotingCommand::request(request::REGISTER_TOPIC_IN_NAMESRV)
        .with_ext("topic", "Single")
        .with_body(body.as_bytes().to_vec());
    assert_eq!(call(&client, reg).await.code, response::SUCCESS);
    let single = body_text(&call(&client, route_request("Single", 479)).await);
    assert!(single.contains(r#""queueDatas":[{"brokerName":"a","perm":6,"readQueueNums":2,"topicSysFlag":1,"writeQueueNums":2}]"#), "{single}");

    let unit = call(
        &client,
        RemotingCommand::request(request::GET_UNIT_TOPIC_LIST),
    )
    .await;
    assert_eq!(topics(&unit), ["Single"]);
    let unit_sub = call(
        &client,
        RemotingCommand::request(request::GET_HAS_UNIT_SUB_TOPIC_LIST),
    )
    .await;
    assert!(topics(&unit_sub).is_empty());
    // The full list follows every change since it was first asked for.
    let all = call(
        &client,
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    )
    .await;
    assert_eq!(topics(&all), ["A1", "B1", "Single"]);
    let bad = RemotingCommand::request(request::REGISTER_TOPIC_IN_NAMESRV)
        .with_ext("topic", "X")
        .with_body(b"{broken".to_vec());
    assert_eq!(call(&client, bad).await.code, response::SYSTEM_ERROR);
}

#[tokio::test]
async fn disabled_topic_list_and_unknown_codes() {
    let server = MQNAMESRV.start_with("enableAllTopicList=false");
    let client = server.client().await;
    let all = call(
        &client,
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    )
    .await;
    assert_eq!(
        (all.code, all.remark.as_deref()),
        (response::SYSTEM_ERROR, Some("disable"))
    );
    let unknown = call(&client, RemotingCommand::request(9999)).await;
    assert_eq!(unknown.code, response::REQUEST_CODE_NOT_SUPPORTED);
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
    assert!(unknown.is_response());

    // A oneway request is processed but never answered.
    client
        .send_oneway(kv_request(request::PUT_KV_CONFIG, "ns", "oneway").with_ext("value", "1"))
        .await
        .unwrap();
    eventually("oneway put applied", Duration::from_secs(2), || async {
        call(&client, kv_request(request::GET_KV_CONFIG, "ns", "oneway"))
            .await
            .code
            == response::SUCCESS
    })
    .await;
}

#[tokio::test]
async fn waits_for_brokers_before_serving_routes_when_asked() {
    let server = MQNAMESRV.start_with("needWaitForService=true\nwaitSecondsForService=30");
    let client = server.client().await;
    let resp = call(&client, route_request("T", 479)).await;
    assert_eq!(resp.code, response::SYSTEM_ERROR);
    assert_eq!(resp.remark.as_deref(), Some("name server not ready"));
}

/// Answers with large bodies (a topic list of 6,000 names, about 90 KB) are written from where
/// they are, not copied with the others: on one connection, pipelined requests still get every
/// answer once and whole (in the order they are ready: a client matches them by opaque).
#[tokio::test]
async fn large_answers_pipelined_with_small_ones_arrive_whole() {
    let server = MQNAMESRV.start();
    let names: Vec<String> = (0..6000).map(|i| format!("PipelinedTopic{i:05}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let _broker = Broker::new("c", "a", 0, "127.0.0.1:10911")
        .register_on(&server, &refs)
        .await;
    let mut sent = Vec::new();
    for i in 0..12usize {
        let mut request = if i.is_multiple_of(3) {
            RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
        } else {
            route_request(&names[i * 100], 0)
        };
        request.opaque = 1000 + i as i32;
        sent.extend(rocketmq_wire::frame::frame_bytes(&request));
    }
    let mut stream = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, &sent)
        .await
        .unwrap();
    let mut answered = std::collections::BTreeSet::new();
    for _ in 0..12 {
        let payload = read_frame(&mut stream).await.expect("an answer");
        let answer = rocketmq_wire::frame::decode_payload(payload.into()).unwrap();
        let i = (answer.opaque - 1000) as usize;
        assert!(answered.insert(i), "answer {i} once");
        assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
        if i.is_multiple_of(3) {
            assert_eq!(topics(&answer).len(), names.len());
        } else {
            let route = String::from_utf8_lossy(answer.body.as_deref().unwrap()).to_string();
            assert!(route.contains("127.0.0.1:10911"), "{route}");
        }
    }
    assert_eq!(answered, (0..12).collect());
}
