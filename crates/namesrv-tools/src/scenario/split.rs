//! A split registration round: one 5.x broker with a large topic table and
//! `enableSplitRegistration`, registering it in chunks of `splitRegistrationSize` topics one after
//! another on its connection, every chunk at the table's one data version, then a last chunk with
//! the remainder (empty when the table divides evenly), as the broker does every period. Route
//! lookups over the broker's topics run through the rounds.
//!
//! Timed: the first round on a NameServer that has never seen the broker (every topic new), then
//! the periodic rounds sent back to back for the lookups' window (the table unchanged: a 5.x broker
//! sends a changed topic alone first, so its periodic rounds repeat what the NameServer holds),
//! each from its first chunk sent to its last answered. Then the same lookups once the broker is
//! quiet, for the p99 ratio, and a check that every topic is listed and routed.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rocketmq_wire::body::TopicRouteData;
use rocketmq_wire::client::Client;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde_json::{json, Value};

use super::{lookups_summary, route_load};
use crate::broker_body;
use crate::cli::{BodyForm, SplitArgs};
use crate::fleet::{fresh_data_version, topic_count, Layout, Member};
use crate::route_load::RouteRun;
use crate::stats::{median, Latency};

/// Topics whose routes are checked once the rounds are over, spread over the table.
const SAMPLE: usize = 200;

pub async fn run(args: &SplitArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(args.chunk > 0, "--chunk must be at least 1");
    let addr = &args.target.addr;
    let topics: Vec<String> = (0..args.topics).map(|i| Layout::topic(0, i)).collect();
    let chunks = chunk_bodies(&topics, args.queues, args.chunk);
    let broker = Member::new(0, 0, Client::connect(addr).await?);
    let load = route_load(addr, &args.load, topics.clone());
    let window = Duration::from_secs_f64(args.window_secs);

    // The first round, lookups from its start (answers for topics not registered yet are
    // counted apart from failures).
    let during_first = tokio::spawn({
        let load = route_load(addr, &args.load, topics.clone());
        async move { load.run(window).await }
    });
    let first = round(&broker, &chunks).await?;
    let first_lookups = during_first.await?;
    anyhow::ensure!(
        first.seconds < args.window_secs,
        "the first round took {:.1} s, longer than the {} s the lookups ran",
        first.seconds,
        args.window_secs
    );
    let listed = topic_count(&Client::connect(addr).await?).await?;
    anyhow::ensure!(
        listed >= topics.len(),
        "after the first round {listed} of {} topics are listed",
        topics.len()
    );

    // Periodic rounds, back to back while the lookups run.
    let during = tokio::spawn(async move {
        let run = load.run(window).await;
        (load, run)
    });
    let began = Instant::now();
    let mut periodic = Vec::new();
    while periodic.is_empty() || began.elapsed() < window {
        periodic.push(round(&broker, &chunks).await?);
    }
    let (load, rounds_lookups) = during.await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = load.run(window).await;
    check_routes(addr, &topics, args.queues).await?;

    let seconds: Vec<f64> = periodic.iter().map(|r| r.seconds).collect();
    let mut chunk_latency = Latency::default();
    periodic
        .iter()
        .for_each(|r| chunk_latency.add(&r.chunk_latency));
    let p99 = |run: &RouteRun| run.latency.p99_ms;
    Ok(json!({
        "scenario": "split",
        "topics": topics.len(),
        "chunk": args.chunk,
        "registrations_a_round": chunks.len(),
        "body_bytes_a_round": chunks.iter().map(Bytes::len).sum::<usize>(),
        "first_round": {
            "seconds": first.seconds,
            "chunk_latency": first.chunk_latency.summary(),
            "lookups": lookups_summary(&first_lookups),
        },
        "periodic_rounds": {
            "rounds": periodic.len(),
            "seconds": seconds,
            "median_seconds": median(seconds.iter().copied()),
            "chunk_latency": chunk_latency.summary(),
            "lookups": lookups_summary(&rounds_lookups),
        },
        "idle_lookups": lookups_summary(&idle),
        "p99_first_round_over_idle": p99(&first_lookups) / p99(&idle).max(f64::MIN_POSITIVE),
        "p99_periodic_rounds_over_idle": p99(&rounds_lookups) / p99(&idle).max(f64::MIN_POSITIVE),
    }))
}

/// The bodies of one round: full chunks of `chunk` topics, then the rest (possibly none), all at
/// one data version.
fn chunk_bodies(topics: &[String], queues: i32, chunk: usize) -> Vec<Bytes> {
    let version = fresh_data_version(1);
    let table: Vec<(&str, i32)> = topics.iter().map(|t| (t.as_str(), queues)).collect();
    let full = table.len() / chunk;
    let mut bodies: Vec<Bytes> = table
        .chunks(chunk)
        .take(full)
        .map(|part| broker_body::encode_table(part, version, BodyForm::Json))
        .collect();
    bodies.push(broker_body::encode_table(
        &table[full * chunk..],
        version,
        BodyForm::Json,
    ));
    bodies
}

struct Round {
    seconds: f64,
    chunk_latency: Latency,
}

/// One round: every chunk, each sent once the one before was answered.
async fn round(broker: &Member, chunks: &[Bytes]) -> anyhow::Result<Round> {
    let started = Instant::now();
    let mut chunk_latency = Latency::default();
    for body in chunks {
        chunk_latency.record(broker.register(body, BodyForm::Json).await?);
    }
    Ok(Round {
        seconds: started.elapsed().as_secs_f64(),
        chunk_latency,
    })
}

/// Every sampled topic routed to the broker with its queues.
async fn check_routes(addr: &str, topics: &[String], queues: i32) -> anyhow::Result<()> {
    let client = Client::connect(addr).await?;
    let step = (topics.len() / SAMPLE).max(1);
    for topic in topics.iter().step_by(step) {
        let ask = GetRouteInfoHeader::new(topic).to_command();
        let resp = client.invoke(ask, Duration::from_secs(5)).await?;
        let route = resp
            .body
            .as_deref()
            .and_then(|b| TopicRouteData::decode(b).ok());
        let routed = route.is_some_and(|r| {
            r.broker_datas.len() == 1
                && r.queue_datas.first().map(|q| q.read_queue_nums) == Some(queues)
        });
        anyhow::ensure!(
            routed,
            "{topic} is not routed to the broker with {queues} queues"
        );
    }
    Ok(())
}
