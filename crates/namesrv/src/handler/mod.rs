//! Request dispatch: one entry per request code, each handled in the module of its family.

mod broker;
mod config;
mod kv;
mod perm;
mod route;
mod topic;

use std::time::Instant;

use remoting::codes::{request as req, response as resp, version};
use remoting::RemotingCommand;

use crate::auth;
use crate::route::ConnId;
use crate::state::State;

/// A request that could not be served: answered SYSTEM_ERROR with this remark.
pub struct Failure(pub String);

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure(e.to_string())
    }
}

pub type Reply = Result<RemotingCommand, Failure>;

/// The connection a request arrived on.
#[derive(Clone, Copy)]
pub struct Origin {
    pub conn: ConnId,
}

/// Whether the request may block (disk writes, large bodies, walks over every topic) and so
/// must not run on the connection's reader, where it would delay route lookups.
pub fn may_block(code: i32) -> bool {
    matches!(
        code,
        req::PUT_KV_CONFIG
            | req::DELETE_KV_CONFIG
            | req::REGISTER_BROKER
            | req::UPDATE_NAMESRV_CONFIG
            | req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER
            | req::GET_TOPICS_BY_CLUSTER
            | req::GET_UNIT_TOPIC_LIST
            | req::GET_HAS_UNIT_SUB_TOPIC_LIST
            | req::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
            | req::WIPE_WRITE_PERM_OF_BROKER
            | req::ADD_WRITE_PERM_OF_BROKER
    )
}

/// Serves one request; `None` for oneway requests, which are never answered.
pub fn handle(state: &State, origin: Origin, request: &RemotingCommand) -> Option<RemotingCommand> {
    let started = Instant::now();
    let refused = state
        .credentials
        .as_ref()
        .filter(|_| auth::changes_state(request.code))
        .and_then(|c| c.check(request).err());
    let response = if state.is_shutting_down() && request.version > version::V5_3_1 {
        RemotingCommand::response_to(request, resp::GO_AWAY).with_remark("please go away")
    } else if let Some(remark) = refused {
        tracing::warn!(
            code = request.code,
            "refused an unauthenticated write: {remark}"
        );
        RemotingCommand::response_to(request, resp::NO_PERMISSION).with_remark(remark)
    } else {
        dispatch(state, origin, request).unwrap_or_else(|Failure(remark)| {
            RemotingCommand::response_to(request, resp::SYSTEM_ERROR).with_remark(remark)
        })
    };
    state
        .metrics
        .request(request.code, response.code, started.elapsed());
    (!request.is_oneway()).then_some(response)
}

fn dispatch(state: &State, origin: Origin, r: &RemotingCommand) -> Reply {
    match r.code {
        req::PUT_KV_CONFIG => kv::put(state, r),
        req::GET_KV_CONFIG => kv::get(state, r),
        req::DELETE_KV_CONFIG => kv::delete(state, r),
        req::GET_KVLIST_BY_NAMESPACE => kv::list(state, r),
        req::REGISTER_BROKER => broker::register(state, origin, r),
        req::UNREGISTER_BROKER => broker::unregister(state, r),
        req::QUERY_DATA_VERSION => broker::query_data_version(state, r),
        req::BROKER_HEARTBEAT => broker::heartbeat(state, r),
        req::GET_BROKER_MEMBER_GROUP => broker::member_group(state, r),
        req::GET_ROUTEINFO_BY_TOPIC => route::topic_route(state, r),
        req::GET_BROKER_CLUSTER_INFO => route::cluster_info(state, r),
        req::WIPE_WRITE_PERM_OF_BROKER => perm::wipe(state, r),
        req::ADD_WRITE_PERM_OF_BROKER => perm::add(state, r),
        req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => topic::all(state, r),
        req::DELETE_TOPIC_IN_NAMESRV => topic::delete(state, r),
        req::REGISTER_TOPIC_IN_NAMESRV => topic::register(state, r),
        req::GET_TOPICS_BY_CLUSTER => topic::by_cluster(state, r),
        req::GET_SYSTEM_TOPIC_LIST_FROM_NS => topic::system(state, r),
        req::GET_UNIT_TOPIC_LIST
        | req::GET_HAS_UNIT_SUB_TOPIC_LIST
        | req::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => topic::unit(state, r),
        req::UPDATE_NAMESRV_CONFIG => config::update(state, r),
        req::GET_NAMESRV_CONFIG => config::get(state, r),
        code => Ok(
            RemotingCommand::response_to(r, resp::REQUEST_CODE_NOT_SUPPORTED)
                .with_remark(format!(" request type {code} not supported")),
        ),
    }
}

/// Whether `dispatch` has a handler for `code`. Kept next to it, in the same order: metrics
/// label only these codes by name, so that arbitrary codes cannot grow the metric set.
pub fn is_served(code: i32) -> bool {
    matches!(
        code,
        req::PUT_KV_CONFIG
            | req::GET_KV_CONFIG
            | req::DELETE_KV_CONFIG
            | req::GET_KVLIST_BY_NAMESPACE
            | req::REGISTER_BROKER
            | req::UNREGISTER_BROKER
            | req::QUERY_DATA_VERSION
            | req::BROKER_HEARTBEAT
            | req::GET_BROKER_MEMBER_GROUP
            | req::GET_ROUTEINFO_BY_TOPIC
            | req::GET_BROKER_CLUSTER_INFO
            | req::WIPE_WRITE_PERM_OF_BROKER
            | req::ADD_WRITE_PERM_OF_BROKER
            | req::GET_ALL_TOPIC_LIST_FROM_NAMESERVER
            | req::DELETE_TOPIC_IN_NAMESRV
            | req::REGISTER_TOPIC_IN_NAMESRV
            | req::GET_TOPICS_BY_CLUSTER
            | req::GET_SYSTEM_TOPIC_LIST_FROM_NS
            | req::GET_UNIT_TOPIC_LIST
            | req::GET_HAS_UNIT_SUB_TOPIC_LIST
            | req::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST
            | req::UPDATE_NAMESRV_CONFIG
            | req::GET_NAMESRV_CONFIG
    )
}

/// A header field the handler cannot work without.
fn required<'a>(r: &'a RemotingCommand, key: &str) -> Result<&'a str, Failure> {
    r.ext(key)
        .ok_or_else(|| Failure(format!("missing header field {key}")))
}

fn required_i64(r: &RemotingCommand, key: &str) -> Result<i64, Failure> {
    let text = required(r, key)?;
    text.parse()
        .map_err(|_| Failure(format!("header field {key} is not a number: {text}")))
}

fn success(r: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(r, resp::SUCCESS)
}
