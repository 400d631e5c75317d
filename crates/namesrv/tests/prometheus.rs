//! The dashboard and alert rules of packaging/ against a real Prometheus scraping the real
//! server: every panel query and every rule expression must evaluate on live data, and the
//! broker-expired alert must fire when a broker goes silent.
//!
//! Needs Debian's `prometheus` and `promtool`; without them the test says so and passes,
//! unless `NAMESRV_TEST_REQUIRE_ALL` is set.

mod support;
use support::MQNAMESRV;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use namesrv_testkit::*;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The scrape job name the rules expect (NamesrvDown selects on it).
const JOB: &str = "namesrv";
/// What the test substitutes for Grafana's `$__rate_interval`: wide enough for many 1 s
/// scrapes, short enough that the load of the last seconds shows in every rate.
const RATE_INTERVAL: &str = "30s";
/// The silent broker's heartbeat timeout: how long the firing takes, at the least.
const DOOMED_TIMEOUT_MS: i64 = 4000;

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// Prometheus as a child process, killed when the test ends however it ends.
struct Prometheus {
    child: Child,
    addr: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: &str, rules: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Prometheus cannot listen on port 0, so a port free a moment ago has to do.
        let port = namesrv_testkit::free_port();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {rules}\n\
                 scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n      - targets: ['{target}']\n",
                rules = rules.display()
            ),
        )
        .unwrap();
        let log = dir.path().join("prometheus.log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting prometheus");
        Prometheus {
            child,
            addr: format!("127.0.0.1:{port}"),
            log,
            _dir: dir,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn api(&self, path: &str) -> Value {
        let (status, body) = http_get(&self.addr, path).await;
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {status}, not JSON ({e}): {body}"));
        assert_eq!(json["status"], "success", "GET {path}: {status} {body}");
        json["data"].clone()
    }

    async fn query(&self, expr: &str) -> Value {
        self.api(&format!("/api/v1/query?query={}", url_encode(expr)))
            .await
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A plain HTTP/1.0 GET, so that the answer ends when the connection does (no chunking).
async fn http_get(addr: &str, path: &str) -> (u16, String) {
    try_http_get(addr, path)
        .await
        .unwrap_or_else(|e| panic!("GET {addr}{path}: {e}"))
}

async fn try_http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .unwrap_or_else(|_| panic!("GET {addr}{path} timed out"))?;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Ok((status, body))
}

/// Polls until `check` gives a value, failing with `what` and Prometheus' log after `limit`.
async fn wait_for<T, F, Fut>(prom: &Prometheus, what: &str, limit: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; prometheus log:\n{}",
            prom.log()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every `expr` of every panel (rows nest panels), with its panel's title.
fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
    fn walk(panels: &Value, out: &mut Vec<(String, String)>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            if panel["type"] != "row" {
                assert_eq!(
                    panel["datasource"]["uid"], "${datasource}",
                    "panel {title:?} must use the datasource variable"
                );
            }
            for target in panel["targets"].as_array().into_iter().flatten() {
                let expr = target["expr"].as_str().unwrap_or_else(|| {
                    panic!("panel {title:?} has a target without expr: {target}")
                });
                out.push((title.clone(), expr.to_string()));
            }
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The dashboard's variables as the test sets them: this job, every instance.
fn substitute(expr: &str) -> String {
    let expr = expr
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("${job}", JOB)
        .replace("$job", JOB)
        .replace("${instance}", ".*")
        .replace("$instance", ".*");
    assert!(
        !expr.contains('$'),
        "a template variable the test does not know: {expr}"
    );
    expr
}

/// Alert and record names as written in the rules file, to check Prometheus loaded them all.
fn rule_names_in(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim_start().strip_prefix("- ")?;
            let name = l
                .strip_prefix("alert:")
                .or_else(|| l.strip_prefix("record:"))?;
            Some(name.trim().to_string())
        })
        .collect()
}

/// `promtool check metrics` lints with the classic text-format parser, which reads the
/// OpenMetrics `# HELP x` of a counter as belonging to `x`, not to its sample `x_total`. Those
/// reports are the only ones tolerated, and only for counters whose help is there.
fn check_metrics(scrape: &str) {
    let out = pipe(Command::new("promtool").args(["check", "metrics"]), scrape);
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // 0: clean; 3: lint problems (listed); anything else: the text did not parse.
    assert!(
        matches!(out.status.code(), Some(0 | 3)),
        "promtool check metrics failed ({:?}):\n{report}",
        out.status
    );
    for problem in report.lines().filter(|l| !l.trim().is_empty()) {
        let tolerated = problem
            .strip_suffix(" no help text")
            .and_then(|name| name.strip_suffix("_total"))
            .is_some_and(|family| {
                scrape.contains(&format!("# HELP {family} "))
                    && scrape.contains(&format!("# TYPE {family} counter"))
            });
        assert!(tolerated, "promtool check metrics: {problem}\n{report}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_and_rules_evaluate_on_live_data_and_an_expired_broker_fires() {
    let tools = on_path(&["prometheus"]).zip(on_path(&["promtool"]));
    if needs(
        tools,
        "prometheus and promtool (Debian package `prometheus`)",
    )
    .is_none()
    {
        return;
    }
    let started = Instant::now();
    let rules_path = repo_file("packaging/prometheus/namesrv-rules.yml");
    let rules_text = std::fs::read_to_string(&rules_path).unwrap();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo_file("packaging/grafana/namesrv-dashboard.json")).unwrap(),
    )
    .expect("the dashboard is JSON");

    let checked = Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules_path)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "promtool check rules:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );

    let server = MQNAMESRV.start_with("scanNotActiveBrokerInterval=200");
    let metrics_addr = server
        .http
        .as_deref()
        .expect("the HTTP port is on")
        .trim_start_matches("http://")
        .to_string();
    let prom = Prometheus::start(&metrics_addr, &rules_path);
    wait_for(
        &prom,
        "prometheus ready",
        Duration::from_secs(20),
        || async {
            let ready = try_http_get(&prom.addr, "/-/ready").await;
            ready.is_ok_and(|(status, _)| status == 200).then_some(())
        },
    )
    .await;

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
    wait_for(
        &prom,
        "5 scrapes of the server",
        Duration::from_secs(30),
        || {
            let prom = &prom;
            let samples = samples.clone();
            async move {
                let data = prom.query(&samples).await;
                let count = data["result"][0]["value"][1]
                    .as_str()?
                    .parse::<f64>()
                    .ok()?;
                (count >= 5.0).then_some(())
            }
        },
    )
    .await;
    let loaded_rules: Vec<Value> = wait_for(
        &prom,
        "every rule evaluated",
        Duration::from_secs(10),
        || async {
            let data = prom.api("/api/v1/rules").await;
            let rules: Vec<Value> = data["groups"]
                .as_array()?
                .iter()
                .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
                .collect();
            rules
                .iter()
                .all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
                .then_some(rules)
        },
    )
    .await;

    // Every rule of the file is loaded, and each expression evaluates to a vector (alerts
    // may match nothing while all is well).
    let mut loaded_names: Vec<String> = loaded_rules
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    let mut file_names = rule_names_in(&rules_text);
    loaded_names.sort();
    file_names.sort();
    assert_eq!(
        loaded_names, file_names,
        "rules loaded vs rules in the file"
    );
    for rule in &loaded_rules {
        let (name, expr) = (
            rule["name"].as_str().unwrap(),
            rule["query"].as_str().unwrap(),
        );
        assert_eq!(rule["lastError"].as_str().unwrap_or_default(), "", "{name}");
        let data = prom.query(expr).await;
        assert_eq!(data["resultType"], "vector", "rule {name}: {expr}");
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
    let queries = panel_queries(&dashboard);
    assert!(queries.len() >= 10, "the dashboard has its panels");
    for (title, expr) in &queries {
        let expr = substitute(expr);
        let data = prom.query(&expr).await;
        assert_eq!(data["resultType"], "vector", "panel {title:?}: {expr}");
        let series = data["result"].as_array().unwrap();
        assert!(
            !series.is_empty(),
            "panel {title:?} has no data: {expr}\nscrape:\n{}",
            http_get(&metrics_addr, "/metrics").await.1
        );
        println!("panel {title:?}: {} series", series.len());
    }
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
    let alerts = prom.api("/api/v1/alerts").await;
    assert!(
        !alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["labels"]["alertname"] == "NamesrvBrokerExpired"),
        "fired before any broker expired: {alerts}"
    );
    silence.store(true, Ordering::Relaxed);
    let _doomed_conn = heartbeats
        .await
        .expect("the broker kept registered until silenced");
    let silent_since = Instant::now();
    let firing = wait_for(
        &prom,
        "NamesrvBrokerExpired firing",
        Duration::from_millis(DOOMED_TIMEOUT_MS as u64) + Duration::from_secs(15),
        || async {
            let alerts = prom.api("/api/v1/alerts").await;
            alerts["alerts"]
                .as_array()?
                .iter()
                .find(|a| {
                    a["labels"]["alertname"] == "NamesrvBrokerExpired" && a["state"] == "firing"
                })
                .cloned()
        },
    )
    .await;
    println!(
        "firing {:.1}s after the broker went silent: {firing}",
        silent_since.elapsed().as_secs_f64()
    );
    assert_eq!(firing["labels"]["severity"], "critical");
    assert_eq!(firing["labels"]["job"], JOB);

    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    println!("took {:.1}s", started.elapsed().as_secs_f64());
}
