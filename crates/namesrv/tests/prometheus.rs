//! The dashboard and alert rules of packaging/ against a real Prometheus scraping the real
//! server: every panel query and every rule expression must evaluate on live data, the
//! broker-expired alert must fire when a broker goes silent, and the departures-burst alert
//! when three more brokers drop their connections.
//!
//! Needs Debian's `prometheus` and `promtool`; without them the test says so and passes,
//! unless `NAMESRV_TEST_REQUIRE_ALL` is set.

mod support;
use support::MQNAMESRV;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use serde_json::Value;

/// The scrape job name the rules expect (NamesrvDown selects on it).
const JOB: &str = "namesrv";
/// The silent broker's heartbeat timeout: how long the firing takes, at the least.
const DOOMED_TIMEOUT_MS: i64 = 4000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_rules_evaluate_on_live_data_and_an_expiry_and_a_departure_burst_fire() {
    if prometheus_installed().is_none() {
        return;
    }
    let started = Instant::now();
    let rules_path = repo_file(
        env!("CARGO_MANIFEST_DIR"),
        "packaging/prometheus/namesrv-rules.yml",
    );
    let rules_text = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file(
            env!("CARGO_MANIFEST_DIR"),
            "packaging/grafana/namesrv-dashboard.json",
        ))
        .unwrap(),
    )
    .expect("the dashboard is JSON");

    check_rules(&rules_path);

    // A member of three NameServers that agree, so that the peers' panels and rules have data
    // as well; the load and the broker go to this one.
    let cluster = NamesrvCluster::start(MQNAMESRV, 3, "scanNotActiveBrokerInterval=200");
    cluster.ready(Duration::from_secs(30)).await;
    let server = cluster.node(0);
    let metrics_addr = server
        .http
        .as_deref()
        .expect("the HTTP port is on")
        .trim_start_matches("http://")
        .to_string();
    let prom = Prometheus::start(JOB, std::slice::from_ref(&metrics_addr), &rules_path);
    prom.ready().await;

    // Load until told to stop: route lookups that succeed and that miss, KV writes, an
    // unsupported request code (a real error answer), a broker that registers and leaves.
    // The steady broker's connection stays with the test, so that whatever happens to the
    // load cannot unregister it.
    let steady = Broker::new("ClusterA", "broker-a", 0, "127.0.0.1:10911");
    let transient = Broker::new("ClusterA", "broker-t", 0, "127.0.0.1:10913");
    let doomed = Broker::new("ClusterB", "broker-b", 0, "127.0.0.1:10912");
    let steady_conn = server.client().await;
    let client = server.client().await;
    let doomed_conn = server.client().await;
    assert_eq!(steady.register(&steady_conn, &BASE_TOPICS, 1).await.code, 0);
    let silence = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut i = 0u64;
            let mut transient_due = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                call(&client, route_request("TopicTest", 479)).await;
                call(&client, route_request("NoSuchTopic", 479)).await;
                call(&client, put_kv_request("NS", "k", &i.to_string())).await;
                call(&client, RemotingCommand::request(9999)).await;
                if transient_due <= Instant::now() {
                    transient.register(&client, &BASE_TOPICS, 1).await;
                    call(&client, transient.unregister_request()).await;
                    transient_due += Duration::from_secs(1);
                }
                call(
                    &client,
                    RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO),
                )
                .await;
                i += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    // A broker with a short heartbeat timeout that re-registers identically (repeat
    // registrations) on its own connection, apart from the load, so that a slow disk or a
    // busy machine cannot make it miss its deadline before it is told to go silent.
    let heartbeats = {
        let silence = silence.clone();
        tokio::spawn(async move {
            let registration = doomed
                .register_request(&[("TopicTest", 6), ("DoomedTopic", 6)], dv(1, 0))
                .with_ext("heartbeatTimeoutMillis", DOOMED_TIMEOUT_MS);
            while !silence.load(Ordering::Relaxed) {
                let answer = call(&doomed_conn, registration.clone()).await;
                assert_eq!(answer.code, 0, "{:?}", answer.remark);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            // Kept open: a closed connection would unregister the broker, not expire it.
            doomed_conn
        })
    };

    // Samples over several seconds of load, and every rule evaluated at least once.
    let samples = format!("count_over_time(namesrv_kv_writes_total{{job=\"{JOB}\"}}[1m])");
    prom.wait_for(
        "5 scrapes of the server",
        Duration::from_secs(30),
        || async { (prom.value(&samples).await? >= 5.0).then_some(()) },
    )
    .await;
    // Every rule of the file is loaded and evaluates; recording rules yield series.
    for (rule, data) in assert_rules_evaluate(&prom, &rule_names_in(&rules_text)).await {
        let (name, expr) = (
            rule["name"].as_str().unwrap(),
            rule["query"].as_str().unwrap(),
        );
        if rule["type"] == "recording" {
            assert!(
                !data["result"].as_array().unwrap().is_empty(),
                "recording rule {name} yields nothing: {expr}"
            );
        }
        println!(
            "rule {name}: {} series",
            data["result"].as_array().unwrap().len()
        );
    }

    // Every panel query yields at least one series.
    assert_panels_have_data(&prom, &dashboard, JOB, 10, &metrics_addr).await;
    // The variables' own queries (label_values) find this job and instance.
    let jobs = prom
        .api("/api/v1/label/job/values?match[]=namesrv_connections")
        .await;
    assert!(jobs.as_array().unwrap().iter().any(|j| j == JOB), "{jobs}");
    let instances = prom
        .api(&format!(
            "/api/v1/label/instance/values?match[]={}",
            url_encode(&format!("namesrv_connections{{job=~\"{JOB}\"}}"))
        ))
        .await;
    assert!(
        instances
            .as_array()
            .unwrap()
            .iter()
            .any(|i| *i == *metrics_addr),
        "{instances}"
    );

    let (status, scrape) = http_get(&metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    check_metrics(&scrape);

    // Nothing expired yet, so the alert is quiet; then the broker goes silent and it fires.
    for state in ["pending", "firing"] {
        let early = prom.alerts("NamesrvBrokerExpired", state).await;
        assert!(
            early.is_empty(),
            "{state} before any broker expired: {early:?}"
        );
    }
    silence.store(true, Ordering::Relaxed);
    let _doomed_conn = heartbeats
        .await
        .expect("the broker kept registered until silenced");
    let silent_since = Instant::now();
    let firing = prom
        .wait_for(
            "NamesrvBrokerExpired firing",
            Duration::from_millis(DOOMED_TIMEOUT_MS as u64) + Duration::from_secs(15),
            || async {
                let firing = prom.alerts("NamesrvBrokerExpired", "firing").await;
                firing.into_iter().next()
            },
        )
        .await;
    println!(
        "firing {:.1}s after the broker went silent: {firing}",
        silent_since.elapsed().as_secs_f64()
    );
    assert_eq!(firing["labels"]["severity"], "critical");
    assert_eq!(firing["labels"]["job"], JOB);

    // One broker gone without unregistering is below the burst alert's threshold; three more
    // that drop their connections within seconds are past it.
    for state in ["pending", "firing"] {
        let early = prom.alerts("NamesrvBrokerDeparturesBurst", state).await;
        assert!(early.is_empty(), "{state} after one expiry: {early:?}");
    }
    let mut vanishing = Vec::new();
    for (i, name) in ["broker-c1", "broker-c2", "broker-c3"]
        .into_iter()
        .enumerate()
    {
        let broker = Broker::new("ClusterC", name, 0, &format!("127.0.0.1:{}", 10921 + i));
        vanishing.push(
            broker
                .register_on(server, &["TopicTest", "BurstTopic"])
                .await,
        );
    }
    drop(vanishing);
    let burst = prom
        .wait_for(
            "NamesrvBrokerDeparturesBurst firing",
            Duration::from_secs(20),
            || async {
                let firing = prom.alerts("NamesrvBrokerDeparturesBurst", "firing").await;
                firing.into_iter().next()
            },
        )
        .await;
    println!("burst alert: {burst}");
    assert_eq!(burst["labels"]["severity"], "critical");
    assert_eq!(burst["labels"]["instance"], metrics_addr.as_str());

    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    println!("took {:.1}s", started.elapsed().as_secs_f64());
}
