//! Liveness under faults, with brokers as separate processes (bash re-sending a prepared
//! REGISTER_BROKER frame over /dev/tcp) so that they can be frozen with SIGSTOP or killed,
//! and keep their rhythm however busy the test process is.

mod support;
use support::MQNAMESRV;

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;

/// Registers every `PERIOD` seconds on one connection; when the connection breaks it
/// reconnects, as a real broker does at its next registration.
const BROKER_SCRIPT: &str = r#"
while :; do
  if exec 3<>"/dev/tcp/127.0.0.1/$PORT"; then
    while cat "$FRAME" >&3; do sleep "$PERIOD"; done
    exec 3>&-
  fi
  sleep 0.2
done
"#;

struct ShellBroker {
    child: Child,
}

impl ShellBroker {
    fn spawn(port: &str, frame: &Path, period_secs: &str) -> Self {
        let child = Command::new("bash")
            .arg("-c")
            .arg(BROKER_SCRIPT)
            .env("PORT", port)
            .env("FRAME", frame)
            .env("PERIOD", period_secs)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("starting bash");
        ShellBroker { child }
    }

    /// Signals the broker's whole process group (bash and its cat/sleep).
    fn signal(&self, signal: &str) {
        let group = format!("-{}", self.child.id());
        let status = Command::new("kill")
            .args([signal, "--", &group])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

impl Drop for ShellBroker {
    fn drop(&mut self) {
        self.signal("-KILL");
        let _ = self.child.wait();
    }
}

/// Writes the REGISTER_BROKER frame of broker `name` carrying `topic` to `<name>.frame`.
fn registration_file(
    dir: &Path,
    name: &'static str,
    topic: &str,
    timeout_ms: Option<i64>,
    counter: i64,
) -> PathBuf {
    let addr = format!("10.1.0.{}:10911", name.len());
    let mut cmd = Broker::new("FaultCluster", name, 0, &addr)
        .register_request(&[(topic, 6), ("TBW102", 7)], dv(counter, 0));
    if let Some(ms) = timeout_ms {
        cmd = cmd.with_ext("heartbeatTimeoutMillis", ms);
    }
    let buf = frame(&cmd);
    let path = dir.join(format!("{name}.frame"));
    // Renamed into place: a broker reading it mid-write would send half a frame.
    let tmp = dir.join(format!("{name}.frame.tmp"));
    std::fs::write(&tmp, &buf).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

fn port(server: &Server) -> String {
    server.addr.rsplit(':').next().unwrap().to_string()
}

async fn has_broker(client: &Client, name: &str) -> bool {
    cluster_info(client)
        .await
        .broker_addr_table
        .contains_key(name)
}

async fn has_route(client: &Client, topic: &str) -> bool {
    call(client, route_request(topic, 479)).await.code == response::SUCCESS
}

/// Polls until `name` is gone; returns how long that took.
async fn time_until_gone(client: &Client, name: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    while has_broker(client, name).await {
        assert!(
            started.elapsed() < limit,
            "{name} still there after {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// A frozen broker keeps its connection open but says nothing: it expires after its own
/// heartbeatTimeoutMillis plus at most one scan. (The default 120 s timeout takes the same
/// path, with the default substituted when the header is absent.)
#[tokio::test]
async fn frozen_broker_expires_after_its_timeout() {
    const TIMEOUT_MS: u64 = 2000;
    const SCAN_MS: u64 = 200;
    let server = MQNAMESRV.start_with(&format!("scanNotActiveBrokerInterval={SCAN_MS}"));
    let dir = tempfile::tempdir().unwrap();
    let frame = registration_file(
        dir.path(),
        "frozen",
        "frozen-topic",
        Some(TIMEOUT_MS as i64),
        1,
    );
    let broker = ShellBroker::spawn(&port(&server), &frame, "0.5");
    let client = server.client().await;
    eventually("frozen registers", TIMEOUT, || {
        has_broker(&client, "frozen")
    })
    .await;
    // Past the first expiry scan (5 s after start) while the broker still heartbeats: it
    // must not have expired.
    tokio::time::sleep(Duration::from_millis(5500)).await;
    assert!(
        has_broker(&client, "frozen").await,
        "expired while heartbeating"
    );
    broker.signal("-STOP");
    let frozen_for = time_until_gone(&client, "frozen", Duration::from_secs(10)).await;
    println!("frozen broker expired {frozen_for:?} after SIGSTOP");
    // Its last heartbeat was at most one period before the freeze.
    assert!(
        frozen_for >= Duration::from_millis(TIMEOUT_MS - 500),
        "expired after only {frozen_for:?}"
    );
    assert!(
        frozen_for <= Duration::from_millis(TIMEOUT_MS + SCAN_MS + 1500),
        "expired only after {frozen_for:?}"
    );
    assert!(!has_route(&client, "frozen-topic").await);
}

/// A broker whose connection is cut (the process dies) leaves at once, long before its
/// 120 s default timeout.
#[tokio::test]
async fn broker_with_a_cut_connection_leaves_at_once() {
    let server = MQNAMESRV.start_with("");
    let dir = tempfile::tempdir().unwrap();
    let frame = registration_file(dir.path(), "cut", "cut-topic", None, 1);
    let broker = ShellBroker::spawn(&port(&server), &frame, "1");
    let client = server.client().await;
    eventually("cut registers", TIMEOUT, || has_broker(&client, "cut")).await;
    drop(broker);
    let gone_after = time_until_gone(&client, "cut", Duration::from_secs(5)).await;
    println!("broker with a cut connection gone after {gone_after:?}");
    assert!(gone_after < Duration::from_secs(2), "took {gone_after:?}");
    assert!(!has_route(&client, "cut-topic").await);
}

const LIVE: [&str; 3] = ["live-a", "live-bb", "live-ccc"];

/// Many connections hammering GET_ROUTEINFO_BY_TOPIC for 10 s while three brokers heartbeat
/// every second with a 3 s timeout and scans run every 200 ms: none may be expired.
#[tokio::test]
async fn route_overload_expires_no_live_broker() {
    let server = MQNAMESRV.start_with("scanNotActiveBrokerInterval=200");
    let dir = tempfile::tempdir().unwrap();
    let _brokers: Vec<ShellBroker> = LIVE
        .iter()
        .map(|name| {
            let frame =
                registration_file(dir.path(), name, &format!("{name}-topic"), Some(3000), 1);
            ShellBroker::spawn(&port(&server), &frame, "1")
        })
        .collect();
    let watcher = server.client().await;
    for name in LIVE {
        eventually(name, TIMEOUT, || has_broker(&watcher, name)).await;
    }

    let stop = Instant::now() + Duration::from_secs(10);
    let mut hammers = Vec::new();
    for i in 0..40 {
        let client = server.client().await;
        let topic = LIVE[i % LIVE.len()].to_string() + "-topic";
        hammers.push(tokio::spawn(async move {
            let mut answered = 0u64;
            while Instant::now() < stop {
                let burst = (0..8).map(|_| call_result(&client, route_request(&topic, 479)));
                answered += futures::future::join_all(burst)
                    .await
                    .iter()
                    .filter(|r| matches!(r, Ok(resp) if resp.code == response::SUCCESS))
                    .count() as u64;
            }
            answered
        }));
    }
    let mut checks = 0;
    while Instant::now() < stop {
        let info = cluster_info(&watcher).await;
        for name in LIVE {
            assert!(
                info.broker_addr_table.contains_key(name),
                "{name} expired under load after {checks} checks"
            );
        }
        checks += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut answered = 0;
    for h in hammers {
        answered += h.await.unwrap();
    }
    println!("{answered} routes served in 10 s by 40 connections; {checks} liveness checks");
    assert!(
        answered > 1000,
        "the load never happened: {answered} routes"
    );
    for name in LIVE {
        assert!(
            has_broker(&watcher, name).await,
            "{name} expired at the end"
        );
    }
}

/// The NameServer restarts (kill -9) in the same home on the same port while brokers keep
/// registering every second and reconnect on failure. Routes converge within one registration
/// period: the brokers changed their topics while it was down, so only a re-registration (not
/// the route snapshot) can show the new ones.
#[tokio::test]
async fn restart_converges_within_one_registration_period() {
    let home = tempfile::tempdir().unwrap();
    let mut server = MQNAMESRV.start_in(home.path(), "");
    let port = port(&server);
    let dir = tempfile::tempdir().unwrap();
    let _brokers: Vec<ShellBroker> = LIVE
        .iter()
        .map(|name| {
            let frame = registration_file(dir.path(), name, &format!("{name}-topic"), None, 1);
            ShellBroker::spawn(&port, &frame, "1")
        })
        .collect();
    let client = server.client().await;
    for name in LIVE {
        let topic = format!("{name}-topic");
        eventually(name, TIMEOUT, || has_route(&client, &topic)).await;
    }
    server.kill();
    let renamed: [&'static str; 3] = ["live-a-v2", "live-bb-v2", "live-ccc-v2"];
    for (name, new_topic) in LIVE.into_iter().zip(renamed) {
        registration_file(dir.path(), name, new_topic, None, 2);
    }
    // Bash notices a dead connection only at its second write after the kill; a Java broker
    // notices at once. Waiting those two periods puts the brokers in their reconnect loop, as a
    // Java broker would be.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let server = MQNAMESRV.start_in(home.path(), &format!("listenPort={port}"));
    let booted = Instant::now();
    let client = server.client().await;
    for topic in renamed {
        eventually(topic, Duration::from_secs(5), || has_route(&client, topic)).await;
    }
    let converged = booted.elapsed();
    println!("converged {converged:?} after the restart");
    // One 1 s period, the brokers' 0.2 s reconnect pause, and scheduling slack.
    assert!(
        converged < Duration::from_millis(2000),
        "took {converged:?}"
    );
}
