//! `nsadmin` against real NameServers (in this process: nsadmin is the process under test).

use std::process::Command;
use std::sync::LazyLock;

use namesrv_testkit::*;

static BROKER_A: LazyLock<Broker> =
    LazyLock::new(|| Broker::new("ClusterX", "broker-a", 0, "127.0.0.1:10911"));
static BROKER_A_SLAVE: LazyLock<Broker> =
    LazyLock::new(|| Broker::new("ClusterX", "broker-a", 1, "127.0.0.1:10921"));
static BROKER_B: LazyLock<Broker> =
    LazyLock::new(|| Broker::new("ClusterY", "broker-b", 0, "127.0.0.1:10931"));

/// Runs `nsadmin` with `args` (no NAMESRV_ADDR from the environment).
async fn nsadmin(args: &[&str]) -> Run {
    nsadmin_env(args, &[]).await
}

async fn nsadmin_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nsadmin"));
    cmd.args(args)
        .env_remove("NAMESRV_ADDR")
        .envs(env.iter().copied());
    run_off_runtime(cmd).await
}

/// Table output as rows of cells, whatever the column widths.
fn words(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_show_clusters_routes_and_topics() {
    let server = Server::start();
    let _a = BROKER_A
        .register_on(&server, &["TopicA", "TopicShared"])
        .await;
    let _a1 = BROKER_A_SLAVE
        .register_on(&server, &["TopicA", "TopicShared"])
        .await;
    let _b = BROKER_B
        .register_on(&server, &["TopicB", "TopicShared"])
        .await;
    let n = server.addr.as_str();

    let clusters = nsadmin(&["-n", n, "clusterList"]).await;
    assert_eq!(clusters.code, 0, "{}", clusters.stderr);
    assert_eq!(
        words(&clusters.stdout),
        [
            vec!["#Cluster", "Name", "#Broker", "Name", "#BID", "#Addr"],
            vec!["ClusterX", "broker-a", "0", "127.0.0.1:10911"],
            vec!["ClusterX", "broker-a", "1", "127.0.0.1:10921"],
            vec!["ClusterY", "broker-b", "0", "127.0.0.1:10931"],
        ]
    );
    let json = nsadmin(&["-n", n, "clusterList", "--json"]).await.json();
    assert_eq!(
        json["brokerAddrTable"]["broker-a"]["brokerAddrs"]["1"],
        "127.0.0.1:10921"
    );
    assert_eq!(json["clusterAddrTable"]["ClusterY"][0], "broker-b");

    let route = nsadmin(&["-n", n, "topicRoute", "-t", "TopicShared"]).await;
    assert_eq!(route.code, 0, "{}", route.stderr);
    let rows = words(&route.stdout);
    assert!(
        rows.contains(&vec!["broker-b", "ClusterY", "0", "127.0.0.1:10931"]),
        "{}",
        route.stdout
    );
    assert!(
        rows.contains(&vec!["broker-a", "4", "4", "6", "(RW-)", "0"]),
        "{}",
        route.stdout
    );
    let json = nsadmin(&["--json", "-n", n, "topicRoute", "-t", "TopicA"])
        .await
        .json();
    assert_eq!(json["queueDatas"][0]["brokerName"], "broker-a");
    assert_eq!(json["queueDatas"][0]["writeQueueNums"], 4);

    let all = nsadmin(&["-n", n, "topicList"]).await;
    assert_eq!(all.stdout, "TopicA\nTopicB\nTopicShared\n");
    let of_y = nsadmin(&["-n", n, "topicList", "-c", "ClusterY", "--json"])
        .await
        .json();
    assert_eq!(
        of_y["topicList"],
        serde_json::json!(["TopicB", "TopicShared"])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_show_code_and_remark_and_fail() {
    let server = Server::start();
    let n = server.addr.as_str();
    let missing = nsadmin(&["-n", n, "topicRoute", "-t", "Nope"]).await;
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("CODE: 17 (TOPIC_NOT_EXIST)"),
        "{}",
        missing.stderr
    );
    assert!(missing
        .stderr
        .contains("No topic route info in name server for the topic: Nope"));

    let no_kv = nsadmin(&["-n", n, "getKvConfig", "-s", "ns", "-k", "k"]).await;
    assert_eq!(no_kv.code, 1);
    assert!(
        no_kv.stderr.contains("CODE: 22 (QUERY_NOT_FOUND)"),
        "{}",
        no_kv.stderr
    );

    let black = nsadmin(&[
        "-n",
        n,
        "updateNamesrvConfig",
        "-k",
        "kvConfigPath",
        "-v",
        "/x",
    ])
    .await;
    assert_eq!(black.code, 1);
    assert!(
        black.stderr.contains("CODE: 16 (NO_PERMISSION)"),
        "{}",
        black.stderr
    );
    assert!(black.stderr.contains("black list"));

    let no_addr = nsadmin(&["clusterList"]).await;
    assert_eq!(no_addr.code, 1);
    assert!(no_addr.stderr.contains("NAMESRV_ADDR"));
    let from_env = nsadmin_env(&["clusterList"], &[("NAMESRV_ADDR", n)]).await;
    assert_eq!(from_env.code, 0, "{}", from_env.stderr);

    let down = nsadmin(&["-n", "127.0.0.1:1", "clusterList"]).await;
    assert_eq!(down.code, 1);
    assert!(
        down.stderr.contains("no NameServer answered"),
        "{}",
        down.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_reach_every_namesrv_and_reads_take_the_first_that_answers() {
    let one = Server::start();
    let two = Server::start();
    let _a1 = BROKER_A.register_on(&one, &["TopicA", "TopicShared"]).await;
    let _a2 = BROKER_A.register_on(&two, &["TopicA", "TopicShared"]).await;
    let both = addrs(&[&one, &two]);

    let put = nsadmin(&[
        "-n",
        &both,
        "updateKvConfig",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "TopicA",
        "-v",
        "broker-a:4",
    ])
    .await;
    assert_eq!(put.code, 0, "{}", put.stderr);
    assert_eq!(put.stdout.lines().count(), 2);
    for server in [&one, &two] {
        let got = nsadmin(&[
            "-n",
            &server.addr,
            "getKvConfig",
            "-s",
            "ORDER_TOPIC_CONFIG",
            "-k",
            "TopicA",
        ])
        .await;
        assert_eq!(got.stdout, "broker-a:4\n");
    }
    let list = nsadmin(&[
        "-n",
        &two.addr,
        "getKVListByNamespace",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "--json",
    ])
    .await
    .json();
    assert_eq!(list["table"]["TopicA"], "broker-a:4");

    let wipe = nsadmin(&["-n", &both, "wipeWritePerm", "-b", "broker-a", "--json"]).await;
    assert_eq!(wipe.code, 0, "{}", wipe.stderr);
    let wipe = wipe.json();
    assert_eq!(wipe[0]["wipeTopicCount"], 2);
    assert_eq!(wipe[1]["namesrv"], two.addr.as_str());
    let route = nsadmin(&["-n", &two.addr, "topicRoute", "-t", "TopicA"]).await;
    assert!(route.stdout.contains("4 (R--)"), "{}", route.stdout);
    let add = nsadmin(&["-n", &both, "addWritePerm", "-b", "broker-a"]).await;
    assert!(
        add.stdout
            .contains("add write perm of broker[broker-a] OK, 2"),
        "{}",
        add.stdout
    );

    let del = nsadmin(&[
        "-n",
        &both,
        "deleteTopic",
        "-t",
        "TopicShared",
        "-c",
        "ClusterX",
    ])
    .await;
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(
        nsadmin(&["-n", &two.addr, "topicList"]).await.stdout,
        "TopicA\n"
    );

    let update = nsadmin(&[
        "-n",
        &both,
        "updateNamesrvConfig",
        "-k",
        "orderMessageEnable",
        "-v",
        "true",
    ])
    .await;
    assert_eq!(update.code, 0, "{}", update.stderr);
    let config = nsadmin(&["-n", &both, "getNamesrvConfig", "--json"])
        .await
        .json();
    assert_eq!(config[&one.addr]["orderMessageEnable"], "true");
    assert_eq!(config[&two.addr]["orderMessageEnable"], "true");

    let delete = nsadmin(&[
        "-n",
        &both,
        "deleteKvConfig",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "TopicA",
    ])
    .await;
    assert_eq!(delete.code, 0, "{}", delete.stderr);

    // A dead NameServer first: reads move on to the next, writes report it and fail.
    let with_dead = format!("127.0.0.1:1;{}", one.addr);
    let read = nsadmin(&["-n", &with_dead, "topicList"]).await;
    assert_eq!(
        (read.code, read.stdout.as_str()),
        (0, "TopicA\n"),
        "{}",
        read.stderr
    );
    let write = nsadmin(&[
        "-n",
        &with_dead,
        "updateKvConfig",
        "-s",
        "ns",
        "-k",
        "k",
        "-v",
        "v",
    ])
    .await;
    assert_eq!(write.code, 1);
    assert!(write.stderr.contains("127.0.0.1:1"), "{}", write.stderr);
    let got = nsadmin(&["-n", &one.addr, "getKvConfig", "-s", "ns", "-k", "k"]).await;
    assert_eq!(got.stdout, "v\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_signed_with_the_given_keys() {
    let dir = tempfile::tempdir().unwrap();
    let credentials = dir.path().join("credentials.properties");
    std::fs::write(&credentials, "admin=s3cret\n").unwrap();
    let server = Server::start_with(&format!(
        "authenticationEnabled=true\nauthCredentialsPath={}",
        credentials.display()
    ));
    let n = server.addr.as_str();
    let put = ["-n", n, "updateKvConfig", "-s", "ns", "-k", "k", "-v", "v"];

    let unsigned = nsadmin(&put).await;
    assert_eq!(unsigned.code, 1);
    assert!(unsigned.stderr.contains("CODE: 16"), "{}", unsigned.stderr);
    let wrong =
        nsadmin(&[&put[..], &["--access-key", "admin", "--secret-key", "nope"]].concat()).await;
    assert_eq!(wrong.code, 1);
    let signed = nsadmin(
        &[
            &put[..],
            &["--access-key", "admin", "--secret-key", "s3cret"],
        ]
        .concat(),
    )
    .await;
    assert_eq!(signed.code, 0, "{}", signed.stderr);
    // Reads stay open.
    let got = nsadmin(&["-n", n, "getKvConfig", "-s", "ns", "-k", "k"]).await;
    assert_eq!(got.stdout, "v\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_agrees_on_the_same_state_and_shows_what_differs() {
    let one = Server::start();
    let two = Server::start();
    let _a1 = BROKER_A.register_on(&one, &["TopicA", "TopicShared"]).await;
    let _a2 = BROKER_A.register_on(&two, &["TopicA", "TopicShared"]).await;
    let both = addrs(&[&one, &two]);
    let kv = [
        "updateKvConfig",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "TopicA",
        "-v",
        "broker-a:4",
    ];
    assert_eq!(
        nsadmin(&[&["-n", both.as_str()][..], &kv[..]].concat())
            .await
            .code,
        0
    );

    let same = nsadmin(&["-n", &both, "diff"]).await;
    assert_eq!(same.code, 0, "{}\n{}", same.stdout, same.stderr);
    assert!(
        same.stdout
            .contains("agree: 1 clusters, 1 brokers, 2 topics, 1 KV namespaces"),
        "{}",
        same.stdout
    );

    // Now a broker that reached only the first, a permission change and a KV write on the
    // second only.
    let _b = BROKER_B.register_on(&one, &["TopicB", "TopicShared"]).await;
    let wipe = nsadmin(&["-n", &two.addr, "wipeWritePerm", "-b", "broker-a"]).await;
    assert_eq!(wipe.code, 0);
    let put = nsadmin(&[
        "-n",
        &two.addr,
        "updateKvConfig",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "TopicB",
        "-v",
        "broker-b:8",
    ])
    .await;
    assert_eq!(put.code, 0);

    let differs = nsadmin(&["-n", &both, "diff"]).await;
    assert_eq!(differs.code, 1, "{}\n{}", differs.stdout, differs.stderr);
    let text = &differs.stdout;
    for expected in [
        "broker broker-b\n",
        "cluster ClusterY\n",
        "topic TopicB\n",
        &format!("  {}  (absent)\n", two.addr),
        "kv ORDER_TOPIC_CONFIG key TopicB\n",
        &format!("  {}  broker-b:8\n", two.addr),
        "queues on broker-a: read 4, write 4, perm 4 (R--), sysFlag 0",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(!text.contains("kv ORDER_TOPIC_CONFIG key TopicA"), "{text}");

    let json = nsadmin(&["-n", &both, "diff", "--json"]).await;
    assert_eq!(json.code, 1);
    let json = json.json();
    assert_eq!(json["agree"], false);
    let topic_b = json["differences"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["item"] == "topic TopicB")
        .unwrap();
    assert!(topic_b["values"][&two.addr].is_null());

    // Namespaces to compare are chosen with -s; this one is on neither.
    let other = nsadmin(&["-n", &both, "diff", "-s", "OTHER"]).await;
    assert!(!other.stdout.contains("kv "), "{}", other.stdout);

    let single = nsadmin(&["-n", &one.addr, "diff"]).await;
    assert_eq!(single.code, 2);
    let unreachable = nsadmin(&["-n", &format!("{};127.0.0.1:1", one.addr), "diff"]).await;
    assert_eq!(unreachable.code, 2, "{}", unreachable.stderr);
}

/// NameServers that agree (`namesrvPeers`): a broker registered with one and a KV write sent
/// to another leave no difference for `diff` to report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_finds_no_difference_between_nameservers_that_agree() {
    let cluster = NamesrvCluster::start(Launch::IN_PROCESS, 3, "");
    cluster.ready(std::time::Duration::from_secs(30)).await;
    let _a = BROKER_A
        .register_on(cluster.node(0), &["TopicA", "TopicShared"])
        .await;
    let all = cluster.addrs.join(";");
    let put = nsadmin(&[
        "-n",
        &cluster.addrs[1],
        "updateKvConfig",
        "-s",
        "ORDER_TOPIC_CONFIG",
        "-k",
        "TopicA",
        "-v",
        "broker-a:4",
    ])
    .await;
    assert_eq!(put.code, 0, "{}", put.stderr);
    let mut last;
    let agreed = {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let run = nsadmin(&["-n", &all, "diff"]).await;
            last = format!("{}\n{}", run.stdout, run.stderr);
            if run.code == 0 || std::time::Instant::now() > deadline {
                break run.code == 0;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    assert!(agreed, "{last}");
    assert!(
        last.contains("agree: 1 clusters, 1 brokers, 2 topics, 1 KV namespaces"),
        "{last}"
    );
}
