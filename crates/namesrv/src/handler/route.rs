//! GET_ROUTEINFO_BY_TOPIC (the hot path) and GET_BROKER_CLUSTER_INFO.

use std::collections::BTreeSet;

use rocketmq_wire::body::TopicRouteData;
use rocketmq_wire::codes::{response as resp, version};
use rocketmq_wire::headers::{GetRouteInfoHeader, RequestHeader};
use rocketmq_wire::json::JsonStyle;
use rocketmq_wire::RemotingCommand;

use super::{success, HandlerResult, SystemError};
use crate::state::State;

const NOT_FOUND_HINT: &str =
    "See https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

pub fn topic_route(state: &State, r: &RemotingCommand) -> HandlerResult {
    if state.waiting_for_service() {
        return Err(SystemError("name server not ready".into()));
    }
    if let Some(why) = state.catching_up() {
        return Err(SystemError(format!(
            "name server not ready: {why}; ask another NameServer"
        )));
    }
    let header = GetRouteInfoHeader::from_command(r)?;
    let topic = header.topic.unwrap_or("null");
    // Only a cache miss needs the settings and the KV store.
    let extras = || state.route_extras(topic);
    let body = match requested_zone(&header) {
        // Zone-filtered routes are rare and per requester: built each time, always in
        // fastjson's form as Java writes them.
        Some(zone) => state.routes.route(topic, extras()).map(|mut route| {
            filter_zone(&mut route, zone);
            route.encode(JsonStyle::Fastjson).into()
        }),
        None => {
            let standard =
                r.version >= version::V4_9_4 || header.accept_standard_json_only == Some(true);
            let style = if standard {
                JsonStyle::Standard
            } else {
                JsonStyle::Fastjson
            };
            state.routes.route_body(topic, style, extras)
        }
    };
    Ok(match body {
        Some(body) => success(r).with_body(body),
        None => RemotingCommand::response_to(r, resp::TOPIC_NOT_EXIST).with_remark(format!(
            "No topic route info in name server for the topic: {topic}\n{NOT_FOUND_HINT}"
        )),
    })
}

fn requested_zone<'a>(header: &GetRouteInfoHeader<'a>) -> Option<&'a str> {
    let zone_mode = header.zone_mode == Some(true);
    let zone = header.zone_name.filter(|z| !z.trim().is_empty());
    zone.filter(|_| zone_mode)
}

/// Keeps the requester's zone, plus every group without a master (for failover).
fn filter_zone(route: &mut TopicRouteData, zone: &str) {
    let mut dropped = BTreeSet::new();
    route.broker_datas.retain(|bd| {
        let keep = !bd.broker_addrs.contains_key(&0)
            || bd
                .zone_name
                .as_deref()
                .is_some_and(|z| z.eq_ignore_ascii_case(zone));
        if !keep {
            dropped.insert(bd.broker_name.clone());
            for addr in bd.broker_addrs.values() {
                route.filter_server_table.remove(addr);
            }
        }
        keep
    });
    route
        .queue_datas
        .retain(|qd| !dropped.contains(&qd.broker_name));
}

pub fn cluster_info(state: &State, r: &RemotingCommand) -> HandlerResult {
    Ok(success(r).with_body(state.routes.cluster_info_body()))
}
