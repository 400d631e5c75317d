//! Who the NameServers that agree are, as `namesrvPeers` and `namesrvSelfId` say: read as the
//! controller reads its members ([`rocketmq_raft::members`]). The list is what a group is formed
//! of; once formed, the group's membership says who its members are.

use std::collections::BTreeMap;

use rocketmq_raft::NodeId;

/// What `namesrvPeers` and `namesrvSelfId` say.
#[derive(Clone, Debug)]
pub struct Peers {
    pub self_id: NodeId,
    /// Node id → remoting address: the members the group is formed with. Once formed, the
    /// group's membership says who the members are; members added or removed since need not
    /// be listed here.
    pub members: BTreeMap<NodeId, String>,
    /// `n` in `n0`: how members are named.
    pub(super) prefix: String,
}

impl Peers {
    /// `None` when no peers are configured: a lone NameServer. Read as the controller reads
    /// its members ([`rocketmq_raft::members`]).
    pub fn from_config(peers: &str, self_id: &str) -> anyhow::Result<Option<Peers>> {
        use rocketmq_raft::members::{MemberError, Members};
        if !crate::config::lists_peers(peers) {
            return Ok(None);
        }
        let members = Members::parse(peers, self_id).map_err(|e| match e {
            MemberError::SelfNotListed(id) => {
                anyhow::anyhow!("namesrvSelfId {id} is not among namesrvPeers")
            }
            MemberError::NoOrdinal(reason) => anyhow::anyhow!("namesrvSelfId=auto: {reason}"),
            other => anyhow::anyhow!("namesrvPeers: {other}"),
        })?;
        Ok(Some(Peers {
            self_id: members.self_node(),
            members: members
                .by_node()
                .map(|(id, addr)| (id, addr.to_string()))
                .collect(),
            prefix: members.prefix().to_string(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn peers_are_read_as_the_controller_s_peer_list_and_must_name_this_node() {
        let peers = Peers::from_config("n0-127.0.0.1:9876;n1-127.0.0.2:9876", "n1")
            .unwrap()
            .unwrap();
        assert_eq!(peers.self_id, 1);
        assert_eq!(peers.members[&0], "127.0.0.1:9876");
        assert_eq!(peers.prefix, "n");
        assert!(Peers::from_config("", "").unwrap().is_none());
        assert!(Peers::from_config("n0-127.0.0.1:9876", "n5").is_err());
        assert!(Peers::from_config("n0-127.0.0.1", "n0").is_err());
        assert!(Peers::from_config("n0-127.0.0.1:1;m1-127.0.0.1:2", "n0").is_err());
        // One member at two addresses: the controller's rule, not the last one winning.
        assert!(Peers::from_config("n0-127.0.0.1:1;n0-127.0.0.2:1", "n0").is_err());
    }
}
