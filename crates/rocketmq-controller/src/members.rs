//! The group's own members as the controller's answers name them. Listing and changing them
//! (adding, removing, handing the leadership over) is the Raft crate's
//! ([`rocketmq_raft::Group::change_members`]); what is the controller's is naming members as
//! `controllerDLegerPeers` does, and GET_METADATA_INFO's list.

use crate::node::Controller;

impl Controller {
    /// (member id, address) of a Raft id: the address the membership holds, or the config's
    /// while the node has no membership yet.
    pub(crate) fn member(&self, node_id: u64) -> Option<(String, String)> {
        let addr = self.group().member_addr(node_id)?;
        Some((self.group().name(node_id), addr))
    }

    /// `n0:host:port;n1:host:port;` of every member, learners included (GET_METADATA_INFO).
    pub(crate) fn members_text(&self) -> String {
        let members = self.group().membership();
        if members.nodes.is_empty() {
            let config = self.config.read();
            return config
                .members
                .list()
                .iter()
                .map(|p| format!("{}:{};", p.id, p.addr))
                .collect();
        }
        members
            .nodes
            .iter()
            .map(|(id, addr)| format!("{}:{addr};", self.group().name(*id)))
            .collect()
    }

    /// Before this node leaves (SIGTERM, as a rolling restart sends): if it leads, it hands the
    /// leadership to a voter that is caught up and answers, so that a node that has been hearing
    /// the brokers all along leads on. Restarted at once, a leader that just stopped may lead
    /// again from its stored vote having heard no broker yet, while the brokers' JVMs still send
    /// to its old address for as long as they cache its name (30 s), and fail over a master
    /// that is alive.
    pub async fn hand_over_before_leaving(&self) {
        self.group().hand_over_before_leaving().await
    }
}
