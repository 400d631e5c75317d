//! The KV group's traffic between NameServers (`kv_group::codes`): Raft requests and writes
//! passed on to the leader. Taken from the group's members only, and only when peers are
//! configured.

use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{Context, HandlerResult};
use crate::kv_group::codes;
use crate::state::State;

pub fn serve(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let Some(group) = &state.kv_group else {
        return Ok(
            RemotingCommand::response_to(r, resp::REQUEST_CODE_NOT_SUPPORTED)
                .with_remark(format!(" request type {} not supported", r.code)),
        );
    };
    // A forged vote with a high term would depose the leader, a forged write skip the
    // signature check its first NameServer made.
    if !group.is_peer(c.origin.peer) {
        tracing::warn!(from = %c.origin.peer, code = r.code, "KV group request from a non-member refused");
        return Ok(
            RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(
                "KV group requests are accepted from the NameServers of namesrvPeers only",
            ),
        );
    }
    // Served on the blocking pool (`Facts::blocking`), where waiting for the group is allowed.
    let handle = tokio::runtime::Handle::current();
    Ok(if r.code == codes::FORWARDED_WRITE {
        handle.block_on(group.serve_forwarded(r))
    } else {
        handle.block_on(group.serve_raft(r))
    })
}
