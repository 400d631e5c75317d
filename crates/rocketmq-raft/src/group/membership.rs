//! A group's own members, changed while it runs: adding a node (a learner first, a voter once it
//! has caught up), removing one (the leader included), handing the leadership to another
//! member, and keeping the trusted addresses those of the membership. Every change is one of
//! openraft's membership changes (a learner, then joint consensus to the new voter set) made by
//! the leader; what is ours is what is checked before one is proposed (one change at a time, no
//! change that would lose the quorum) and how a leader gets its successor elected without
//! waiting out election timeouts.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, ServerState};
use rocketmq_wire::body::{GroupMember, GroupMembers};
use rocketmq_wire::headers::{
    AddMemberRequestHeader, RemoveMemberRequestHeader, RequestHeader, TransferLeaderRequestHeader,
};
use rocketmq_wire::RemotingCommand;

use super::Group;
use crate::{Machine, NodeId};

/// How long an added node may take to catch up with the leader's log before it is made a voter.
const CATCH_UP_LIMIT: Duration = Duration::from_secs(30);
/// How long one membership change may take to commit (it commits twice: joint, then final).
const CHANGE_DEADLINE: Duration = Duration::from_secs(10);
/// Entries a member may lack and still count as caught up: under a steady write load a live
/// follower is always a few entries behind the leader's newest.
const CAUGHT_UP_LAG: u64 = 64;
/// How long a leader handing on its office waits for the successor to hold its whole log.
const HAND_OVER_LIMIT: Duration = Duration::from_secs(3);

/// Why a member change was not made.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error("this node is not the leader")]
    NotLeader,
    /// Not attempted: the remark says why.
    #[error("{0}")]
    Refused(String),
    /// Attempted, and not completed.
    #[error("{0}")]
    Failed(String),
}

impl ChangeError {
    /// The response code a refusal is answered with (the controller's codes, which nsadmin
    /// reads for either group): NOT_LEADER sends the tool to the leader.
    pub fn code(&self) -> i32 {
        use rocketmq_wire::codes::response;
        match self {
            ChangeError::NotLeader => response::CONTROLLER_NOT_LEADER,
            ChangeError::Refused(_) => response::CONTROLLER_INVALID_REQUEST,
            ChangeError::Failed(_) => response::SYSTEM_ERROR,
        }
    }
}

/// A change of a group's members, each named by its member id (`n3`).
#[derive(Clone, Copy, Debug)]
pub enum MemberChange<'a> {
    /// A started node at its peer address: a learner first, a voter once caught up.
    Add { id: &'a str, addr: &'a str },
    /// A learner or a voter, the leader included (it steps down).
    Remove { id: &'a str },
    /// The leadership handed to a caught-up voter.
    TransferLeader { id: &'a str },
}

impl<'a> MemberChange<'a> {
    /// The change a request asks for, else the remark refusing it. Each group's add, remove and
    /// transfer codes follow one another from `add_code` (1200 the controller's, 1204 the
    /// NameServers'), and their requests carry the same headers.
    pub fn from_request(r: &'a RemotingCommand, add_code: i32) -> Result<Self, &'static str> {
        let id_only = "memberId is required";
        match r.code.wrapping_sub(add_code) {
            0 => AddMemberRequestHeader::from_command(r)
                .map(|h| Self::Add {
                    id: h.member_id,
                    addr: h.member_address,
                })
                .map_err(|_| "memberId and memberAddress are required"),
            1 => RemoveMemberRequestHeader::from_command(r)
                .map(|h| Self::Remove { id: h.member_id })
                .map_err(|_| id_only),
            2 => TransferLeaderRequestHeader::from_command(r)
                .map(|h| Self::TransferLeader { id: h.member_id })
                .map_err(|_| id_only),
            _ => Err("not a member change"),
        }
    }
}

/// The membership this node holds (the newest it has received, committed or not).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Membership {
    pub voters: BTreeSet<NodeId>,
    /// Every member, learners included, and its peer address.
    pub nodes: BTreeMap<NodeId, String>,
    /// A change is half done (joint consensus): no other may start before it ends.
    pub joint: bool,
}

/// Whether a voter set change keeps a working group: a majority of the old voters and of the
/// new ones must be reachable and caught up, since joint consensus commits in both, and the
/// group then goes on in the new one.
fn quorum_kept(
    old: &BTreeSet<NodeId>,
    new: &BTreeSet<NodeId>,
    healthy: &BTreeSet<NodeId>,
    name: impl Fn(NodeId) -> String,
) -> Result<(), String> {
    if new.is_empty() {
        return Err("the group's last voter cannot be removed".into());
    }
    for (which, set) in [("current", old), ("new", new)] {
        let up: Vec<String> = set.intersection(healthy).map(|id| name(*id)).collect();
        if up.len() * 2 <= set.len() {
            let all: Vec<String> = set.iter().map(|id| name(*id)).collect();
            return Err(format!(
                "refused: the change would lose the quorum: of the {which} voters [{}] only [{}] \
                 are reachable and caught up, and a majority ({} of {}) must be",
                all.join(", "),
                up.join(", "),
                set.len() / 2 + 1,
                set.len()
            ));
        }
    }
    Ok(())
}

impl<M: Machine> Group<M> {
    /// A member's id as the config names members (`n3`).
    pub fn name(&self, id: NodeId) -> String {
        format!("{}{id}", self.settings.id_prefix)
    }

    /// The membership this node holds; before the group was formed, none.
    pub fn membership(&self) -> Membership {
        let stored = self.raft.metrics().borrow().membership_config.clone();
        let m = stored.membership();
        Membership {
            voters: m.voter_ids().collect(),
            nodes: m.nodes().map(|(id, n)| (*id, n.addr.clone())).collect(),
            joint: m.get_joint_config().len() > 1,
        }
    }

    /// A member's peer address: the membership's, or the config's while this node holds no
    /// membership yet.
    pub fn member_addr(&self, id: NodeId) -> Option<String> {
        let stored = self.raft.metrics().borrow().membership_config.clone();
        let held = stored.membership().get_node(&id).map(|n| n.addr.clone());
        held.or_else(|| self.settings.members.get(&id).cloned())
    }

    /// Every member's peer address, as [`Group::member_addr`] has them: the membership's, or the
    /// config's while this node holds no membership yet.
    pub fn member_nodes(&self) -> BTreeMap<NodeId, String> {
        let held = self.membership().nodes;
        if held.is_empty() {
            self.settings.members.clone()
        } else {
            held
        }
    }

    /// (member id, address) of every member but this node, as [`Group::member_addr`] has them.
    pub fn others(&self) -> Vec<(String, String)> {
        self.member_nodes()
            .into_iter()
            .filter(|(id, _)| *id != self.settings.self_id)
            .map(|(id, addr)| (self.name(id), addr))
            .collect()
    }

    /// The Raft id of the member named `name`: the group's prefix and a number.
    pub fn node_id(&self, name: &str) -> Result<NodeId, ChangeError> {
        match crate::members::member_id_parts(name) {
            Some((prefix, id)) if prefix == self.settings.id_prefix => Ok(id),
            _ => Err(ChangeError::Refused(format!(
                "{name} is not a member id of this group: ids are {}<number> (the number is the \
                 member's Raft id)",
                self.settings.id_prefix
            ))),
        }
    }

    /// The members as the leader sees them; refused by a follower, which cannot tell how far
    /// each lags.
    pub fn list_members(&self) -> Result<GroupMembers, ChangeError> {
        self.lead()?;
        Ok(self.members_body())
    }

    /// Makes `change`; the members once it is done, as the leader sees them (no leader named
    /// when this leader removed itself: it steps down).
    pub async fn change_members(
        &self,
        change: MemberChange<'_>,
    ) -> Result<GroupMembers, ChangeError> {
        let removed_self = match change {
            MemberChange::Add { id, addr } => {
                self.add_member(self.node_id(id)?, addr).await?;
                false
            }
            MemberChange::Remove { id } => {
                let id = self.node_id(id)?;
                self.remove_member(id).await?;
                id == self.settings.self_id
            }
            MemberChange::TransferLeader { id } => {
                self.transfer_leader(self.node_id(id)?).await?;
                false
            }
        };
        let mut body = self.members_body();
        if removed_self {
            body.leader_id = None;
        }
        Ok(body)
    }

    /// The members as the leader sees them (what each holds of the log is known on the leader
    /// only), as LIST_MEMBERS and every member change answer them.
    pub fn members_body(&self) -> GroupMembers {
        let leader = self.is_leader().then_some(self.settings.self_id);
        GroupMembers {
            leader_id: leader.map(|id| self.name(id)),
            last_log_index: self.last_log_index(),
            members: self
                .members(leader)
                .iter()
                .map(|m| self.member_row(m))
                .collect(),
        }
    }

    /// A member as LIST_MEMBERS answers it, named as the config names members.
    pub fn member_row(&self, m: &crate::figures::Member) -> GroupMember {
        GroupMember {
            id: self.name(m.node),
            address: m.address.clone(),
            role: m.role.into(),
            matched_index: m.matched_index,
            lag: m.lag,
        }
    }

    /// The membership a change may start from: one change at a time, so none while the
    /// membership is still joint.
    fn settled_membership(&self) -> Result<Membership, ChangeError> {
        let members = self.membership();
        if members.joint {
            return Err(ChangeError::Refused(
                "another membership change is under way: try again once it is done".into(),
            ));
        }
        Ok(members)
    }

    fn lead(&self) -> Result<(), ChangeError> {
        self.is_leader().then_some(()).ok_or(ChangeError::NotLeader)
    }

    /// Keeps the trusted addresses those of the membership, once the node has one: a node
    /// added at a new address must be heard, and one removed no longer speaks for the group.
    /// Looked at whenever openraft reports its metrics.
    pub(super) fn follow_membership(&self) {
        let stored = self.raft.metrics().borrow().membership_config.clone();
        let at = *stored.log_id();
        // Held until the names are given: a newer membership seen meanwhile gives its own after.
        let mut seen = self.membership_seen.lock();
        if *seen == Some(at) {
            return;
        }
        *seen = Some(at);
        let m = stored.membership();
        let addrs: Vec<String> = m.nodes().map(|(_, n)| n.addr.clone()).collect();
        if addrs.is_empty() {
            return;
        }
        if m.get_node(&self.settings.self_id).is_none() {
            tracing::warn!(
                group = %self.settings.name, members = self.settings.members_are,
                "this node is not in its group's membership (it was removed): it takes no part \
                 until it is added again"
            );
        }
        self.addresses.set_names(addrs);
        drop(seen);
        let addresses = self.addresses.clone();
        tokio::spawn(async move { addresses.refresh().await });
    }

    /// How many entries of the leader's log `id` lacks, as the leader last heard; `None` while
    /// it has heard nothing of it.
    fn lag_of(&self, id: NodeId) -> Option<u64> {
        let m = self.raft.metrics().borrow().clone();
        let matched = matched_of(&m, id)?;
        Some(m.last_log_index.unwrap_or(0).saturating_sub(matched))
    }

    /// The voters that answer a probe within a second and lack at most [`CAUGHT_UP_LAG`]
    /// entries, this leader included.
    async fn healthy_voters(&self, members: &Membership) -> BTreeSet<NodeId> {
        let self_id = self.settings.self_id;
        let checks = members
            .voters
            .iter()
            .filter(|id| **id != self_id)
            .map(|id| async move {
                let close = self.lag_of(*id).is_some_and(|lag| lag <= CAUGHT_UP_LAG);
                let addr = members.nodes.get(id)?;
                (close && self.probe(addr).await.is_some()).then_some(*id)
            });
        let mut healthy: BTreeSet<NodeId> = futures::future::join_all(checks)
            .await
            .into_iter()
            .flatten()
            .collect();
        healthy.insert(self_id);
        healthy
    }

    /// A membership change's outcome, within [`CHANGE_DEADLINE`].
    async fn within<T>(
        &self,
        what: &str,
        change: impl Future<Output = Result<T, RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>>>,
    ) -> Result<T, ChangeError> {
        match tokio::time::timeout(CHANGE_DEADLINE, change).await {
            Err(_) => Err(ChangeError::Failed(format!(
                "{what} not committed within {} s: no quorum of {} answered",
                CHANGE_DEADLINE.as_secs(),
                self.settings.members_are
            ))),
            Ok(Ok(v)) => Ok(v),
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
                Err(ChangeError::NotLeader)
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
                Err(ChangeError::Refused(format!("{what} refused: {e}")))
            }
            Ok(Err(e)) => Err(ChangeError::Failed(format!("{what} failed: {e}"))),
        }
    }

    /// Adds `id` at `addr`: a learner first, made a voter once it has caught up with the
    /// leader's log. An earlier attempt that left it a learner is carried on; a voter already
    /// there is left as it is.
    pub async fn add_member(&self, id: NodeId, addr: &str) -> Result<(), ChangeError> {
        self.lead()?;
        let name = self.name(id);
        if !crate::members::is_address(addr) {
            return Err(ChangeError::Refused(format!(
                "{addr} is not an address (host:port)"
            )));
        }
        let members = self.settled_membership()?;
        if let Some((other, _)) = members.nodes.iter().find(|(i, a)| **i != id && *a == addr) {
            return Err(ChangeError::Refused(format!(
                "{addr} is already the address of member {}",
                self.name(*other)
            )));
        }
        match members.nodes.get(&id) {
            Some(held) if held != addr => {
                return Err(ChangeError::Refused(format!(
                    "{name} is already a member, at {held}: remove it first to move it"
                )))
            }
            Some(_) if members.voters.contains(&id) => return Ok(()),
            Some(_) => {}
            None => {
                let learner = self.raft.add_learner(id, BasicNode::new(addr), false);
                self.within(&format!("adding {name} as a learner"), learner)
                    .await?;
                tracing::info!(group = %self.settings.name, members = self.settings.members_are, member = name, %addr, "added a learner");
            }
        }
        self.await_caught_up(id, &name, addr).await?;
        let members = self.membership();
        let mut healthy = self.healthy_voters(&members).await;
        healthy.insert(id);
        let mut new = members.voters.clone();
        new.insert(id);
        quorum_kept(&members.voters, &new, &healthy, |i| self.name(i))
            .map_err(ChangeError::Refused)?;
        let change = self
            .raft
            .change_membership(ChangeMembers::AddVoterIds([id].into()), false);
        self.within(&format!("making {name} a voter"), change)
            .await?;
        tracing::info!(group = %self.settings.name, members = self.settings.members_are, member = name, %addr, "a new voter joined");
        Ok(())
    }

    /// Waits until the learner `id` holds what the leader held when the wait began and lags by
    /// no more than [`CAUGHT_UP_LAG`] entries.
    async fn await_caught_up(&self, id: NodeId, name: &str, addr: &str) -> Result<(), ChangeError> {
        let goal = self.raft.metrics().borrow().last_log_index.unwrap_or(0);
        let deadline = Instant::now() + CATCH_UP_LIMIT;
        let mut metrics = self.raft.metrics();
        loop {
            let (matched, last) = {
                let m = metrics.borrow_and_update();
                (matched_of(&m, id), m.last_log_index.unwrap_or(0))
            };
            if matched.is_some_and(|i| i >= goal && last.saturating_sub(i) <= CAUGHT_UP_LAG) {
                return Ok(());
            }
            self.lead()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ChangeError::Failed(format!(
                    "{name} ({addr}) was added as a learner but has not caught up within {} s \
                     (it holds index {} of {last}): is it running, at that address, with a config \
                     listing this group's members? It stays a learner: repeat the command to make \
                     it a voter, or remove it",
                    CATCH_UP_LIMIT.as_secs(),
                    matched.map_or_else(|| "none".into(), |i| i.to_string()),
                )));
            }
            let _ =
                tokio::time::timeout(left.min(Duration::from_millis(200)), metrics.changed()).await;
        }
    }

    /// Removes `id`, a learner or a voter, this leader included: once the change commits the
    /// leader steps down (openraft) and tells the most caught-up remaining voter to stand, so
    /// that the group does not wait out an election timeout on top of the leaders' lease.
    pub async fn remove_member(&self, id: NodeId) -> Result<(), ChangeError> {
        self.lead()?;
        let name = self.name(id);
        let members = self.settled_membership()?;
        if !members.nodes.contains_key(&id) {
            return Err(ChangeError::Refused(format!(
                "{name} is not a member of this group"
            )));
        }
        if !members.voters.contains(&id) {
            let change = self
                .raft
                .change_membership(ChangeMembers::RemoveNodes([id].into()), false);
            self.within(&format!("removing learner {name}"), change)
                .await?;
            return Ok(());
        }
        let mut new = members.voters.clone();
        new.remove(&id);
        let healthy = self.healthy_voters(&members).await;
        quorum_kept(&members.voters, &new, &healthy, |i| self.name(i))
            .map_err(ChangeError::Refused)?;
        let change = self
            .raft
            .change_membership(ChangeMembers::RemoveVoters([id].into()), false);
        self.within(&format!("removing {name}"), change).await?;
        tracing::info!(group = %self.settings.name, members = self.settings.members_are, member = name, "a voter left");
        if id != self.settings.self_id {
            return Ok(());
        }
        // It steps down as soon as the change is applied, if it has not already.
        let successor = new
            .iter()
            .filter(|v| healthy.contains(v))
            .min_by_key(|v| self.lag_of(**v).unwrap_or(u64::MAX))
            .and_then(|v| members.nodes.get(v).cloned());
        if let Some(addr) = successor {
            // The others refuse votes while their lease of this leader lasts (openraft's leader
            // lease: the longest election timeout since they last heard from it), and it goes
            // on sending heartbeats until it has stepped down, a moment after the change was
            // answered.
            let wait = self.lease_of_followers();
            let mut metrics = self.raft.metrics();
            let connect = self.settings.connect.clone();
            let (source, code) = (self.source, self.settings.codes.take_leadership);
            tokio::spawn(async move {
                let stepped_down = async {
                    while metrics.borrow_and_update().state == ServerState::Leader {
                        if metrics.changed().await.is_err() {
                            return;
                        }
                    }
                };
                let _ = tokio::time::timeout(CHANGE_DEADLINE, stepped_down).await;
                tokio::time::sleep(wait).await;
                if let Err(why) = ask_to_lead(&connect, source, code, &addr).await {
                    tracing::warn!(successor = %addr, %why, "the successor could not be asked to stand");
                }
            });
        }
        Ok(())
    }

    /// Hands the leadership to the voter `id`; returns once it leads (or another was elected).
    /// This leader stops serving and sending heartbeats, waits until `id` holds its whole log
    /// and then has it stand: `id`'s vote and this node's (whose own lease of itself has run
    /// out, as it has led longer than one) elect it at once when they are a majority, as in a
    /// group of two or three voters; in a larger group the other voters grant their vote only
    /// once their lease of this leader has run out (openraft 0.9 has no way to end it early),
    /// so the hand-over waits for it first.
    pub async fn transfer_leader(&self, id: NodeId) -> Result<(), ChangeError> {
        self.lead()?;
        let name = self.name(id);
        if id == self.settings.self_id {
            return Ok(());
        }
        let members = self.settled_membership()?;
        if !members.voters.contains(&id) {
            return Err(ChangeError::Refused(format!(
                "{name} is not a voter of this group: only a voter can lead"
            )));
        }
        let healthy = self.healthy_voters(&members).await;
        if !healthy.contains(&id) {
            return Err(ChangeError::Refused(format!(
                "{name} is not reachable or not caught up: it cannot take over now"
            )));
        }
        let addr = members.nodes[&id].clone();
        // This leader grants the successor its vote only once its lease of itself, dated from
        // its election, has run out; until then it goes on serving.
        let lease_of_self = self.settings.longest_election_timeout() + Duration::from_millis(50);
        let led_for = self.leading_for().unwrap_or(Duration::ZERO);
        if led_for < lease_of_self {
            tokio::time::sleep(lease_of_self - led_for).await;
            self.lead()?;
        }
        self.set_transferring(true);
        self.raft.runtime_config().heartbeat(false);
        let outcome = self.hand_over(id, &name, &addr, members.voters.len()).await;
        self.raft.runtime_config().heartbeat(true);
        self.set_transferring(false);
        outcome
    }

    /// Before this node leaves (SIGTERM, as a rolling restart sends): if it leads, it hands the
    /// leadership to a voter that is caught up and answers, so that a node that has been serving
    /// all along leads on. A leader that just stopped is replaced by an election seconds later;
    /// restarted at once, it may lead again from its stored vote before it has heard anyone.
    pub async fn hand_over_before_leaving(&self) {
        if !self.is_leader() {
            return;
        }
        let Ok(members) = self.settled_membership() else {
            return;
        };
        let self_id = self.settings.self_id;
        // A group of one has nobody to hand over to, and nothing to warn of.
        if members.voters.iter().all(|id| *id == self_id) {
            return;
        }
        let healthy = self.healthy_voters(&members).await;
        let Some(&successor) = healthy.iter().find(|id| **id != self_id) else {
            tracing::warn!(group = %self.settings.name, members = self.settings.members_are, "leaving while leading, and no other voter is caught up to lead on");
            return;
        };
        let name = self.name(successor);
        match self.transfer_leader(successor).await {
            Ok(()) => {
                tracing::info!(group = %self.settings.name, members = self.settings.members_are, successor = %name, "handed the leadership over before leaving")
            }
            Err(e) => tracing::warn!(
                group = %self.settings.name, members = self.settings.members_are,
                successor = %name,
                error = %e,
                "could not hand the leadership over before leaving"
            ),
        }
    }

    async fn hand_over(
        &self,
        id: NodeId,
        name: &str,
        addr: &str,
        voters: usize,
    ) -> Result<(), ChangeError> {
        let mut metrics = self.raft.metrics();
        let started = Instant::now();
        // Requests proposed before the hand-over began still commit: wait for them to be
        // applied here and for the successor to hold them, or its election would be refused
        // for a shorter log.
        loop {
            if self.writes_in_flight() > 0 {
                if started.elapsed() >= HAND_OVER_LIMIT {
                    return Err(ChangeError::Failed(format!(
                        "requests proposed before the hand-over to {name} did not end within {} \
                         s: this node leads on",
                        HAND_OVER_LIMIT.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
            let done = {
                let m = metrics.borrow_and_update();
                let matched = matched_of(&m, id);
                let applied = m.last_applied.map(|l| l.index);
                m.last_log_index.is_some_and(|last| {
                    matched.is_some_and(|i| i >= last) && applied.is_some_and(|a| a >= last)
                })
            };
            if done {
                break;
            }
            if started.elapsed() >= HAND_OVER_LIMIT {
                return Err(ChangeError::Failed(format!(
                    "{name} did not receive this leader's whole log within {} s: this node \
                     leads on",
                    HAND_OVER_LIMIT.as_secs()
                )));
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), metrics.changed()).await;
        }
        tracing::info!(
            group = %self.settings.name, members = self.settings.members_are,
            successor = name,
            caught_up_ms = started.elapsed().as_millis() as u64,
            "the successor holds this leader's whole log"
        );
        // The votes at hand: the successor's own and this leader's.
        const AT_HAND: usize = 2;
        if AT_HAND * 2 <= voters {
            tokio::time::sleep(self.lease_of_followers()).await;
        }
        ask_to_lead(
            &self.settings.connect,
            self.source,
            self.settings.codes.take_leadership,
            addr,
        )
        .await
        .map_err(|why| ChangeError::Failed(format!("{name} could not be asked to lead: {why}")))?;
        let waited = 4 * self.lease + Duration::from_secs(1);
        let deadline = Instant::now() + waited;
        loop {
            let leader = metrics.borrow_and_update().current_leader;
            match leader {
                Some(l) if l == id => return Ok(()),
                Some(l) if l != self.settings.self_id => {
                    return Err(ChangeError::Failed(format!(
                        "{} was elected instead of {name}",
                        self.name(l)
                    )))
                }
                _ => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ChangeError::Failed(format!(
                    "{name} was asked to lead but no new leader was seen within {} ms",
                    waited.as_millis()
                )));
            }
            let _ = tokio::time::timeout(left, metrics.changed()).await;
        }
    }

    /// How long after this leader's last message a follower still refuses votes (openraft's
    /// leader lease, the longest election timeout), with a heartbeat interval to spare.
    fn lease_of_followers(&self) -> Duration {
        self.settings.longest_election_timeout() + Duration::from_millis(self.settings.heartbeat_ms)
    }

    /// Stands for election at once, as a leader handing on its office asks (`take_leadership`
    /// of [`crate::Codes`]).
    pub(super) async fn take_leadership(&self) -> Result<(), String> {
        if !self.membership().voters.contains(&self.settings.self_id) {
            return Err("this node is not a voter".into());
        }
        if self.rejoin_state().is_some() {
            return Err("this node is still catching up with the group".into());
        }
        tracing::info!(group = %self.settings.name, members = self.settings.members_are, "asked by the leader handing on its office: standing for election now");
        self.raft.trigger().elect().await.map_err(|e| e.to_string())
    }
}

/// The last log index the leader knows member `id` holds; `None` while it knows nothing of it
/// (or this node does not lead).
fn matched_of(m: &openraft::RaftMetrics<NodeId, BasicNode>, id: NodeId) -> Option<u64> {
    m.replication
        .as_ref()?
        .get(&id)
        .copied()
        .flatten()
        .map(|l| l.index)
}

/// Asks the member at `addr` to stand at once, on a link as the group's own (sealed when the
/// group has a secret).
async fn ask_to_lead(
    connect: &crate::Connect,
    source: Option<std::net::IpAddr>,
    code: i32,
    addr: &str,
) -> Result<(), String> {
    let limit = Duration::from_secs(1);
    let client = connect(addr.to_string(), source, limit).await?;
    let answer = client
        .invoke(RemotingCommand::request(code), limit)
        .await
        .map_err(|e| e.to_string())?;
    if answer.code != 0 {
        return Err(answer.remark.unwrap_or_default());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_request_reads_by_its_code_from_the_groups_add_code() {
        use rocketmq_wire::codes::request as req;
        let mut r = RemotingCommand::request(req::NAMESRV_ADD_MEMBER)
            .with_ext("memberId", "n3")
            .with_ext("memberAddress", "ns-3:9876");
        let add = MemberChange::from_request(&r, req::NAMESRV_ADD_MEMBER);
        assert!(matches!(
            add,
            Ok(MemberChange::Add {
                id: "n3",
                addr: "ns-3:9876"
            })
        ));
        r.code = req::NAMESRV_TRANSFER_LEADER;
        let transfer = MemberChange::from_request(&r, req::NAMESRV_ADD_MEMBER);
        assert!(matches!(
            transfer,
            Ok(MemberChange::TransferLeader { id: "n3" })
        ));
        // The controller's codes are another group's: not a change of this one.
        assert!(MemberChange::from_request(&r, req::CONTROLLER_ADD_MEMBER).is_err());
        let bare = RemotingCommand::request(req::CONTROLLER_ADD_MEMBER);
        assert_eq!(
            MemberChange::from_request(&bare, req::CONTROLLER_ADD_MEMBER).err(),
            Some("memberId and memberAddress are required")
        );
        let min = RemotingCommand::request(i32::MIN);
        assert!(MemberChange::from_request(&min, req::CONTROLLER_ADD_MEMBER).is_err());
    }

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_change_that_leaves_too_few_reachable_voters_is_refused() {
        let name = |i: u64| format!("n{i}");
        // Five voters, two down: removing a live one leaves 2 of 4 reachable.
        let refused = quorum_kept(
            &set(&[0, 1, 2, 3, 4]),
            &set(&[0, 1, 3, 4]),
            &set(&[0, 1, 2]),
            name,
        );
        assert!(refused
            .unwrap_err()
            .contains("of the new voters [n0, n1, n3, n4] only [n0, n1]"));
        // Removing a dead one leaves 3 of 4.
        assert!(quorum_kept(
            &set(&[0, 1, 2, 3, 4]),
            &set(&[0, 1, 2, 3]),
            &set(&[0, 1, 2]),
            name
        )
        .is_ok());
        // Adding a caught-up voter to three with one down: 3 of 4.
        assert!(quorum_kept(
            &set(&[0, 1, 2]),
            &set(&[0, 1, 2, 3]),
            &set(&[0, 1, 3]),
            name
        )
        .is_ok());
        assert!(quorum_kept(&set(&[0]), &set(&[]), &set(&[0]), name).is_err());
    }
}
