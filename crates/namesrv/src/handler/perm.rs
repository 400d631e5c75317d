//! WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER.

use rocketmq_wire::headers::{
    AddWritePermHeader, AddWritePermResponseHeader, RequestHeader, ResponseHeader,
    WipeWritePermHeader, WipeWritePermResponseHeader,
};
use rocketmq_wire::RemotingCommand;

use super::{admin_change, success, Context, HandlerResult, SystemError};
use crate::peers::replicated::AdminOp;
use crate::state::State;

/// How many topics of the broker were touched here; with peers, the change reaches them all
/// through the KV group.
async fn change(
    state: &State,
    asked: (Context, &RemotingCommand),
    broker_name: &str,
    wipe: bool,
) -> Result<i64, SystemError> {
    let op = AdminOp::WritePerm {
        broker_name: broker_name.to_string(),
        wipe,
    };
    admin_change(state, asked, op).await
}

pub async fn wipe(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let broker_name = WipeWritePermHeader::from_command(r)?.broker_name;
    let wipe_topic_count = change(state, (c, r), broker_name, true).await?;
    Ok(WipeWritePermResponseHeader { wipe_topic_count }.write(success(r)))
}

pub async fn add(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let broker_name = AddWritePermHeader::from_command(r)?.broker_name;
    let add_topic_count = change(state, (c, r), broker_name, false).await?;
    Ok(AddWritePermResponseHeader { add_topic_count }.write(success(r)))
}
