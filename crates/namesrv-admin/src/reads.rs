//! Commands that only look: answered by the first NameServer that responds (getNamesrvConfig
//! asks every one, since each has its own configuration).

use rocketmq_wire::body::{ClusterInfo, KvTable, TopicList, TopicRouteData};
use rocketmq_wire::codes::request;
use rocketmq_wire::headers::{
    GetKvConfigHeader, GetKvConfigResponseHeader, GetKvListByNamespaceHeader, GetRouteInfoHeader,
    GetTopicsByClusterHeader, RequestHeader, ResponseHeader,
};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Map, Value};

use crate::error::AdminError;
use crate::namesrvs::{Namesrvs, ServerResponse};
use crate::report::{perm, Report, Table};

/// The body as JSON: what the server said, with fastjson's unquoted keys made valid.
pub fn body_json(reply: &ServerResponse) -> Result<Value, AdminError> {
    reply.decode("JSON body", rocketmq_wire::json::parse_value)
}

pub async fn cluster_list(ns: &Namesrvs) -> Result<Report, AdminError> {
    let reply = ns
        .read(RemotingCommand::request(request::GET_BROKER_CLUSTER_INFO))
        .await?
        .success()?;
    let info = reply.decode("cluster info", ClusterInfo::decode)?;
    let mut table = Table::new(&["Cluster Name", "Broker Name", "BID", "Addr"]);
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let addrs = info.broker_addr_table.get(name).map(|b| &b.broker_addrs);
            match addrs.filter(|a| !a.is_empty()) {
                Some(addrs) => {
                    for (id, addr) in addrs {
                        table.row(vec![
                            cluster.clone(),
                            name.clone(),
                            id.to_string(),
                            addr.clone(),
                        ]);
                    }
                }
                None => table.row(vec![cluster.clone(), name.clone(), "-".into(), "-".into()]),
            }
        }
    }
    Ok(Report::ok(table.render(), body_json(&reply)?))
}

pub async fn topic_route(ns: &Namesrvs, topic: &str) -> Result<Report, AdminError> {
    let reply = ns
        .read(GetRouteInfoHeader::new(topic).to_command())
        .await?
        .success()?;
    let route = reply.decode("topic route", TopicRouteData::decode)?;
    let mut brokers = Table::new(&["Broker Name", "Cluster", "BID", "Addr"]);
    for bd in &route.broker_datas {
        for (id, addr) in &bd.broker_addrs {
            brokers.row(vec![
                bd.broker_name.clone(),
                bd.cluster.clone(),
                id.to_string(),
                addr.clone(),
            ]);
        }
    }
    let mut queues = Table::new(&[
        "Broker Name",
        "Read Queues",
        "Write Queues",
        "Perm",
        "Sys Flag",
    ]);
    for qd in &route.queue_datas {
        queues.row(vec![
            qd.broker_name.clone(),
            qd.read_queue_nums.to_string(),
            qd.write_queue_nums.to_string(),
            perm(qd.perm),
            qd.topic_sys_flag.to_string(),
        ]);
    }
    let mut text = format!("{}\n{}", brokers.render(), queues.render());
    if let Some(conf) = &route.order_topic_conf {
        text.push_str(&format!("\nOrder topic config: {conf}\n"));
    }
    Ok(Report::ok(text, body_json(&reply)?))
}

pub async fn topic_list(ns: &Namesrvs, cluster: Option<&str>) -> Result<Report, AdminError> {
    let request = match cluster {
        Some(cluster) => GetTopicsByClusterHeader { cluster }.to_command(),
        None => RemotingCommand::request(request::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    };
    let reply = ns.read(request).await?.success()?;
    let mut list = reply.decode("topic list", TopicList::decode)?;
    list.topic_list.sort();
    let text = list.topic_list.iter().map(|t| format!("{t}\n")).collect();
    Ok(Report::ok(text, json!({ "topicList": list.topic_list })))
}

pub async fn get_kv_config(
    ns: &Namesrvs,
    namespace: &str,
    key: &str,
) -> Result<Report, AdminError> {
    let reply = ns
        .read(GetKvConfigHeader { namespace, key }.to_command())
        .await?
        .success()?;
    let value = GetKvConfigResponseHeader::from_command(&reply.response)
        .ok()
        .and_then(|h| h.value)
        .unwrap_or_default()
        .to_string();
    Ok(Report::ok(
        format!("{value}\n"),
        json!({ "namespace": namespace, "key": key, "value": value }),
    ))
}

pub async fn get_kv_list(ns: &Namesrvs, namespace: &str) -> Result<Report, AdminError> {
    let reply = ns
        .read(GetKvListByNamespaceHeader { namespace }.to_command())
        .await?
        .success()?;
    let kv = reply.decode("KV table", KvTable::decode)?;
    let mut table = Table::new(&["Key", "Value"]);
    for (k, v) in &kv.table {
        table.row(vec![k.clone(), v.clone()]);
    }
    Ok(Report::ok(
        table.render(),
        json!({ "namespace": namespace, "table": kv.table }),
    ))
}

pub async fn get_namesrv_config(ns: &Namesrvs) -> Report {
    let outcomes = ns
        .ask_each(RemotingCommand::request(request::GET_NAMESRV_CONFIG))
        .await;
    config_report(outcomes, |k, v| format!("{k}={v}\n"))
}

/// Each server's configuration (a properties-text answer) under a heading naming the server;
/// `line` renders one key, the one thing in which mqadmin's config listings differ.
pub fn config_report(
    outcomes: Vec<Result<ServerResponse, AdminError>>,
    line: impl Fn(&str, &str) -> String,
) -> Report {
    let mut text = String::new();
    let mut json = Map::new();
    let mut failures = Vec::new();
    for outcome in outcomes {
        let config = outcome.and_then(|r| {
            let config = r.decode("config", |body| {
                rocketmq_wire::properties::parse(body).map_err(|e| e.to_string())
            });
            config.map(|c| (r.addr, c))
        });
        match config {
            Ok((addr, config)) => {
                let mut config: Vec<(String, String)> = config.into_iter().collect();
                config.sort();
                text.push_str(&format!("============{addr}============\n"));
                for (k, v) in &config {
                    text.push_str(&line(k, v));
                }
                let config: Map<String, Value> = config
                    .into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect();
                json.insert(addr, Value::Object(config));
            }
            Err(e) => failures.push(e),
        }
    }
    Report::partial(text, Value::Object(json), failures)
}
