//! Request and response bodies, written exactly as the Java side writes them and read as
//! leniently as the Java side reads them.

mod cluster;
mod data_version;
mod lists;
mod register;
mod register_delta;
mod register_strict;
mod route;

pub use cluster::ClusterInfo;
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
