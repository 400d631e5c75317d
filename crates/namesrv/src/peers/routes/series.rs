//! The route exchange's series on `/metrics`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{PeerRoutes, PeerStanding};

/// The exchange's series on `/metrics`.
struct PeerRoutesCollector(Arc<PeerRoutes>);

impl std::fmt::Debug for PeerRoutesCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerRoutesCollector")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct PeerLabels {
    peer: rocketmq_http::Escaped,
    address: rocketmq_http::Escaped,
}

impl prometheus_client::collector::Collector for PeerRoutesCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let p = &self.0;
        let standing = p.standing();
        for (name, help, value) in [
            (
                "peers_route_differences",
                "Brokers the last exchange with each peer found this NameServer lacking or \
                 holding at an older data version",
                (|s: &PeerStanding| Some(s.differences as f64)) as fn(&PeerStanding) -> Option<f64>,
            ),
            (
                "peers_route_disagreeing_seconds",
                "Seconds this NameServer has disagreed with each peer without a break (0: agrees)",
                |s| Some(s.disagreeing_ms.map_or(0.0, |ms| ms as f64 / 1000.0)),
            ),
            (
                "peers_route_exchange_age_seconds",
                "Seconds since each peer's route digest last came",
                |s| s.last_exchange_ms.map(|ms| ms as f64 / 1000.0),
            ),
        ] {
            let g = ConstGauge::new(0f64);
            let mut family = encoder.encode_descriptor(name, help, None, g.metric_type())?;
            for s in &standing {
                if let Some(v) = value(s) {
                    let labels = PeerLabels {
                        peer: rocketmq_http::Escaped(s.id.clone()),
                        address: rocketmq_http::Escaped(s.address.clone()),
                    };
                    ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        for (name, help, n) in [
            (
                "peers_route_taken_over",
                "Broker registrations taken over from peers",
                p.taken_over.load(Ordering::Relaxed),
            ),
            (
                "peers_route_heard_later",
                "Broker deadlines moved on because a peer heard the broker later",
                p.heard_later.load(Ordering::Relaxed),
            ),
            (
                "peers_route_left",
                "Brokers held on a peer's word removed because they told a peer they were leaving",
                p.left.load(Ordering::Relaxed),
            ),
            (
                "peers_route_received_bytes",
                "Bytes of the route exchange's answers received from peers, whole frames",
                p.digest_bytes.load(Ordering::Relaxed),
            ),
        ] {
            let c = ConstCounter::new(n);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        rocketmq_http::group_series::gauge(
            &mut encoder,
            "peers_routes_filled",
            "1 once this NameServer has taken its peers' routes since it started",
            i64::from(p.filled()),
        )
    }
}

/// Adds the exchange's series to every scrape of `registry`.
pub fn register_metrics(
    registry: &mut prometheus_client::registry::Registry,
    routes: Arc<PeerRoutes>,
) {
    registry.register_collector(Box::new(PeerRoutesCollector(routes)));
}
