//! `explainRoute` and `explainBroker`: why a topic has (or has no) route on each NameServer, and
//! where a broker group stands, in plain words, from each NameServer's route journal
//! (ROUTE_JOURNAL, ours) and what it serves now.
//!
//! Each NameServer is asked on its own: they do not share their tables, and "No route info of
//! this topic" is often one NameServer that a broker never registered with. A NameServer without
//! a journal (the Java one) is still asked for the route itself, and said to keep no history.

use std::collections::BTreeMap;
use std::time::{Duration, UNIX_EPOCH};

use rocketmq_wire::body::ClusterInfo;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::{RequestHeader, RouteJournalHeader};
use rocketmq_wire::RemotingCommand;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::error::AdminError;
use crate::namesrvs::{Connection, Namesrvs};
use crate::report::{perm, Report};

/// Entries asked for per NameServer: the latest are what explain a route.
const LIMIT: i64 = 50;

// ---- the answer of ROUTE_JOURNAL, as far as it is read here ----

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    name_server: Server,
    journal: JournalStats,
    #[serde(default)]
    route: Vec<Queues>,
    #[serde(default)]
    brokers: BTreeMap<String, Option<Group>>,
    #[serde(default)]
    entries: Vec<Entry>,
    #[serde(default)]
    refusals: Vec<Entry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Server {
    started_at: i64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JournalStats {
    enabled: bool,
    since: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
struct Queues {
    broker: String,
    read: i32,
    write: i32,
    perm: i32,
}

#[derive(Debug, Deserialize)]
struct Group {
    cluster: String,
    members: Vec<Member>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Member {
    id: i64,
    addr: String,
    heard_ago_ms: Option<i64>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    at: i64,
    #[serde(default)]
    cause: String,
    broker: Option<String>,
    addr: Option<String>,
    silent_ms: Option<i64>,
    timeout_ms: Option<i64>,
    by: Option<String>,
    #[serde(default)]
    detail: String,
    #[serde(default)]
    topics: Vec<Move>,
}

#[derive(Debug, Clone, Deserialize)]
struct Move {
    topic: String,
    broker: String,
    now: Option<[i32; 3]>,
}

/// An instant of a NameServer's clock, in UTC to the second.
fn when(ms: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// A duration as people read it: tenths of a second below ten seconds.
fn secs(ms: i64) -> String {
    if ms < 10_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} s", (ms + 500) / 1000)
    }
}

/// What one NameServer said, or why it said nothing.
enum Heard {
    /// With a journal (ours).
    Journal(Answer),
    /// Without one (the Java NameServer): its route only.
    RouteOnly(Vec<Queues>),
    Unreachable(String),
}

/// ROUTE_JOURNAL, asked about a topic or a broker group.
async fn ask_journal(
    conn: &Connection,
    topic: Option<&str>,
    broker_name: Option<&str>,
) -> Result<Heard, AdminError> {
    let request = RouteJournalHeader {
        topic,
        broker_name,
        limit: Some(LIMIT),
    }
    .to_command();
    let reply = conn.call(request).await?;
    if reply.response.code == response::REQUEST_CODE_NOT_SUPPORTED {
        return Ok(Heard::RouteOnly(Vec::new()));
    }
    let reply = reply.success()?;
    let answer: Answer = reply.decode("route journal", |b| serde_json::from_slice(b))?;
    Ok(Heard::Journal(answer))
}

async fn ask_route(conn: &Connection, topic: &str) -> Result<Vec<Queues>, AdminError> {
    let route = conn.route(topic).await?.unwrap_or_default();
    Ok(route
        .queue_datas
        .iter()
        .map(|q| Queues {
            broker: q.broker_name.clone(),
            read: q.read_queue_nums,
            write: q.write_queue_nums,
            perm: q.perm,
        })
        .collect())
}

async fn known_brokers(conn: &Connection) -> Result<Vec<String>, AdminError> {
    let info = conn
        .call(RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO))
        .await?
        .success()?
        .decode("cluster info", ClusterInfo::decode)?;
    Ok(info.broker_addr_table.into_keys().collect())
}

/// Asks one NameServer about `topic`; never fails, an unreachable one says so.
async fn hear_topic(ns: &Namesrvs, addr: &str, topic: &str) -> (Heard, Option<Connection>) {
    let conn = match ns.connect(addr).await {
        Ok(c) => c,
        Err(e) => return (Heard::Unreachable(e.to_string()), None),
    };
    let heard = match ask_journal(&conn, Some(topic), None).await {
        Ok(Heard::RouteOnly(_)) => match ask_route(&conn, topic).await {
            Ok(route) => Heard::RouteOnly(route),
            Err(e) => Heard::Unreachable(e.to_string()),
        },
        Ok(heard) => heard,
        Err(e) => Heard::Unreachable(e.to_string()),
    };
    (heard, Some(conn))
}

/// One NameServer's verdict on a topic.
struct Verdict {
    addr: String,
    route: Vec<Queues>,
    /// A word for scripts: `routed`, `read-only`, `never-registered`, `expired`, …
    cause: String,
    reason: String,
    at: Option<i64>,
    broker: Option<String>,
}

impl Verdict {
    fn new(addr: &str, route: &[Queues], cause: &str, reason: String) -> Self {
        Verdict {
            addr: addr.to_string(),
            route: route.to_vec(),
            cause: cause.to_string(),
            reason,
            at: None,
            broker: None,
        }
    }

    fn routes(&self) -> bool {
        !self.route.is_empty()
    }

    fn json(&self) -> Value {
        json!({
            "addr": self.addr,
            "routes": self.routes(),
            "route": self.route,
            "cause": self.cause,
            "reason": self.reason,
            "at": self.at,
            "broker": self.broker,
        })
    }
}

fn route_words(route: &[Queues]) -> String {
    route
        .iter()
        .map(|q| {
            format!(
                "{} (read {}, write {}, perm {})",
                q.broker,
                q.read,
                q.write,
                perm(q.perm)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The cause word and the words for an entry that took `topic` off a group's route here.
fn removal_words(e: &Entry, group: &str, answer: &Answer) -> (String, String) {
    let addr = e
        .addr
        .as_deref()
        .map(|a| format!(" ({a})"))
        .unwrap_or_default();
    let by = e.by.as_deref().unwrap_or("an admin");
    let at = when(e.at);
    let (cause, words) = match e.cause.as_str() {
        "expired" => {
            let silent = e.silent_ms.unwrap_or_default();
            let timeout = e.timeout_ms.unwrap_or_default();
            (
                "expired",
                format!(
                    "{group}{addr} stopped sending heartbeats at {} and expired {} later, at \
                     {at} (its timeout: {})",
                    when(e.at - silent),
                    secs(silent),
                    secs(timeout)
                ),
            )
        }
        "connection-closed" => (
            "connection-closed",
            format!(
                "{group}{addr} lost its connection to this NameServer at {at} (the broker \
                 stopped, or the network between them dropped), and its topics left with it"
            ),
        ),
        "unregistered" => (
            "unregistered",
            format!("{group}{addr} unregistered at {at}: it was shut down"),
        ),
        "left-at-peer" => (
            "left-at-peer",
            format!("{group}{addr} unregistered at a peer NameServer, told here at {at}"),
        ),
        "unbacked" => (
            "unbacked",
            format!(
                "{group}{addr} was restored from the route snapshot at start but did not \
                 register again; it was dropped at {at}"
            ),
        ),
        "admin-deleted" => ("admin-deleted", format!("deleted by {by} at {at}")),
        "updated" | "taken-over" => (
            "no-longer-listed",
            format!(
                "{group}{addr} registered at {at} without it{}",
                match e.by.as_deref() {
                    Some(peer) => format!(" (as {peer} said)"),
                    None => String::new(),
                }
            ),
        ),
        other => (
            "changed",
            format!("its route on {group} was removed at {at} ({other})"),
        ),
    };
    let mut words = words;
    match answer.brokers.get(group) {
        // An admin's delete (or a change of no known cause) says nothing of the broker, which
        // may still have the topic: a registration that lists it routes it again. The other
        // removals are the broker's own doing; registered again without the topic, it has
        // dropped it (a registration adds every topic it lists that the route lacks).
        Some(Some(_)) if matches!(cause, "admin-deleted" | "changed") => words.push_str(&format!(
            "; {group} is still registered here: if the broker still has the topic, its \
                 next registration that lists it routes it again"
        )),
        Some(Some(_)) => words.push_str(&format!(
            "; {group} is registered here now, without this topic: the broker no longer has it"
        )),
        _ if matches!(
            cause,
            "expired" | "connection-closed" | "unregistered" | "unbacked"
        ) =>
        {
            words.push_str("; it has not registered here since")
        }
        _ => {}
    }
    (cause.to_string(), words)
}

/// Why a NameServer with a journal routes `topic` the way it does, or not at all.
/// `elsewhere` holds the groups other NameServers route it through, and whether this one has
/// ever heard of each (from its journal).
fn topic_verdict(
    addr: &str,
    topic: &str,
    answer: &Answer,
    unknown_elsewhere: &[(String, String)],
) -> Verdict {
    let mut v = Verdict::new(addr, &answer.route, "", String::new());
    if v.routes() {
        let writable = answer.route.iter().any(|q| q.perm & 2 != 0);
        if writable {
            v.cause = "routed".into();
            v.reason = format!("routes it through {}", route_words(&answer.route));
            return v;
        }
        v.cause = "read-only".into();
        let wiped = answer.entries.iter().rev().find(|e| {
            e.topics
                .iter()
                .any(|m| m.topic == topic && m.now.is_some_and(|q| q[2] & 2 == 0))
        });
        v.reason = match wiped {
            Some(e) if e.cause == "admin-wiped" => {
                v.at = Some(e.at);
                format!(
                    "routes it read-only through {}: write permission wiped by {} at {}",
                    route_words(&answer.route),
                    e.by.as_deref().unwrap_or("an admin"),
                    when(e.at)
                )
            }
            _ => format!(
                "routes it read-only through {}: producers cannot send to it",
                route_words(&answer.route)
            ),
        };
        return v;
    }
    let removal = answer.entries.iter().rev().find_map(|e| {
        e.topics
            .iter()
            .find(|m| m.topic == topic && m.now.is_none())
            .map(|m| (e, m))
    });
    if let Some((e, m)) = removal {
        let (cause, words) = removal_words(e, &m.broker, answer);
        v.cause = cause;
        v.reason = words;
        v.at = Some(e.at);
        v.broker = Some(m.broker.clone());
        return v;
    }
    if !answer.journal.enabled {
        v.cause = "no-journal".into();
        v.reason = "has no route, and keeps no route journal (routeJournalEnable=false)".into();
        return v;
    }
    let since = answer
        .journal
        .since
        .unwrap_or(answer.name_server.started_at);
    if let Some((other, group)) = unknown_elsewhere.first() {
        v.cause = "unknown-broker".into();
        v.broker = Some(group.clone());
        v.reason = format!(
            "NameServer {other} routes it through {group}, which has not registered here since \
             {}: the broker's namesrvAddr does not list {addr} (or the broker cannot reach it)",
            when(since)
        );
        return v;
    }
    v.cause = "never-registered".into();
    v.reason = format!(
        "no broker has registered {topic} on this NameServer since {} (it started at {}): create \
         it on a broker (mqadmin updateTopic -t {topic} -c CLUSTER), or turn on \
         autoCreateTopicEnable on the brokers",
        when(since),
        when(answer.name_server.started_at)
    );
    if let Some(r) = answer.refusals.last() {
        v.reason.push_str(&format!(
            "; note: registrations were refused here recently, the latest from {} at {}: {}",
            r.broker.as_deref().unwrap_or("a broker"),
            when(r.at),
            r.detail
        ));
    }
    v
}

pub async fn explain_route(ns: &Namesrvs, topic: &str) -> Result<Report, AdminError> {
    let mut heard = Vec::new();
    for addr in ns.addrs() {
        let (h, conn) = hear_topic(ns, addr, topic).await;
        heard.push((addr.clone(), h, conn));
    }
    // The groups each NameServer routes the topic through, to tell the others about.
    let routing: Vec<(String, Vec<String>)> = heard
        .iter()
        .filter_map(|(addr, h, _)| {
            let route = match h {
                Heard::Journal(a) => &a.route,
                Heard::RouteOnly(r) => r,
                Heard::Unreachable(_) => return None,
            };
            (!route.is_empty()).then(|| {
                (
                    addr.clone(),
                    route.iter().map(|q| q.broker.clone()).collect(),
                )
            })
        })
        .collect();
    let mut verdicts = Vec::new();
    for (addr, h, conn) in &heard {
        let verdict = match h {
            Heard::Unreachable(why) => {
                let reason = format!("could not be asked: {why}");
                Verdict::new(addr, &[], "unreachable", reason)
            }
            Heard::RouteOnly(route) if route.is_empty() => {
                let why =
                    "has no route, and keeps no route journal to say why (not our NameServer)";
                Verdict::new(addr, route, "no-journal", why.into())
            }
            Heard::RouteOnly(route) => {
                let reason = format!("routes it through {}", route_words(route));
                Verdict::new(addr, route, "routed", reason)
            }
            Heard::Journal(answer) => {
                let mut unknown = Vec::new();
                if answer.route.is_empty() {
                    if let Some(conn) = conn {
                        unknown = unheard_groups(conn, &routing, addr).await;
                    }
                }
                topic_verdict(addr, topic, answer, &unknown)
            }
        };
        verdicts.push(verdict);
    }
    Ok(topic_report(topic, &verdicts))
}

/// The groups other NameServers route the topic through that this one has no word of at all:
/// not registered now, and nothing in its journal.
async fn unheard_groups(
    conn: &Connection,
    routing: &[(String, Vec<String>)],
    here: &str,
) -> Vec<(String, String)> {
    let known = known_brokers(conn).await.unwrap_or_default();
    let mut out = Vec::new();
    for (other, groups) in routing.iter().filter(|(a, _)| a != here) {
        for group in groups {
            if known.contains(group) {
                continue;
            }
            let silent = match ask_journal(conn, None, Some(group)).await {
                Ok(Heard::Journal(a)) => a.entries.is_empty(),
                _ => false,
            };
            if silent {
                out.push((other.clone(), group.clone()));
            }
        }
    }
    out
}

fn topic_report(topic: &str, verdicts: &[Verdict]) -> Report {
    let n = verdicts.len();
    let routing: Vec<&Verdict> = verdicts.iter().filter(|v| v.routes()).collect();
    let not: Vec<&Verdict> = verdicts.iter().filter(|v| !v.routes()).collect();
    let summary = if not.is_empty() {
        let read_only: Vec<&&Verdict> = routing.iter().filter(|v| v.cause == "read-only").collect();
        match read_only.first() {
            Some(v) => format!("{topic} is routed but read-only: {}", v.reason),
            None if n == 1 => format!("{topic} is routed: {}", verdicts[0].reason),
            None => format!("every NameServer routes {topic}"),
        }
    } else if routing.is_empty() {
        let first = not[0];
        let same = not
            .iter()
            .all(|v| v.cause == first.cause && v.broker == first.broker);
        if n > 1 && same {
            format!(
                "no NameServer routes {topic}: {} (on all {n} NameServers)",
                first.reason
            )
        } else if n == 1 {
            format!("{topic} has no route: {}", first.reason)
        } else {
            let each: Vec<String> = not
                .iter()
                .map(|v| format!("{}: {}", v.addr, v.reason))
                .collect();
            format!("no NameServer routes {topic}. {}", each.join(". "))
        }
    } else {
        let routed_by: Vec<&str> = routing.iter().map(|v| v.addr.as_str()).collect();
        let each: Vec<String> = not
            .iter()
            .map(|v| format!("{} does not: {}", v.addr, v.reason))
            .collect();
        format!(
            "NameServer {} routes {topic}; {}. A client asking a NameServer without the route \
             gets \"No route info of this topic\"",
            routed_by.join(", "),
            each.join("; ")
        )
    };
    let mut text = format!("Topic {topic}\n");
    for v in verdicts {
        text.push_str(&format!("  {}  {}\n", v.addr, v.reason));
    }
    text.push_str(&format!("In short: {summary}\n"));
    let json = json!({
        "topic": topic,
        "routedBy": routing.iter().map(|v| v.addr.clone()).collect::<Vec<_>>(),
        "summary": summary,
        "nameServers": verdicts.iter().map(Verdict::json).collect::<Vec<_>>(),
    });
    Report::ok(text, json)
}

/// The words for a broker group's latest departure here, with its cause word.
fn departure_words(e: &Entry, name: &str) -> (String, String) {
    let answer = Answer::default();
    let (cause, words) = removal_words(e, name, &answer);
    if cause == "changed" || cause == "no-longer-listed" {
        return (e.cause.clone(), format!("{} at {}", e.cause, when(e.at)));
    }
    (cause, words)
}

pub async fn explain_broker(ns: &Namesrvs, name: &str) -> Result<Report, AdminError> {
    let mut each = Vec::new();
    for addr in ns.addrs() {
        let asked = match ns.connect(addr).await {
            Ok(conn) => ask_journal(&conn, None, Some(name))
                .await
                .map(|h| (h, conn)),
            Err(e) => Err(e),
        };
        let answer = match asked {
            Ok((Heard::Journal(a), _)) => a,
            Ok((_, conn)) => {
                let known = known_brokers(&conn).await.unwrap_or_default();
                let registered = known.iter().any(|b| b == name);
                each.push(json!({"addr": addr, "registered": registered, "cause": "no-journal",
                    "reason": if registered {
                        "has it registered; keeps no route journal (not our NameServer)"
                    } else {
                        "does not have it registered, and keeps no route journal to say why (not our NameServer)"
                    }}));
                continue;
            }
            Err(e) => {
                each.push(
                    json!({"addr": addr, "registered": false, "cause": "unreachable",
                    "reason": format!("could not be asked: {e}")}),
                );
                continue;
            }
        };
        let group = answer.brokers.get(name).and_then(Option::as_ref);
        let departure = answer.entries.iter().rev().find(|e| {
            matches!(
                e.cause.as_str(),
                "expired" | "connection-closed" | "unregistered" | "left-at-peer" | "unbacked"
            )
        });
        let (registered, cause, reason, at) = match group {
            Some(g) => {
                let members: Vec<String> = g
                    .members
                    .iter()
                    .map(|m| match m.heard_ago_ms {
                        Some(ago) => format!("id {} at {} heard {} ago", m.id, m.addr, secs(ago)),
                        None => format!("id {} at {}", m.id, m.addr),
                    })
                    .collect();
                let mut reason = format!(
                    "registered in cluster {}: {}",
                    g.cluster,
                    members.join(", ")
                );
                if let Some(e) = departure {
                    reason.push_str(&format!(
                        "; a member last left at {} ({})",
                        when(e.at),
                        e.cause
                    ));
                }
                (true, "registered".to_string(), reason, None)
            }
            None => {
                match departure {
                    Some(e) => {
                        let (cause, words) = departure_words(e, name);
                        (false, cause, words, Some(e.at))
                    }
                    None if answer.entries.is_empty() => (
                        false,
                        "never-registered".to_string(),
                        format!(
                        "{name} has not registered here since {}: its namesrvAddr does not list \
                         this NameServer, or it cannot reach it",
                        when(answer.journal.since.unwrap_or(answer.name_server.started_at))
                    ),
                        None,
                    ),
                    None => {
                        let last = answer.entries.last().expect("not empty");
                        (
                            false,
                            last.cause.clone(),
                            format!(
                                "not registered; last change here {} at {}",
                                last.cause,
                                when(last.at)
                            ),
                            Some(last.at),
                        )
                    }
                }
            }
        };
        each.push(
            json!({"addr": addr, "registered": registered, "cause": cause,
            "reason": reason, "at": at}),
        );
    }
    let mut text = format!("Broker {name}\n");
    for e in &each {
        text.push_str(&format!(
            "  {}  {}\n",
            e["addr"].as_str().unwrap_or_default(),
            e["reason"].as_str().unwrap_or_default()
        ));
    }
    let registered_on = each.iter().filter(|e| e["registered"] == true).count();
    let summary = format!(
        "{name} is registered on {registered_on} of {} NameServer{}",
        each.len(),
        if each.len() == 1 { "" } else { "s" }
    );
    text.push_str(&format!("In short: {summary}\n"));
    Ok(Report::ok(
        text,
        json!({"brokerName": name, "summary": summary, "nameServers": each}),
    ))
}
