//! The traffic between NameServers that agree: the KV group's Raft requests and writes passed
//! on to its leader, and the route exchange's digests and pulls
//! (`rocketmq_wire::codes::peer::namesrv`). Taken from the members of `namesrvPeers` only, and
//! only when peers are configured.

use rocketmq_wire::codes::peer::namesrv::{self as codes, PEER_HELLO};
use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{Context, HandlerResult};
use crate::peer_routes;
use crate::state::State;
use rocketmq_raft::trust::RefusalLog;

pub fn serve(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let Some(group) = &state.kv_group else {
        return Ok(
            RemotingCommand::response_to(r, resp::REQUEST_CODE_NOT_SUPPORTED)
                .with_remark(format!(" request type {} not supported", r.code)),
        );
    };
    // Served on the blocking pool (`Facts::blocking`), where waiting for the group is allowed.
    let handle = tokio::runtime::Handle::current();
    // A forged vote with a high term would depose the leader, a forged write skip the
    // signature check its first NameServer made.
    if !handle.block_on(group.is_peer(c.origin.peer)) {
        static TOLD: RefusalLog = RefusalLog::new();
        if let Some(refused) = TOLD.tell() {
            tracing::warn!(from = %c.origin.peer, code = r.code, refused, "KV group requests from a non-member refused (refused: how many since the last such line)");
        }
        return Ok(
            RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(
                "KV group requests are accepted from the NameServers of namesrvPeers only",
            ),
        );
    }
    let conn = c.origin.conn;
    // Members that share a secret prove who they are on every request (`peer_auth`); the
    // address above is only the second fence.
    match (&state.peer_sessions, r.code) {
        (Some(sessions), PEER_HELLO) => return Ok(sessions.hello(conn, r)),
        (None, PEER_HELLO) => {
            return Ok(RemotingCommand::response_to(r, resp::NO_PERMISSION)
                .with_remark("this NameServer has no peer secret (namesrvPeerSecretPath)"))
        }
        (Some(sessions), _) => {
            if let Err(why) = sessions.check(conn, r) {
                static TOLD: RefusalLog = RefusalLog::new();
                if let Some(refused) = TOLD.tell() {
                    tracing::warn!(from = %c.origin.peer, code = r.code, why, refused, "unproven peer requests refused (refused: how many since the last such line)");
                }
                return Ok(RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(why));
            }
        }
        (None, _) => {}
    }
    let mut answer = answer(state, group, &handle, r)?;
    if let Some(sessions) = &state.peer_sessions {
        sessions.seal_answer(conn, &mut answer);
    }
    Ok(answer)
}

/// The answer to a member's request, taken.
fn answer(
    state: &State,
    group: &crate::kv_group::KvGroup,
    handle: &tokio::runtime::Handle,
    r: &RemotingCommand,
) -> HandlerResult {
    let ok = || RemotingCommand::response_to(r, resp::SUCCESS);
    Ok(match r.code {
        // Until it has applied the admin changes made while it was down, its routes may hold
        // what they undid, dated later than the change: its peers must not take them.
        codes::ROUTE_DIGEST if !group.caught_up() => {
            RemotingCommand::response_to(r, resp::SYSTEM_ERROR)
                .with_remark("this NameServer has not caught up with its KV group yet")
        }
        codes::ROUTE_DIGEST => {
            let since = r.ext(peer_routes::SINCE).and_then(|s| s.parse().ok());
            match peer_routes::digest_since(state, since) {
                None => ok().with_ext(peer_routes::UNCHANGED, "true"),
                Some((digest, generation)) => ok()
                    .with_ext(peer_routes::GENERATION, generation)
                    .with_ext(peer_routes::NOW, rocketmq_wire::clock::now_ms())
                    .with_body(serde_json::to_vec(&digest)?),
            }
        }
        codes::ROUTE_PULL => {
            let asked: Vec<peer_routes::Heard> =
                serde_json::from_slice(r.body.as_deref().unwrap_or_default())?;
            // An asker that does not say takes what a first answer holds.
            let budget = r
                .ext(peer_routes::BYTES)
                .and_then(|b| b.parse().ok())
                .unwrap_or(peer_routes::FIRST_PULL_BYTES);
            let records = state
                .routes
                .read(|reg| peer_routes::pull(reg, &asked, budget))
                .records();
            ok().with_ext(peer_routes::NOW, rocketmq_wire::clock::now_ms())
                .with_body(peer_routes::encode_pull(&records)?)
        }
        codes::FORWARDED_WRITE => handle.block_on(group.serve_forwarded(r)),
        _ => handle.block_on(group.serve_raft(r)),
    })
}
