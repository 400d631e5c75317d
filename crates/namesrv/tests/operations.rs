//! Warm restart from the route snapshot, and the HTTP port: probes, metrics, address list and
//! the status page; repeated registrations as the metrics show them.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SNAPSHOT_SETTLE: Duration = Duration::from_millis(1600);

/// A plain HTTP/1.0 GET; returns the status code and the body.
async fn get(base: &str, path: &str) -> (u16, String) {
    let host = base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut raw = String::new();
    tokio::time::timeout(TIMEOUT, stream.read_to_string(&mut raw))
        .await
        .unwrap()
        .unwrap();
    let status = raw.split(' ').nth(1).unwrap().parse().unwrap();
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn routes_survive_kill_and_dead_brokers_still_expire() {
    let mut server = MQNAMESRV.start();
    let client = server.client().await;
    let stays = Broker::new("c", "stays", 0, "127.0.0.1:10911");
    let dies = Broker::new("c", "dies", 0, "127.0.0.1:10921");
    stays
        .register(&client, &[("Kept", 6), ("Shared", 6)], 1)
        .await;
    let short = dies
        .register_request(&[("Gone", 6), ("Shared", 6)], dv(1, 0))
        .with_ext("heartbeatTimeoutMillis", 1500);
    call(&client, short).await;
    tokio::time::sleep(SNAPSHOT_SETTLE).await;
    server.kill();

    let restarted = MQNAMESRV.start_in(&server.home, "");
    let client = restarted.client().await;
    let kept = call(&client, route_request("Kept", 479)).await;
    assert_eq!(
        kept.code,
        response::SUCCESS,
        "routes are answered at once after kill -9"
    );
    assert!(body_text(&kept).contains("127.0.0.1:10911"));
    let gone = call(&client, route_request("Gone", 479)).await;
    assert_eq!(
        gone.code,
        response::TOPIC_NOT_EXIST,
        "a broker whose deadline passed while we were down is gone"
    );
}

async fn routed(client: &rocketmq_wire::client::Client, topic: &str) -> bool {
    call(client, route_request(topic, 479)).await.code == response::SUCCESS
}

/// Restored routes are served at once, but a topic that the broker's first complete round of
/// registrations no longer lists leaves when the round ends: for a split broker at its short last
/// chunk, for one that does not split once nothing follows its registration for a while.
#[tokio::test]
async fn restored_topics_the_first_registration_round_no_longer_lists_leave_when_it_ends() {
    let mut server = MQNAMESRV.start();
    let client = server.client().await;
    let split = Broker::new("c", "split", 0, "127.0.0.1:10911");
    let lone = Broker::new("c", "lone", 0, "127.0.0.1:10921");
    let topics = [("A", 4), ("B", 4), ("C", 4), ("D", 4), ("Dropped", 4)];
    split.register(&client, &topics, 1).await;
    lone.register(&client, &[("Stays", 4), ("Also", 4), ("Old", 4)], 1)
        .await;
    tokio::time::sleep(SNAPSHOT_SETTLE).await;
    server.kill();

    let restarted = MQNAMESRV.start_in(&server.home, "scanNotActiveBrokerInterval=200");
    let client = restarted.client().await;
    assert!(routed(&client, "Dropped").await && routed(&client, "Old").await);
    // Chunks of two at the data version the broker had: the round goes on.
    split.register(&client, &[("A", 4), ("B", 4)], 1).await;
    split.register(&client, &[("C", 4), ("D", 4)], 1).await;
    assert!(
        routed(&client, "Dropped").await,
        "served until the round ends"
    );
    lone.register(&client, &[("Stays", 4), ("Also", 4)], 1)
        .await;
    // The last chunk divides evenly: it lists nothing, fewer than the chunk before.
    split.register(&client, &[], 1).await;
    assert!(
        !routed(&client, "Dropped").await,
        "no chunk of the round listed it"
    );
    for topic in ["A", "B", "C", "D"] {
        assert!(routed(&client, topic).await, "{topic} was in a chunk");
    }
    assert!(
        routed(&client, "Old").await,
        "a lone registration may be a first chunk"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while routed(&client, "Old").await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Old still routed after the lone registration went quiet"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(routed(&client, "Stays").await && routed(&client, "Also").await);
}

#[tokio::test]
async fn clean_shutdown_saves_and_the_snapshot_can_be_turned_off() {
    let mut server = MQNAMESRV.start();
    let client = server.client().await;
    Broker::new("c", "b", 0, "127.0.0.1:10911")
        .register(&client, &BASE_TOPICS, 1)
        .await;
    assert!(server.terminate().success());
    let restarted = MQNAMESRV.start_in(&server.home, "");
    let client = restarted.client().await;
    assert_eq!(
        call(&client, route_request("TopicTest", 479)).await.code,
        response::SUCCESS
    );
    drop(client);
    drop(restarted);

    let without = MQNAMESRV.start_in(&server.home, "routeSnapshotEnable=false");
    let client = without.client().await;
    assert_eq!(
        call(&client, route_request("TopicTest", 479)).await.code,
        response::TOPIC_NOT_EXIST
    );
}

/// 5.x brokers close their connections to a NameServer that answers GO_AWAY: during the graceful
/// shutdown they leave its connection table, not its routes. The snapshot written at exit still
/// holds them, so a member restarted with its peers (a StatefulSet's pods deleted together) serves
/// them at once instead of no route at all.
#[tokio::test]
async fn brokers_that_close_their_connections_during_the_graceful_shutdown_stay_in_its_snapshot() {
    let mut server =
        MQNAMESRV.start_with("enableShutdownGracefully=true\nshutdownWaitTimeSeconds=2");
    let broker = Broker::new("c", "b", 0, "127.0.0.1:10911");
    let registered_on = server.client().await;
    let registered = broker.register(&registered_on, &BASE_TOPICS, 1).await;
    assert_eq!(
        registered.code,
        response::SUCCESS,
        "{:?}",
        registered.remark
    );
    let client = server.client().await;
    let pid = server.pid().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    eventually(
        "GO_AWAY during the shutdown wait",
        Duration::from_secs(2),
        || async { call(&client, route_request("TopicTest", 479)).await.code == response::GO_AWAY },
    )
    .await;
    // The broker goes as a 5.x broker does on GO_AWAY: it closes its connection.
    drop(registered_on);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.terminate().success());

    let restarted = MQNAMESRV.start_in(&server.home, "");
    let client = restarted.client().await;
    let route = call(&client, route_request("TopicTest", 479)).await;
    assert_eq!(route.code, response::SUCCESS, "{:?}", route.remark);
    assert!(body_text(&route).contains("127.0.0.1:10911"));
}

#[tokio::test]
async fn probes_metrics_and_address_list() {
    let server = MQNAMESRV.start_with("needWaitForService=true\nwaitSecondsForService=2");
    let http = server.http.clone().expect("HTTP port announced");
    assert_eq!(get(&http, "/healthz").await.0, 200);
    assert_eq!(
        get(&http, "/readyz").await.0,
        503,
        "not ready while waiting for brokers"
    );
    eventually("ready after the wait", Duration::from_secs(5), || async {
        get(&http, "/readyz").await.0 == 200
    })
    .await;

    let (status, nsaddr) = get(&http, "/rocketmq/nsaddr").await;
    assert_eq!((status, nsaddr.as_str()), (200, server.addr.as_str()));

    let client = server.client().await;
    Broker::new("c", "b", 0, "127.0.0.1:10911")
        .register(&client, &BASE_TOPICS, 1)
        .await;
    for _ in 0..3 {
        call(&client, route_request("TopicTest", 479)).await;
    }
    call(&client, RemotingCommand::request(4242)).await;
    let (_, metrics) = get(&http, "/metrics").await;
    assert!(
        metrics.contains(r#"namesrv_requests_total{code="105",result="0"} 3"#),
        "{metrics}"
    );
    assert!(metrics.contains(r#"namesrv_requests_total{code="other",result="3"} 1"#));
    assert!(metrics.contains(r#"namesrv_brokers_alive{cluster="c"} 1"#));
    assert!(metrics.contains("namesrv_topics 2"));
    assert!(metrics.contains("namesrv_broker_registrations_total 1"));
    assert!(metrics.contains("namesrv_connections 1"));
    assert!(metrics.contains("namesrv_request_duration_seconds_bucket"));
}

#[tokio::test]
async fn configured_address_list_and_status_page() {
    let server = MQNAMESRV.start_with("advertisedAddresses=10.0.0.1:9876;10.0.0.2:9876");
    let http = server.http.clone().unwrap();
    assert_eq!(
        get(&http, "/rocketmq/nsaddr").await.1,
        "10.0.0.1:9876;10.0.0.2:9876"
    );

    let client = server.client().await;
    Broker::new("prod", "broker-a", 0, "127.0.0.1:10911")
        .register(&client, &BASE_TOPICS, 1)
        .await;
    call(
        &client,
        put_kv_request("ORDER_TOPIC_CONFIG", "TopicTest", "broker-a:4"),
    )
    .await;
    let (status, page) = get(&http, "/?topic=TopicTest").await;
    assert_eq!(status, 200);
    for expected in [
        "prod",
        "broker-a",
        "127.0.0.1:10911",
        "master",
        "ORDER_TOPIC_CONFIG",
        "broker-a:4",
    ] {
        assert!(page.contains(expected), "status page lacks {expected}");
    }
    assert!(page.contains("<table id=route>"));
    let (_, missing) = get(&http, "/?topic=%3Cscript%3E").await;
    assert!(
        missing.contains("&lt;script&gt;"),
        "topic names are escaped"
    );
}

/// Brokers repeat their whole registration every 30 s: an identical one is applied without
/// decoding, but only while nothing changed since; a topic an admin deleted comes back.
#[tokio::test]
async fn repeated_registrations_skip_decoding_but_restore_deleted_topics() {
    let server = MQNAMESRV.start();
    let http = server.http.clone().expect("HTTP port announced");
    let client = server.client().await;
    let broker = Broker::new("c", "b", 0, "127.0.0.1:10911");
    let repeats = || async {
        let (_, metrics) = get(&http, "/metrics").await;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("namesrv_broker_repeat_registrations_total "))
            .map(|n| n.trim().to_string())
    };
    for _ in 0..3 {
        assert_eq!(
            broker.register(&client, &BASE_TOPICS, 1).await.code,
            response::SUCCESS
        );
    }
    assert_eq!(repeats().await.as_deref(), Some("2"));

    let delete =
        RemotingCommand::request(request::DELETE_TOPIC_IN_NAMESRV).with_ext("topic", "TopicTest");
    assert_eq!(call(&client, delete).await.code, response::SUCCESS);
    assert_eq!(
        call(&client, route_request("TopicTest", 479)).await.code,
        response::TOPIC_NOT_EXIST
    );
    broker.register(&client, &BASE_TOPICS, 1).await;
    assert_eq!(
        call(&client, route_request("TopicTest", 479)).await.code,
        response::SUCCESS,
        "the unchanged registration restores what was deleted since"
    );
    assert_eq!(repeats().await.as_deref(), Some("2"), "not a repeat");

    // The same content with another header value is not a repeat either.
    let mut moved = broker.register_request(&BASE_TOPICS, dv(1, 0));
    moved = moved.with_ext("haServerAddr", "127.0.0.1:20000");
    assert_eq!(call(&client, moved).await.code, response::SUCCESS);
    broker.register(&client, &BASE_TOPICS, 1).await;
    assert_eq!(repeats().await.as_deref(), Some("2"));
}
