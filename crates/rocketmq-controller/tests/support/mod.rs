//! What the fault tests of this crate share.

// Each test binary uses a part of it.
#![allow(dead_code)]

pub mod delay;

/// The `mqcontroller` Cargo built for this package's tests.
pub const MQCONTROLLER: &str = env!("CARGO_BIN_EXE_mqcontroller");

/// `Some(())` when the machine can run a fault test; otherwise the test fails when
/// NAMESRV_TEST_REQUIRE_ALL is set (the test command sets it), or says on the terminal why it
/// skips.
pub fn able(can: bool, why: &str) -> Option<()> {
    if can {
        return Some(());
    }
    if std::env::var_os("NAMESRV_TEST_REQUIRE_ALL").is_some_and(|v| !v.is_empty()) {
        panic!("{why} (NAMESRV_TEST_REQUIRE_ALL is set, so it cannot skip)");
    }
    eprintln!("SKIPPED: {why}");
    None
}

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use namesrv_testkit::ControllerProps;
use rocketmq_wire::client::Client;
use rocketmq_wire::codes::request;
use rocketmq_wire::RemotingCommand;

/// One request on a fresh connection, connected and answered within `limit` each; `None` if
/// not.
pub async fn ask(addr: &str, cmd: RemotingCommand, limit: Duration) -> Option<RemotingCommand> {
    let client = tokio::time::timeout(limit, Client::connect(addr))
        .await
        .ok()?
        .ok()?;
    client.invoke(cmd, limit).await.ok()
}

/// Which of the nodes at `addrs` say they lead, asked all at once.
pub async fn claims(addrs: &[String]) -> Vec<usize> {
    leadership(addrs)
        .await
        .into_iter()
        .enumerate()
        .filter(|(_, said)| said.leads)
        .map(|(i, _)| i)
        .collect()
}

/// What a node answered to 1005 about the leadership.
#[derive(Clone, Copy, Debug, Default)]
pub struct Said {
    /// `isLeader=true`.
    pub leads: bool,
    /// It named a leader (itself or another), the one brokers would go to.
    pub names: bool,
}

/// What each node at `addrs` says of the leadership, asked all at once; a node that does not
/// answer says nothing.
pub async fn leadership(addrs: &[String]) -> Vec<Said> {
    let asks = addrs.iter().map(|addr| async move {
        let meta = RemotingCommand::request(request::CONTROLLER_GET_METADATA_INFO);
        let Some(answer) = ask(addr, meta, Duration::from_millis(800)).await else {
            return Said::default();
        };
        Said {
            leads: answer.ext("isLeader") == Some("true"),
            names: answer
                .ext("controllerLeaderAddress")
                .is_some_and(|a| !a.is_empty()),
        }
    });
    futures::future::join_all(asks).await
}

/// The node that alone claims to lead for `steady` on end, waited for up to `limit`.
pub async fn one_leader(addrs: &[String], steady: Duration, limit: Duration) -> Option<usize> {
    let deadline = Instant::now() + limit;
    let mut held: Option<(usize, Instant)> = None;
    while Instant::now() < deadline {
        held = match (&claims(addrs).await[..], held) {
            ([now], Some((was, since))) if *now == was => Some((was, since)),
            ([now], _) => Some((*now, Instant::now())),
            _ => None,
        };
        if let Some((leader, since)) = held {
            if since.elapsed() >= steady {
                return Some(leader);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    None
}

/// Starts a controller node with `command`, its output appended to `log`, and waits for its
/// boot line (ours and Java's both contain `Controller Server boot success`; a NameServer that
/// embeds a controller prints `ControllerManager boot success`); an error naming how it exited
/// if it ends first.
pub fn boot_node(mut command: Command, log: &Path) -> Result<Child, String> {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| e.to_string())?;
    let booted = lines.by_ref().map_while(Result::ok).find(|line| {
        let _ = writeln!(log, "{line}");
        line.contains("Controller Server boot success")
            || line.contains("ControllerManager boot success")
    });
    if booted.is_none() {
        let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
        return Err(format!("exited before booting ({status})"));
    }
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = writeln!(log, "{line}");
        }
    });
    Ok(child)
}

/// Starts `binary` as node `i` of a group of `nodes` in `net`'s namespaces, all listening on
/// `port`, with its config, store and log in `dir`; `extra` is appended to its config file.
#[allow(clippy::too_many_arguments)]
pub fn boot_in_namespace(
    net: &namesrv_testkit::Net,
    binary: &str,
    group: &str,
    i: usize,
    nodes: usize,
    port: u16,
    dir: &Path,
    extra: &str,
) -> Child {
    let addrs = (0..nodes).map(|j| format!("{}:{port}", net.node_ip(j)));
    let props = ControllerProps::new(addrs, i, dir.join(format!("store-{i}")))
        .group(group)
        .extra(extra);
    let conf = dir.join(format!("controller-{i}.conf"));
    std::fs::write(&conf, props.to_string()).unwrap();
    let mut command = Command::new("ip");
    command
        .args(["netns", "exec", &net.ns(i), binary, "-c"])
        .arg(&conf);
    boot_node(command, &dir.join(format!("node-{i}.log"))).unwrap_or_else(|e| panic!("n{i} {e}"))
}

/// Starts `n` `mqcontroller` nodes on loopback as group `group`, each with its HTTP port on
/// (`metricsExporterType=PROM`), configs, stores and logs in `dir`, `extra` appended to every
/// config; the processes, their controller addresses and their HTTP addresses, in node order.
pub fn boot_group_with_http(
    dir: &Path,
    group: &str,
    n: usize,
    extra: &str,
) -> (Vec<Child>, Vec<String>, Vec<String>) {
    let loopback = |_| format!("127.0.0.1:{}", namesrv_testkit::free_port());
    let controllers: Vec<String> = (0..n).map(loopback).collect();
    let http: Vec<String> = (0..n).map(loopback).collect();
    let mut nodes = Vec::new();
    for (i, http) in http.iter().enumerate() {
        let conf = dir.join(format!("controller-{i}.conf"));
        let port = http.rsplit(':').next().unwrap();
        let props = ControllerProps::new(&controllers, i, dir.join(format!("store-{i}")))
            .group(group)
            .extra(&format!(
                "metricsExporterType=PROM\nmetricsPromExporterHost=127.0.0.1\n\
                 metricsPromExporterPort={port}\n{extra}"
            ));
        std::fs::write(&conf, props.to_string()).unwrap();
        let mut command = Command::new(MQCONTROLLER);
        command.arg("-c").arg(&conf);
        let log = dir.join(format!("node-{i}.log"));
        nodes.push(boot_node(command, &log).unwrap_or_else(|e| panic!("n{i} {e}")));
    }
    (nodes, controllers, http)
}
