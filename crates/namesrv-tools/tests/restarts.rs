//! Brokers restarting at once against our server over TCP: thousands of rounds of unregister,
//! register again and read the route, in each of the three ways a broker's requests travel,
//! with several brokers at a time. Not one fresh registration may be lost. The long run (100,000
//! rounds a variant, beside the Java NameServer) is `scripts/bench --restarts`.

use std::process::Command;

use namesrv_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_restarting_at_once_are_never_lost_and_the_overtaken_removals_are_counted() {
    let server = Server::start();
    let mut nsbench = Command::new(env!("CARGO_BIN_EXE_nsbench"));
    nsbench.args(["restarts", "--addr", &server.addr]).args([
        "--rounds",
        "1500",
        "--brokers",
        "8",
        "--settle-ms",
        "20",
    ]);
    let run = run_off_runtime(nsbench).await;
    assert_eq!(run.code, 0, "nsbench failed: {}", run.stderr);
    let result = run.json();
    for variant in result["variants"].as_array().unwrap() {
        assert_eq!(variant["rounds"], 1500, "{variant}");
        assert_eq!(variant["lost"], 0, "fresh registrations lost: {variant}");
    }
    // Every removal a new registration overtook is counted, and told on the status page.
    let metrics = server.http_get("/metrics").await;
    let ignored: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("namesrv_broker_stale_unregistrations_ignored_total "))
        .expect("the counter is exported")
        .trim()
        .parse()
        .unwrap();
    let status: serde_json::Value =
        serde_json::from_str(&server.http_get("/status.json").await).unwrap();
    let told = status["changes"]
        .as_array()
        .expect("the change list")
        .iter()
        .filter(|e| e["kind"] == "stale-unregistration-ignored")
        .count() as u64;
    assert!(ignored <= 3 * 1500 * 2, "{ignored}");
    assert!(told <= ignored, "{told} told, {ignored} counted");
    if ignored > 0 {
        assert!(told > 0, "{ignored} counted but none told");
    }
}
