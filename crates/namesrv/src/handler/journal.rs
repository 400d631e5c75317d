//! ROUTE_JOURNAL (ours): what the route journal holds about a topic or a broker group, with
//! the route as it is now, for `nsadmin explainRoute` and `explainBroker`.

use rocketmq_wire::headers::{RequestHeader, RouteJournalHeader};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Map, Value};

use super::{success, HandlerResult, SystemError};
use crate::journal::{Entry, Subject};
use crate::state::State;

/// Entries answered when the request does not say.
pub(crate) const DEFAULT_LIMIT: usize = 50;
/// Entries answered at most: an answer stays small whatever is asked.
pub(crate) const MAX_LIMIT: usize = 500;
/// A topic or broker name longer than any RocketMQ accepts (topics: 127 characters).
pub(crate) const MAX_NAME: usize = 1024;

pub fn query(state: &State, r: &RemotingCommand) -> HandlerResult {
    let header = RouteJournalHeader::from_command(r)?;
    let topic = header.topic.filter(|t| !t.is_empty());
    let broker = header.broker_name.filter(|b| !b.is_empty());
    let subject = match (topic, broker) {
        (Some(t), None) => Subject::Topic(t),
        (None, Some(b)) => Subject::Broker(b),
        _ => {
            return Err(SystemError(
                "ROUTE_JOURNAL asks about one topic (ext topic) or one broker group (ext \
                 brokerName)"
                    .into(),
            ))
        }
    };
    let (Subject::Topic(n) | Subject::Broker(n)) = subject;
    if n.len() > MAX_NAME {
        return Err(SystemError(format!("a name of {} bytes", n.len())));
    }
    let limit = header
        .limit
        .map_or(DEFAULT_LIMIT, |l| l.clamp(1, MAX_LIMIT as i64) as usize);
    let body = answer(state, subject, limit);
    Ok(success(r).with_body(serde_json::to_vec(&body)?))
}

/// The answer's JSON; the HTTP port serves the same.
pub(crate) fn answer(state: &State, subject: Subject<'_>, limit: usize) -> Value {
    let journal = state.routes.journal();
    let found = journal.find(subject, limit);
    let now = rocketmq_wire::clock::now_ms();
    let started_at = now - state.started.elapsed().as_millis() as i64;
    let mut out = json!({
        "nameServer": {
            "addr": state.remoting_addr.to_string(),
            "startedAt": started_at,
            "now": now,
            "version": env!("CARGO_PKG_VERSION"),
        },
        "journal": journal.stats(),
    });
    // The groups the answer names: the route's, the entries', the subject itself.
    let mut groups: Vec<String> = Vec::new();
    match subject {
        Subject::Topic(topic) => {
            out["topic"] = json!(topic);
            let route = state.routes.route(topic, state.route_extras(topic));
            let queues: Vec<Value> = route
                .iter()
                .flat_map(|r| &r.queue_datas)
                .map(|q| {
                    groups.push(q.broker_name.clone());
                    json!({
                        "broker": q.broker_name,
                        "read": q.read_queue_nums,
                        "write": q.write_queue_nums,
                        "perm": q.perm,
                    })
                })
                .collect();
            out["route"] = Value::Array(queues);
            out["refusals"] = serde_json::to_value(journal.refusals()).unwrap_or_default();
        }
        Subject::Broker(name) => {
            out["brokerName"] = json!(name);
            groups.push(name.to_string());
        }
    }
    for e in &found.entries {
        groups.extend(e.broker.iter().cloned());
        groups.extend(e.topics.iter().map(|m| m.broker.clone()));
    }
    groups.sort();
    groups.dedup();
    out["brokers"] = brokers_now(state, &groups, now);
    out["entries"] = serde_json::to_value::<&[Entry]>(&found.entries).unwrap_or_default();
    out["more"] = json!(found.more);
    out
}

/// Each group as it is now: its cluster, members and when each was last heard (`null` for a
/// group not registered here).
fn brokers_now(state: &State, groups: &[String], now: i64) -> Value {
    state.routes.read(|reg| {
        let mut out = Map::new();
        for name in groups {
            let Some(bd) = reg.group(name) else {
                out.insert(name.clone(), Value::Null);
                continue;
            };
            let members: Vec<Value> = bd
                .broker_addrs
                .iter()
                .map(|(id, addr)| {
                    let live = reg.live(&bd.cluster, addr);
                    json!({
                        "id": id,
                        "addr": addr,
                        "heardAgoMs": live.map(|l| now - l.last_update_ms),
                        "timeoutMs": live.map(|l| l.timeout_ms),
                    })
                })
                .collect();
            out.insert(
                name.clone(),
                json!({"cluster": bd.cluster, "members": members}),
            );
        }
        Value::Object(out)
    })
}
