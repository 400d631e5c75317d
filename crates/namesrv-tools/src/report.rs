//! Writes `BENCHMARKS.md` from what `scripts/bench` collected:
//!
//! ```text
//! RESULTS/meta.json            mode, versions, servers (id, label, command) in column order
//! RESULTS/commands.txt         the exact commands run
//! RESULTS/<server>/<figure>.json    nsbench output
//! RESULTS/<server>/<figure>.error   why that figure could not be measured
//! ```
//!
//! Every number comes from a file; a figure without one is shown as failed or not run.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Deserialize;
use serde_json::Value;

use crate::cli::ReportArgs;
use crate::stats::median;

#[derive(Deserialize)]
struct Meta {
    mode: String,
    date: String,
    commit: String,
    versions: Vec<(String, String)>,
    servers: Vec<Server>,
}

#[derive(Deserialize)]
struct Server {
    id: String,
    label: String,
}

const OURS: &str = "ours";
const JAVA: &str = "java";
const ROCKETMQ_RUST: &str = "rocketmq-rust";
const CANNED: &str = "canned";

/// What one server produced for one figure.
enum Outcome {
    Measured(Value),
    Failed(String),
    NotRun,
}

struct Results<'a> {
    dir: &'a Path,
}

impl Results<'_> {
    fn outcome(&self, server: &str, figure: &str) -> Outcome {
        let base = self.dir.join(server).join(figure);
        if let Ok(text) = std::fs::read_to_string(base.with_extension("json")) {
            if let Ok(v) = serde_json::from_str(&text) {
                return Outcome::Measured(v);
            }
        }
        match std::fs::read_to_string(base.with_extension("error")) {
            Ok(text) => Outcome::Failed(text.trim().to_string()),
            Err(_) => Outcome::NotRun,
        }
    }

    fn number(&self, server: &str, row: &Row) -> Option<f64> {
        match self.outcome(server, row.figure) {
            Outcome::Measured(v) => (row.value)(&v),
            _ => None,
        }
    }
}

/// Whether a larger number is the better one.
#[derive(Clone, Copy, PartialEq)]
enum Better {
    Higher,
    Lower,
}

struct Row {
    label: &'static str,
    figure: &'static str,
    better: Better,
    value: fn(&Value) -> Option<f64>,
    /// Extra words next to the number (e.g. what failed alongside it).
    note: fn(&Value) -> Option<String>,
}

fn at(v: &Value, path: &str) -> Option<f64> {
    v.pointer(path).and_then(Value::as_f64)
}

fn mb(kib: Option<f64>) -> Option<f64> {
    kib.map(|k| k * 1024.0 / 1e6)
}

fn no_note(_: &Value) -> Option<String> {
    None
}

fn route_failures(v: &Value) -> Option<String> {
    let failures = at(v, "/route/failures").unwrap_or(0.0)
        + at(v, "/reregistration/failures/count").unwrap_or(0.0);
    (failures > 0.0).then(|| format!("{failures} failed requests"))
}

fn rows() -> Vec<Row> {
    vec![
        Row {
            label: "Route QPS — 1k topics × 10 brokers × 8 queues, 16 conns × 8 in flight",
            figure: "route-1k",
            better: Better::Higher,
            value: |v| at(v, "/route/median_qps"),
            note: route_failures,
        },
        Row {
            label: "Route p99 latency, same load (ms)",
            figure: "route-1k",
            better: Better::Lower,
            value: |v| at(v, "/route/median_p99_ms"),
            note: no_note,
        },
        Row {
            label: "Route QPS at 100 topics (× 10 brokers)",
            figure: "route-100",
            better: Better::Higher,
            value: |v| at(v, "/route/median_qps"),
            note: route_failures,
        },
        Row {
            label: "Route QPS at 10k topics (× 10 brokers)",
            figure: "route-10k",
            better: Better::Higher,
            value: |v| at(v, "/route/median_qps"),
            note: route_failures,
        },
        Row {
            label: "Route QPS at 100k topics (× 10 brokers, compressed bodies)",
            figure: "route-100k",
            better: Better::Higher,
            value: |v| at(v, "/route/median_qps"),
            note: route_failures,
        },
        Row {
            label: "One broker registers 10k topics (compressed), median ms",
            figure: "register-10k",
            better: Better::Lower,
            value: |v| at(v, "/median_ms"),
            note: |v| v["failure"].as_str().map(|f| format!("failed: {f}")),
        },
        Row {
            label: "One broker registers 10k topics (JSON), median ms",
            figure: "register-10k-json",
            better: Better::Lower,
            value: |v| at(v, "/median_ms"),
            note: |v| v["failure"].as_str().map(|f| format!("failed: {f}")),
        },
        Row {
            label: "One broker with 100k topics (JSON body) registers, ms",
            figure: "register-100k-json",
            better: Better::Lower,
            value: |v| at(v, "/median_ms"),
            note: |v| {
                let size = at(v, "/body_bytes").unwrap_or(0.0) / 1e6;
                let routable = match v["routable"].as_bool() {
                    Some(true) => "routable",
                    _ => "NOT routable",
                };
                Some(match v["failure"].as_str() {
                    Some(f) => format!("{size:.1} MB body: {f}; {routable}"),
                    None => format!("{size:.1} MB body, {routable}"),
                })
            },
        },
        Row {
            label: "300 brokers × 10k topics: route p99 with the fleet idle (ms)",
            figure: "mixed-300",
            better: Better::Lower,
            value: |v| at(v, "/idle/median_p99_ms"),
            note: no_note,
        },
        Row {
            label: "… route p99 while every broker re-registers (ms)",
            figure: "mixed-300",
            better: Better::Lower,
            value: |v| at(v, "/churn/median_p99_ms"),
            note: |v| {
                // A mixed-300 run has no route-changing registrations to count.
                let failed = churn_failures(v);
                let expected = at(v, "/brokers_expected").unwrap_or(0.0);
                let listed = match (
                    at(v, "/brokers_listed_at_end"),
                    v["final_check_error"].as_str(),
                ) {
                    (Some(n), _) => format!("{n}/{expected} brokers listed at the end"),
                    (None, Some(e)) => format!("final broker count failed: {e}"),
                    (None, None) => "brokers not counted".into(),
                };
                let period = at(v, "/reregister_secs").unwrap_or(0.0);
                Some(format!(
                    "{failed} failed requests, {listed}, re-registering every {period} s"
                ))
            },
        },
        Row {
            label: "… re-registration p99 under that load (ms)",
            figure: "mixed-300",
            better: Better::Lower,
            value: |v| at(v, "/reregistration/latency/p99_ms"),
            note: no_note,
        },
        Row {
            label: "RSS with 100k topics × 10 brokers (MB)",
            figure: "route-100k",
            better: Better::Lower,
            value: |v| mb(at(v, "/server_rss_kib/after_load")),
            note: no_note,
        },
        Row {
            label: "RSS with 10k topics × 10 brokers, JSON bodies (MB)",
            figure: "route-10k",
            better: Better::Lower,
            value: |v| mb(at(v, "/server_rss_kib/after_load")),
            note: no_note,
        },
        Row {
            label: "GET_ALL_TOPIC_LIST at 100k topics, median ms",
            figure: "route-100k",
            better: Better::Lower,
            value: |v| at(v, "/topic_list/median_ms"),
            // A server may keep the list between calls; the first call shows the cost of
            // building it.
            note: |v| {
                at(v, "/topic_list/runs_ms/0").map(|ms| format!("first call {}", fmt_num(ms)))
            },
        },
        Row {
            label: "Start → first route answered, median ms",
            figure: "startup",
            better: Better::Lower,
            value: |v| at(v, "/median_first_route_ms"),
            note: no_note,
        },
        Row {
            label: "Idle RSS (MB)",
            figure: "startup",
            better: Better::Lower,
            value: |v| mb(at(v, "/median_idle_rss_kib")),
            note: no_note,
        },
        Row {
            label: "10 brokers × 10k topics, every route its own: route QPS, fleet idle",
            figure: "mixed-distinct",
            better: Better::Higher,
            value: |v| at(v, "/idle/median_qps"),
            note: no_note,
        },
        Row {
            label: "… route QPS while 20 registrations a second each change a route",
            figure: "mixed-distinct",
            better: Better::Higher,
            value: |v| at(v, "/churn/median_qps"),
            note: |v| {
                at(v, "/qps_churn_over_idle").map(|x| {
                    format!("{x:.2}× idle, {} failed requests", churn_failures(v))
                })
            },
        },
        Row {
            label: "… route p99, fleet idle (ms)",
            figure: "mixed-distinct",
            better: Better::Lower,
            value: |v| at(v, "/idle/median_p99_ms"),
            note: no_note,
        },
        Row {
            label: "… route p99 under the changes (ms)",
            figure: "mixed-distinct",
            better: Better::Lower,
            value: |v| at(v, "/churn/median_p99_ms"),
            note: |v| at(v, "/p99_churn_over_idle").map(|x| format!("{x:.2}× idle")),
        },
        Row {
            label: "… route-changing registration p99 (ms)",
            figure: "mixed-distinct",
            better: Better::Lower,
            value: |v| at(v, "/changing_registrations/latency/p99_ms"),
            note: |v| {
                at(v, "/changing_registrations/latency/count")
                    .map(|n| format!("{n} registrations"))
            },
        },
        Row {
            label: "300 brokers × 10k topics, 1 % of re-registrations change a topic: route p99, idle (ms)",
            figure: "mixed-300-changing",
            better: Better::Lower,
            value: |v| at(v, "/idle/median_p99_ms"),
            note: no_note,
        },
        Row {
            label: "… route p99 while every broker re-registers (ms)",
            figure: "mixed-300-changing",
            better: Better::Lower,
            value: |v| at(v, "/churn/median_p99_ms"),
            note: |v| {
                at(v, "/p99_churn_over_idle").map(|x| {
                    format!("{x:.2}× idle, {} failed requests", churn_failures(v))
                })
            },
        },
    ]
}

/// Failed requests of every kind in a mixed run.
fn churn_failures(v: &Value) -> f64 {
    [
        "/idle/failures",
        "/churn/failures",
        "/reregistration/failures/count",
        "/changing_registrations/failures/count",
        "/cluster_polls/failures/count",
        "/topic_list_polls/failures/count",
    ]
    .iter()
    .filter_map(|path| at(v, path))
    .sum()
}

/// A ratio of a mixed run against a bound, with no failed request.
fn mixed_ratio(r: &Results, figure: &str, path: &str, want: fn(f64) -> bool) -> Verdict {
    match r.outcome(OURS, figure) {
        Outcome::Measured(v) => match at(&v, path) {
            Some(x) => {
                let failed = churn_failures(&v);
                let text = format!("{x:.2}×, {failed} failed requests");
                Verdict::of(want(x) && failed == 0.0, text)
            }
            None => Verdict::Unknown("not measured".into()),
        },
        _ => Verdict::Unknown("not measured".into()),
    }
}

fn fmt_num(x: f64) -> String {
    match x.abs() {
        a if a >= 1000.0 => group_thousands(x.round() as i64),
        a if a >= 10.0 => format!("{x:.1}"),
        _ => format!("{x:.2}"),
    }
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::from(if n < 0 { "-" } else { "" });
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn first_line(text: &str) -> String {
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let line: String = line.chars().take(140).collect();
    line.replace('|', "\\|")
}

fn cell(results: &Results, server: &str, row: &Row) -> String {
    match results.outcome(server, row.figure) {
        Outcome::NotRun => "not run".into(),
        Outcome::Failed(why) => format!("**failed**: {}", first_line(&why)),
        Outcome::Measured(v) => {
            let number = (row.value)(&v).map(fmt_num);
            match (number, (row.note)(&v)) {
                (Some(n), Some(note)) => format!("{n} ({note})"),
                (Some(n), None) => n,
                (None, Some(note)) => note,
                (None, None) => "—".into(),
            }
        }
    }
}

/// `ours / peer`, or why there is none.
fn ratio(results: &Results, peer: &str, row: &Row) -> String {
    match (results.number(OURS, row), results.number(peer, row)) {
        (Some(o), Some(p)) if p > 0.0 => format!("{}×", fmt_ratio(o / p)),
        _ => "—".into(),
    }
}

/// Two significant digits at least, so that small ratios do not read as zero.
fn fmt_ratio(r: f64) -> String {
    match r {
        r if r >= 10.0 => format!("{r:.1}"),
        r if r >= 0.1 => format!("{r:.2}"),
        r if r > 0.0 => {
            let decimals = (1.0 - r.log10().floor()) as usize;
            format!("{r:.decimals$}")
        }
        r => format!("{r}"),
    }
}

struct Target {
    text: &'static str,
    check: fn(&Results) -> Verdict,
}

enum Verdict {
    Met(String),
    Missed(String),
    Unknown(String),
}

impl Verdict {
    fn of(met: bool, text: String) -> Self {
        if met {
            Verdict::Met(text)
        } else {
            Verdict::Missed(text)
        }
    }
}

fn compare(results: &Results, row_index: usize, peer: &str, want: fn(f64) -> bool) -> Verdict {
    let row = &rows()[row_index];
    match (results.number(OURS, row), results.number(peer, row)) {
        (Some(o), Some(p)) if p > 0.0 => {
            let text = format!("{} vs {} = {}×", fmt_num(o), fmt_num(p), fmt_ratio(o / p));
            Verdict::of(want(o / p), text)
        }
        (None, _) => Verdict::Unknown("ours not measured".into()),
        _ => Verdict::Unknown(format!("{peer} not measured")),
    }
}

fn absolute(results: &Results, row_index: usize, want: fn(f64) -> bool) -> Verdict {
    match results.number(OURS, &rows()[row_index]) {
        Some(o) => Verdict::of(want(o), fmt_num(o)),
        None => Verdict::Unknown("not measured".into()),
    }
}

const ROUTE_QPS: usize = 0;
const ROUTE_P99: usize = 1;
const QPS_100: usize = 2;
const QPS_100K: usize = 4;
const REGISTER_10K: usize = 5;
const CHURN_P99: usize = 9;
const RSS_100K: usize = 11;
const RSS_10K: usize = 12;
const TOPIC_LIST: usize = 13;
const STARTUP: usize = 14;
const IDLE_RSS: usize = 15;
const CHANGING_REGISTRATION_P99: usize = 20;

fn targets() -> Vec<Target> {
    vec![
        Target {
            text: "Route QPS ≥ 5× Java",
            check: |r| compare(r, ROUTE_QPS, JAVA, |x| x >= 5.0),
        },
        Target {
            text: "Route QPS ≥ 2× rocketmq-rust",
            check: |r| compare(r, ROUTE_QPS, ROCKETMQ_RUST, |x| x >= 2.0),
        },
        Target {
            text: "Route QPS ≥ 70 % of canned",
            check: |r| compare(r, ROUTE_QPS, CANNED, |x| x >= 0.7),
        },
        Target {
            text: "Route p99 ≤ 1/3 of the best peer",
            check: |r| {
                let row = &rows()[ROUTE_P99];
                let best = [JAVA, ROCKETMQ_RUST]
                    .into_iter()
                    .filter_map(|p| r.number(p, row).map(|v| (p, v)))
                    .min_by(|a, b| a.1.total_cmp(&b.1));
                match best {
                    Some((peer, _)) => compare(r, ROUTE_P99, peer, |x| x <= 1.0 / 3.0),
                    None => Verdict::Unknown("no peer measured".into()),
                }
            },
        },
        Target {
            text: "Route QPS at 100 / 10k / 100k topics within ±20 % of their median",
            check: |r| {
                let qps: Vec<f64> = (QPS_100..=QPS_100K)
                    .filter_map(|i| r.number(OURS, &rows()[i]))
                    .collect();
                if qps.len() < 3 {
                    return Verdict::Unknown("not all three measured".into());
                }
                let mid = median(qps.iter().copied()).unwrap_or(1.0);
                let worst = qps
                    .iter()
                    .map(|q| (q / mid - 1.0).abs())
                    .fold(0.0, f64::max);
                let text = format!(
                    "{} (largest deviation {:.0} %)",
                    qps.iter()
                        .map(|q| fmt_num(*q))
                        .collect::<Vec<_>>()
                        .join(" / "),
                    worst * 100.0
                );
                Verdict::of(worst <= 0.2, text)
            },
        },
        Target {
            text: "10k-topic registration ≤ 1/5 of Java's",
            check: |r| compare(r, REGISTER_10K, JAVA, |x| x <= 0.2),
        },
        Target {
            text: "Re-registration churn: no failed request, no broker dropped",
            check: |r| match r.outcome(OURS, "mixed-300") {
                Outcome::Measured(v) => {
                    let note = (rows()[CHURN_P99].note)(&v).unwrap_or_default();
                    let dropped = at(&v, "/brokers_listed_at_end") < at(&v, "/brokers_expected");
                    Verdict::of(note.starts_with("0 failed") && !dropped, note)
                }
                _ => Verdict::Unknown("not measured".into()),
            },
        },
        Target {
            text: "Re-registration churn: route p99 ≤ 2× its idle value",
            check: |r| match r.outcome(OURS, "mixed-300") {
                Outcome::Measured(v) => match at(&v, "/p99_churn_over_idle") {
                    Some(x) => {
                        let text = format!(
                            "{} ms idle → {} ms = {x:.2}×",
                            at(&v, "/idle/median_p99_ms").map_or("?".into(), fmt_num),
                            at(&v, "/churn/median_p99_ms").map_or("?".into(), fmt_num)
                        );
                        Verdict::of(x <= 2.0, text)
                    }
                    None => Verdict::Unknown("not measured".into()),
                },
                _ => Verdict::Unknown("not measured".into()),
            },
        },
        Target {
            text: "RSS at 100k × 10 ≤ 1/10 of Java's",
            check: |r| compare(r, RSS_100K, JAVA, |x| x <= 0.1),
        },
        Target {
            text: "RSS at 100k × 10 ≤ 1/2 of rocketmq-rust's",
            check: |r| compare(r, RSS_100K, ROCKETMQ_RUST, |x| x <= 0.5),
        },
        Target {
            text: "RSS ≤ 1/2 of rocketmq-rust's at 10k × 10 (JSON bodies, which it takes)",
            check: |r| compare(r, RSS_10K, ROCKETMQ_RUST, |x| x <= 0.5),
        },
        Target {
            text: "GET_ALL_TOPIC_LIST at 100k topics ≤ 50 ms",
            check: |r| absolute(r, TOPIC_LIST, |x| x <= 50.0),
        },
        Target {
            text: "Start → first route ≤ 20 ms",
            check: |r| absolute(r, STARTUP, |x| x <= 20.0),
        },
        Target {
            text: "Idle RSS ≤ 10 MB",
            check: |r| absolute(r, IDLE_RSS, |x| x <= 10.0),
        },
        Target {
            text: "Route-changing registrations (10 × 10k distinct routes, 20/s): route QPS ≥ 0.8× idle, no failed request",
            check: |r| mixed_ratio(r, "mixed-distinct", "/qps_churn_over_idle", |x| x >= 0.8),
        },
        Target {
            text: "… route p99 ≤ 2× idle, no failed request",
            check: |r| mixed_ratio(r, "mixed-distinct", "/p99_churn_over_idle", |x| x <= 2.0),
        },
        Target {
            text: "… route-changing registration p99 ≤ 1/3 of Java's",
            check: |r| compare(r, CHANGING_REGISTRATION_P99, JAVA, |x| x <= 1.0 / 3.0),
        },
        Target {
            text: "300 × 10k re-registering every 30 s, 1 % changing a topic: route p99 ≤ 1.5× idle",
            check: |r| {
                mixed_ratio(r, "mixed-300-changing", "/p99_churn_over_idle", |x| x <= 1.5)
            },
        },
    ]
}

/// Every distinct failure message kept anywhere in a result.
fn failure_samples(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("samples", Value::Array(items)) => {
                        for item in items.iter().filter_map(Value::as_str) {
                            if !out.iter().any(|o| o == item) {
                                out.push(item.to_string());
                            }
                        }
                    }
                    ("final_check_error", Value::String(e)) => out.push(e.clone()),
                    _ => failure_samples(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| failure_samples(i, out)),
        _ => {}
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    format!("{cpus} CPUs ({model}), {mem_gib:.1} GiB memory, Linux; client and server share the machine")
}

pub fn run(args: &ReportArgs) -> anyhow::Result<()> {
    let meta_path = args.results.join("meta.json");
    let meta: Meta = serde_json::from_str(
        &std::fs::read_to_string(&meta_path)
            .with_context(|| format!("reading {}", meta_path.display()))?,
    )?;
    let commands = std::fs::read_to_string(args.results.join("commands.txt")).unwrap_or_default();
    let results = Results { dir: &args.results };
    let mut md = String::new();
    let w = &mut md;
    writeln!(w, "# Benchmarks\n")?;
    writeln!(
        w,
        "Written by `scripts/bench{}` on {} at commit `{}`; do not edit by hand. Each figure is \
         measured on every server in turn before the next. Every number is the median of the \
         runs listed in the raw results (at least 3 per figure); load generator: `nsbench`.\n",
        if meta.mode == "quick" { " --quick" } else { "" },
        meta.date,
        meta.commit
    )?;
    writeln!(w, "**Machine:** {}\n", machine())?;
    writeln!(w, "**Versions:**\n")?;
    for (name, version) in &meta.versions {
        writeln!(w, "- {name}: {version}")?;
    }

    writeln!(w, "\n## Results\n")?;
    let peers: Vec<&Server> = meta.servers.iter().filter(|s| s.id != OURS).collect();
    write!(w, "| figure |")?;
    for s in &meta.servers {
        write!(w, " {} |", s.label)?;
    }
    for p in &peers {
        write!(w, " ours ÷ {} |", p.label)?;
    }
    writeln!(w)?;
    writeln!(
        w,
        "|{}",
        "---|".repeat(1 + meta.servers.len() + peers.len())
    )?;
    for row in rows() {
        let arrow = match row.better {
            Better::Higher => "↑",
            Better::Lower => "↓",
        };
        write!(w, "| {} {arrow} |", row.label)?;
        for s in &meta.servers {
            write!(w, " {} |", cell(&results, &s.id, &row))?;
        }
        for p in &peers {
            write!(w, " {} |", ratio(&results, &p.id, &row))?;
        }
        writeln!(w)?;
    }
    writeln!(
        w,
        "\n↑ higher is better, ↓ lower is better. \"not run\": the script did not measure this \
         server for that figure (the canned server only answers the route load). A failed cell \
         quotes the error; no number is ever filled in for it.\n"
    )?;

    writeln!(w, "## Targets (ours)\n")?;
    writeln!(w, "| target | measured | met |\n|---|---|---|")?;
    for t in targets() {
        let (text, met) = match (t.check)(&results) {
            Verdict::Met(text) => (text, "yes"),
            Verdict::Missed(text) => (text, "**no**"),
            Verdict::Unknown(text) => (text, "unknown"),
        };
        writeln!(w, "| {} | {} | {} |", t.text, text, met)?;
    }

    // Sections that other scripts measure in runs of their own and leave beside these results,
    // in this order: controller mode (scripts/bench-controller, real brokers failing over);
    // NameServers that agree, and consensus under a registration storm (both scripts/bench-peers);
    // the rolling restart in the pod simulation (scripts/bench-kube; its text carries its own
    // heading); the route journal's cost (scripts/bench-journal, ours with the journal on and
    // off); a million topics and a restart storm (scripts/bench-large: ours, Java, the canned
    // ceiling; its text carries its commands).
    for (file, heading) in [
        (
            "controller.md",
            "\n## Controller mode\n\nFrom `scripts/bench-controller` (its own run; the date and \
             commit are in the text).\n\n",
        ),
        ("peers.md", "\n## NameServers that agree\n\n"),
        (
            "consensus.md",
            "\n## Consensus under a registration storm\n\n",
        ),
        ("kube.md", "\n"),
        ("journal.md", "\n## Route journal\n\n"),
        ("large.md", "\n## Big clusters\n\n"),
    ] {
        if let Ok(text) = std::fs::read_to_string(args.results.join(file)) {
            writeln!(w, "{heading}{}", text.trim())?;
        }
    }

    writeln!(w, "\n## Failures in full\n")?;
    let mut any = false;
    let mut figures: Vec<&str> = Vec::new();
    for row in rows() {
        if !figures.contains(&row.figure) {
            figures.push(row.figure);
        }
    }
    for s in &meta.servers {
        for figure in &figures {
            let Outcome::Measured(v) = results.outcome(&s.id, figure) else {
                continue;
            };
            let mut samples = Vec::new();
            failure_samples(&v, &mut samples);
            if !samples.is_empty() {
                any = true;
                writeln!(
                    w,
                    "- {} / `{figure}`: requests failed during the run; first messages:\n\n```\n{}\n```\n",
                    s.label,
                    samples.join("\n")
                )?;
            }
        }
    }
    for s in &meta.servers {
        let mut figures: Vec<_> = std::fs::read_dir(args.results.join(&s.id))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "error"))
            .collect();
        figures.sort();
        for path in figures {
            any = true;
            let figure = path.file_stem().unwrap_or_default().to_string_lossy();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            writeln!(
                w,
                "- {} / `{figure}`:\n\n```\n{}\n```\n",
                s.label,
                text.trim()
            )?;
        }
    }
    if !any {
        writeln!(w, "None.")?;
    }

    writeln!(w, "\n## How each figure was measured\n")?;
    writeln!(w, "{}", include_str!("report_method.md").trim())?;
    // scripts/bench-journal's commands follow this run's, from its own run.
    let journal_commands =
        std::fs::read_to_string(args.results.join("journal-commands.txt")).unwrap_or_default();
    let commands = [commands.trim(), journal_commands.trim()]
        .into_iter()
        .filter(|c| !c.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    writeln!(w, "\n## Exact commands\n\n```\n{commands}\n```")?;
    std::fs::write(&args.out, md).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_rows_point_at_their_figures() {
        let rows = rows();
        assert_eq!(rows[ROUTE_QPS].figure, "route-1k");
        assert!(rows[ROUTE_P99].label.contains("p99"));
        assert_eq!(rows[QPS_100].figure, "route-100");
        assert_eq!(rows[QPS_100K].figure, "route-100k");
        assert_eq!(rows[REGISTER_10K].figure, "register-10k");
        assert!(rows[CHURN_P99].label.contains("re-registers"));
        assert!(rows[RSS_100K].label.starts_with("RSS"));
        assert!(rows[TOPIC_LIST].label.starts_with("GET_ALL_TOPIC_LIST"));
        assert!(rows[STARTUP].label.starts_with("Start"));
        assert!(rows[IDLE_RSS].label.starts_with("Idle RSS"));
        assert!(rows[CHANGING_REGISTRATION_P99]
            .label
            .contains("route-changing registration"));
    }

    #[test]
    fn small_ratios_keep_two_digits() {
        assert_eq!(fmt_ratio(0.0027), "0.0027");
        assert_eq!(fmt_ratio(0.83), "0.83");
        assert_eq!(fmt_ratio(22.84), "22.8");
    }

    #[test]
    fn numbers_read_well() {
        assert_eq!(fmt_num(1234567.4), "1,234,567");
        assert_eq!(fmt_num(999.0), "999.0");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(0.123), "0.12");
    }
}
