//! Topic lists (206, 224, 304, 311-313) and topic changes (216, 217).

use std::collections::BTreeSet;

use rocketmq_wire::body::{TopicList, TopicRouteData};
use rocketmq_wire::codes::request as req;
use rocketmq_wire::headers::{
    DeleteTopicHeader, GetTopicsByClusterHeader, RegisterTopicHeader, RequestHeader,
};
use rocketmq_wire::RemotingCommand;

use super::{admin_change, success, Context, HandlerResult, SystemError};
use crate::peers::replicated::AdminOp;
use crate::state::State;

const TOPIC_SYS_FLAG_UNIT: i32 = 1;
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 2;

fn list_reply(
    r: &RemotingCommand,
    topics: Vec<String>,
    broker_addr: Option<String>,
) -> HandlerResult {
    let list = TopicList {
        topic_list: topics,
        broker_addr,
    };
    Ok(success(r).with_body(list.encode()))
}

fn gate(open: bool) -> Result<(), SystemError> {
    open.then_some(())
        .ok_or_else(|| SystemError("disable".into()))
}

pub fn all(state: &State, r: &RemotingCommand) -> HandlerResult {
    gate(state.config.settings().server.enable_all_topic_list)?;
    Ok(success(r).with_body(state.routes.all_topics_body()))
}

pub fn by_cluster(state: &State, r: &RemotingCommand) -> HandlerResult {
    gate(state.config.settings().server.enable_topic_list)?;
    let cluster = GetTopicsByClusterHeader::from_command(r)?.cluster;
    Ok(success(r).with_body(state.routes.cluster_topics_body(cluster)))
}

pub fn system(state: &State, r: &RemotingCommand) -> HandlerResult {
    let (names, broker_addr) = state.routes.read(|reg| {
        let mut names = BTreeSet::new();
        for (cluster, brokers) in reg.clusters() {
            names.insert(cluster.to_string());
            names.extend(brokers.iter().cloned());
        }
        let mut groups: Vec<_> = reg.groups().collect();
        groups.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
        let addr = groups
            .iter()
            .find_map(|bd| bd.broker_addrs.values().next().cloned());
        (names, addr)
    });
    list_reply(r, names.into_iter().collect(), broker_addr)
}

pub fn unit(state: &State, r: &RemotingCommand) -> HandlerResult {
    gate(state.config.settings().server.enable_topic_list)?;
    let pred: fn(i32) -> bool = match r.code {
        req::GET_UNIT_TOPIC_LIST => |f| f & TOPIC_SYS_FLAG_UNIT != 0,
        req::GET_HAS_UNIT_SUB_TOPIC_LIST => |f| f & TOPIC_SYS_FLAG_UNIT_SUB != 0,
        _ => |f| f & TOPIC_SYS_FLAG_UNIT_SUB != 0 && f & TOPIC_SYS_FLAG_UNIT == 0,
    };
    let topics = state.routes.topics_by_sys_flag(pred);
    list_reply(r, topics, None)
}

pub async fn delete(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let DeleteTopicHeader {
        topic,
        cluster_name,
    } = DeleteTopicHeader::from_command(r)?;
    let cluster = cluster_name.filter(|c| !c.is_empty());
    let op = AdminOp::DeleteTopic {
        topic: topic.to_string(),
        cluster: cluster.map(String::from),
    };
    admin_change(state, (c, r), op).await?;
    Ok(success(r))
}

pub async fn register(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let topic = RegisterTopicHeader::from_command(r)?.topic;
    if let Some(body) = &r.body {
        // Read as a tree; a route body is small, and a peer's large one would cost many times
        // its size.
        if body.len() > rocketmq_wire::json::TREE_MAX {
            return Err(SystemError(format!(
                "topic route body of {} bytes",
                body.len()
            )));
        }
        let route = TopicRouteData::decode(body)?;
        if !route.queue_datas.is_empty() {
            let queues = route
                .queue_datas
                .iter()
                .map(|q| {
                    let (read, write) = (q.read_queue_nums, q.write_queue_nums);
                    (q.broker_name.clone(), read, write, q.perm, q.topic_sys_flag)
                })
                .collect();
            let op = AdminOp::RegisterTopic {
                topic: topic.to_string(),
                queues,
            };
            admin_change(state, (c, r), op).await?;
        }
    }
    Ok(success(r))
}
