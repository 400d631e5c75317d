//! Consensus under a registration storm: NameServers that agree (their KV group, and the
//! controller each embeds) while a large fleet registers with every one of them at once, as
//! brokers that list every NameServer do when the fleet starts, and an admin client writes a KV
//! entry every few milliseconds through one of them. Every member's /metrics is read every
//! 100 ms for each group's term and quorum contact age: a term that moves is an election, and a
//! contact age that reaches the lease (0.75 s) is a leader about to lose its office or a follower
//! about to stand.
//!
//! Figures: each group's term changes and longest contact age, the KV writes' latency (p99, max)
//! and failures, and how long each NameServer took to answer the whole fleet.

use std::time::{Duration, Instant};

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use serde::Serialize;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{http_get, sample};
use crate::cli::ConsensusArgs;
use crate::fleet::{Fleet, Prepared};
use crate::stats::{Failures, Latency};

/// The groups whose series are read, by their metrics prefix.
const GROUPS: [(&str, &str); 2] = [
    ("kv", "namesrv_peers_kv"),
    ("controller", "namesrv_controller"),
];
const POLL_EVERY: Duration = Duration::from_millis(100);
/// A KV write's deadline: beyond the server's own bound on a write, so a refusal is an answer.
const WRITE_TIMEOUT: Duration = Duration::from_secs(15);

pub async fn run(args: &ConsensusArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(
        !args.addrs.is_empty() && args.addrs.len() == args.http.len(),
        "give every NameServer's remoting address and its HTTP address, in the same order"
    );
    anyhow::ensure!(
        args.writer < args.addrs.len(),
        "--writer names no NameServer"
    );
    // Built before the clock starts: the bodies are the generator's work, not the servers'.
    let prepared = Prepared::new(&args.fleet);
    let before = read_all(&args.http).await?;
    for (group, _) in GROUPS {
        anyhow::ensure!(
            before.iter().all(|m| m.term.contains_key(group)),
            "a NameServer has no {group} group: run them with namesrvPeers and the embedded controller"
        );
    }
    let stop = CancellationToken::new();
    let poller = tokio::spawn(poll(args.http.clone(), stop.clone()));
    let writer = tokio::spawn(write_every(
        args.addrs[args.writer].clone(),
        Duration::from_millis(args.write_every_ms.max(1)),
        stop.clone(),
    ));
    tokio::time::sleep(Duration::from_secs_f64(args.lead_in_secs)).await;

    let began = Instant::now();
    let registered =
        futures::future::try_join_all(args.addrs.iter().map(|addr| {
            Fleet::register_prepared(addr, &prepared, args.fleet.register_concurrency)
        }))
        .await?;
    let storm_secs = began.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs_f64(args.after_secs)).await;
    stop.cancel();
    let polled = poller.await?;
    let writes = writer.await?;
    let after = read_all(&args.http).await?;

    let mut groups = serde_json::Map::new();
    for (group, _) in GROUPS {
        let term = |members: &[Member]| {
            members
                .iter()
                .filter_map(|m| m.term.get(group))
                .max()
                .copied()
        };
        let (first, last) = (term(&before), term(&after));
        let longest = polled
            .contact_age
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, age)| *age)
            .fold(0.0, f64::max);
        groups.insert(
            group.to_string(),
            json!({
                "term_before": first,
                "term_after": last,
                "term_changes": last.zip(first).map(|(l, f)| l.saturating_sub(f)),
                "longest_contact_age_s": longest,
            }),
        );
    }
    Ok(json!({
        "scenario": "consensus",
        "layout": prepared.layout(),
        "nameservers": args.addrs.len(),
        "registration": registered.iter().map(|(_, report)| report).collect::<Vec<_>>(),
        "storm_seconds": storm_secs,
        "groups": groups,
        "polls": polled.polls,
        "poll_failures": polled.failures,
        "kv_writes": writes,
    }))
}

/// One member's terms and contact ages, by group.
#[derive(Default)]
struct Member {
    term: std::collections::BTreeMap<&'static str, u64>,
    contact_age: std::collections::BTreeMap<&'static str, f64>,
}

async fn read(http: &str) -> anyhow::Result<Member> {
    let text = http_get(http, "/metrics").await?;
    let text = String::from_utf8_lossy(&text);
    let mut member = Member::default();
    for (group, prefix) in GROUPS {
        if let Some(term) = sample(&text, &format!("{prefix}_term")) {
            member.term.insert(group, term as u64);
        }
        if let Some(age) = sample(&text, &format!("{prefix}_quorum_contact_age_seconds")) {
            member.contact_age.insert(group, age);
        }
    }
    Ok(member)
}

async fn read_all(http: &[String]) -> anyhow::Result<Vec<Member>> {
    futures::future::try_join_all(http.iter().map(|h| read(h))).await
}

#[derive(Default)]
struct Polled {
    /// Every contact age read, by group (an unanswered read is a failure, not an age).
    contact_age: Vec<(String, f64)>,
    polls: u64,
    failures: Failures,
}

async fn poll(http: Vec<String>, stop: CancellationToken) -> Polled {
    let mut polled = Polled::default();
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.is_cancelled() {
        tick.tick().await;
        for (h, member) in http
            .iter()
            .zip(futures::future::join_all(http.iter().map(|h| read(h))).await)
        {
            polled.polls += 1;
            match member {
                Ok(m) => polled.contact_age.extend(
                    m.contact_age
                        .into_iter()
                        .filter(|(_, age)| age.is_finite())
                        .map(|(g, age)| (g.to_string(), age)),
                ),
                Err(e) => polled.failures.add(1, format!("{h}: {e}")),
            }
        }
    }
    polled
}

#[derive(Serialize)]
struct Writes {
    acknowledged: u64,
    latency: crate::stats::LatencySummary,
    failures: Failures,
}

/// PUT_KV_CONFIG every `every` through `addr`, each waiting for its answer, until `stop`.
async fn write_every(addr: String, every: Duration, stop: CancellationToken) -> Writes {
    let mut latency = Latency::default();
    let mut failures = Failures::default();
    let mut acknowledged = 0;
    let mut client: Option<Client> = None;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut n = 0u64;
    while !stop.is_cancelled() {
        tick.tick().await;
        if client.is_none() {
            match Client::connect(&addr).await {
                Ok(c) => client = Some(c),
                Err(e) => {
                    failures.add(1, format!("connect: {e}"));
                    continue;
                }
            }
        }
        let Some(c) = &client else { continue };
        n += 1;
        let write = RemotingCommand::request(request::PUT_KV_CONFIG)
            .with_ext("namespace", "NSBENCH_CONSENSUS")
            .with_ext("key", format!("k{}", n % 64))
            .with_ext("value", format!("v{n}"));
        let began = Instant::now();
        match c.invoke(write, WRITE_TIMEOUT).await {
            Ok(a) if a.code == response::SUCCESS => {
                acknowledged += 1;
                latency.record(began.elapsed());
            }
            Ok(a) => failures.add(
                1,
                format!("answered {}: {}", a.code, a.remark.unwrap_or_default()),
            ),
            Err(e) => {
                failures.add(1, e.to_string());
                client = None;
            }
        }
    }
    Writes {
        acknowledged,
        latency: latency.summary(),
        failures,
    }
}
