//! `nsadmin explainRoute` and `explainBroker` against real NameServers: each cause of a missing
//! route produced for real, and named, in words and in JSON.

use std::process::Command;
use std::time::Duration;

use namesrv_testkit::*;
use serde_json::Value;

/// Brokers expire within a second here, and are looked for every 200 ms.
const FAST: &str = "scanNotActiveBrokerInterval=200\n";

async fn nsadmin(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsadmin"));
    cmd.args(args).env_remove("NAMESRV_ADDR");
    run_off_runtime(cmd).await
}

/// `explainRoute --json` of `topic` on `namesrvs`, which must succeed.
async fn explain(namesrvs: &str, topic: &str) -> Value {
    let run = nsadmin(&["-n", namesrvs, "explainRoute", "-t", topic, "--json"]).await;
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.json()
}

/// The cause each NameServer gives, in `-n` order.
fn causes(v: &Value) -> Vec<String> {
    v["nameServers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["cause"].as_str().unwrap().to_string())
        .collect()
}

fn reason(v: &Value, i: usize) -> String {
    v["nameServers"][i]["reason"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_no_broker_ever_registered_is_explained_as_never_registered() {
    let server = Server::start();
    let v = explain(&server.addr, "NeverMade").await;
    assert_eq!(causes(&v), ["never-registered"]);
    assert!(reason(&v, 0).contains("autoCreateTopicEnable"), "{v}");
    let words = nsadmin(&["-n", &server.addr, "explainRoute", "-t", "NeverMade"]).await;
    assert!(
        words
            .stdout
            .contains("no broker has registered NeverMade on this NameServer since"),
        "{}",
        words.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nameserver_the_broker_does_not_know_is_told_apart_from_the_one_that_routes() {
    let (one, two) = (Server::start(), Server::start());
    let broker = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let _kept = broker.register_on(&one, &["Orders", "Other"]).await;
    let both = addrs(&[&one, &two]);
    let v = explain(&both, "Orders").await;
    assert_eq!(causes(&v), ["routed", "unknown-broker"]);
    assert_eq!(v["routedBy"], serde_json::json!([one.addr]));
    let r = reason(&v, 1);
    assert!(r.contains("broker-a"), "{r}");
    assert!(r.contains("namesrvAddr does not list"), "{r}");
    assert!(
        v["summary"].as_str().unwrap().contains("No route info"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_connection_an_unregistration_and_an_expiry_are_each_named() {
    let server = Server::start_with(FAST);
    let n = server.addr.as_str();

    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let client = a.register_on(&server, &["ClosedT", "ClosedU"]).await;
    drop(client);
    eventually("the closed broker's topic gone", TIMEOUT, || async {
        causes(&explain(n, "ClosedT").await) == ["connection-closed"]
    })
    .await;
    let v = explain(n, "ClosedT").await;
    assert_eq!(v["nameServers"][0]["broker"], "broker-a");
    assert!(
        reason(&v, 0).contains("has not registered here since"),
        "{v}"
    );

    let b = Broker::new("C", "broker-b", 0, "127.0.0.1:10912");
    let client = b.register_on(&server, &["LeftT", "LeftU"]).await;
    let resp = call(&client, b.unregister_request()).await;
    assert_eq!(resp.code, 0);
    eventually("the unregistered broker's topic gone", TIMEOUT, || async {
        causes(&explain(n, "LeftT").await) == ["unregistered"]
    })
    .await;

    let c = Broker::new("C", "broker-c", 0, "127.0.0.1:10913");
    let client = server.client().await;
    let request = c
        .register_request(&[("QuietT", 6), ("QuietU", 6)], dv(1, 0))
        .with_ext("heartbeatTimeoutMillis", 800);
    assert_eq!(call(&client, request).await.code, 0);
    eventually(
        "the silent broker expired",
        Duration::from_secs(10),
        || async { causes(&explain(n, "QuietT").await) == ["expired"] },
    )
    .await;
    let v = explain(n, "QuietT").await;
    let r = reason(&v, 0);
    assert!(r.contains("stopped sending heartbeats at"), "{r}");
    assert!(r.contains("(its timeout: 0.8 s)"), "{r}");
    drop(client);

    let broker = nsadmin(&["-n", n, "explainBroker", "-b", "broker-c", "--json"])
        .await
        .json();
    assert_eq!(broker["nameServers"][0]["cause"], "expired", "{broker}");
    assert_eq!(broker["nameServers"][0]["registered"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_delete_and_a_wipe_name_the_admin_who_asked() {
    let server = Server::start();
    let n = server.addr.as_str();
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let _kept = a.register_on(&server, &["Doomed", "Kept"]).await;

    let del = nsadmin(&["-n", n, "deleteTopic", "-t", "Doomed"]).await;
    assert_eq!(del.code, 0, "{}", del.stderr);
    let v = explain(n, "Doomed").await;
    assert_eq!(causes(&v), ["admin-deleted"]);
    assert!(
        reason(&v, 0).contains("deleted by admin from 127.0.0.1"),
        "{v}"
    );

    let wipe = nsadmin(&["-n", n, "wipeWritePerm", "-b", "broker-a"]).await;
    assert_eq!(wipe.code, 0, "{}", wipe.stderr);
    let v = explain(n, "Kept").await;
    assert_eq!(causes(&v), ["read-only"]);
    assert!(reason(&v, 0).contains("write permission wiped by admin from 127.0.0.1"));
    assert_eq!(v["nameServers"][0]["route"][0]["perm"], 4);

    let broker = nsadmin(&["-n", n, "explainBroker", "-b", "broker-a", "--json"])
        .await
        .json();
    assert_eq!(broker["nameServers"][0]["cause"], "registered", "{broker}");
    assert!(broker["nameServers"][0]["reason"]
        .as_str()
        .unwrap()
        .contains("id 0 at 127.0.0.1:10911 heard"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_delete_does_not_say_the_broker_dropped_a_topic_it_still_has() {
    let server = Server::start();
    let n = server.addr.as_str();
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let client = server.client().await;
    let topics = [("Doomed", 6), ("Kept", 6)];
    assert_eq!(a.register(&client, &topics, 1).await.code, 0);

    // Deleted on the NameServer only: the broker keeps the topic.
    let del = nsadmin(&["-n", n, "deleteTopic", "-t", "Doomed"]).await;
    assert_eq!(del.code, 0, "{}", del.stderr);
    let v = explain(n, "Doomed").await;
    assert_eq!(causes(&v), ["admin-deleted"]);
    let r = reason(&v, 0);
    assert!(!r.contains("no longer has it"), "{r}");
    assert!(
        r.contains("broker-a is still registered here: if the broker still has the topic"),
        "{r}"
    );

    // Its next registration, unchanged, still lists it, and routes it again.
    assert_eq!(a.register(&client, &topics, 1).await.code, 0);
    assert_eq!(causes(&explain(n, "Doomed").await), ["routed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_a_broker_stops_listing_is_named_when_registrations_are_the_whole_truth() {
    let server = Server::start_with("deleteTopicWithBrokerRegistration=true\n");
    let n = server.addr.as_str();
    let a = Broker::new("C", "broker-a", 0, "127.0.0.1:10911");
    let client = server.client().await;
    assert_eq!(
        a.register(&client, &[("Old", 6), ("Stay", 6)], 1)
            .await
            .code,
        0
    );
    assert_eq!(
        a.register(&client, &[("Stay", 6), ("New", 6)], 2)
            .await
            .code,
        0
    );
    let v = explain(n, "Old").await;
    assert_eq!(causes(&v), ["no-longer-listed"], "{v}");
    assert!(
        reason(&v, 0).contains("is registered here now, without this topic"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_broker_tells_a_broker_never_seen_from_one_registered() {
    let server = Server::start();
    let n = server.addr.as_str();
    let v = nsadmin(&["-n", n, "explainBroker", "-b", "ghost", "--json"])
        .await
        .json();
    assert_eq!(v["nameServers"][0]["cause"], "never-registered", "{v}");
    assert_eq!(v["summary"], "ghost is registered on 0 of 1 NameServer");
}
