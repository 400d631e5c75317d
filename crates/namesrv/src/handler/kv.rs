//! PUT_KV_CONFIG, GET_KV_CONFIG, DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE.

use rocketmq_wire::body::KvTable;
use rocketmq_wire::codes::response as resp;
use rocketmq_wire::headers::{
    DeleteKvConfigHeader, GetKvConfigHeader, GetKvConfigResponseHeader, GetKvListByNamespaceHeader,
    PutKvConfigHeader, RequestHeader, ResponseHeader,
};
use rocketmq_wire::RemotingCommand;

use super::{success, HandlerResult, SystemError};
use crate::events::{Event, EventKind};
use crate::kv::ORDER_TOPIC_CONFIG;
use crate::peers::replicated::Command;
use crate::state::State;
use rocketmq_wire::server::offload;

/// Writes through the KV group, answered once a majority of it has the change; alone, with
/// `here` (a file write: not on a worker other connections wait for).
async fn write(
    state: &State,
    namespace: &str,
    cmd: Command,
    here: impl FnOnce() -> Result<(), crate::kv::KvError>,
) -> Result<(), SystemError> {
    match &state.peer_group {
        Some(group) => group.write(state, cmd).await?,
        None => offload::now(here)?,
    }
    state.metrics.kv_written();
    // Routes show the order config, so a change to it must reach cached routes.
    if namespace == ORDER_TOPIC_CONFIG {
        state.routes.invalidate();
    }
    Ok(())
}

pub async fn put(state: &State, r: &RemotingCommand) -> HandlerResult {
    let PutKvConfigHeader {
        namespace: ns,
        key,
        value,
    } = PutKvConfigHeader::from_command(r)?;
    let cmd = Command::Put {
        namespace: ns.to_string(),
        key: key.to_string(),
        value: value.map(String::from),
    };
    write(state, ns, cmd, || state.kv.put(ns, key, value)).await?;
    // A put without a value removes the key, as in Java.
    let (kind, detail) = match value {
        Some(v) => (EventKind::KvPut, format!("= {v}")),
        None => (EventKind::KvDeleted, "put without a value".to_string()),
    };
    state
        .events
        .record(Event::new(kind, format!("{ns} {key}"), detail));
    Ok(success(r))
}

pub fn get(state: &State, r: &RemotingCommand) -> HandlerResult {
    let GetKvConfigHeader { namespace: ns, key } = GetKvConfigHeader::from_command(r)?;
    Ok(match state.kv.get(ns, key) {
        Some(value) => GetKvConfigResponseHeader {
            value: Some(&value),
        }
        .write(success(r)),
        None => RemotingCommand::response_to(r, resp::QUERY_NOT_FOUND)
            .with_empty_ext()
            .with_remark(format!("No config item, Namespace: {ns} Key: {key}")),
    })
}

pub async fn delete(state: &State, r: &RemotingCommand) -> HandlerResult {
    let DeleteKvConfigHeader { namespace: ns, key } = DeleteKvConfigHeader::from_command(r)?;
    let cmd = Command::Delete {
        namespace: ns.to_string(),
        key: key.to_string(),
    };
    write(state, ns, cmd, || state.kv.delete(ns, key)).await?;
    state
        .events
        .record(Event::new(EventKind::KvDeleted, format!("{ns} {key}"), ""));
    Ok(success(r))
}

pub fn list(state: &State, r: &RemotingCommand) -> HandlerResult {
    let ns = GetKvListByNamespaceHeader::from_command(r)?.namespace;
    Ok(match state.kv.namespace(ns) {
        Some(table) => success(r).with_body(KvTable { table }.encode()),
        None => RemotingCommand::response_to(r, resp::QUERY_NOT_FOUND)
            .with_remark(format!("No config item, Namespace: {ns}")),
    })
}
