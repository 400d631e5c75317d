//! WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER.

use rocketmq_wire::headers::{
    AddWritePermHeader, AddWritePermResponseHeader, RequestHeader, ResponseHeader,
    WipeWritePermHeader, WipeWritePermResponseHeader,
};
use rocketmq_wire::RemotingCommand;

use super::{success, HandlerResult};
use crate::state::State;

/// How many topics of the broker were touched.
fn change(state: &State, broker_name: &str, wipe: bool) -> i64 {
    let count = state
        .routes
        .change(|reg| reg.change_write_perm(broker_name, wipe));
    count as i64
}

pub fn wipe(state: &State, r: &RemotingCommand) -> HandlerResult {
    let broker_name = WipeWritePermHeader::from_command(r)?.broker_name;
    let wipe_topic_count = change(state, broker_name, true);
    Ok(WipeWritePermResponseHeader { wipe_topic_count }.write(success(r)))
}

pub fn add(state: &State, r: &RemotingCommand) -> HandlerResult {
    let broker_name = AddWritePermHeader::from_command(r)?.broker_name;
    let add_topic_count = change(state, broker_name, false);
    Ok(AddWritePermResponseHeader { add_topic_count }.write(success(r)))
}
