//! The group's own members: listing them, adding and removing nodes while the group runs, and
//! handing the leadership to another member. Every change is one of openraft's membership
//! changes (a learner first, then joint consensus to the new voter set), made by the leader; what
//! is ours is only what is checked before one is proposed and how a leader gets its successor
//! elected without waiting for election timeouts.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{ClientWriteError, RaftError};
use openraft::{BasicNode, ChangeMembers, ServerState};
use rocketmq_wire::body::{ControllerMember, ControllerMembers};
use rocketmq_wire::RemotingCommand;

use crate::node::{response, Controller};
use crate::raft::codes;

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
pub enum MemberError {
    #[error("this node is not the leader")]
    NotLeader,
    /// Not attempted: the remark says why.
    #[error("{0}")]
    Refused(String),
    /// Attempted, and not completed.
    #[error("{0}")]
    Failed(String),
}

impl MemberError {
    pub fn code(&self) -> i32 {
        match self {
            MemberError::NotLeader => response::CONTROLLER_NOT_LEADER,
            MemberError::Refused(_) => response::CONTROLLER_INVALID_REQUEST,
            MemberError::Failed(_) => response::SYSTEM_ERROR,
        }
    }
}

/// The membership this node holds (the newest it has received, committed or not).
struct Members {
    voters: BTreeSet<u64>,
    nodes: BTreeMap<u64, String>,
    /// A change is half done (joint consensus): no other may start before it ends.
    joint: bool,
}

/// Whether a voter set change keeps a working group: a majority of the old voters and of the
/// new ones must be reachable and caught up, since joint consensus commits in both, and the
/// group then goes on in the new one.
fn quorum_kept(
    old: &BTreeSet<u64>,
    new: &BTreeSet<u64>,
    healthy: &BTreeSet<u64>,
    name: impl Fn(u64) -> String,
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

/// A membership change's outcome, within [`CHANGE_DEADLINE`].
async fn within<T>(
    what: &str,
    change: impl Future<Output = Result<T, RaftError<u64, ClientWriteError<u64, BasicNode>>>>,
) -> Result<T, MemberError> {
    match tokio::time::timeout(CHANGE_DEADLINE, change).await {
        Err(_) => Err(MemberError::Failed(format!(
            "{what} not committed within {} s: no quorum of controller nodes answered",
            CHANGE_DEADLINE.as_secs()
        ))),
        Ok(Ok(v)) => Ok(v),
        Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(_)))) => {
            Err(MemberError::NotLeader)
        }
        Ok(Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e)))) => {
            Err(MemberError::Refused(format!("{what} refused: {e}")))
        }
        Ok(Err(e)) => Err(MemberError::Failed(format!("{what} failed: {e}"))),
    }
}

impl Controller {
    /// The membership a change may start from: one change at a time, so none while the
    /// membership is still joint.
    fn settled_membership(&self) -> Result<Members, MemberError> {
        let members = self.membership();
        if members.joint {
            return Err(MemberError::Refused(
                "another membership change is under way: try again once it is done".into(),
            ));
        }
        Ok(members)
    }

    fn membership(&self) -> Members {
        let stored = self.raft().metrics().borrow().membership_config.clone();
        let m = stored.membership();
        Members {
            voters: m.voter_ids().collect(),
            nodes: m.nodes().map(|(id, n)| (*id, n.addr.clone())).collect(),
            joint: m.get_joint_config().len() > 1,
        }
    }

    /// (member id, address) of a Raft id: the address the membership holds, or the config's
    /// while the node has no membership yet.
    pub(crate) fn member(&self, node_id: u64) -> Option<(String, String)> {
        let held = self
            .raft()
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .get_node(&node_id)
            .map(|n| n.addr.clone());
        let config = self.config.read();
        let addr = held.or_else(|| config.peer(node_id).map(|p| p.addr.clone()))?;
        Some((config.member_name(node_id), addr))
    }

    /// `n0:host:port;n1:host:port;` of every member, learners included (GET_METADATA_INFO).
    pub(crate) fn members_text(&self) -> String {
        let members = self.membership();
        let config = self.config.read();
        if members.nodes.is_empty() {
            return config
                .peers
                .iter()
                .map(|p| format!("{}:{};", p.id, p.addr))
                .collect();
        }
        members
            .nodes
            .iter()
            .map(|(id, addr)| format!("{}:{addr};", config.member_name(*id)))
            .collect()
    }

    /// Keeps the trusted addresses (`is_peer`, the port's reserve) those of the membership,
    /// once the node has one: a node added at a new address must be heard, and one removed
    /// no longer speaks for the group. Looked at whenever openraft reports its metrics.
    pub(crate) fn follow_membership(self: &Arc<Self>) {
        let stored = self.raft().metrics().borrow().membership_config.clone();
        let at = *stored.log_id();
        // Held until the names are given: a newer membership seen meanwhile gives its own after.
        let mut seen = self.membership_seen.lock();
        if *seen == Some(at) {
            return;
        }
        *seen = Some(at);
        let addrs: Vec<String> = stored
            .membership()
            .nodes()
            .map(|(_, n)| n.addr.clone())
            .collect();
        if addrs.is_empty() {
            return;
        }
        let self_id = self.config.read().self_node_id();
        if stored.membership().get_node(&self_id).is_none() {
            tracing::warn!(
                "this node is not in its group's membership (it was removed): it takes no part \
                 until it is added again"
            );
        }
        self.addresses.set_names(addrs);
        drop(seen);
        let addresses = self.addresses.clone();
        tokio::spawn(async move { addresses.refresh().await });
    }

    fn lead(&self) -> Result<(), MemberError> {
        if self.is_leader() {
            Ok(())
        } else {
            Err(MemberError::NotLeader)
        }
    }

    fn raft_id(&self, name: &str) -> Result<u64, MemberError> {
        let config = self.config.read();
        config.node_id(name).ok_or_else(|| {
            MemberError::Refused(format!(
                "{name} is not a member id of this group: ids are {}<number> (the number is the \
                 member's Raft id)",
                config.id_prefix
            ))
        })
    }

    pub(crate) fn name(&self, id: u64) -> String {
        self.config.read().member_name(id)
    }

    /// The members as the leader sees them; refused by a follower.
    pub fn list_members(&self) -> Result<ControllerMembers, MemberError> {
        self.lead()?;
        Ok(self.members_body())
    }

    fn members_body(&self) -> ControllerMembers {
        let m = self.raft().metrics().borrow().clone();
        let leader = (m.state == ServerState::Leader).then_some(m.id);
        ControllerMembers {
            leader_id: leader.map(|id| self.name(id)),
            last_log_index: m.last_log_index,
            members: self
                .member_rows(leader)
                .into_iter()
                .map(|(_, r)| r)
                .collect(),
        }
    }

    /// Each member with its Raft id, as this node's Raft core knows the membership, `leader`
    /// named the leader (`Group::members`).
    pub(crate) fn member_rows(&self, leader: Option<u64>) -> Vec<(u64, ControllerMember)> {
        self.group()
            .members(leader)
            .iter()
            .map(|m| (m.node, self.member_row(m)))
            .collect()
    }

    /// A member as LIST_MEMBERS answers it, named as the config names members.
    pub(crate) fn member_row(&self, m: &rocketmq_raft::metrics::Member) -> ControllerMember {
        ControllerMember {
            id: self.name(m.node),
            address: m.address.clone(),
            role: m.role.into(),
            matched_index: m.matched_index,
            lag: m.lag,
        }
    }

    /// How many entries of the leader's log `id` lacks, as the leader last heard; `None` while
    /// it has heard nothing of it.
    fn lag_of(&self, id: u64) -> Option<u64> {
        let m = self.raft().metrics().borrow().clone();
        let matched = m.replication.as_ref()?.get(&id).copied().flatten()?.index;
        Some(m.last_log_index.unwrap_or(0).saturating_sub(matched))
    }

    /// The voters that answer a probe within a second and lack at most [`CAUGHT_UP_LAG`]
    /// entries, this leader included.
    async fn healthy_voters(&self, members: &Members) -> BTreeSet<u64> {
        let self_id = self.config.read().self_node_id();
        let checks = members
            .voters
            .iter()
            .filter(|id| **id != self_id)
            .map(|id| async move {
                let close = self.lag_of(*id).is_some_and(|lag| lag <= CAUGHT_UP_LAG);
                let addr = members.nodes.get(id)?;
                (close && self.group().probe(addr).await.is_some()).then_some(*id)
            });
        let mut healthy: BTreeSet<u64> = futures::future::join_all(checks)
            .await
            .into_iter()
            .flatten()
            .collect();
        healthy.insert(self_id);
        healthy
    }

    /// Adds `name` at `addr`: a learner first, made a voter once it has caught up with the
    /// leader's log. An earlier attempt that left it a learner is carried on.
    pub async fn add_member(
        &self,
        name: &str,
        addr: &str,
    ) -> Result<ControllerMembers, MemberError> {
        self.lead()?;
        let id = self.raft_id(name)?;
        if !rocketmq_raft::members::is_address(addr) {
            return Err(MemberError::Refused(format!(
                "{addr} is not an address (host:port)"
            )));
        }
        let members = self.settled_membership()?;
        if let Some((other, _)) = members.nodes.iter().find(|(i, a)| **i != id && *a == addr) {
            return Err(MemberError::Refused(format!(
                "{addr} is already the address of member {}",
                self.name(*other)
            )));
        }
        match members.nodes.get(&id) {
            Some(held) if held != addr => {
                return Err(MemberError::Refused(format!(
                    "{name} is already a member, at {held}: remove it first to move it"
                )))
            }
            Some(_) if members.voters.contains(&id) => return Ok(self.members_body()),
            Some(_) => {}
            None => {
                let learner = self.raft().add_learner(id, BasicNode::new(addr), false);
                within(&format!("adding {name} as a learner"), learner).await?;
                tracing::info!(member = name, %addr, "added a learner to the controller group");
            }
        }
        self.await_caught_up(id, name, addr).await?;
        let members = self.membership();
        let mut healthy = self.healthy_voters(&members).await;
        healthy.insert(id);
        let mut new = members.voters.clone();
        new.insert(id);
        quorum_kept(&members.voters, &new, &healthy, |i| self.name(i))
            .map_err(MemberError::Refused)?;
        let change = self
            .raft()
            .change_membership(ChangeMembers::AddVoterIds([id].into()), false);
        within(&format!("making {name} a voter"), change).await?;
        tracing::info!(member = name, %addr, "a new voter joined the controller group");
        Ok(self.members_body())
    }

    /// Waits until the learner `id` holds what the leader held when the wait began and lags by
    /// no more than [`CAUGHT_UP_LAG`] entries.
    async fn await_caught_up(&self, id: u64, name: &str, addr: &str) -> Result<(), MemberError> {
        let goal = self.raft().metrics().borrow().last_log_index.unwrap_or(0);
        let deadline = Instant::now() + CATCH_UP_LIMIT;
        let mut metrics = self.raft().metrics();
        loop {
            let (matched, last) = {
                let m = metrics.borrow_and_update();
                let matched = m
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(&id).copied().flatten())
                    .map(|l| l.index);
                (matched, m.last_log_index.unwrap_or(0))
            };
            if matched.is_some_and(|i| i >= goal && last.saturating_sub(i) <= CAUGHT_UP_LAG) {
                return Ok(());
            }
            self.lead()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MemberError::Failed(format!(
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

    /// Removes `name`, a learner or a voter, this leader included: once the change commits the
    /// leader steps down (openraft) and tells the most caught-up remaining voter to stand, so
    /// that the group does not wait out an election timeout on top of the leaders' lease.
    pub async fn remove_member(&self, name: &str) -> Result<ControllerMembers, MemberError> {
        self.lead()?;
        let id = self.raft_id(name)?;
        let members = self.settled_membership()?;
        if !members.nodes.contains_key(&id) {
            return Err(MemberError::Refused(format!(
                "{name} is not a member of this group"
            )));
        }
        if !members.voters.contains(&id) {
            let change = self
                .raft()
                .change_membership(ChangeMembers::RemoveNodes([id].into()), false);
            within(&format!("removing learner {name}"), change).await?;
            return Ok(self.members_body());
        }
        let mut new = members.voters.clone();
        new.remove(&id);
        let healthy = self.healthy_voters(&members).await;
        quorum_kept(&members.voters, &new, &healthy, |i| self.name(i))
            .map_err(MemberError::Refused)?;
        let change = self
            .raft()
            .change_membership(ChangeMembers::RemoveVoters([id].into()), false);
        within(&format!("removing {name}"), change).await?;
        tracing::info!(member = name, "a voter left the controller group");
        let mut body = self.members_body();
        if id == self.config.read().self_node_id() {
            // It steps down as soon as the change is applied, if it has not already.
            body.leader_id = None;
            let successor = new
                .iter()
                .filter(|v| healthy.contains(v))
                .min_by_key(|v| self.lag_of(**v).unwrap_or(u64::MAX))
                .and_then(|v| members.nodes.get(v).cloned());
            if let Some(addr) = successor {
                // The others refuse votes while their lease of this leader lasts (openraft's
                // leader lease: the longest election timeout since they last heard from it),
                // and it goes on sending heartbeats until it has stepped down, a moment after
                // the change was answered.
                let wait = self.lease_of_followers();
                let group = self.group().clone();
                let mut metrics = self.raft().metrics();
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
                    if let Err(why) = ask_to_lead(&group, &addr).await {
                        tracing::warn!(successor = %addr, %why, "the successor could not be asked to stand");
                    }
                });
            }
        }
        Ok(body)
    }

    /// Hands the leadership to the voter `name`; returns once it leads (or another was
    /// elected). This leader stops serving and sending heartbeats, waits until `name` holds its
    /// whole log and then has it stand: `name`'s vote and this node's (whose own lease of
    /// itself has run out, as it has led longer than one) elect it at once when they are a
    /// majority, as in a group of two or three voters; in a larger group the other voters grant
    /// their vote only once their lease of this leader has run out (openraft 0.9 has no way to
    /// end it early), so the hand-over waits for it first.
    pub async fn transfer_leader(&self, name: &str) -> Result<ControllerMembers, MemberError> {
        self.lead()?;
        let id = self.raft_id(name)?;
        let self_id = self.config.read().self_node_id();
        if id == self_id {
            return Ok(self.members_body());
        }
        let members = self.settled_membership()?;
        if !members.voters.contains(&id) {
            return Err(MemberError::Refused(format!(
                "{name} is not a voter of this group: only a voter can lead"
            )));
        }
        let healthy = self.healthy_voters(&members).await;
        if !healthy.contains(&id) {
            return Err(MemberError::Refused(format!(
                "{name} is not reachable or not caught up: it cannot take over now"
            )));
        }
        let addr = members.nodes[&id].clone();
        // This leader grants the successor its vote only once its lease of itself, dated from
        // its election, has run out; until then it goes on serving.
        let lease_of_self =
            self.group().settings().longest_election_timeout() + Duration::from_millis(50);
        let led_for = self.group().leading_for().unwrap_or(Duration::ZERO);
        if led_for < lease_of_self {
            tokio::time::sleep(lease_of_self - led_for).await;
            self.lead()?;
        }
        self.group().set_transferring(true);
        self.raft().runtime_config().heartbeat(false);
        let outcome = self.hand_over(id, name, &addr, members.voters.len()).await;
        self.raft().runtime_config().heartbeat(true);
        self.group().set_transferring(false);
        outcome?;
        Ok(self.members_body())
    }

    /// Before this node leaves (SIGTERM, as a rolling restart sends): if it leads, it hands the
    /// leadership to a voter that is caught up and answers, so that a node that has been hearing
    /// the brokers all along leads on. A leader that just stopped is replaced by an election
    /// seconds later; restarted at once, it may lead again from its stored vote having heard no
    /// broker yet, while the brokers' JVMs still send to its old address for as long as they
    /// cache its name (30 s), and fail over a master that is alive.
    pub async fn hand_over_before_leaving(&self) {
        if !self.is_leader() {
            return;
        }
        let Ok(members) = self.settled_membership() else {
            return;
        };
        let self_id = self.config.read().self_node_id();
        // A group of one has nobody to hand over to, and nothing to warn of.
        if members.voters.iter().all(|id| *id == self_id) {
            return;
        }
        let healthy = self.healthy_voters(&members).await;
        let Some(&successor) = healthy.iter().find(|id| **id != self_id) else {
            tracing::warn!("leaving while leading, and no other voter is caught up to lead on");
            return;
        };
        let name = self.name(successor);
        match self.transfer_leader(&name).await {
            Ok(_) => tracing::info!(successor = %name, "handed the leadership over before leaving"),
            Err(e) => tracing::warn!(
                successor = %name,
                error = %e,
                "could not hand the leadership over before leaving"
            ),
        }
    }

    async fn hand_over(
        &self,
        id: u64,
        name: &str,
        addr: &str,
        voters: usize,
    ) -> Result<(), MemberError> {
        let mut metrics = self.raft().metrics();
        let started = Instant::now();
        // Requests proposed before the hand-over began still commit: wait for them to be
        // applied here and for the successor to hold them, or its election would be refused
        // for a shorter log.
        loop {
            if self.group().writes_in_flight() > 0 {
                if started.elapsed() >= HAND_OVER_LIMIT {
                    return Err(MemberError::Failed(format!(
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
                let matched = m
                    .replication
                    .as_ref()
                    .and_then(|r| r.get(&id).copied().flatten())
                    .map(|l| l.index);
                let applied = m.last_applied.map(|l| l.index);
                m.last_log_index.is_some_and(|last| {
                    matched.is_some_and(|i| i >= last) && applied.is_some_and(|a| a >= last)
                })
            };
            if done {
                break;
            }
            if started.elapsed() >= HAND_OVER_LIMIT {
                return Err(MemberError::Failed(format!(
                    "{name} did not receive this leader's whole log within {} s: this node \
                     leads on",
                    HAND_OVER_LIMIT.as_secs()
                )));
            }
            let _ = tokio::time::timeout(Duration::from_millis(20), metrics.changed()).await;
        }
        tracing::info!(
            successor = name,
            caught_up_ms = started.elapsed().as_millis() as u64,
            "the successor holds this leader's whole log"
        );
        // The votes at hand: the successor's own and this leader's.
        const AT_HAND: usize = 2;
        if AT_HAND * 2 <= voters {
            tokio::time::sleep(self.lease_of_followers()).await;
        }
        ask_to_lead(self.group(), addr).await.map_err(|why| {
            MemberError::Failed(format!("{name} could not be asked to lead: {why}"))
        })?;
        let deadline = Instant::now() + 4 * self.group().lease() + Duration::from_secs(1);
        loop {
            let leader = metrics.borrow_and_update().current_leader;
            match leader {
                Some(l) if l == id => return Ok(()),
                Some(l) if l != self.config.read().self_node_id() => {
                    return Err(MemberError::Failed(format!(
                        "{} was elected instead of {name}",
                        self.name(l)
                    )))
                }
                _ => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MemberError::Failed(format!(
                    "{name} was asked to lead but no new leader was seen within {} ms",
                    (4 * self.group().lease() + Duration::from_secs(1)).as_millis()
                )));
            }
            let _ = tokio::time::timeout(left, metrics.changed()).await;
        }
    }

    /// How long after this leader's last message a follower still refuses votes (openraft's
    /// leader lease, the longest election timeout), with a heartbeat interval to spare.
    fn lease_of_followers(&self) -> Duration {
        let settings = self.group().settings();
        settings.longest_election_timeout() + Duration::from_millis(settings.heartbeat_ms)
    }

    /// TAKE_LEADERSHIP: stands for election at once, as a leader handing on its office asks.
    pub(crate) async fn take_leadership(&self) -> Result<(), String> {
        let id = self.config.read().self_node_id();
        if !self.membership().voters.contains(&id) {
            return Err("this node is not a voter".into());
        }
        if self.group().rejoin_state().is_some() {
            return Err("this node is still catching up with the group".into());
        }
        tracing::info!("asked by the leader handing on its office: standing for election now");
        self.raft()
            .trigger()
            .elect()
            .await
            .map_err(|e| e.to_string())
    }
}

/// Sends TAKE_LEADERSHIP to the member at `addr`, on a link as the group's own (sealed when the
/// group has a secret).
async fn ask_to_lead(group: &crate::node::ControllerGroup, addr: &str) -> Result<(), String> {
    let limit = Duration::from_secs(1);
    let client = group.connect(addr, limit).await?;
    let answer = client
        .invoke(RemotingCommand::request(codes::TAKE_LEADERSHIP), limit)
        .await
        .map_err(|e| e.to_string())?;
    if answer.code != response::SUCCESS {
        return Err(answer.remark.unwrap_or_default());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
