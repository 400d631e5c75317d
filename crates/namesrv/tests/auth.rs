//! Authenticated writes: signed the way RocketMQ's ACL clients sign, checked against the
//! credentials file; reads stay open.

mod support;
use support::MQNAMESRV;

use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::acl::sign;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;

#[tokio::test]
async fn writes_need_a_valid_signature_and_reads_stay_open() {
    let server = MQNAMESRV.start_authenticated("admin=secret-1\n", "");
    let client = server.client().await;

    let unsigned = call(&client, put_kv_request("ns", "a", "v")).await;
    assert_eq!(unsigned.code, response::NO_PERMISSION);
    assert!(unsigned
        .remark
        .unwrap()
        .contains("needs AccessKey and Signature"));
    let wrong_secret = call(
        &client,
        sign(put_kv_request("ns", "a", "v"), "admin", "guess"),
    )
    .await;
    assert_eq!(wrong_secret.code, response::NO_PERMISSION);
    let unknown = call(
        &client,
        sign(put_kv_request("ns", "a", "v"), "intruder", "secret-1"),
    )
    .await;
    assert_eq!(unknown.code, response::NO_PERMISSION);
    let mut tampered = sign(put_kv_request("ns", "a", "v"), "admin", "secret-1");
    tampered
        .ext_fields
        .as_mut()
        .unwrap()
        .insert("value".into(), "evil".into());
    assert_eq!(call(&client, tampered).await.code, response::NO_PERMISSION);

    assert_eq!(
        call(
            &client,
            sign(put_kv_request("ns", "a", "v"), "admin", "secret-1")
        )
        .await
        .code,
        response::SUCCESS
    );
    let get = RemotingCommand::request(request::GET_KV_CONFIG)
        .with_ext("namespace", "ns")
        .with_ext("key", "a");
    assert_eq!(
        call(&client, get).await.ext("value"),
        Some("v"),
        "reads need no signature"
    );

    let broker = Broker::new("c", "b", 0, "127.0.0.1:10911");
    let reg = broker.register_request(&BASE_TOPICS, dv(1, 0));
    assert_eq!(
        call(&client, reg.clone()).await.code,
        response::NO_PERMISSION
    );
    assert_eq!(
        call(&client, sign(reg, "admin", "secret-1")).await.code,
        response::SUCCESS
    );
    assert_eq!(
        call(&client, route_request("TopicTest", 479)).await.code,
        response::SUCCESS
    );
    let wipe =
        RemotingCommand::request(request::WIPE_WRITE_PERM_OF_BROKER).with_ext("brokerName", "b");
    assert_eq!(
        call(&client, wipe.clone()).await.code,
        response::NO_PERMISSION
    );
    assert_eq!(
        call(&client, sign(wipe, "admin", "secret-1")).await.code,
        response::SUCCESS
    );
    // The route journal names the refused registration and the signed admin change's key.
    let journal = call(
        &client,
        RemotingCommand::request(request::ROUTE_JOURNAL).with_ext("brokerName", "b"),
    )
    .await;
    let journal: serde_json::Value =
        serde_json::from_slice(journal.body.as_deref().unwrap()).unwrap();
    let entries = journal["entries"].as_array().unwrap();
    let causes: Vec<&str> = entries
        .iter()
        .map(|e| e["cause"].as_str().unwrap())
        .collect();
    assert_eq!(
        causes,
        ["refused", "registered", "admin-wiped"],
        "{journal}"
    );
    assert!(entries[0]["detail"]
        .as_str()
        .unwrap()
        .starts_with("not authenticated"));
    assert_eq!(entries[2]["by"], "admin from 127.0.0.1 (access key admin)");

    for key in [
        "authenticationEnabled",
        "authCredentialsPath",
        "kvConfigPath",
    ] {
        let update = RemotingCommand::request(request::UPDATE_NAMESRV_CONFIG)
            .with_body(format!("{key}=x\n").into_bytes());
        let refused = call(&client, sign(update, "admin", "secret-1")).await;
        assert_eq!(
            refused.code,
            response::NO_PERMISSION,
            "{key} is never remotely changeable"
        );
    }

    // The credentials file is reloaded when it changes.
    let creds = server.home.join("credentials.properties");
    std::fs::write(&creds, "admin=secret-1\nops=secret-2\n").unwrap();
    eventually("new credentials loaded", Duration::from_secs(8), || async {
        call(
            &client,
            sign(put_kv_request("ns", "b", "v"), "ops", "secret-2"),
        )
        .await
        .code
            == response::SUCCESS
    })
    .await;
}

fn listed(info: &rocketmq_wire::body::ClusterInfo, name: &str) -> bool {
    info.broker_addr_table.contains_key(name)
}

/// With authentication on, anyone could keep a dead broker in the routes with unsigned
/// heartbeats; only signed ones count. Both are answered alike.
#[tokio::test]
async fn only_signed_heartbeats_keep_a_broker_alive_when_authentication_is_on() {
    let server =
        MQNAMESRV.start_authenticated("broker=secret-b\n", "scanNotActiveBrokerInterval=200");
    let client = server.client().await;
    let silent = Broker::new("AuthCluster", "impersonated", 0, "10.4.4.1:10911");
    let signed = Broker::new("AuthCluster", "signing", 0, "10.4.4.2:10911");
    // Each on its own connection: expiry closes the expired broker's connection.
    let mut registered_on = Vec::new();
    for broker in [&silent, &signed] {
        let conn = server.client().await;
        let register = broker
            .register_request(&BASE_TOPICS, dv(1, 0))
            .with_ext("heartbeatTimeoutMillis", 1500);
        let resp = call(&conn, sign(register, "broker", "secret-b")).await;
        assert_eq!(resp.code, response::SUCCESS);
        registered_on.push(conn);
    }
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_secs(8) {
        let unsigned = call(&client, silent.heartbeat_request()).await;
        assert_eq!(
            unsigned.code,
            response::SUCCESS,
            "answered as Java answers it"
        );
        let unsigned_qdv = RemotingCommand::request(request::QUERY_DATA_VERSION)
            .with_ext("clusterName", silent.cluster)
            .with_ext("brokerAddr", &silent.addr)
            .with_ext("brokerName", silent.name)
            .with_ext("brokerId", 0)
            .with_body(dv(1, 0).encode());
        assert_eq!(call(&client, unsigned_qdv).await.code, response::SUCCESS);
        let beat = call(
            &client,
            sign(signed.heartbeat_request(), "broker", "secret-b"),
        )
        .await;
        assert_eq!(beat.code, response::SUCCESS);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let info = call(
        &client,
        RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    let info = rocketmq_wire::body::ClusterInfo::decode(info.body.as_deref().unwrap()).unwrap();
    assert!(
        !listed(&info, "impersonated"),
        "unsigned heartbeats kept it alive"
    );
    assert!(listed(&info, "signing"), "signed heartbeats keep it alive");
}
