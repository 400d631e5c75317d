//! A replicated group's Prometheus series, the same for every group of ours under the user's
//! prefix (`controller_*` for the controller's group, `peers_kv_*` for the NameServers' KV
//! group), so that one dashboard panel reads either: the node's role, its leader and term, how
//! long since it last had word from a working group, its members by role, each member's lag and
//! last answer (known on the leader), and the commit latency.

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use rocketmq_raft::figures::{Figures, Member};
use rocketmq_raft::NodeId;

use crate::Escaped;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    member: Escaped,
    address: Escaped,
}

/// One gauge series without labels.
pub fn gauge<T: prometheus_client::encoding::EncodeGaugeValue + Default + Copy>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: T,
) -> std::fmt::Result
where
    ConstGauge<T>: EncodeMetric,
{
    let g = ConstGauge::new(value);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

/// Writes the group's series as `{prefix}_...`; `name` gives a member's name for its labels.
pub fn encode(
    encoder: &mut DescriptorEncoder,
    prefix: &str,
    figures: &Figures,
    name: impl Fn(NodeId) -> String,
    commit_seconds: &Histogram,
) -> std::fmt::Result {
    {
        let g = ConstGauge::new(1i64);
        let name = format!("{prefix}_role");
        let mut family = encoder.encode_descriptor(
            &name,
            "This node's Raft role in its group (1 on the current one)",
            None,
            g.metric_type(),
        )?;
        g.encode(family.encode_family(&RoleLabel {
            role: figures.role.to_lowercase(),
        })?)?;
    }
    gauge(
        encoder,
        &format!("{prefix}_is_leader"),
        "1 when this node leads its group",
        i64::from(figures.is_leader),
    )?;
    gauge(
        encoder,
        &format!("{prefix}_has_leader"),
        "1 when this node names a leader it has heard from within the lease (itself included)",
        i64::from(figures.has_leader),
    )?;
    gauge(
        encoder,
        &format!("{prefix}_term"),
        "The Raft term this node is in",
        figures.term as i64,
    )?;
    gauge(
        encoder,
        &format!("{prefix}_quorum_contact_age_seconds"),
        "Seconds since this node last had word from a working group: as leader a quorum's \
         acknowledgement, as follower the leader's AppendEntries (+Inf: never)",
        figures
            .quorum_contact_ms
            .map_or(f64::INFINITY, |ms| ms as f64 / 1000.0),
    )?;
    {
        let g = ConstGauge::new(0i64);
        let name = format!("{prefix}_members");
        let mut family = encoder.encode_descriptor(
            &name,
            "Members of the group as this node knows them, by role",
            None,
            g.metric_type(),
        )?;
        for role in ["leader", "follower", "learner"] {
            let n = figures.members.iter().filter(|m| m.role == role).count() as i64;
            ConstGauge::new(n).encode(family.encode_family(&RoleLabel {
                role: role.to_string(),
            })?)?;
        }
    }
    // Per member, from the leader only: a follower does not replicate to anyone.
    for (suffix, help, value) in [
        (
            "member_lag_entries",
            "Log entries each member lacks (on the leader)",
            (|m: &Member| m.lag.map(|l| l as f64)) as fn(&Member) -> Option<f64>,
        ),
        (
            "member_answer_age_seconds",
            "Seconds since each member last answered the leader's Raft requests",
            |m| m.last_answer_ms.map(|ms| ms as f64 / 1000.0),
        ),
    ] {
        let g = ConstGauge::new(0f64);
        let series = format!("{prefix}_{suffix}");
        let mut family = encoder.encode_descriptor(&series, help, None, g.metric_type())?;
        for m in figures.members.iter().filter(|m| !m.this_node) {
            if let Some(x) = value(m) {
                let labels = MemberLabels {
                    member: Escaped(name(m.node)),
                    address: Escaped(m.address.clone()),
                };
                ConstGauge::new(x).encode(family.encode_family(&labels)?)?;
            }
        }
    }
    commit_seconds.encode(encoder.encode_descriptor(
        &format!("{prefix}_commit"),
        "Time from proposing a change to the group to its being applied here",
        Some(&prometheus_client::registry::Unit::Seconds),
        commit_seconds.metric_type(),
    )?)
}
