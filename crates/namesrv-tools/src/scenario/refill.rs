//! Restart to a complete table: NameServers that agree hold a fleet (registered with the first
//! of them only); another one of the group starts with no routes of its own, and is timed from
//! its start until its `/readyz` answers 200. Its table must then be complete: every broker
//! listed, every topic listed, and a sample of routes as the first peer answers them.

use std::time::{Duration, Instant};

use anyhow::Context;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::response;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::startup::{spawn, wait_port_free};
use crate::cli::RefillArgs;
use crate::fleet::{cluster_members, topic_count, Fleet};
use crate::stats::median;

const LIMIT: Duration = Duration::from_secs(120);
const POLL_EVERY: Duration = Duration::from_millis(2);
const TIMEOUT: Duration = Duration::from_secs(30);

pub async fn run(args: &RefillArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(!args.peers.is_empty(), "no peers");
    let (fleet, registration) = Fleet::register(&args.peers[0], &args.fleet).await?;
    // Kept alive as real brokers are, for as long as the runs take.
    let alive = (args.fleet.reregister_secs > 0)
        .then(|| fleet.reregistration(Duration::from_secs(args.fleet.reregister_secs)));
    let reference = Client::connect(&args.peers[0]).await?;
    let expected = Expected {
        brokers: fleet.layout.members(),
        sample: sample(&fleet.layout.all_topics(), args.sample),
    };
    let began = Instant::now();
    for peer in &args.peers[1..] {
        let client = Client::connect(peer).await?;
        loop {
            match differences(&client, &reference, &expected).await? {
                None => break,
                Some(why) if began.elapsed() > LIMIT => {
                    anyhow::bail!("peer {peer} did not take the fleet over: {why}")
                }
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }
    let peers_took_ms = began.elapsed().as_secs_f64() * 1000.0;

    let mut ready_ms = Vec::new();
    let mut complete_ms = Vec::new();
    let mut incomplete_at_ready = Vec::new();
    for _ in 0..args.runs.max(1) {
        wait_port_free(&args.addr).await?;
        let started = Instant::now();
        let mut child = spawn(&args.command, &args.log)?;
        let outcome = async {
            let ready = wait_ready(&args.http, &mut child, started).await?;
            let client = Client::connect(&args.addr).await?;
            let mut missing = differences(&client, &reference, &expected).await?;
            if let Some(why) = &missing {
                incomplete_at_ready.push(why.clone());
            }
            while let Some(why) = missing {
                anyhow::ensure!(started.elapsed() < LIMIT, "never complete: {why}");
                tokio::time::sleep(Duration::from_millis(10)).await;
                missing = differences(&client, &reference, &expected).await?;
            }
            anyhow::Ok((ready, started.elapsed()))
        }
        .await;
        let _ = child.kill();
        let _ = child.wait();
        let (ready, complete) = outcome?;
        ready_ms.push(ready.as_secs_f64() * 1000.0);
        complete_ms.push(complete.as_secs_f64() * 1000.0);
    }
    let reregistration = alive.map(|bg| bg.stop());
    Ok(json!({
        "scenario": "refill",
        "layout": fleet.layout,
        "registration": registration,
        "peers_took_over_ms": peers_took_ms,
        "ready_ms": ready_ms,
        "median_ready_ms": median(ready_ms.iter().copied()),
        "complete_ms": complete_ms,
        "incomplete_at_ready": incomplete_at_ready,
        "reregistration": reregistration,
    }))
}

/// What a complete table holds.
struct Expected {
    brokers: usize,
    sample: Vec<String>,
}

/// `n` topics spread evenly over `all`, the first and last included.
fn sample(all: &[String], n: usize) -> Vec<String> {
    if all.len() <= n || n < 2 {
        return all.iter().take(n.max(1)).cloned().collect();
    }
    (0..n)
        .map(|i| all[i * (all.len() - 1) / (n - 1)].clone())
        .collect()
}

/// How `client`'s table differs from `reference`'s, if it does.
async fn differences(
    client: &Client,
    reference: &Client,
    expected: &Expected,
) -> anyhow::Result<Option<String>> {
    let brokers = cluster_members(client).await?;
    if brokers != expected.brokers {
        return Ok(Some(format!("{brokers} of {} brokers", expected.brokers)));
    }
    // Asked all at once: the check's own time is counted in the time to a complete table.
    let (mine, theirs) = tokio::try_join!(topic_count(client), topic_count(reference))?;
    if mine != theirs {
        return Ok(Some(format!("{mine} of {theirs} topics")));
    }
    let routes = expected.sample.iter().map(|topic| async move {
        let (mine, theirs) = tokio::try_join!(route(client, topic), route(reference, topic))?;
        anyhow::Ok((mine != theirs).then(|| format!("the route of {topic} differs")))
    });
    let differing = futures::future::try_join_all(routes).await?;
    Ok(differing.into_iter().flatten().next())
}

/// `topic`'s route with its lists in broker-name order (`None`: not routed).
async fn route(client: &Client, topic: &str) -> anyhow::Result<Option<Value>> {
    let answer = client
        .invoke(GetRouteInfoHeader::new(topic).to_command(), TIMEOUT)
        .await?;
    if answer.code != response::SUCCESS {
        return Ok(None);
    }
    let mut route: Value = serde_json::from_slice(answer.body.as_deref().unwrap_or_default())
        .context("a route that is not JSON")?;
    for list in ["brokerDatas", "queueDatas"] {
        if let Some(items) = route[list].as_array_mut() {
            items.sort_by(|a, b| a["brokerName"].as_str().cmp(&b["brokerName"].as_str()));
        }
    }
    Ok(Some(route))
}

/// Polls `http`'s /readyz until it answers 200.
async fn wait_ready(
    http: &str,
    child: &mut std::process::Child,
    started: Instant,
) -> anyhow::Result<Duration> {
    while started.elapsed() < LIMIT {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the server exited before it was ready: {status}");
        }
        if ready(http).await {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    anyhow::bail!("not ready within {LIMIT:?}")
}

/// Whether `GET /readyz` at `http` answers 200.
async fn ready(http: &str) -> bool {
    let ask = async {
        let mut stream = TcpStream::connect(http).await?;
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            .await?;
        let mut status = [0u8; 12];
        stream.read_exact(&mut status).await?;
        std::io::Result::Ok(status.ends_with(b" 200"))
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Ok(true))
    )
}
