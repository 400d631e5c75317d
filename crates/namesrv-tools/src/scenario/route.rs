//! The route benchmark: register a fleet, keep it re-registering like real brokers, and drive
//! closed-loop route lookups; optionally time the full topic list over the same data.

use std::time::Duration;

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;
use serde_json::json;

use super::{measure, route_load, rss_kib, timed_topic_list};
use crate::cli::RouteArgs;
use crate::fleet::Fleet;

pub async fn run(args: &RouteArgs) -> anyhow::Result<serde_json::Value> {
    let addr = &args.target.addr;
    let (fleet, registration) = Fleet::register(addr, &args.fleet).await?;
    let rss_registered = rss_kib(args.target.server_pid);
    let reregistration = (args.fleet.reregister_secs > 0)
        .then(|| fleet.reregistration(Duration::from_secs(args.fleet.reregister_secs)));
    let topics = fleet.layout.all_topics();
    let topic_count = topics.len();
    let load = route_load(addr, &args.load, topics);
    let runs = measure(&load, &args.load).await;
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
    let mut timed = timed_topic_list(&client, runs, || {
        RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    })
    .await?;
    timed["topics_expected_at_least"] = json!(expected);
    Ok(timed)
}
