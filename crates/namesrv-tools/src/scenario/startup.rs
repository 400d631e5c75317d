//! Start-up: how long from spawning a server until it answers a route request, and how much
//! memory it holds once idle. Any server command works, so every peer is measured alike.

use std::fs::OpenOptions;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use rocketmq_wire::client::Client;
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use serde_json::json;
use tokio::net::TcpStream;

use crate::cli::StartupArgs;
use crate::server_proc;
use crate::stats::median;

const START_LIMIT: Duration = Duration::from_secs(120);
const POLL_EVERY: Duration = Duration::from_millis(1);
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn run(args: &StartupArgs) -> anyhow::Result<serde_json::Value> {
    let mut first_route_ms = Vec::new();
    let mut idle_rss_kib = Vec::new();
    for _ in 0..args.runs.max(1) {
        wait_port_free(&args.addr).await?;
        let started = Instant::now();
        let mut child = spawn(&args.command, &args.log)?;
        let outcome = time_first_route(&args.addr, &mut child, started).await;
        if outcome.is_ok() {
            tokio::time::sleep(Duration::from_secs_f64(args.settle_secs)).await;
            idle_rss_kib.extend(server_proc::rss_kib(child.id()));
        }
        let _ = child.kill();
        let _ = child.wait();
        first_route_ms.push(outcome?.as_secs_f64() * 1000.0);
    }
    Ok(json!({
        "scenario": "startup",
        "first_route_ms": first_route_ms,
        "median_first_route_ms": median(first_route_ms.iter().copied()),
        "idle_rss_kib": idle_rss_kib,
        "median_idle_rss_kib": median(idle_rss_kib.iter().map(|&k| k as f64)),
    }))
}

/// Starts `command`, its output appended to `log` (or dropped).
pub(super) fn spawn(command: &[String], log: &Option<std::path::PathBuf>) -> anyhow::Result<Child> {
    let output = |log: &Option<std::path::PathBuf>| -> anyhow::Result<Stdio> {
        Ok(match log {
            Some(path) => OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("opening {}", path.display()))?
                .into(),
            None => Stdio::null(),
        })
    };
    Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::null())
        .stdout(output(log)?)
        .stderr(output(log)?)
        .spawn()
        .with_context(|| format!("starting {}", command[0]))
}

/// Polls until a route request is answered (any code: an empty server answers TOPIC_NOT_EXIST).
async fn time_first_route(
    addr: &str,
    child: &mut Child,
    started: Instant,
) -> anyhow::Result<Duration> {
    while started.elapsed() < START_LIMIT {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the server exited before answering: {status}");
        }
        if let Ok(stream) = TcpStream::connect(addr).await {
            let client = Client::from_stream(stream);
            let ask = GetRouteInfoHeader::new("TBW102").to_command();
            if client.invoke(ask, ANSWER_TIMEOUT).await.is_ok() {
                return Ok(started.elapsed());
            }
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    anyhow::bail!("no route answer within {START_LIMIT:?}")
}

/// The previous run's server may still hold the port for a moment after being killed.
pub(super) async fn wait_port_free(addr: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    while TcpStream::connect(addr).await.is_ok() {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(30),
            "something else keeps listening on {addr}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
