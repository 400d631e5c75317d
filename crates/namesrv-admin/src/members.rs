//! The member commands of our replicated groups: the controller group's (`-a`) and that of
//! NameServers that agree (`namesrvPeers`, `-n`). Both groups answer the same requests under
//! codes of their own, with the same headers and body: the members listed, a member added,
//! removed, or the leadership handed over, each by the group's leader. How the leader is found
//! is each group's ([`MemberGroup`]): a controller node names it in its metadata; a NameServer
//! that does not lead names it in its refusal (`leaderAddress`).

use std::time::Duration;

use rocketmq_wire::body::GroupMembers;
use rocketmq_wire::codes::peer::keys;
use rocketmq_wire::codes::{request, response};
use rocketmq_wire::headers::{
    AddMemberRequestHeader, RemoveMemberRequestHeader, RequestHeader, TransferLeaderRequestHeader,
};
use rocketmq_wire::RemotingCommand;
use serde_json::{json, Value};

use crate::controller::shown;
use crate::error::AdminError;
use crate::namesrvs::{call_once, Namesrvs, ServerResponse};
use crate::report::{Report, Table};

/// How long a member change may take: an added node is given 30 s to catch up with the
/// leader's log, and each change commits twice (joint, then final configuration).
const MEMBER_CHANGE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the group is asked for a new leader after the leader removed itself.
pub const NEW_LEADER_WAIT: Duration = Duration::from_secs(10);

/// A group's member request codes.
pub struct MemberCodes {
    pub list: i32,
    pub add: i32,
    pub remove: i32,
    pub transfer: i32,
}

/// A replicated group whose members the commands list and change, through its leader.
pub trait MemberGroup {
    /// How reports name it ("the controller group").
    const NAME: &'static str;
    /// The JSON field naming the leader's address that answered.
    const LEADER_KEY: &'static str;
    const CODES: MemberCodes;

    /// The servers asked, with their timeout and credentials.
    fn servers(&self) -> &Namesrvs;

    /// `request` sent to the leader, waiting up to `timeout` for the answer.
    async fn call_leader(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<ServerResponse, AdminError>;

    /// The leader's address once another than `old` leads, waited for up to
    /// [`NEW_LEADER_WAIT`].
    async fn new_leader(&self, old: &str) -> Option<String>;
}

/// How often a request for the leader is tried (rounds over -n, or a controller's NOT_LEADER
/// refusals): a leader named a moment ago can lose its office before the request reaches it, and
/// a new one is usually elected within a second or two.
pub const LEADER_ATTEMPTS: u32 = 3;
pub const LEADER_RETRY_PAUSE: Duration = Duration::from_millis(700);

impl MemberGroup for Namesrvs {
    const NAME: &'static str = "the NameServers' group";
    const LEADER_KEY: &'static str = "leader";
    const CODES: MemberCodes = MemberCodes {
        list: request::NAMESRV_LIST_MEMBERS,
        add: request::NAMESRV_ADD_MEMBER,
        remove: request::NAMESRV_REMOVE_MEMBER,
        transfer: request::NAMESRV_TRANSFER_LEADER,
    };

    fn servers(&self) -> &Namesrvs {
        self
    }

    /// Each NameServer of -n in turn, then the leader it names; [`LEADER_ATTEMPTS`] rounds.
    async fn call_leader(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<ServerResponse, AdminError> {
        let mut notes = Vec::new();
        for round in 1..=LEADER_ATTEMPTS {
            notes.clear();
            for addr in self.addrs() {
                let mut asked = addr.clone();
                for _ in 0..2 {
                    let reply = match call_once(&asked, timeout, request.clone()).await {
                        Ok(reply) => reply,
                        Err(e) => {
                            notes.push(e.to_string());
                            break;
                        }
                    };
                    if reply.response.code != response::CONTROLLER_NOT_LEADER {
                        return Ok(reply);
                    }
                    match reply.response.ext(keys::LEADER_ADDRESS) {
                        Some(leader) if leader != asked => asked = leader.to_string(),
                        _ => {
                            notes.push(format!("{asked}: not the leader, and knows none"));
                            break;
                        }
                    }
                }
            }
            if round < LEADER_ATTEMPTS {
                tokio::time::sleep(LEADER_RETRY_PAUSE).await;
            }
        }
        Err(AdminError::NoGroupLeader(notes))
    }

    async fn new_leader(&self, old: &str) -> Option<String> {
        let deadline = std::time::Instant::now() + NEW_LEADER_WAIT;
        while std::time::Instant::now() < deadline {
            let list = RemotingCommand::request(Self::CODES.list);
            if let Ok(reply) = self.call_leader(list, self.timeout()).await {
                if reply.response.code == response::SUCCESS && reply.addr != old {
                    return Some(reply.addr);
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        None
    }
}

/// The members as a table: id, role, address, the last log index the leader knows each holds
/// and how many entries each lacks.
fn members_text(members: &GroupMembers) -> String {
    let mut table = Table::new(&["Id", "Role", "Address", "MatchedIndex", "Lag"]);
    for m in &members.members {
        table.row(vec![
            m.id.clone(),
            m.role.clone(),
            m.address.clone(),
            shown(m.matched_index),
            shown(m.lag),
        ]);
    }
    format!(
        "#Leader\t{}\n#LastLogIndex\t{}\n{}",
        shown(members.leader_id.as_deref()),
        shown(members.last_log_index),
        table.render()
    )
}

fn members_json<G: MemberGroup>(leader_addr: &str, members: &GroupMembers) -> Value {
    json!({ G::LEADER_KEY: leader_addr, "members": members })
}

/// `listControllerMembers`, `listNamesrvMembers`: the members as the leader sees them.
pub async fn list_members<G: MemberGroup>(group: &G) -> Result<Report, AdminError> {
    let request = RemotingCommand::request(G::CODES.list);
    let reply = group
        .call_leader(request, group.servers().timeout())
        .await?
        .success()?;
    let members = reply.decode("GroupMembers", GroupMembers::decode)?;
    Ok(Report::ok(
        members_text(&members),
        members_json::<G>(&reply.addr, &members),
    ))
}

/// Sends a member change to the leader, signed and given the time a change may take; the
/// leader's address and the members it answers with.
async fn change<G: MemberGroup>(
    group: &G,
    request: RemotingCommand,
) -> Result<(String, GroupMembers), AdminError> {
    let servers = group.servers();
    let timeout = servers.timeout().max(MEMBER_CHANGE_TIMEOUT);
    let reply = group
        .call_leader(servers.signed(request), timeout)
        .await?
        .success()?;
    let members = reply.decode("GroupMembers", GroupMembers::decode)?;
    Ok((reply.addr, members))
}

/// `addControllerMember`, `addNamesrvMember`: adds a started node, a learner first and a voter
/// once caught up.
pub async fn add_member<G: MemberGroup>(
    group: &G,
    id: &str,
    addr: &str,
) -> Result<Report, AdminError> {
    let request = AddMemberRequestHeader {
        member_id: id,
        member_address: addr,
    }
    .write(RemotingCommand::request(G::CODES.add));
    let (leader, members) = change(group, request).await?;
    Ok(Report::ok(
        format!(
            "{id} ({addr}) is a voter of {}.\n{}",
            G::NAME,
            members_text(&members)
        ),
        members_json::<G>(&leader, &members),
    ))
}

/// `removeControllerMember`, `removeNamesrvMember`: removes a node, the leader included; when
/// the leader left, the report names its successor once the group names one.
pub async fn remove_member<G: MemberGroup>(group: &G, id: &str) -> Result<Report, AdminError> {
    let request = RemoveMemberRequestHeader { member_id: id }
        .write(RemotingCommand::request(G::CODES.remove));
    let (leader, members) = change(group, request).await?;
    let mut text = format!("{id} was removed from {}.\n", G::NAME);
    let mut json = members_json::<G>(&leader, &members);
    if members.leader_id.is_none() {
        text.push_str(&format!("It was the leader ({leader}) and stepped down; "));
        match group.new_leader(&leader).await {
            Some(leader) => text.push_str(&format!("the new leader is {leader}.\n")),
            None => text.push_str(&format!(
                "no new leader was named within {} s: ask again later.\n",
                NEW_LEADER_WAIT.as_secs()
            )),
        }
        json["removedLeader"] = json!(true);
    }
    text.push_str(&members_text(&members));
    Ok(Report::ok(text, json))
}

/// `transferControllerLeader`, `transferNamesrvLeader`: hands the leadership to the named voter.
pub async fn transfer_leader<G: MemberGroup>(group: &G, id: &str) -> Result<Report, AdminError> {
    let request = TransferLeaderRequestHeader { member_id: id }
        .write(RemotingCommand::request(G::CODES.transfer));
    let started = std::time::Instant::now();
    let (previous, members) = change(group, request).await?;
    let took = started.elapsed().as_millis();
    let leader = members
        .members
        .iter()
        .find(|m| m.id == id)
        .map(|m| m.address.clone());
    Ok(Report::ok(
        format!(
            "{id} ({}) leads {} (the hand-over from {previous} took {took} ms).\n",
            shown(leader.as_deref()),
            G::NAME,
        ),
        json!({ "previousLeader": previous, "leaderId": id, "leaderAddress": leader, "tookMs": took }),
    ))
}
