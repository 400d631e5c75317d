//! The node's Prometheus metrics, read from [`Controller::view`] at scrape time, plus the commit
//! latency histogram. The NameServer registers the same collector for its embedded node, so a
//! dashboard reads a standalone and an embedded controller alike: both name their series
//! `namesrv_controller_*` (the registry's prefix is `namesrv`).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use rocketmq_http::Escaped;

use crate::node::Controller;
use crate::replicated::GroupView;

/// Adds the node's figures to every scrape of `registry`.
pub fn register(registry: &mut Registry, controller: Arc<Controller>) {
    registry.register_collector(Box::new(ControllerCollector(controller)));
}

struct ControllerCollector(Arc<Controller>);

impl std::fmt::Debug for ControllerCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ControllerCollector")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoleLabel {
    role: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    cluster: Escaped,
    broker_name: Escaped,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    member: Escaped,
    address: Escaped,
}

fn gauge<T: prometheus_client::encoding::EncodeGaugeValue + Default + Copy>(
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

impl Collector for ControllerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let v = self.0.view(usize::MAX);
        {
            let g = ConstGauge::new(1i64);
            let mut family = encoder.encode_descriptor(
                "controller_role",
                "This controller node's Raft role (1 on the current one)",
                None,
                g.metric_type(),
            )?;
            g.encode(family.encode_family(&RoleLabel {
                role: v.role.to_lowercase(),
            })?)?;
        }
        gauge(
            &mut encoder,
            "controller_is_leader",
            "1 when this controller node leads its group",
            i64::from(v.leader_id.as_deref() == Some(v.self_id.as_str())),
        )?;
        gauge(
            &mut encoder,
            "controller_has_leader",
            "1 when this node names a leader it has heard from within the lease (itself included)",
            i64::from(v.leader_id.is_some()),
        )?;
        gauge(
            &mut encoder,
            "controller_term",
            "The Raft term this node is in",
            v.term as i64,
        )?;
        gauge(
            &mut encoder,
            "controller_quorum_contact_age_seconds",
            "Seconds since this node last had word from a working group: as leader a quorum's \
             acknowledgement, as follower the leader's AppendEntries (+Inf: never)",
            v.quorum_contact_ms
                .map_or(f64::INFINITY, |ms| ms as f64 / 1000.0),
        )?;
        gauge(
            &mut encoder,
            "controller_live_brokers",
            "Brokers whose controller heartbeats this node receives",
            v.live_brokers as i64,
        )?;
        {
            let c = ConstCounter::new(0u64);
            let mut family = encoder.encode_descriptor(
                "controller_elections",
                "Master elections this node ran as leader, by outcome",
                None,
                c.metric_type(),
            )?;
            for (result, n) in [
                ("new_master", v.elections_new_master),
                ("kept_master", v.elections_kept_master),
                ("no_master", v.elections_no_master),
            ] {
                ConstCounter::new(n).encode(family.encode_family(&ResultLabel { result })?)?;
            }
        }
        for (name, help, n) in [
            (
                "controller_role_notifications",
                "NOTIFY_BROKER_ROLE_CHANGED messages sent",
                v.role_notifications,
            ),
            (
                "controller_heartbeats",
                "Broker heartbeats received, directly or passed on by a follower",
                v.heartbeats,
            ),
        ] {
            let c = ConstCounter::new(n);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        {
            let g = ConstGauge::new(0i64);
            let mut family = encoder.encode_descriptor(
                "controller_members",
                "Members of the controller group as this node knows them, by role",
                None,
                g.metric_type(),
            )?;
            for role in ["leader", "follower", "learner"] {
                let n = v.members.iter().filter(|m| m.member.role == role).count() as i64;
                ConstGauge::new(n).encode(family.encode_family(&RoleLabel {
                    role: role.to_string(),
                })?)?;
            }
        }
        // Per member, from the leader only: a follower does not replicate to anyone.
        for (name, help, value) in [
            (
                "controller_member_lag_entries",
                "Log entries each member lacks (on the leader)",
                (|m: &crate::node::MemberView| m.member.lag.map(|l| l as f64))
                    as fn(&crate::node::MemberView) -> Option<f64>,
            ),
            (
                "controller_member_answer_age_seconds",
                "Seconds since each member last answered the leader's Raft requests",
                |m| m.last_answer_ms.map(|ms| ms as f64 / 1000.0),
            ),
        ] {
            let g = ConstGauge::new(0f64);
            let mut family = encoder.encode_descriptor(name, help, None, g.metric_type())?;
            for m in v.members.iter().filter(|m| !m.this_node) {
                if let Some(x) = value(m) {
                    let labels = MemberLabels {
                        member: Escaped(m.member.id.clone()),
                        address: Escaped(m.member.address.clone()),
                    };
                    ConstGauge::new(x).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        let live_in = |g: &GroupView| {
            v.live
                .iter()
                .filter(|l| l.cluster_name == g.cluster_name && l.broker_name == g.broker_name)
                .count() as i64
        };
        for (name, help, value) in [
            (
                "controller_master_epoch",
                "Master epoch of each broker group",
                (|g: &GroupView, _: i64| g.master_epoch as i64) as fn(&GroupView, i64) -> i64,
            ),
            (
                "controller_sync_state_set_size",
                "Members of each broker group's sync-state set",
                |g, _| g.sync_state_set.len() as i64,
            ),
            (
                "controller_master_broker_id",
                "Controller id of each broker group's master (-1: none)",
                |g, _| g.master_broker_id.unwrap_or(-1),
            ),
            (
                "controller_group_live_brokers",
                "Brokers of each group whose heartbeats this node receives",
                |_, live| live,
            ),
        ] {
            let g = ConstGauge::new(0i64);
            let mut family = encoder.encode_descriptor(name, help, None, g.metric_type())?;
            for group in &v.groups {
                let labels = GroupLabels {
                    cluster: Escaped(group.cluster_name.clone()),
                    broker_name: Escaped(group.broker_name.clone()),
                };
                ConstGauge::new(value(group, live_in(group)))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        let h = self.0.commit_seconds();
        h.encode(encoder.encode_descriptor(
            "controller_commit",
            "Time from proposing a change to the group to its being applied here",
            Some(&prometheus_client::registry::Unit::Seconds),
            h.metric_type(),
        )?)
    }
}
