//! The traffic between NameServers that agree: the KV group's Raft requests and writes passed
//! on to its leader, and the route exchange's digests and pulls
//! (`rocketmq_wire::codes::peer::namesrv`). Taken from the members of `namesrvPeers` only, and
//! only when peers are configured.

use rocketmq_wire::codes::peer::keys;
use rocketmq_wire::codes::peer::namesrv::{self as codes, PEER_HELLO};
use rocketmq_wire::codes::response as resp;
use rocketmq_wire::RemotingCommand;

use super::{Context, HandlerResult};
use crate::peers::group::PeerGroup;
use crate::peers::routes as peer_routes;
use crate::state::State;
use rocketmq_raft::trust::RefusalLog;

/// A KV group request (Raft, a forwarded write, the handshake): awaited on the async workers.
pub async fn serve(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let group = match admit(state, c, r).await {
        Ok(group) => group,
        Err(refused) => return Ok(refused),
    };
    if r.code == PEER_HELLO {
        // `admit` answers it when there is no secret.
        if let Some(sessions) = &state.peer_sessions {
            return Ok(sessions.hello(c.origin.conn, r));
        }
    }
    let answer = match r.code {
        codes::FORWARDED_WRITE => group.serve_forwarded(r).await,
        _ => group.serve_raft(r).await,
    };
    Ok(sealed(state, c, answer))
}

/// A route digest or pull: served on the blocking pool (`Facts::blocking`), where it may walk
/// every broker's routes and wait for the member check.
pub fn serve_routes(state: &State, c: Context, r: &RemotingCommand) -> HandlerResult {
    let group = match tokio::runtime::Handle::current().block_on(admit(state, c, r)) {
        Ok(group) => group,
        Err(refused) => return Ok(refused),
    };
    let answer = routes_answer(state, group, r)?;
    Ok(sealed(state, c, answer))
}

/// The KV group, when the request comes from a member that proved who it is; else the answer
/// that refuses it.
async fn admit<'a>(
    state: &'a State,
    c: Context,
    r: &RemotingCommand,
) -> Result<&'a PeerGroup, RemotingCommand> {
    let Some(group) = &state.peer_group else {
        return Err(super::not_supported(r));
    };
    // A forged vote with a high term would depose the leader, a forged write skip the
    // signature check its first NameServer made.
    if !group.raft().admits(c.origin.peer).await {
        static TOLD: RefusalLog = RefusalLog::new();
        if let Some(refused) = TOLD.tell() {
            tracing::warn!(from = %c.origin.peer, code = r.code, refused, "KV group requests from a non-member refused (refused: how many since the last such line)");
        }
        return Err(
            RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(
                "KV group requests are accepted from the NameServers of namesrvPeers only",
            ),
        );
    }
    // Members that share a secret prove who they are on every request (`peer_auth`); the
    // address above is only the second fence.
    match (&state.peer_sessions, r.code) {
        (Some(_), PEER_HELLO) => {}
        (None, PEER_HELLO) => {
            return Err(RemotingCommand::response_to(r, resp::NO_PERMISSION)
                .with_remark("this NameServer has no peer secret (namesrvPeerSecretPath)"))
        }
        (Some(sessions), _) => {
            if let Err(why) = sessions.check(c.origin.conn, r) {
                static TOLD: RefusalLog = RefusalLog::new();
                if let Some(refused) = TOLD.tell() {
                    tracing::warn!(from = %c.origin.peer, code = r.code, why, refused, "unproven peer requests refused (refused: how many since the last such line)");
                }
                return Err(RemotingCommand::response_to(r, resp::NO_PERMISSION).with_remark(why));
            }
        }
        (None, _) => {}
    }
    Ok(group)
}

/// The answer, signed for the member's session when members share a secret.
fn sealed(state: &State, c: Context, mut answer: RemotingCommand) -> RemotingCommand {
    if let Some(sessions) = &state.peer_sessions {
        sessions.seal_answer(c.origin.conn, &mut answer);
    }
    answer
}

/// The answer to a member's route digest or pull.
fn routes_answer(state: &State, group: &PeerGroup, r: &RemotingCommand) -> HandlerResult {
    let ok = || RemotingCommand::response_to(r, resp::SUCCESS);
    Ok(match r.code {
        // Until it has applied the admin changes made while it was down, its routes may hold
        // what they undid, dated later than the change: its peers must not take them.
        codes::ROUTE_DIGEST if !group.caught_up() => {
            RemotingCommand::response_to(r, resp::SYSTEM_ERROR)
                .with_remark("this NameServer has not caught up with its KV group yet")
        }
        codes::ROUTE_DIGEST => {
            let since = r.ext(keys::SINCE).and_then(|s| s.parse().ok());
            match peer_routes::digest_since(&state.routes, since) {
                None => ok().with_ext(keys::UNCHANGED, "true"),
                Some((digest, generation)) => ok()
                    .with_ext(keys::GENERATION, generation)
                    .with_ext(keys::NOW, rocketmq_wire::clock::now_ms())
                    .with_body(serde_json::to_vec(&digest)?),
            }
        }
        _ => {
            let asked: Vec<peer_routes::Heard> =
                serde_json::from_slice(r.body.as_deref().unwrap_or_default())?;
            // An asker that does not say takes what a first answer holds.
            let budget = r
                .ext(keys::BYTES)
                .and_then(|b| b.parse().ok())
                .unwrap_or(peer_routes::FIRST_PULL_BYTES);
            let records = state
                .routes
                .read(|reg| peer_routes::pull(reg, &asked, budget))
                .records();
            ok().with_ext(keys::NOW, rocketmq_wire::clock::now_ms())
                .with_body(peer_routes::encode_pull(&records)?)
        }
    })
}
