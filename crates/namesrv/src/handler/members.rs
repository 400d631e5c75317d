//! The KV group's own members, changed while the NameServers run (ours, codes 1204–1207):
//! listed by the leader, a member added, removed, or the leadership handed over, as nsadmin asks.
//! Refused by a follower with the leader's address, where the tool goes next.

use rocketmq_raft::{ChangeError, MemberChange};
use rocketmq_wire::body::GroupMembers;
use rocketmq_wire::codes::peer::keys;
use rocketmq_wire::codes::request as req;
use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{Context, HandlerResult};
use crate::peers::group::PeerGroup;
use crate::state::State;

/// NAMESRV_LIST_MEMBERS.
pub fn list(state: &State, r: &RemotingCommand) -> HandlerResult {
    Ok(match &state.peer_group {
        None => no_group(r),
        Some(group) => answer(group, r, group.raft().list_members()),
    })
}

/// NAMESRV_ADD_MEMBER, NAMESRV_REMOVE_MEMBER and NAMESRV_TRANSFER_LEADER: from a member's host
/// or this host only, since they move who holds the KV config.
pub async fn change(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let Some(group) = &state.peer_group else {
        return Ok(no_group(r));
    };
    if !c.origin.peer.is_loopback() && !group.raft().admits(c.origin.peer).await {
        return Ok(
            RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(
                "member changes are accepted from the hosts of the KV group's members or loopback \
             only",
            ),
        );
    }
    let change = MemberChange::from_request(r, req::NAMESRV_ADD_MEMBER);
    Ok(match change {
        Ok(change) => answer(group, r, group.raft().change_members(change).await),
        Err(why) => {
            RemotingCommand::response_to(r, resp::CONTROLLER_INVALID_REQUEST).with_remark(why)
        }
    })
}

fn answer(
    group: &PeerGroup,
    r: &RemotingCommand,
    result: Result<GroupMembers, ChangeError>,
) -> RemotingCommand {
    match result {
        Ok(members) => RemotingCommand::response_to(r, resp::SUCCESS).with_body(members.encode()),
        Err(e) => {
            let refused = RemotingCommand::response_to(r, e.code()).with_remark(e.to_string());
            match (&e, group.leader_address()) {
                (ChangeError::NotLeader, Some(leader)) => {
                    refused.with_ext(keys::LEADER_ADDRESS, leader)
                }
                _ => refused,
            }
        }
    }
}

fn no_group(r: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(r, resp::REQUEST_CODE_NOT_SUPPORTED).with_remark(
        "this NameServer agrees with no others (namesrvPeers is not set): it has no group members",
    )
}
