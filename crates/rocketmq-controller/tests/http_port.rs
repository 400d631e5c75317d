//! `mqcontroller`'s HTTP port, turned on as Java's controller turns on its Prometheus exporter
//! (`metricsExporterType=PROM`): metrics, probes and the status page of a real three-node group,
//! a broker group electing its master through it, and what a node cut off from the others says.

mod support;
use support::{boot_group_with_http, one_leader, MQCONTROLLER};

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use namesrv_testkit::{
    free_port, headless_chromium, http_get, needs, on_path, ControllerBroker, ControllerProps,
};
use serde_json::Value;

struct Group {
    nodes: Vec<Option<Child>>,
    controllers: Vec<String>,
    http: Vec<String>,
    _dir: tempfile::TempDir,
}

impl Group {
    fn start(n: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let (nodes, controllers, http) = boot_group_with_http(dir.path(), "web", n, "");
        Group {
            nodes: nodes.into_iter().map(Some).collect(),
            controllers,
            http,
            _dir: dir,
        }
    }

    fn kill(&mut self, i: usize) {
        if let Some(mut child) = self.nodes[i].take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    async fn get(&self, i: usize, path: &str) -> (u16, String) {
        http_get(&self.http[i], path).await
    }

    async fn status(&self, i: usize) -> Value {
        let (code, body) = self.get(i, "/status.json").await;
        assert_eq!(code, 200, "{body}");
        serde_json::from_str(&body).unwrap()
    }

    /// Waits up to `limit` for node `i`'s `/readyz` to answer `code`; the last body.
    async fn readyz_becomes(&self, i: usize, code: u16, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let (got, body) = self.get(i, "/readyz").await;
            if got == code {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "n{i} /readyz answered {got} {body:?}, not {code}, for {limit:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for i in 0..self.nodes.len() {
            self.kill(i);
        }
    }
}

/// The value of the series `name` exactly as written (labels included), if scraped.
fn sample(scrape: &str, name: &str) -> Option<f64> {
    scrape.lines().find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        (series == name).then(|| value.parse().ok())?
    })
}

#[tokio::test]
async fn a_group_serves_metrics_probes_and_a_page_naming_members_masters_and_elections() {
    let mut group = Group::start(3);
    let leader = one_leader(
        &group.controllers,
        Duration::from_millis(500),
        Duration::from_secs(20),
    )
    .await
    .expect("a leader");
    for i in 0..3 {
        group.readyz_becomes(i, 200, Duration::from_secs(10)).await;
        assert_eq!(group.get(i, "/healthz").await, (200, "ok\n".into()));
    }

    // A broker group gets its master through the group.
    let mut broker = ControllerBroker::new("WebCluster", "web-a", "127.0.0.1:30911");
    let registered = broker
        .register(&group.controllers)
        .await
        .expect("1003 answered");
    assert_eq!(registered.code, 0, "{:?}", registered.remark);
    let elected = broker
        .elect_self(&group.controllers)
        .await
        .expect("1002 answered");
    assert_eq!(elected.code, 0, "{:?}", elected.remark);
    broker.heartbeat(&group.controllers).await;

    let status = group.status(leader).await;
    let c = &status["controller"];
    let members = c["members"].as_array().unwrap();
    assert_eq!(members.len(), 3, "{c}");
    assert_eq!(
        members.iter().filter(|m| m["role"] == "leader").count(),
        1,
        "{c}"
    );
    for m in members.iter().filter(|m| m["this_node"] == false) {
        assert!(m["lag"].is_u64(), "the leader knows each member's lag: {m}");
        assert!(
            m["last_answer_ms"].as_u64().is_some_and(|ms| ms < 5_000),
            "the leader heard each member lately: {m}"
        );
    }
    let recent = c["recent"].as_array().unwrap();
    assert!(
        recent.iter().any(|e| e["kind"] == "election"
            && e["of"] == "web-a"
            && e["detail"].as_str().unwrap().contains("new master")
            && e["detail"].as_str().unwrap().contains("asked")),
        "the election is listed with its cause: {recent:?}"
    );
    assert!(
        recent.iter().any(|e| e["kind"] == "leadership"),
        "{recent:?}"
    );
    // Heartbeats reach every node; each lists the broker as heard from.
    let deadline = Instant::now() + Duration::from_secs(5);
    while group.status(leader).await["controller"]["live"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        assert!(
            Instant::now() < deadline,
            "the broker's heartbeat never showed"
        );
        broker.heartbeat(&group.controllers).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let (code, scrape) = group.get(leader, "/metrics").await;
    assert_eq!(code, 200);
    let group_labels = "{cluster=\"WebCluster\",broker_name=\"web-a\"}";
    for (series, want) in [
        ("namesrv_controller_is_leader".to_string(), 1.0),
        ("namesrv_controller_has_leader".to_string(), 1.0),
        (
            "namesrv_controller_members{role=\"follower\"}".to_string(),
            2.0,
        ),
        (
            format!("namesrv_controller_master_epoch{group_labels}"),
            1.0,
        ),
        (
            format!("namesrv_controller_sync_state_set_size{group_labels}"),
            1.0,
        ),
        (
            format!("namesrv_controller_group_live_brokers{group_labels}"),
            1.0,
        ),
        (
            "namesrv_controller_elections_total{result=\"new_master\"}".to_string(),
            1.0,
        ),
    ] {
        assert_eq!(
            sample(&scrape, &series),
            Some(want),
            "{series} in\n{scrape}"
        );
    }
    assert!(
        sample(&scrape, "namesrv_controller_commit_seconds_count").is_some_and(|n| n >= 3.0),
        "the id, registration and election commits are timed:\n{scrape}"
    );
    assert!(
        sample(&scrape, "namesrv_controller_quorum_contact_age_seconds").is_some_and(|s| s < 1.0),
        "{scrape}"
    );

    let (code, page) = group.get(leader, "/").await;
    assert_eq!(code, 200);
    for expected in [
        "<table id=controller-members>",
        &format!("n{leader} (this node)"),
        "web-a",
        "WebCluster",
        "new master",
        "showController",
    ] {
        assert!(
            page.contains(expected),
            "the page lacks {expected}:\n{page}"
        );
    }

    // As a person sees it: the script redraws the page from status.json.
    if let Some(chromium) = needs(
        on_path(&["chromium", "chromium-browser", "google-chrome"]),
        "headless Chromium (Debian package: chromium)",
    ) {
        let url = format!("http://{}/", group.http[leader]);
        let dom = headless_chromium(
            &chromium,
            &["--virtual-time-budget=7000", "--dump-dom", &url],
        );
        let body = &dom[dom.find("<body").unwrap()..];
        let polls: u32 = body[..body.find('>').unwrap()]
            .split("data-polls=\"")
            .nth(1)
            .and_then(|v| v[..v.find('"')?].parse().ok())
            .unwrap_or(0);
        assert!(polls >= 1, "the script updated the page: {body}");
        assert!(
            dom.contains("web-a") && dom.contains("(this node)"),
            "{dom}"
        );
    }

    // The leader cut off from both others (killed): within its lease it names no leader, and
    // its probe and series say so, with the reason.
    let others: Vec<usize> = (0..3).filter(|i| *i != leader).collect();
    for i in &others {
        group.kill(*i);
    }
    let why = group
        .readyz_becomes(leader, 503, Duration::from_secs(5))
        .await;
    assert!(why.contains("no leader"), "{why}");
    let (_, scrape) = group.get(leader, "/metrics").await;
    assert_eq!(
        sample(&scrape, "namesrv_controller_has_leader"),
        Some(0.0),
        "{scrape}"
    );
    assert!(
        sample(&scrape, "namesrv_controller_quorum_contact_age_seconds").is_some_and(|s| s >= 0.7),
        "the age of the last quorum contact grows: {scrape}"
    );
}

fn try_start(conf: &str) -> std::process::Output {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("controller.conf");
    std::fs::write(&path, conf).unwrap();
    let mut child = Command::new(MQCONTROLLER)
        .arg("-c")
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let printed = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut stdout = child.stdout.take().unwrap();
    let reader = {
        let printed = printed.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n @ 1..) = stdout.read(&mut chunk) {
                printed.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        })
    };
    // A node that boots runs until killed: it is given the time to print what it serves, which
    // follows its boot line at once (on a busy machine the boot itself may take seconds).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut booted_at = None;
    while std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        let booted = String::from_utf8_lossy(&printed.lock().unwrap()).contains("boot success");
        let since = *booted_at.get_or_insert_with(std::time::Instant::now);
        if !booted {
            booted_at = None;
        } else if since.elapsed() >= Duration::from_millis(700) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let mut out = child.wait_with_output().unwrap();
    reader.join().unwrap();
    out.stdout = printed.lock().unwrap().clone();
    out
}

#[test]
fn the_port_stays_off_unless_asked_for_and_a_mistyped_exporter_is_refused_by_name() {
    let port = free_port();
    let store = tempfile::tempdir().unwrap();
    let base = ControllerProps::new([format!("127.0.0.1:{}", free_port())], 0, store.path())
        .extra(&format!(
            "metricsPromExporterHost=127.0.0.1\nmetricsPromExporterPort={port}\n"
        ))
        .to_string();
    // Java's default, DISABLE: no HTTP port, as with Java's OTLP and LOG exporters.
    for kind in [
        "",
        "metricsExporterType=DISABLE\n",
        "metricsExporterType=LOG\n",
    ] {
        let out = try_start(&format!("{base}{kind}"));
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(printed.contains("boot success"), "{kind:?}: {printed}");
        assert!(!printed.contains("HTTP"), "{kind:?}: {printed}");
    }
    // Java's enum name, or its ordinal, turns it on.
    for kind in ["PROM", "2"] {
        let out = try_start(&format!("{base}metricsExporterType={kind}\n"));
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            printed.contains(&format!("http://127.0.0.1:{port}/")),
            "{kind}: {printed}"
        );
    }
    for (bad, key) in [
        ("metricsExporterType=PROMETHEUS\n", "metricsExporterType"),
        (
            "metricsExporterType=PROM\nmetricsPromExporterPort=70000\n",
            "metricsPromExporterPort",
        ),
    ] {
        let out = try_start(&format!("{base}{bad}"));
        assert_eq!(out.status.code(), Some(255), "{bad:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(key), "{bad:?}: {said}");
    }
}
