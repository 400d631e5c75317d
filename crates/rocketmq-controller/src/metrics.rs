//! The node's Prometheus metrics, read from [`Controller::view`] at scrape time: the group's own
//! series (`rocketmq_http::group_series`, under `controller_`) and the controller's. The NameServer registers the same collector for its embedded node, so a
//! dashboard reads a standalone and an embedded controller alike: both name their series
//! `namesrv_controller_*` (the registry's prefix is `namesrv`).

use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use rocketmq_http::group_series::gauge;
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
struct ResultLabel {
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct GroupLabels {
    cluster: Escaped,
    broker_name: Escaped,
}

impl Collector for ControllerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let v = self.0.view(usize::MAX);
        let group = self.0.group();
        rocketmq_http::group_series::encode(
            &mut encoder,
            "controller",
            &group.figures(),
            |id| self.0.group().name(id),
            group.commit_seconds(),
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
        Ok(())
    }
}
