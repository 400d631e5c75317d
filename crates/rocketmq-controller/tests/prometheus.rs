//! The controller dashboard and alert rules of packaging/ against a real Prometheus scraping a
//! real three-node `mqcontroller` group with brokers that follow the controller protocol: every
//! panel query must yield data, every rule must evaluate, and each alert of the rules file must
//! fire, as shipped (its `for:` included), when what it watches for is made to happen.
//!
//! Needs Debian's `prometheus` and `promtool`; without them the test says so and passes,
//! unless `NAMESRV_TEST_REQUIRE_ALL` is set.

mod support;

use std::collections::BTreeSet;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::headers::controller::ElectMasterRequestHeader;
use rocketmq_wire::headers::RequestHeader;
use serde_json::Value;
use tokio::sync::Mutex;

/// The rules name no job; the test's scrape job has a name of its own to show that.
const JOB: &str = "rocketmq-controller";
/// Every alert of the rules file, each of which this test must see firing.
const ALERTS: [&str; 5] = [
    "ControllerNoLeader",
    "ControllerQuorumUnreachable",
    "ControllerBrokerGroupWithoutMaster",
    "ControllerSyncStateSetShrunk",
    "ControllerMasterFlapping",
];

/// A node process, killed (stopped or not) when the test ends however it ends.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

type Shared = Arc<Mutex<ControllerBroker>>;

/// Registers `broker` (an id, 1003) and, when `elect`, makes it its group's master (1002).
async fn join(controllers: &[String], broker: &Shared, elect: bool) {
    let mut b = broker.lock().await;
    let answer = b.register(controllers).await.expect("1003 answered");
    assert_eq!(answer.code, 0, "register {}: {:?}", b.name, answer.remark);
    if elect {
        let answer = b.elect_self(controllers).await.expect("1002 answered");
        assert_eq!(answer.code, 0, "elect {}: {:?}", b.name, answer.remark);
    }
}

/// `master` sets its group's its sync-state set to `set`.
async fn alter(controllers: &[String], master: &Shared, set: &[i64]) {
    let mut m = master.lock().await;
    let info = m.replica_info(controllers).await.expect("1004 answered");
    let set: BTreeSet<i64> = set.iter().copied().collect();
    if info.sync_state_set == set {
        return;
    }
    let answer = m
        .alter_sync_state_set(controllers, &info, &set)
        .await
        .expect("1001 answered");
    assert_eq!(
        answer.code, 0,
        "alter {} to {set:?}: {:?}",
        m.name, answer.remark
    );
}

/// Makes `to` its group's master by a designated election (admin `electMaster`).
async fn designate(controllers: &[String], to: &Shared) {
    let mut b = to.lock().await;
    let leader = b.find_leader(controllers).await.expect("a leader");
    let cmd = ElectMasterRequestHeader {
        cluster_name: Some(b.cluster),
        broker_name: b.name,
        broker_id: b.id,
        designate_elect: true,
        invoke_time: Some(0),
    }
    .to_command();
    let answer = b
        .call(controllers, leader, cmd)
        .await
        .expect("1002 answered");
    assert_eq!(answer.code, 0, "designate {:?}: {:?}", b.id, answer.remark);
}

fn labels(alerts: &[Value], label: &str) -> BTreeSet<String> {
    alerts
        .iter()
        .filter_map(|a| a["labels"][label].as_str().map(String::from))
        .collect()
}

/// Waits for `name` to fire with `label` = `value`; its alerts then.
async fn fires(
    prom: &Prometheus,
    name: &str,
    label: &str,
    value: &str,
    limit: Duration,
) -> Vec<Value> {
    let since = Instant::now();
    let firing = prom
        .wait_for(
            &format!("{name} firing for {label}={value}"),
            limit,
            || async {
                let firing = prom.alerts(name, "firing").await;
                labels(&firing, label).contains(value).then_some(firing)
            },
        )
        .await;
    println!(
        "{name} firing for {label}={value} after {:.1}s",
        since.elapsed().as_secs_f64()
    );
    firing
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_panel_and_rule_evaluates_on_a_live_group_and_every_controller_alert_fires() {
    if prometheus_installed().is_none() {
        return;
    }
    let started = Instant::now();
    let manifest = env!("CARGO_MANIFEST_DIR");
    let rules_path = repo_file(manifest, "packaging/prometheus/controller-rules.yml");
    let rules_text = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file(
            manifest,
            "packaging/grafana/controller-dashboard.json",
        ))
        .unwrap(),
    )
    .expect("the dashboard is JSON");
    check_rules(&rules_path);
    let mut in_file = rule_names_in(&rules_text);
    in_file.sort();
    let mut expected: Vec<String> = ALERTS.iter().map(|a| a.to_string()).collect();
    expected.sort();
    assert_eq!(
        in_file, expected,
        "an alert without a firing test, or the reverse"
    );

    let dir = tempfile::tempdir().unwrap();
    // Expiry scans every 500 ms, so that a silent master is seen within a second.
    let (nodes, controllers, http) =
        support::boot_group_with_http(dir.path(), "prom", 3, "scanNotActiveBrokerInterval=500\n");
    let nodes: Vec<Node> = nodes.into_iter().map(Node).collect();
    let prom = Prometheus::start(JOB, &http, &rules_path);
    prom.ready().await;
    support::one_leader(
        &controllers,
        Duration::from_millis(500),
        Duration::from_secs(20),
    )
    .await
    .expect("the group elects a leader");

    // Group A: one broker, the master. Group B: a master and a slave. Group C: two brokers
    // whose master the test moves back and forth.
    let broker = |cluster, name, port: u16, timeout_ms| {
        let mut b = ControllerBroker::new(cluster, name, &format!("127.0.0.1:{port}"));
        b.heartbeat_timeout_ms = timeout_ms;
        Arc::new(Mutex::new(b))
    };
    let a1 = broker("ClusterP", "broker-a", 30911, 3000);
    let (b1, b2) = (
        broker("ClusterP", "broker-b", 30921, 10_000),
        broker("ClusterP", "broker-b", 30922, 10_000),
    );
    let (c1, c2) = (
        broker("ClusterP", "broker-c", 30931, 10_000),
        broker("ClusterP", "broker-c", 30932, 10_000),
    );
    join(&controllers, &a1, true).await;
    join(&controllers, &b1, true).await;
    join(&controllers, &b2, false).await;
    join(&controllers, &c1, true).await;
    join(&controllers, &c2, false).await;
    alter(&controllers, &b1, &[1, 2]).await;
    alter(&controllers, &c1, &[1, 2]).await;

    // Heartbeats to every node each 500 ms from every broker not silenced, and a registration
    // now and then, a replicated write that feeds the commit latency histogram.
    let silenced = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let beats = {
        let (controllers, stop, silenced) = (controllers.clone(), stop.clone(), silenced.clone());
        let brokers = [a1.clone(), b1.clone(), b2.clone(), c1.clone(), c2.clone()];
        tokio::spawn(async move {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                for (i, b) in brokers.iter().enumerate() {
                    if i == 0 && silenced.load(Ordering::Relaxed) {
                        continue;
                    }
                    let mut b = b.lock().await;
                    b.heartbeat(&controllers).await;
                    if round % 4 == i as u64 {
                        b.register(&controllers).await;
                    }
                }
                round += 1;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        })
    };

    // Every node scraped a few times, every rule evaluated on that.
    let samples = format!("min(count_over_time(namesrv_controller_term{{job=\"{JOB}\"}}[1m]))");
    prom.wait_for(
        "5 scrapes of each node",
        Duration::from_secs(30),
        || async { (prom.value(&samples).await? >= 5.0).then_some(()) },
    )
    .await;
    let up = prom.query(&format!("up{{job=\"{JOB}\"}} == 1")).await;
    assert_eq!(
        up["result"].as_array().unwrap().len(),
        3,
        "all three scraped: {up}"
    );
    assert_rules_evaluate(&prom, &expected).await;

    // Every panel query yields a series for what it shows (all is well, so the alerts are
    // quiet: a healthy group raises none of them, not even pending).
    assert_panels_have_data(&prom, &dashboard, JOB, 12, &http[0]).await;
    let groups = prom
        .query(&substitute(
            &panel_queries(&dashboard)
                .iter()
                .find(|(t, _)| t == "Master id per group")
                .expect("the master id panel")
                .1,
            JOB,
        ))
        .await;
    // Query results carry their labels under `metric`; series in result order.
    let named: Vec<&str> = groups["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metric"]["broker_name"].as_str().unwrap())
        .collect();
    let mut sorted = named.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["broker-a", "broker-b", "broker-c"],
        "the leader's view names each group once: {groups}"
    );
    let instances = prom
        .api(&format!(
            "/api/v1/label/instance/values?match[]={}",
            url_encode(&format!("namesrv_controller_term{{job=~\"{JOB}\"}}"))
        ))
        .await;
    let instances: BTreeSet<String> = instances
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        instances,
        http.iter().cloned().collect(),
        "the instance variable"
    );
    for state in ["pending", "firing"] {
        for alert in ALERTS {
            let early = prom.alerts(alert, state).await;
            assert!(
                early.is_empty(),
                "{alert} {state} in a healthy group: {early:?}"
            );
        }
    }
    let (status, scrape) = http_get(&http[0], "/metrics").await;
    assert_eq!(status, 200);
    check_metrics(&scrape);

    let phase = Instant::now();
    // Group A's only broker dies: its master is gone with nobody to elect. Group B's slave
    // stops replicating, so its master shrinks the set to itself. Group C's master is moved
    // four times in a row.
    silenced.store(true, Ordering::Relaxed);
    a1.lock().await.disconnect();
    alter(&controllers, &b1, &[1]).await;
    let (mut master, mut other) = (c1.clone(), c2.clone());
    for _ in 0..4 {
        let other_id = other.lock().await.id.unwrap();
        let master_id = master.lock().await.id.unwrap();
        alter(&controllers, &master, &[master_id, other_id]).await;
        designate(&controllers, &other).await;
        std::mem::swap(&mut master, &mut other);
    }
    let flapping = fires(
        &prom,
        "ControllerMasterFlapping",
        "broker_name",
        "broker-c",
        Duration::from_secs(15),
    )
    .await;
    assert_eq!(flapping[0]["labels"]["severity"], "warning");
    // `for: 30s` each, counted from when a rule evaluation first saw the condition.
    let masterless = fires(
        &prom,
        "ControllerBrokerGroupWithoutMaster",
        "broker_name",
        "broker-a",
        Duration::from_secs(45),
    )
    .await;
    assert_eq!(
        labels(&masterless, "broker_name"),
        BTreeSet::from(["broker-a".to_string()]),
        "only the group without a live broker has no master"
    );
    assert_eq!(masterless[0]["labels"]["severity"], "critical");
    let shrunk = fires(
        &prom,
        "ControllerSyncStateSetShrunk",
        "broker_name",
        "broker-b",
        Duration::from_secs(45),
    )
    .await;
    assert!(
        !labels(&shrunk, "broker_name").contains("broker-a"),
        "a group with no live slave has nothing to shrink: {shrunk:?}"
    );
    assert!(
        phase.elapsed() >= Duration::from_secs(30),
        "fired before its `for:` of 30 s"
    );
    for alert in ["ControllerNoLeader", "ControllerQuorumUnreachable"] {
        let early = prom.alerts(alert, "pending").await;
        assert!(
            early.is_empty(),
            "{alert} pending with a quorum up: {early:?}"
        );
    }

    // Two of three nodes paused: the third can reach no quorum and names no leader.
    for node in &nodes[..2] {
        // SAFETY: kill(2) on a child this test started and still holds.
        assert_eq!(unsafe { libc::kill(node.0.id() as i32, libc::SIGSTOP) }, 0);
    }
    let no_leader = fires(
        &prom,
        "ControllerNoLeader",
        "instance",
        &http[2],
        Duration::from_secs(25),
    )
    .await;
    assert_eq!(no_leader[0]["labels"]["severity"], "critical");
    fires(
        &prom,
        "ControllerQuorumUnreachable",
        "instance",
        &http[2],
        Duration::from_secs(25),
    )
    .await;

    // The paused nodes are killed as they are when `nodes` drops.
    stop.store(true, Ordering::Relaxed);
    beats.await.unwrap();
    println!("took {:.1}s", started.elapsed().as_secs_f64());
}
