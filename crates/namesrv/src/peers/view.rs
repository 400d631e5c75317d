//! The group as the status page and `/metrics` show it: this node's role, the leader, what it
//! applied and whether it caught up, and each member's role, lag and last answer.

use std::sync::Arc;

use serde::Serialize;

use super::group::PeerGroup;

impl PeerGroup {
    /// What the status page shows of the group.
    pub fn view(&self) -> PeersView {
        let figures = self.group.figures();
        PeersView {
            self_id: self.group.name(self.self_id),
            role: figures.role,
            term: figures.term,
            leader: self.group.leader().map(|id| self.group.name(id)),
            applied: self.group.applied_index(),
            caught_up: self.caught_up(),
            quorum_contact_ms: figures.quorum_contact_ms,
            members: figures
                .members
                .into_iter()
                .map(|m| PeerView {
                    id: self.group.name(m.node),
                    address: m.address,
                    role: m.role,
                    lag: m.lag,
                    last_answer_ms: m.last_answer_ms,
                    this_node: m.this_node,
                })
                .collect(),
            commits: self.group.commits(),
        }
    }
}

/// The KV group as the status page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct PeersView {
    pub self_id: String,
    pub role: String,
    pub term: u64,
    /// The leader this node vouches for (heard from within the lease, or itself).
    pub leader: Option<String>,
    pub applied: Option<u64>,
    pub caught_up: bool,
    pub quorum_contact_ms: Option<u64>,
    pub members: Vec<PeerView>,
    /// KV writes this node committed as leader since it started.
    pub commits: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PeerView {
    pub id: String,
    pub address: String,
    pub role: &'static str,
    /// Entries it lacks (known on the leader).
    pub lag: Option<u64>,
    pub last_answer_ms: Option<u64>,
    pub this_node: bool,
}

/// The group's series on `/metrics` (`namesrv_peers_kv_*`, as the controller's group's are
/// `namesrv_controller_*`), and whether this node has caught up.
struct PeerGroupCollector(Arc<PeerGroup>);

impl std::fmt::Debug for PeerGroupCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerGroupCollector")
    }
}

impl prometheus_client::collector::Collector for PeerGroupCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        let g = &self.0;
        rocketmq_http::group_series::encode(
            &mut encoder,
            "peers_kv",
            &g.group.figures(),
            |id| g.group.name(id),
            g.group.commit_seconds(),
        )?;
        rocketmq_http::group_series::gauge(
            &mut encoder,
            "peers_kv_caught_up",
            "1 once this NameServer has caught up with its KV group since it started",
            i64::from(g.caught_up()),
        )?;
        rocketmq_http::group_series::gauge(
            &mut encoder,
            "peers_kv_applied_index",
            "The last KV group log entry this NameServer applied",
            g.group.applied_index().unwrap_or(0) as i64,
        )
    }
}

/// Adds the group's series to every scrape of `registry`.
pub fn register_metrics(
    registry: &mut prometheus_client::registry::Registry,
    group: Arc<PeerGroup>,
) {
    registry.register_collector(Box::new(PeerGroupCollector(group)));
}
