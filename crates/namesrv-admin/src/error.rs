//! What can go wrong talking to NameServers, worded as mqadmin words it.

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
    #[error("{addr}: unreadable {what}: {reason}")]
    Body {
        addr: String,
        what: &'static str,
        reason: String,
    },
}

/// The Java `ResponseCode` name of the codes a NameServer answers with.
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
        _ => "UNKNOWN",
    }
}
