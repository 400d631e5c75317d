//! A registration storm: a NameServer with no routes (restarted without a snapshot, or new) that
//! every broker of a large fleet registers with in the same second, as they do when it comes back
//! and their connections to it are new. Route lookups run through the storm; then the time from
//! the last registration answered until every route is complete, and the same lookups once the
//! fleet is quiet, for the p99 ratio.

use std::time::{Duration, Instant};

use rocketmq_wire::body::TopicRouteData;
use rocketmq_wire::client::Client;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde_json::{json, Value};

use super::{lookups_summary, route_load};
use crate::cli::StormArgs;
use crate::fleet::{cluster_members, topic_count, Fleet};

/// How long the routes may take to be complete before the run gives up.
const LIMIT: Duration = Duration::from_secs(120);
/// Topics whose routes are checked whole, spread over the fleet's.
const SAMPLE: usize = 200;

pub async fn run(args: &StormArgs) -> anyhow::Result<Value> {
    let addr = &args.target.addr;
    let mut fleet_args = args.fleet.clone();
    // Every member at once: the storm.
    fleet_args.register_concurrency = fleet_args.brokers * if fleet_args.slaves { 2 } else { 1 };
    let layout = crate::fleet::Layout::from_args(&fleet_args);
    let topics = layout.all_topics();
    let load = route_load(addr, &args.load, topics.clone());
    let window = Duration::from_secs_f64(args.window_secs);
    // The lookups start with the storm and outlast it; answers for topics not registered yet
    // are counted apart from failures.
    let during = tokio::spawn(async move {
        let run = load.run(window).await;
        (load, run)
    });
    let began = Instant::now();
    let (fleet, registration) = Fleet::register(addr, &fleet_args).await?;
    let registered = began.elapsed();
    let complete_after = complete(addr, &fleet, &topics).await?;
    let (load, storm) = during.await?;
    anyhow::ensure!(
        registration.seconds < args.window_secs,
        "the storm took {:.1} s, longer than the {} s the lookups ran",
        registration.seconds,
        args.window_secs
    );
    // The fleet quiet, every route complete: the same lookups again.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = load.run(window).await;
    let storm_p99 = storm.latency.p99_ms;
    let idle_p99 = idle.latency.p99_ms;
    Ok(json!({
        "scenario": "storm",
        "layout": fleet.layout,
        "body": format!("{:?}", fleet.form).to_lowercase(),
        "distinct_topics": topics.len(),
        "registration": registration,
        "complete_after_last_registration_ms": complete_after.as_secs_f64() * 1000.0,
        "complete_after_storm_began_ms": (registered + complete_after).as_secs_f64() * 1000.0,
        "storm_lookups": lookups_summary(&storm),
        "idle_lookups": lookups_summary(&idle),
        "p99_storm_over_idle": storm_p99 / idle_p99.max(f64::MIN_POSITIVE),
    }))
}

/// How long after the last registration was answered every route was complete: every broker in
/// the cluster table, every topic listed, and the sampled topics' routes naming all their brokers.
async fn complete(addr: &str, fleet: &Fleet, topics: &[String]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let client = Client::connect(addr).await?;
    let members = fleet.layout.members();
    let sample = fleet.layout.sample_routes(SAMPLE);
    loop {
        let mut missing = None;
        let listed = cluster_members(&client).await?;
        if listed != members {
            missing = Some(format!("{listed} of {members} brokers"));
        }
        if missing.is_none() {
            let n = topic_count(&client).await?;
            if n < topics.len() {
                missing = Some(format!("{n} of {} topics", topics.len()));
            }
        }
        if missing.is_none() {
            for (topic, want) in &sample {
                let ask = GetRouteInfoHeader::new(topic).to_command();
                let resp = client.invoke(ask, Duration::from_secs(5)).await?;
                let brokers = resp
                    .body
                    .as_deref()
                    .and_then(|b| TopicRouteData::decode(b).ok())
                    .map_or(0, |r| r.broker_datas.len());
                if brokers != *want {
                    missing = Some(format!("{topic}: {brokers} of {want} brokers"));
                    break;
                }
            }
        }
        match missing {
            None => return Ok(started.elapsed()),
            Some(why) => anyhow::ensure!(started.elapsed() < LIMIT, "never complete: {why}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
