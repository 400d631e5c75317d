//! `diff`: whether several NameServers tell clients the same thing. NameServers never talk to
//! each other, so a broker that reaches only some of them, or an admin write that reached only
//! some, leaves them disagreeing silently; this makes that visible.
//!
//! Each NameServer's state is flattened into aspects, a label (`cluster C`, `broker B`,
//! `topic T`, `kv NS key K`, …) mapped to a canonical rendering; NameServers agree when every
//! label renders the same on all of them (a missing label renders as absent).

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt, TryStreamExt};
use rocketmq_wire::body::{BrokerData, ClusterInfo, KvTable, TopicList, TopicRouteData};
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::{GetKvListByNamespaceHeader, RequestHeader};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Map};

use crate::error::AdminError;
use crate::namesrvs::{Connection, Namesrvs};
use crate::report::{perm, Report};

/// Exit code when the NameServers differ (0 when they agree; errors exit 2, as diff(1) does).
pub const DIFFERENT: i32 = 1;
pub const TROUBLE: i32 = 2;

/// Route requests in flight per NameServer; enough to hide round trips on clusters with
/// thousands of topics without flooding the server.
const ROUTES_IN_FLIGHT: usize = 32;

type Aspects = BTreeMap<String, String>;

pub async fn diff(ns: &Namesrvs, namespaces: &[String]) -> Result<Report, AdminError> {
    if ns.addrs().len() < 2 {
        return Err(AdminError::NothingToCompare);
    }
    let mut views = Vec::new();
    for addr in ns.addrs() {
        let conn = ns.connect(addr).await?;
        let listing = Listing::fetch(&conn, namespaces).await?;
        views.push((conn, listing));
    }
    let all_topics: BTreeSet<String> = views
        .iter()
        .flat_map(|(_, l)| l.topics.iter().cloned())
        .collect();
    let mut aspects = Vec::new();
    for (conn, listing) in &views {
        let mut a = listing.aspects();
        for (topic, route) in fetch_routes(conn, &all_topics).await? {
            if let Some(rendered) = topic_aspect(listing.topics.contains(&topic), route.as_ref()) {
                a.insert(format!("topic {topic}"), rendered);
            }
        }
        aspects.push(a);
    }
    let addrs: Vec<&str> = views.iter().map(|(c, _)| c.addr.as_str()).collect();
    let differences = compare(&aspects);
    Ok(report(&addrs, &differences, &views[0].1, all_topics.len()))
}

/// What one NameServer holds, apart from routes.
struct Listing {
    cluster: ClusterInfo,
    topics: BTreeSet<String>,
    /// `None` for a namespace the server does not have (distinct from an empty one).
    namespaces: BTreeMap<String, Option<KvTable>>,
}

impl Listing {
    async fn fetch(conn: &Connection, namespaces: &[String]) -> Result<Self, AdminError> {
        let cluster = conn
            .call(RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO))
            .await?
            .success()?
            .decode("cluster info", ClusterInfo::decode)?;
        let topics = conn
            .call(RemotingCommand::request(
                request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
            ))
            .await?
            .success()?
            .decode("topic list", TopicList::decode)?
            .topic_list
            .into_iter()
            .collect();
        let mut kv = BTreeMap::new();
        for namespace in namespaces {
            let reply = conn
                .call(GetKvListByNamespaceHeader { namespace }.to_command())
                .await?;
            let table = if reply.response.code == response::QUERY_NOT_FOUND {
                None
            } else {
                Some(reply.success()?.decode("KV table", KvTable::decode)?)
            };
            kv.insert(namespace.clone(), table);
        }
        Ok(Listing {
            cluster,
            topics,
            namespaces: kv,
        })
    }

    fn aspects(&self) -> Aspects {
        let mut a = Aspects::new();
        for (cluster, brokers) in &self.cluster.cluster_addr_table {
            let names: Vec<&str> = brokers.iter().map(String::as_str).collect();
            a.insert(
                format!("cluster {cluster}"),
                format!("brokers {}", names.join(", ")),
            );
        }
        for (name, broker) in &self.cluster.broker_addr_table {
            a.insert(format!("broker {name}"), broker_line(broker));
        }
        for (namespace, table) in &self.namespaces {
            let Some(table) = table else { continue };
            a.insert(format!("kv {namespace}"), "namespace present".into());
            for (key, value) in &table.table {
                a.insert(format!("kv {namespace} key {key}"), value.clone());
            }
        }
        a
    }
}

/// Every topic's route from one NameServer, `None` where it has none.
async fn fetch_routes(
    conn: &Connection,
    topics: &BTreeSet<String>,
) -> Result<Vec<(String, Option<TopicRouteData>)>, AdminError> {
    stream::iter(topics.iter().cloned())
        .map(|topic| async move {
            let route = conn.route(&topic).await?;
            Ok((topic, route))
        })
        .buffered(ROUTES_IN_FLIGHT)
        .try_collect()
        .await
}

/// A topic as one NameServer presents it: its route, and whether it lists the topic, since
/// clients see one and admin tools the other.
fn topic_aspect(listed: bool, route: Option<&TopicRouteData>) -> Option<String> {
    match (listed, route) {
        (false, None) => None,
        (true, None) => Some("listed, but no route".into()),
        (true, Some(route)) => Some(route_lines(route)),
        (false, Some(route)) => Some(format!("not listed, but routed:\n{}", route_lines(route))),
    }
}

fn route_lines(route: &TopicRouteData) -> String {
    let mut queues: Vec<_> = route.queue_datas.iter().collect();
    queues.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut brokers: Vec<_> = route.broker_datas.iter().collect();
    brokers.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut lines: Vec<String> = queues
        .iter()
        .map(|q| {
            format!(
                "queues on {}: read {}, write {}, perm {}, sysFlag {}",
                q.broker_name,
                q.read_queue_nums,
                q.write_queue_nums,
                perm(q.perm),
                q.topic_sys_flag
            )
        })
        .collect();
    lines.extend(
        brokers
            .iter()
            .map(|b| format!("broker {}: {}", b.broker_name, broker_line(b))),
    );
    if let Some(conf) = &route.order_topic_conf {
        lines.push(format!("order config {conf}"));
    }
    lines.join("\n")
}

fn broker_line(broker: &BrokerData) -> String {
    let addrs: Vec<String> = broker
        .broker_addrs
        .iter()
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect();
    let mut line = format!("cluster {}, {}", broker.cluster, addrs.join(", "));
    if broker.enable_acting_master {
        line.push_str(", acting master enabled");
    }
    if let Some(zone) = &broker.zone_name {
        line.push_str(&format!(", zone {zone}"));
    }
    line
}

/// A label whose rendering is not the same on every NameServer, with each one's rendering.
struct Difference {
    label: String,
    values: Vec<Option<String>>,
}

fn compare(aspects: &[Aspects]) -> Vec<Difference> {
    let labels: BTreeSet<&String> = aspects.iter().flat_map(|a| a.keys()).collect();
    labels
        .into_iter()
        .filter_map(|label| {
            let values: Vec<Option<String>> =
                aspects.iter().map(|a| a.get(label).cloned()).collect();
            let agree = values.windows(2).all(|w| w[0] == w[1]);
            (!agree).then(|| Difference {
                label: label.clone(),
                values,
            })
        })
        .collect()
}

fn report(addrs: &[&str], differences: &[Difference], first: &Listing, topics: usize) -> Report {
    let width = addrs.iter().map(|a| a.len()).max().unwrap_or(0);
    let mut text = String::new();
    let mut json_diffs = Vec::new();
    for d in differences {
        text.push_str(&format!("{}\n", d.label));
        let mut values = Map::new();
        for (addr, value) in addrs.iter().zip(&d.values) {
            let shown = value.as_deref().unwrap_or("(absent)");
            let indent = " ".repeat(width + 4);
            let shown = shown.replace('\n', &format!("\n{indent}"));
            text.push_str(&format!("  {addr:<width$}  {shown}\n"));
            values.insert(addr.to_string(), json!(value));
        }
        json_diffs.push(json!({ "item": d.label, "values": values }));
    }
    if differences.is_empty() {
        text.push_str(&format!(
            "The {} NameServers agree: {} clusters, {} brokers, {} topics, {} KV namespaces.\n",
            addrs.len(),
            first.cluster.cluster_addr_table.len(),
            first.cluster.broker_addr_table.len(),
            topics,
            first.namespaces.len()
        ));
    } else {
        text.push_str(&format!(
            "{} difference(s) between {}.\n",
            differences.len(),
            addrs.join(", ")
        ));
    }
    Report {
        text,
        json: json!({
            "namesrvs": addrs,
            "agree": differences.is_empty(),
            "differences": json_diffs,
        }),
        failures: Vec::new(),
        exit_code: if differences.is_empty() { 0 } else { DIFFERENT },
    }
}
