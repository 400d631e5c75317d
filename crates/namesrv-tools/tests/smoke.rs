//! Seconds-long smoke runs of the load generator, for CI: against our server (the library entry
//! point the binary runs, in process on a free loopback port) and against the canned server.
//! `scripts/bench --smoke` does the same with the release binary; the benchmarks proper are
//! `scripts/bench`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use namesrv_testkit::*;
use serde_json::Value;

/// Runs nsbench with `args`: it must succeed and print one JSON document, returned.
fn nsbench(args: &[&str]) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_nsbench"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nsbench {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn nsbench_route(addr: &str, extra: &[&str]) -> Value {
    let mut args = vec!["route", "--addr", addr, "--brokers", "2", "--topics", "50"];
    args.extend([
        "--warmup-secs",
        "0.2",
        "--duration-secs",
        "2",
        "--runs",
        "1",
    ]);
    args.extend(["--require-clean", "--topic-list-runs", "1"]);
    args.extend(extra);
    nsbench(&args)
}

#[test]
fn route_load_against_our_server_is_clean() {
    let server = Server::start();
    let result = nsbench_route(&server.addr, &["--slaves"]);
    assert!(result["route"]["median_qps"].as_f64().unwrap() > 0.0);
    assert_eq!(result["route"]["failures"], 0);
    assert_eq!(result["registration"]["members"], 4);
    assert_eq!(result["topic_list"]["topics_listed"], 50);
}

#[test]
fn canned_server_answers_the_route_load() {
    let mut canned = Command::new(env!("CARGO_BIN_EXE_nsbench"))
        .args(["canned", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(canned.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    let addr = ready
        .split("address ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("a readiness line with the address")
        .to_string();
    let result = nsbench(&[
        "route",
        "--addr",
        &addr,
        "--brokers",
        "2",
        "--topics",
        "50",
        "--warmup-secs",
        "0",
        "--duration-secs",
        "1",
        "--runs",
        "1",
        "--reregister-secs",
        "0",
        "--require-clean",
    ]);
    canned.kill().unwrap();
    canned.wait().unwrap();
    assert!(result["route"]["median_qps"].as_f64().unwrap() > 0.0);
}

#[test]
fn kv_stream_reads_every_acknowledged_write_back() {
    let server = Server::start();
    let addrs = format!("{0},{0}", server.addr);
    let result = nsbench(&[
        "kv-stream",
        "--addrs",
        &addrs,
        "--duration-secs",
        "1",
        "--settle-secs",
        "1",
    ]);
    assert!(result["acknowledged"].as_u64().unwrap() > 10, "{result}");
    assert_eq!(result["refused"]["count"], 0, "{result}");
    assert_eq!(result["lost_anywhere"], 0, "{result}");
    assert_eq!(result["lost"].as_array().unwrap().len(), 2);
}

#[test]
fn a_split_round_is_applied_whole_and_timed_against_our_server() {
    let server = Server::start();
    let result = nsbench(&[
        "split",
        "--addr",
        &server.addr,
        "--topics",
        "2000",
        "--chunk",
        "800",
        "--window-secs",
        "1",
        "--conns",
        "2",
        "--depth",
        "2",
    ]);
    // 800 + 800 + the last 400.
    assert_eq!(result["registrations_a_round"], 3);
    assert!(result["periodic_rounds"]["rounds"].as_u64().unwrap() >= 1);
    assert_eq!(result["periodic_rounds"]["lookups"]["failed"], 0);
    assert_eq!(result["idle_lookups"]["not_registered_yet"], 0);
}
