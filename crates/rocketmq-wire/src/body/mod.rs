//! Request and response bodies, written exactly as the Java side writes them and read as
//! leniently as the Java side reads them.
//!
//! - `cluster`: the answer to GET_BROKER_CLUSTER_INFO;
//! - `data_version`: the DataVersion brokers and the NameServer compare;
//! - `lists`: topic lists, KV tables and a group's members;
//! - `register`: the REGISTER_BROKER body, in its JSON and zlib binary forms;
//! - `register_delta`: a register body read as the difference from the broker's previous one;
//! - `register_strict`: the register body as real brokers write it, read with typed serde;
//! - `route`: the answer to GET_ROUTEINFO_BY_TOPIC;
//! - `controller`: the controller's bodies (sync-state sets, elections, replica tables).

mod cluster;
mod controller;
mod data_version;
mod lists;
mod register;
mod register_delta;
mod register_strict;
mod route;

pub use cluster::ClusterInfo;
pub use controller::{
    BrokerNameList, BrokerReplicasInfo, ElectMasterResponseBody, GroupMember, GroupMembers,
    ReplicaIdentity, ReplicasInfo, RoleChangeNotifyEntry, SyncStateSet,
};
pub use data_version::DataVersion;
pub use lists::{BrokerMemberGroup, KvTable, TopicList};
pub use register::{RegisterBrokerBody, TopicConfig, TopicConfigWrapper, MAX_INFLATED_BODY};
pub use register_delta::{TableIndex, TableRead};
pub use route::{BrokerData, QueueData, TopicQueueMappingInfo, TopicRouteData};

use serde_json::{Map, Value};

use crate::error::BodyError;
use crate::json::parse_value;

/// A peer's body that must be an object, read into a tree: bounded by `json::TREE_MAX`.
pub(crate) fn parse_peer_object(body: &[u8], what: &str) -> Result<Map<String, Value>, BodyError> {
    match crate::json::parse_value_bounded(body, what)? {
        Value::Object(obj) => Ok(obj),
        _ => Err(BodyError::Format(format!("{what} is not a JSON object"))),
    }
}

pub(crate) fn parse_object(body: &[u8], what: &str) -> Result<Map<String, Value>, BodyError> {
    match parse_value(body)? {
        Value::Object(obj) => Ok(obj),
        _ => Err(BodyError::Format(format!("{what} is not a JSON object"))),
    }
}

pub(crate) fn as_object<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, BodyError> {
    v.as_object()
        .ok_or_else(|| BodyError::Format(format!("{what} is not a JSON object")))
}

/// The strings of a JSON array, anything else in it left out; not an array: none.
pub fn strings_of<C: FromIterator<String> + Default>(v: &Value) -> C {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
