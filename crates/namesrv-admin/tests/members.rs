//! `nsadmin`'s member commands for NameServers that agree (`namesrvPeers`): their KV group takes
//! a new member, hands it the leadership and lets another go while every write stays readable,
//! and a change that would lose the quorum is refused. Real NameServers (in this process) and
//! the real `nsadmin` binary over TCP.

use std::process::Command;
use std::time::Duration;

use namesrv_testkit::*;
use rocketmq_wire::codes::{request, response};

const READY: Duration = Duration::from_secs(30);

async fn nsadmin(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsadmin"));
    cmd.args(args).env_remove("NAMESRV_ADDR");
    run_off_runtime(cmd).await
}

/// The members' ids and roles as `listNamesrvMembers --json` reports them, and the leader's id.
async fn members(ns: &str) -> (Vec<(String, String)>, String) {
    let run = nsadmin(&["listNamesrvMembers", "-n", ns, "--json"]).await;
    assert_eq!(run.code, 0, "listNamesrvMembers: {}", run.stderr);
    let json = run.json();
    let rows = json["members"]["members"]
        .as_array()
        .expect("a member list")
        .iter()
        .map(|m| {
            (
                m["id"].as_str().unwrap().to_string(),
                m["role"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let leader = json["members"]["leaderId"].as_str().unwrap_or_default();
    (rows, leader.to_string())
}

async fn get_kv(cluster: &NamesrvCluster, i: usize, key: &str) -> Option<String> {
    let client = cluster.client(i).await;
    let answer = call(&client, kv_request(request::GET_KV_CONFIG, "members", key)).await;
    (answer.code == response::SUCCESS)
        .then(|| answer.ext("value").map(String::from))
        .flatten()
}

async fn put_kv(cluster: &NamesrvCluster, i: usize, key: &str) {
    let client = cluster.client(i).await;
    let answer = client
        .invoke(put_kv_request("members", key, "v"), Duration::from_secs(15))
        .await
        .expect("the NameServer answers");
    assert_eq!(answer.code, response::SUCCESS, "{:?}", answer.remark);
}

/// Starts a fourth NameServer (`extra` in its config) and adds it as `n3` through the
/// NameServers of `ns` with `nsadmin addNamesrvMember`; its index.
async fn join_a_fourth(cluster: &mut NamesrvCluster, ns: &str, extra: &str) -> usize {
    let n3 = cluster.start_new_member(extra);
    let added = nsadmin(&[
        "addNamesrvMember",
        "-n",
        ns,
        "-i",
        "n3",
        "-m",
        &cluster.addrs[n3],
    ])
    .await;
    assert_eq!(
        added.code, 0,
        "addNamesrvMember: {} {}",
        added.stdout, added.stderr
    );
    n3
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nameservers_group_takes_a_member_hands_it_the_lead_and_lets_another_go() {
    let mut cluster = NamesrvCluster::start(Launch::IN_PROCESS, 3, "");
    cluster.ready(READY).await;
    let first_three = cluster.addrs.join(";");
    let (rows, leader) = members(&first_three).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows
        .iter()
        .any(|(id, role)| *id == leader && role == "leader"));
    put_kv(&cluster, 0, "before").await;

    // A fourth NameServer, started listing the three and itself, joins through the leader.
    let n3 = join_a_fourth(&mut cluster, &first_three, "").await;
    let (rows, _) = members(&first_three).await;
    assert!(rows.contains(&("n3".into(), "follower".into())), "{rows:?}");
    cluster.node_ready(n3, READY).await;
    eventually(
        "the new member holds what was written before",
        READY,
        || async { get_kv(&cluster, n3, "before").await.as_deref() == Some("v") },
    )
    .await;

    // A broker heard by the new member only: the first three's configs do not list it, and
    // they take its routes all the same, since the route exchange follows the membership.
    let broker = Broker::new("MembersCluster", "broker-new", 0, "127.0.0.1:30911");
    let _kept = broker
        .register_on(cluster.node(n3), &["TopicOfTheNewMember", "AnotherTopic"])
        .await;
    for i in 0..3 {
        eventually("a route heard by the new member only", READY, || async {
            let client = cluster.client(i).await;
            call(&client, route_request("TopicOfTheNewMember", 0))
                .await
                .code
                == response::SUCCESS
        })
        .await;
    }

    let moved = nsadmin(&[
        "transferNamesrvLeader",
        "-n",
        &first_three,
        "-i",
        "n3",
        "--json",
    ])
    .await;
    assert_eq!(
        moved.code, 0,
        "transferNamesrvLeader: {} {}",
        moved.stdout, moved.stderr
    );
    assert_eq!(moved.json()["leaderId"], "n3");
    let (_, leader) = members(&cluster.addrs.join(";")).await;
    assert_eq!(leader, "n3");

    let removed = nsadmin(&["removeNamesrvMember", "-n", &first_three, "-i", "n0"]).await;
    assert_eq!(
        removed.code, 0,
        "removeNamesrvMember: {} {}",
        removed.stdout, removed.stderr
    );
    let rest = cluster.addrs[1..].join(";");
    let (rows, _) = members(&rest).await;
    let ids: Vec<&str> = rows.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["n1", "n2", "n3"]);
    // Writes go on through the three left, and read back from each.
    put_kv(&cluster, 1, "after").await;
    for i in 1..4 {
        eventually(
            "a write after the changes on every member",
            READY,
            || async { get_kv(&cluster, i, "after").await.as_deref() == Some("v") },
        )
        .await;
    }

    // With n1 down, removing n2 would leave n1 and n3, of which only one answers.
    cluster.kill(1);
    let refused = nsadmin(&["removeNamesrvMember", "-n", &rest, "-i", "n2"]).await;
    assert_ne!(refused.code, 0);
    assert!(
        refused.stderr.contains("would lose the quorum"),
        "{}",
        refused.stderr
    );
    let (rows, _) = members(&cluster.addrs[2..].join(";")).await;
    assert_eq!(rows.len(), 3, "{rows:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_that_prove_who_they_are_take_a_new_member_that_shares_their_secret() {
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("peer.secret");
    std::fs::write(&secret, "the members' own shared secret\n").unwrap();
    let extra = format!("namesrvPeerSecretPath={}\n", secret.display());
    let mut cluster = NamesrvCluster::start(Launch::IN_PROCESS, 3, &extra);
    cluster.ready(READY).await;
    put_kv(&cluster, 1, "sealed").await;
    let first_three = cluster.addrs.join(";");
    let n3 = join_a_fourth(&mut cluster, &first_three, &extra).await;
    cluster.node_ready(n3, READY).await;
    eventually(
        "the new member holds what was written before",
        READY,
        || async { get_kv(&cluster, n3, "sealed").await.as_deref() == Some("v") },
    )
    .await;
    // A write through the new member commits through the sealed links.
    put_kv(&cluster, n3, "through-the-new-member").await;
    eventually(
        "a write through the new member everywhere",
        READY,
        || async {
            get_kv(&cluster, 0, "through-the-new-member")
                .await
                .as_deref()
                == Some("v")
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_nameserver_has_no_members_to_list() {
    let server = Launch::IN_PROCESS.start();
    let run = nsadmin(&["listNamesrvMembers", "-n", &server.addr]).await;
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("namesrvPeers is not set"),
        "{}",
        run.stderr
    );
}
