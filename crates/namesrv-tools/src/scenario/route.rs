//! The route benchmark: register a fleet, keep it re-registering like real brokers, and drive
//! closed-loop route lookups; optionally time the full topic list over the same data.

use std::time::{Duration, Instant};

use rocketmq_wire::body::TopicList;
use rocketmq_wire::client::Client;
use serde_json::json;

use super::{measure, route_load, rss_kib};
use crate::cli::RouteArgs;
use crate::fleet::Fleet;
use crate::stats::{median, Latency};

pub async fn run(args: &RouteArgs) -> anyhow::Result<serde_json::Value> {
    let addr = &args.target.addr;
    let (fleet, registration) = Fleet::register(addr, &args.fleet).await?;
    let rss_registered = rss_kib(args.target.server_pid);
    let reregistration = (args.fleet.reregister_secs > 0)
        .then(|| fleet.reregistration(Duration::from_secs(args.fleet.reregister_secs)));
    let topics = fleet.layout.all_topics();
    let topic_count = topics.len();
    let load = route_load(addr, &args.load, topics);
    let runs = measure(
        &load,
        args.load.warmup_secs,
        args.load.runs,
        args.load.duration_secs,
    )
    .await;
    let topic_list = match args.topic_list_runs {
        0 => serde_json::Value::Null,
        n => topic_list(addr, n, topic_count).await?,
    };
    let rss_loaded = rss_kib(args.target.server_pid);
    let reregistration = reregistration.map(|bg| bg.stop());
    let clean = runs.clean()
        && reregistration
            .as_ref()
            .is_none_or(|r| r.failures.count == 0);
    let out = json!({
        "scenario": "route",
        "layout": fleet.layout,
        "body": format!("{:?}", fleet.form).to_lowercase(),
        "conns": load.conns,
        "depth": load.depth,
        "distinct_topics": topic_count,
        "registration": registration,
        "route": runs,
        "topic_list": topic_list,
        "reregistration": reregistration,
        "server_rss_kib": { "registered": rss_registered, "after_load": rss_loaded },
    });
    anyhow::ensure!(clean || !args.require_clean, "the run was not clean: {out}");
    Ok(out)
}

/// Times GET_ALL_TOPIC_LIST_FROM_NAMESERVER `runs` times on a fresh connection.
async fn topic_list(addr: &str, runs: usize, expected: usize) -> anyhow::Result<serde_json::Value> {
    let client = Client::connect(addr).await?;
    let mut latency = Latency::default();
    let mut millis = Vec::with_capacity(runs);
    let mut listed = 0;
    let mut body_bytes = 0;
    for _ in 0..runs {
        let started = Instant::now();
        let body = crate::fleet::topic_list(&client).await?;
        let elapsed = started.elapsed();
        latency.record(elapsed);
        millis.push(elapsed.as_secs_f64() * 1000.0);
        body_bytes = body.len();
        listed = TopicList::decode(&body)?.topic_list.len();
    }
    Ok(json!({
        "runs_ms": millis,
        "median_ms": median(millis.iter().copied()),
        "latency": latency.summary(),
        "topics_listed": listed,
        "topics_expected_at_least": expected,
        "body_bytes": body_bytes,
    }))
}
