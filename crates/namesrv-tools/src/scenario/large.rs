//! A large table (a million topics): once a fleet has registered, the first topic lists a console
//! asks for, the status page and the metrics, route lookups, how far the route snapshot falls
//! behind a change, and the server's memory. Run at a small size too, the same server's figures
//! give the ratios the report shows.

use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use futures::{StreamExt, TryStreamExt};
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Value};

use super::{http_get, measure, metric, route_load, rss_kib, timed_topic_list, LIST_TIMEOUT};
use crate::cli::LargeArgs;
use crate::fleet::{expect_success, Fleet, CLUSTER};
use crate::stats::median;

/// How long a change may take to reach the snapshot before the run gives up on it.
const SNAPSHOT_LIMIT: Duration = Duration::from_secs(120);

pub async fn run(args: &LargeArgs) -> anyhow::Result<Value> {
    let addr = &args.target.addr;
    let (fleet, registration) = Fleet::register(addr, &args.fleet).await?;
    let rss_registered = rss_kib(args.target.server_pid);
    // As a console asks once the fleet is up, not in the middle of its registrations.
    tokio::time::sleep(Duration::from_secs_f64(args.settle_secs)).await;
    let client = Client::connect(addr.as_str()).await?;
    let all = timed_topic_list(&client, args.list_runs, || {
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    })
    .await?;
    let by_cluster = timed_topic_list(&client, args.list_runs, || {
        RemotingCommand::request(request::GET_TOPICS_BY_CLUSTER).with_ext("cluster", CLUSTER)
    })
    .await?;
    let http = match &args.http {
        Some(http) => {
            let mut pages = serde_json::Map::new();
            for path in ["/", "/status.json", "/metrics"] {
                pages.insert(path.into(), timed_page(http, path, args.list_runs).await?);
            }
            Value::Object(pages)
        }
        None => Value::Null,
    };

    let topics = fleet.layout.all_topics();
    let topic_count = topics.len();
    // Clients ask each topic they use every 30 s, so a server's cache holds every route in use
    // soon after it starts: the measured runs begin once every topic was asked for, and this
    // first pass is how fast the routes of a cold cache are served.
    let cold = cold_pass(addr, &topics).await?;
    let load = route_load(addr, &args.load, topics);
    let runs = measure(&load, &args.load).await;
    let snapshot = match &args.snapshot {
        Some(path) => snapshot_lag(&fleet, path, args.snapshot_changes).await?,
        None => Value::Null,
    };
    let save_seconds = match &args.http {
        Some(http) => metric(http, "namesrv_route_snapshot_save_seconds").await?,
        None => None,
    };
    let rss_loaded = rss_kib(args.target.server_pid);
    Ok(json!({
        "snapshot_save_seconds": save_seconds,
        "scenario": "large",
        "layout": fleet.layout,
        "body": format!("{:?}", fleet.form).to_lowercase(),
        "distinct_topics": topic_count,
        "registration": registration,
        "topic_list": all,
        "topics_by_cluster": by_cluster,
        "http": http,
        "cold_pass": cold,
        "route": runs,
        "snapshot": snapshot,
        "server_rss_kib": { "registered": rss_registered, "after_load": rss_loaded },
    }))
}

/// Every topic's route asked for once, in order, on a few connections with many requests in
/// flight on each.
async fn cold_pass(addr: &str, topics: &[String]) -> anyhow::Result<Value> {
    const CONNS: usize = 4;
    const IN_FLIGHT: usize = 32;
    let started = Instant::now();
    let chunk = topics.len().div_ceil(CONNS).max(1);
    let passes = topics.chunks(chunk).map(|slice| async move {
        let client = Client::connect(addr).await?;
        let client = &client;
        futures::stream::iter(slice)
            .map(|topic| async move {
                let ask = GetRouteInfoHeader::new(topic).to_command();
                let resp = client.invoke(ask, LIST_TIMEOUT).await?;
                expect_success(resp, "a route of the cold pass")
            })
            .buffer_unordered(IN_FLIGHT)
            .try_collect::<()>()
            .await
    });
    futures::future::try_join_all(passes).await?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(json!({ "seconds": seconds, "qps": topics.len() as f64 / seconds }))
}

/// GETs `path` `runs` times, each on a connection of its own read to its end.
async fn timed_page(http: &str, path: &str, runs: usize) -> anyhow::Result<Value> {
    let mut millis = Vec::with_capacity(runs);
    let mut bytes = 0;
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        bytes = http_get(http, path).await?.len();
        millis.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(json!({
        "first_ms": millis[0],
        "median_ms": median(millis.iter().copied()),
        "runs_ms": millis,
        "bytes": bytes,
    }))
}

/// `changes` times, one after the other: a topic is created, and the time until the snapshot
/// file is written after the change was answered. The first change after a save waits longest.
async fn snapshot_lag(fleet: &Fleet, path: &Path, changes: usize) -> anyhow::Result<Value> {
    let mut lags = Vec::with_capacity(changes);
    for _ in 0..changes.max(1) {
        let topic = fleet.create_topic().await?;
        let answered = SystemTime::now();
        let started = Instant::now();
        loop {
            anyhow::ensure!(
                started.elapsed() < SNAPSHOT_LIMIT,
                "{topic} was not in the snapshot within {SNAPSHOT_LIMIT:?}"
            );
            let written = std::fs::metadata(path).and_then(|m| m.modified());
            if written.is_ok_and(|at| at > answered) && holds(path, &topic) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        lags.push(started.elapsed().as_secs_f64());
    }
    let worst = lags.iter().copied().fold(0.0, f64::max);
    Ok(json!({ "lags_secs": lags, "max_secs": worst, "bytes": std::fs::metadata(path)?.len() }))
}

/// Whether the snapshot at `path` names `topic` (read whole: it is written atomically).
fn holds(path: &Path, topic: &str) -> bool {
    let needle = format!("\"{topic}\"");
    std::fs::read(path).is_ok_and(|bytes| memchr::memmem::find(&bytes, needle.as_bytes()).is_some())
}
