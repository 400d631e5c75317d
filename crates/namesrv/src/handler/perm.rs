//! WIPE_WRITE_PERM_OF_BROKER and ADD_WRITE_PERM_OF_BROKER.

use rocketmq_wire::RemotingCommand;

use super::{required, success, Reply};
use crate::state::State;

fn change(state: &State, r: &RemotingCommand, wipe: bool, count_field: &str) -> Reply {
    let broker_name = required(r, "brokerName")?;
    let count = state
        .routes
        .change(|reg| reg.change_write_perm(broker_name, wipe));
    Ok(success(r).with_ext(count_field, count))
}

pub fn wipe(state: &State, r: &RemotingCommand) -> Reply {
    change(state, r, true, "wipeTopicCount")
}

pub fn add(state: &State, r: &RemotingCommand) -> Reply {
    change(state, r, false, "addTopicCount")
}
