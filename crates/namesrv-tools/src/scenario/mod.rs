//! One module per measurement; each returns the JSON document `scripts/bench` keeps.

pub mod agreement;
pub mod consensus;
pub mod kv_stream;
pub mod kv_writes;
pub mod large;
pub mod mixed;
pub mod refill;
pub mod register;
pub mod restarts;
pub mod rounds;
pub mod route;
pub mod split;
pub mod startup;
pub mod storm;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::cli::LoadArgs;
use crate::route_load::{RouteLoad, RouteRun};
use crate::server_proc;
use crate::stats::median;

/// Measured runs and their medians; latencies only over runs that got answers.
#[derive(Debug, Serialize)]
pub struct Runs {
    pub median_qps: f64,
    pub median_p50_ms: Option<f64>,
    pub median_p99_ms: Option<f64>,
    pub median_p999_ms: Option<f64>,
    pub failures: u64,
    pub runs: Vec<RouteRun>,
}

impl Runs {
    fn of(runs: Vec<RouteRun>) -> Self {
        let answered =
            |f: fn(&RouteRun) -> f64| median(runs.iter().filter(|r| r.requests > 0).map(f));
        Runs {
            median_qps: median(runs.iter().map(|r| r.qps)).unwrap_or(0.0),
            median_p50_ms: answered(|r| r.latency.p50_ms),
            median_p99_ms: answered(|r| r.latency.p99_ms),
            median_p999_ms: answered(|r| r.latency.p999_ms),
            failures: runs.iter().map(|r| r.failures.count).sum(),
            runs,
        }
    }

    /// Clean = every run answered something and nothing failed.
    pub fn clean(&self) -> bool {
        self.failures == 0 && self.runs.iter().all(|r| r.requests > 0)
    }
}

pub fn route_load(addr: &str, load: &LoadArgs, topics: Vec<String>) -> RouteLoad {
    RouteLoad {
        addr: addr.to_string(),
        conns: load.conns.max(1),
        depth: load.depth.max(1),
        topics: Arc::new(topics),
    }
}

/// Warms up, then measures the runs `args` asks for.
pub async fn measure(load: &RouteLoad, args: &LoadArgs) -> Runs {
    measure_runs(load, args.warmup_secs, args.runs, args.duration_secs).await
}

/// Warms up, then measures `runs` runs of `secs` each.
pub async fn measure_runs(load: &RouteLoad, warmup_secs: f64, runs: usize, secs: f64) -> Runs {
    if warmup_secs > 0.0 {
        load.run(Duration::from_secs_f64(warmup_secs)).await;
    }
    let mut measured = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        measured.push(load.run(Duration::from_secs_f64(secs)).await);
    }
    Runs::of(measured)
}

/// A run's figures, with the answers that only said the topic was not registered yet apart.
pub fn lookups_summary(run: &RouteRun) -> serde_json::Value {
    serde_json::json!({
        "requests": run.requests,
        "qps": run.qps,
        "latency": run.latency,
        "not_registered_yet": run.not_found,
        "failed": run.failures.count - run.not_found,
        "failures": run.failures,
    })
}

/// GET `path` at `http` (HTTP/1.0, so that the server closes), read to its end; anything but 200
/// is an error.
pub async fn http_get(http: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(http).await?;
    let ask = format!("GET {path} HTTP/1.0\r\nHost: bench\r\n\r\n");
    stream.write_all(ask.as_bytes()).await?;
    let mut answer = Vec::new();
    tokio::time::timeout(LIST_TIMEOUT, stream.read_to_end(&mut answer)).await??;
    anyhow::ensure!(
        answer.starts_with(b"HTTP/1.0 200") || answer.starts_with(b"HTTP/1.1 200"),
        "GET {path}: {}",
        String::from_utf8_lossy(&answer[..answer.len().min(80)])
    );
    Ok(answer)
}

/// The value of the sample `name` (without labels) in a metrics text.
pub fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (sample, value) = line.split_once(' ')?;
        (sample == name)
            .then(|| value.trim().parse().ok())
            .flatten()
    })
}

/// A sample's value from the server's metrics.
pub async fn metric(http: &str, name: &str) -> anyhow::Result<Option<f64>> {
    let text = http_get(http, "/metrics").await?;
    Ok(sample(&String::from_utf8_lossy(&text), name))
}

pub fn rss_kib(pid: Option<u32>) -> Option<u64> {
    pid.and_then(server_proc::rss_kib)
}

/// A list of a million topics is 25 MB: far longer than a route's answer may take.
pub const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// Asks a topic list (`ask`) `runs` times on `client`: the first answer's time, the median and
/// each run's, their latency summary, and what the last listed.
pub async fn timed_topic_list(
    client: &rocketmq_wire::client::Client,
    runs: usize,
    ask: impl Fn() -> rocketmq_wire::RemotingCommand,
) -> anyhow::Result<serde_json::Value> {
    let mut latency = crate::stats::Latency::default();
    let mut millis = Vec::with_capacity(runs);
    let mut listed = 0;
    let mut body_bytes = 0;
    for _ in 0..runs.max(1) {
        let started = std::time::Instant::now();
        let resp = client.invoke(ask(), LIST_TIMEOUT).await?;
        let elapsed = started.elapsed();
        let body = resp.body.clone().unwrap_or_default();
        crate::fleet::expect_success(resp, "a topic list")?;
        latency.record(elapsed);
        millis.push(elapsed.as_secs_f64() * 1000.0);
        body_bytes = body.len();
        listed = rocketmq_wire::body::TopicList::decode(&body)?
            .topic_list
            .len();
    }
    Ok(serde_json::json!({
        "first_ms": millis[0],
        "median_ms": median(millis.iter().copied()),
        "runs_ms": millis,
        "latency": latency.summary(),
        "topics_listed": listed,
        "body_bytes": body_bytes,
    }))
}
