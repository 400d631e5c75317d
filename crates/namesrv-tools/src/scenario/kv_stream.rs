//! KV writes across kills: one writer per NameServer of a group that agrees writes a distinct key
//! after a distinct key, each waiting for its answer, for a fixed time while the caller kills
//! NameServers with SIGKILL and restarts them. Then every write that was answered SUCCESS is
//! looked for on every NameServer: an acknowledged write that one of them lacks once they had
//! time to catch up is a lost write. Writes refused (no quorum, leader gone) or left unanswered
//! (the connection died with the server) were never promised, so they are counted, not checked.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Value};

use crate::cli::KvStreamArgs;
use crate::stats::{Failures, Latency};

/// A write's deadline: longer than the server's own bound on a write without quorum, so a
/// refusal comes back as an answer rather than as a timeout here.
const TIMEOUT: Duration = Duration::from_secs(15);
const CONNECT: Duration = Duration::from_secs(1);
/// Between a failed connection and the next try: the server is down or starting.
const RETRY: Duration = Duration::from_millis(50);

/// A gap between two acknowledged writes this long or longer is reported as a pause.
const PAUSE: Duration = Duration::from_millis(200);

/// What one writer saw.
#[derive(Default)]
struct Stream {
    acknowledged: Vec<String>,
    latency: Latency,
    refused: Failures,
    unanswered: Failures,
    /// When each acknowledged write was answered, for the longest pause of the whole group.
    answered_at: Vec<Duration>,
}

pub async fn run(args: &KvStreamArgs) -> anyhow::Result<Value> {
    anyhow::ensure!(!args.addrs.is_empty(), "no NameServer to write to");
    let began = Instant::now();
    let until = began + Duration::from_secs(args.duration_secs);
    let writers: Vec<_> = args
        .addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            tokio::spawn(write_until(
                addr.clone(),
                format!("w{i}-"),
                args.namespace.clone(),
                began,
                until,
            ))
        })
        .collect();
    let mut all = Stream::default();
    for writer in writers {
        let s = writer.await?;
        all.acknowledged.extend(s.acknowledged);
        all.latency.add(&s.latency);
        all.refused.merge(&s.refused);
        all.unanswered.merge(&s.unanswered);
        all.answered_at.extend(s.answered_at);
    }
    all.answered_at.sort();
    // Pauses of the whole group: no writer had a write acknowledged for this long.
    let pauses: Vec<(Duration, Duration)> = all
        .answered_at
        .windows(2)
        .map(|w| (w[0], w[1] - w[0]))
        .filter(|(_, gap)| *gap >= PAUSE)
        .collect();
    let longest_pause = pauses.iter().map(|(_, gap)| *gap).max().unwrap_or_default();

    let settle = Instant::now() + Duration::from_secs(args.settle_secs);
    let mut lost = Vec::new();
    let mut lost_anywhere = HashSet::new();
    for addr in &args.addrs {
        let missing = missing_on(addr, &args.namespace, &all.acknowledged, settle).await;
        lost.push(json!({
            "addr": addr,
            "lost": missing.len(),
            "samples": missing.iter().take(5).collect::<Vec<_>>(),
        }));
        lost_anywhere.extend(missing);
    }
    Ok(json!({
        "scenario": "kv-stream",
        "duration_secs": args.duration_secs,
        "acknowledged": all.acknowledged.len(),
        "refused": all.refused,
        "unanswered": all.unanswered,
        "latency": all.latency.summary(),
        "longest_pause_ms": longest_pause.as_secs_f64() * 1000.0,
        "pauses": pauses
            .iter()
            .map(|(from, gap)| json!({"from_ms": from.as_millis(), "ms": gap.as_millis()}))
            .collect::<Vec<_>>(),
        "lost_anywhere": lost_anywhere.len(),
        "lost": lost,
    }))
}

/// Writes distinct keys (`prefix` and a counter) to `addr` until `until`, reconnecting after a
/// failure: the server may have been killed and be starting again.
async fn write_until(
    addr: String,
    prefix: String,
    namespace: String,
    began: Instant,
    until: Instant,
) -> Stream {
    let mut stream = Stream::default();
    let mut client: Option<Client> = None;
    let mut n = 0u64;
    while Instant::now() < until {
        let c = match &client {
            Some(c) => c.clone(),
            None => match Client::connect_within(&addr, CONNECT).await {
                Ok(c) => {
                    client = Some(c.clone());
                    c
                }
                Err(_) => {
                    tokio::time::sleep(RETRY).await;
                    continue;
                }
            },
        };
        let key = format!("{prefix}{n:06}");
        n += 1;
        let write = RemotingCommand::request(request::PUT_KV_CONFIG)
            .with_ext("namespace", namespace.as_str())
            .with_ext("key", key.as_str())
            .with_ext("value", "v");
        let sent = Instant::now();
        match c.invoke(write, TIMEOUT).await {
            Ok(a) if a.code == response::SUCCESS => {
                stream.latency.record(sent.elapsed());
                stream.answered_at.push(began.elapsed());
                stream.acknowledged.push(key);
            }
            Ok(a) => {
                stream.refused.add(
                    1,
                    format!("answered {}: {}", a.code, a.remark.unwrap_or_default()),
                );
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                stream.unanswered.add(1, format!("{addr}: {e}"));
                client = None;
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    stream
}

/// The acknowledged keys `addr` does not list, asking again until it lists them all or `settle`
/// passes (a restarted member catches up from the log after it answers).
async fn missing_on(
    addr: &str,
    namespace: &str,
    acknowledged: &[String],
    settle: Instant,
) -> Vec<String> {
    loop {
        let listed = list(addr, namespace).await.unwrap_or_default();
        let missing: Vec<String> = acknowledged
            .iter()
            .filter(|k| !listed.contains(k.as_str()))
            .cloned()
            .collect();
        if missing.is_empty() || Instant::now() >= settle {
            return missing;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The keys of `namespace` as `addr` answers GET_KVLIST_BY_NAMESPACE.
async fn list(addr: &str, namespace: &str) -> anyhow::Result<HashSet<String>> {
    let client = Client::connect_within(addr, CONNECT).await?;
    let answer = client
        .invoke(
            RemotingCommand::request(request::GET_KVLIST_BY_NAMESPACE)
                .with_ext("namespace", namespace),
            TIMEOUT,
        )
        .await?;
    if answer.code != response::SUCCESS {
        return Ok(HashSet::new());
    }
    let body: Value = serde_json::from_slice(answer.body.as_deref().unwrap_or_default())?;
    Ok(body["table"]
        .as_object()
        .map(|t| t.keys().cloned().collect())
        .unwrap_or_default())
}
