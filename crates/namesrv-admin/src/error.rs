//! What can go wrong talking to NameServers and controllers, worded as mqadmin words it.

use rocketmq_wire::codes::response;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("no NameServer address: pass -n host:port[;host:port] or set NAMESRV_ADDR")]
    NoAddress,
    #[error("diff needs at least two NameServers in -n")]
    NothingToCompare,
    #[error("{addr}: {reason}")]
    Unreachable { addr: String, reason: String },
    #[error("no NameServer answered: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    NoneAnswered(Vec<AdminError>),
    #[error("{addr}: CODE: {code} ({name}) DESC: {remark}", name = code_name(*.code), remark = .remark.as_deref().unwrap_or("(none)"))]
    Response {
        addr: String,
        code: i32,
        remark: Option<String>,
    },
    #[error("no controller address: pass -a host:port[;host:port]")]
    NoControllerAddress,
    /// None of the nodes of `-a` named a leader: each one's answer or failure.
    #[error("no controller leader: {}; a controller group has one only while a majority of its nodes are up", .0.join("; "))]
    NoLeader(Vec<String>),
    /// None of the NameServers of `-n` led their group or named its leader.
    #[error("no leader of the NameServers' group: {}; the group has one only while a majority of its NameServers are up", .0.join("; "))]
    NoGroupLeader(Vec<String>),
    #[error("cluster {0} has no brokers on the NameServers of -n: make sure the cluster name and -n are right")]
    UnknownCluster(String),
    #[error("{controller}: the controller holds no metadata of broker set {broker}")]
    UnknownBrokerSet { controller: String, broker: String },
    #[error("{addr}: unreadable {what}: {reason}")]
    Body {
        addr: String,
        what: &'static str,
        reason: String,
    },
}

/// The Java `ResponseCode` name of the codes a NameServer or a controller answers with.
pub fn code_name(code: i32) -> &'static str {
    match code {
        response::SUCCESS => "SUCCESS",
        response::SYSTEM_ERROR => "SYSTEM_ERROR",
        response::SYSTEM_BUSY => "SYSTEM_BUSY",
        response::REQUEST_CODE_NOT_SUPPORTED => "REQUEST_CODE_NOT_SUPPORTED",
        response::NO_PERMISSION => "NO_PERMISSION",
        response::TOPIC_NOT_EXIST => "TOPIC_NOT_EXIST",
        response::QUERY_NOT_FOUND => "QUERY_NOT_FOUND",
        response::GO_AWAY => "GO_AWAY",
        response::CONTROLLER_FENCED_MASTER_EPOCH => "CONTROLLER_FENCED_MASTER_EPOCH",
        response::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH => {
            "CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH"
        }
        response::CONTROLLER_INVALID_MASTER => "CONTROLLER_INVALID_MASTER",
        response::CONTROLLER_INVALID_REPLICAS => "CONTROLLER_INVALID_REPLICAS",
        response::CONTROLLER_MASTER_NOT_AVAILABLE => "CONTROLLER_MASTER_NOT_AVAILABLE",
        response::CONTROLLER_INVALID_REQUEST => "CONTROLLER_INVALID_REQUEST",
        response::CONTROLLER_BROKER_NOT_ALIVE => "CONTROLLER_BROKER_NOT_ALIVE",
        response::CONTROLLER_NOT_LEADER => "CONTROLLER_NOT_LEADER",
        response::CONTROLLER_BROKER_METADATA_NOT_EXIST => "CONTROLLER_BROKER_METADATA_NOT_EXIST",
        response::CONTROLLER_INVALID_CLEAN_BROKER_METADATA => {
            "CONTROLLER_INVALID_CLEAN_BROKER_METADATA"
        }
        response::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED => {
            "CONTROLLER_BROKER_NEED_TO_BE_REGISTERED"
        }
        response::CONTROLLER_MASTER_STILL_EXIST => "CONTROLLER_MASTER_STILL_EXIST",
        response::CONTROLLER_ELECT_MASTER_FAILED => "CONTROLLER_ELECT_MASTER_FAILED",
        response::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED => {
            "CONTROLLER_ALTER_SYNC_STATE_SET_FAILED"
        }
        response::CONTROLLER_BROKER_ID_INVALID => "CONTROLLER_BROKER_ID_INVALID",
        response::CONTROLLER_JRAFT_INTERNAL_ERROR => "CONTROLLER_JRAFT_INTERNAL_ERROR",
        response::CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS => {
            "CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS"
        }
        _ => "UNKNOWN",
    }
}
