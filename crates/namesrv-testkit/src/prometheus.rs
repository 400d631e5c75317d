//! A real Prometheus scraping the servers under test, and what the dashboard and rules tests
//! ask of it: queries, rules, alerts, and the queries of a Grafana dashboard.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::{free_port, http_get, needs, on_path, pipe, try_http_get};

/// What the tests substitute for Grafana's `$__rate_interval`: wide enough for many 1 s
/// scrapes, short enough that the load of the last seconds shows in every rate.
pub const RATE_INTERVAL: &str = "30s";

/// `Some(())` when `prometheus` and `promtool` are on PATH; otherwise the test skips (or fails
/// when every tool is required).
pub fn prometheus_installed() -> Option<()> {
    let tools = on_path(&["prometheus"]).zip(on_path(&["promtool"]));
    needs(
        tools,
        "prometheus and promtool (Debian package `prometheus`)",
    )
    .map(|_| ())
}

/// A file of this repository, from a crate's manifest directory.
pub fn repo_file(manifest_dir: &str, path: &str) -> PathBuf {
    Path::new(manifest_dir).join("../..").join(path)
}

/// Prometheus as a child process scraping `targets` every second as job `job` and evaluating
/// `rules` every second, killed when the test ends however it ends.
pub struct Prometheus {
    child: Child,
    pub addr: String,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    pub fn start(job: &str, targets: &[String], rules: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        // Prometheus cannot listen on port 0, so a port free a moment ago has to do.
        let port = free_port();
        let config = dir.path().join("prometheus.yml");
        let targets: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 rule_files:\n  - {rules}\n\
                 scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: [{targets}]\n",
                rules = rules.display(),
                targets = targets.join(", ")
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

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until Prometheus answers its readiness probe.
    pub async fn ready(&self) {
        self.wait_for("prometheus ready", Duration::from_secs(20), || async {
            let ready = try_http_get(&self.addr, "/-/ready").await;
            ready.is_ok_and(|(status, _)| status == 200).then_some(())
        })
        .await
    }

    /// The `data` of a successful API answer.
    pub async fn api(&self, path: &str) -> Value {
        let (status, body) = http_get(&self.addr, path).await;
        let json: Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("GET {path}: {status}, not JSON ({e}): {body}"));
        assert_eq!(json["status"], "success", "GET {path}: {status} {body}");
        json["data"].clone()
    }

    /// An instant query's `data`.
    pub async fn query(&self, expr: &str) -> Value {
        self.api(&format!("/api/v1/query?query={}", url_encode(expr)))
            .await
    }

    /// The first number an instant query yields, if any.
    pub async fn value(&self, expr: &str) -> Option<f64> {
        self.query(expr).await["result"][0]["value"][1]
            .as_str()?
            .parse()
            .ok()
    }

    /// Every rule of every loaded group.
    pub async fn rules(&self) -> Vec<Value> {
        let data = self.api("/api/v1/rules").await;
        data["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect()
    }

    /// The rules, once each one is healthy and has been evaluated at least once.
    pub async fn rules_evaluated(&self) -> Vec<Value> {
        self.wait_for("every rule evaluated", Duration::from_secs(10), || async {
            let rules = self.rules().await;
            rules
                .iter()
                .all(|r| r["health"] == "ok" && r["lastEvaluation"] != "0001-01-01T00:00:00Z")
                .then_some(rules)
        })
        .await
    }

    /// The alerts of `name` in state `state` (`pending` or `firing`).
    pub async fn alerts(&self, name: &str, state: &str) -> Vec<Value> {
        let data = self.api("/api/v1/alerts").await;
        data["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["labels"]["alertname"] == name && a["state"] == state)
            .cloned()
            .collect()
    }

    /// Polls until `check` gives a value, failing with `what` and Prometheus' log after `limit`.
    pub async fn wait_for<T, F, Fut>(&self, what: &str, limit: Duration, mut check: F) -> T
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
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Asserts that `prom` loaded exactly the rules named `expected` and that each evaluates
/// without error to a vector (an alert may match nothing while all is well); each rule with
/// what its expression yields now.
pub async fn assert_rules_evaluate(prom: &Prometheus, expected: &[String]) -> Vec<(Value, Value)> {
    let loaded = prom.rules_evaluated().await;
    let mut loaded_names: Vec<String> = loaded
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_string())
        .collect();
    let mut expected = expected.to_vec();
    loaded_names.sort();
    expected.sort();
    assert_eq!(loaded_names, expected, "rules loaded vs rules in the file");
    let mut evaluated = Vec::with_capacity(loaded.len());
    for rule in loaded {
        let (name, expr) = (
            rule["name"].as_str().unwrap(),
            rule["query"].as_str().unwrap(),
        );
        assert_eq!(rule["lastError"].as_str().unwrap_or_default(), "", "{name}");
        let data = prom.query(expr).await;
        assert_eq!(data["resultType"], "vector", "rule {name}: {expr}");
        evaluated.push((rule, data));
    }
    evaluated
}

/// Asserts that `dashboard` has at least `min` panel queries and that each returns a series on
/// `prom`, whose scrape job is `job`; a failure shows the scrape of the target `scraped`.
pub async fn assert_panels_have_data(
    prom: &Prometheus,
    dashboard: &Value,
    job: &str,
    min: usize,
    scraped: &str,
) {
    let queries = panel_queries(dashboard);
    assert!(queries.len() >= min, "the dashboard has its panels");
    for (title, expr) in &queries {
        let expr = substitute(expr, job);
        let data = prom.query(&expr).await;
        assert_eq!(data["resultType"], "vector", "panel {title:?}: {expr}");
        let series = data["result"].as_array().unwrap();
        assert!(
            !series.is_empty(),
            "panel {title:?} has no data: {expr}\nscrape:\n{}",
            http_get(scraped, "/metrics").await.1
        );
        println!("panel {title:?}: {} series", series.len());
    }
}

/// Every `expr` of every panel of a Grafana dashboard (rows nest panels), with its panel's
/// title; every panel must use the dashboard's `datasource` variable.
pub fn panel_queries(dashboard: &Value) -> Vec<(String, String)> {
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

/// A dashboard query with its variables as the tests set them: job `job`, every instance.
pub fn substitute(expr: &str, job: &str) -> String {
    let expr = expr
        .replace("$__rate_interval", RATE_INTERVAL)
        .replace("${job}", job)
        .replace("$job", job)
        .replace("${instance}", ".*")
        .replace("$instance", ".*");
    assert!(
        !expr.contains('$'),
        "a template variable the test does not know: {expr}"
    );
    expr
}

/// Alert and record names as written in a rules file, to check Prometheus loaded them all.
pub fn rule_names_in(text: &str) -> Vec<String> {
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

/// `promtool check rules` on `path`, which must pass.
pub fn check_rules(path: &Path) {
    let checked = Command::new("promtool")
        .args(["check", "rules"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "promtool check rules:\n{}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

/// `promtool check metrics` lints with the classic text-format parser, which reads the
/// OpenMetrics `# HELP x` of a counter as belonging to `x`, not to its sample `x_total`. Those
/// reports are the only ones tolerated, and only for counters whose help is there.
pub fn check_metrics(scrape: &str) {
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
