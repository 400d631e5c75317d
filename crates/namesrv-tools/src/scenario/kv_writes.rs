//! KV write latency: one admin client writes PUT_KV_CONFIG after PUT_KV_CONFIG, each waiting for
//! its answer, as `mqadmin updateKvConfig` does. Against a lone NameServer a write is one file
//! write; against NameServers that agree it is also a commit in their group.

use std::time::Instant;

use rocketmq_wire::client::Client;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::RemotingCommand;
use serde_json::json;

use crate::cli::KvWritesArgs;
use crate::stats::{Failures, Latency};

const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

pub async fn run(args: &KvWritesArgs) -> anyhow::Result<serde_json::Value> {
    let client = Client::connect(&args.target.addr).await?;
    let mut latency = Latency::default();
    let mut failures = Failures::default();
    for n in 0..args.warmup + args.writes {
        let write = RemotingCommand::request(request::PUT_KV_CONFIG)
            .with_ext("namespace", "NSBENCH")
            .with_ext("key", format!("k{}", n % args.keys.max(1)))
            .with_ext("value", format!("v{n}"));
        let began = Instant::now();
        let answer = client.invoke(write, TIMEOUT).await;
        let took = began.elapsed();
        match answer {
            Ok(a) if a.code == response::SUCCESS => {
                if n >= args.warmup {
                    latency.record(took);
                }
            }
            Ok(a) => failures.add(
                1,
                format!("answered {}: {}", a.code, a.remark.unwrap_or_default()),
            ),
            Err(e) => failures.add(1, e.to_string()),
        }
    }
    Ok(json!({
        "scenario": "kv-writes",
        "writes": args.writes,
        "latency": latency.summary(),
        "failures": failures,
    }))
}
