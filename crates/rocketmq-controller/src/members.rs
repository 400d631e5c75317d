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
        // The config's members until a membership is held: the same ids, so the same names.
        self.group()
            .member_nodes()
            .into_iter()
            .map(|(id, addr)| format!("{}:{addr};", self.group().name(id)))
            .collect()
    }
}
