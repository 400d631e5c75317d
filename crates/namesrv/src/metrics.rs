//! Prometheus metrics: traffic counted as it happens, registry sizes read at scrape time.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use std::fmt::Write as _;

use prometheus_client::encoding::{
    text::encode, EncodeLabelSet, EncodeLabelValue, LabelValueEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::state::now_ms;

/// A request code as a label value; codes we do not serve all count as `other`, whatever the
/// answer (GO_AWAY during a graceful shutdown answers every code), so that a client sending
/// arbitrary codes cannot grow the metric set without bound. Integers keep the
/// per-request cost free of allocations.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Code(Option<i32>);

impl EncodeLabelValue for Code {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        match self.0 {
            Some(code) => write!(encoder, "{code}"),
            None => encoder.write_str("other"),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: Code,
    result: i32,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: Code,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: Escaped,
}

/// A label value from outside (a broker's cluster name). The encoder writes values as given,
/// so a quote or line feed in a name would end the value or the line and forge series.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct Escaped(String);

impl EncodeLabelValue for Escaped {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
        let mut rest = self.0.as_str();
        while let Some(at) = rest.find(['\\', '"', '\n']) {
            encoder.write_str(&rest[..at])?;
            encoder.write_str(match rest.as_bytes()[at] {
                b'\\' => "\\\\",
                b'"' => "\\\"",
                _ => "\\n",
            })?;
            rest = &rest[at + 1..];
        }
        encoder.write_str(rest)
    }
}

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<CodeLabel, Histogram>,
    connections: Gauge,
    connections_refused: Counter,
    registrations: Counter,
    repeat_registrations: Counter,
    unregistrations: Counter,
    expirations: Counter,
    kv_writes: Counter,
    brokers_alive: Family<ClusterLabel, Gauge>,
    topics: Gauge,
    snapshot_age: Gauge,
    ready: Gauge,
    snapshot_saved_ms: AtomicI64,
}

/// Only codes the server serves get a label of their own, whatever the answer (during a
/// graceful shutdown every request is answered GO_AWAY, served code or not).
fn code_label(code: i32) -> Code {
    Code(crate::handler::is_served(code).then_some(code))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("namesrv");
        let requests = Family::<RequestLabels, Counter>::default();
        let latency = Family::<CodeLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 4.0, 10))
        });
        let m = Metrics {
            requests,
            latency,
            connections: Gauge::default(),
            connections_refused: Counter::default(),
            registrations: Counter::default(),
            repeat_registrations: Counter::default(),
            unregistrations: Counter::default(),
            expirations: Counter::default(),
            kv_writes: Counter::default(),
            brokers_alive: Family::default(),
            topics: Gauge::default(),
            snapshot_age: Gauge::default(),
            ready: Gauge::default(),
            snapshot_saved_ms: AtomicI64::new(0),
            registry: Registry::default(),
        };
        registry.register(
            "requests",
            "Requests by request code and response code",
            m.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to serve a request, by request code",
            m.latency.clone(),
        );
        registry.register("connections", "Open connections", m.connections.clone());
        registry.register(
            "connections_refused",
            "Connections closed at once for being over a connection cap",
            m.connections_refused.clone(),
        );
        registry.register(
            "broker_registrations",
            "REGISTER_BROKER requests applied",
            m.registrations.clone(),
        );
        registry.register(
            "broker_repeat_registrations",
            "REGISTER_BROKER requests identical to the broker's previous one, applied without decoding",
            m.repeat_registrations.clone(),
        );
        registry.register(
            "broker_unregistrations",
            "Broker addresses removed (unregistration, expiry or connection loss)",
            m.unregistrations.clone(),
        );
        registry.register(
            "broker_expirations",
            "Brokers expired for silence",
            m.expirations.clone(),
        );
        registry.register(
            "kv_writes",
            "KV store changes persisted",
            m.kv_writes.clone(),
        );
        registry.register(
            "brokers_alive",
            "Live broker addresses per cluster",
            m.brokers_alive.clone(),
        );
        registry.register("topics", "Topics with at least one queue", m.topics.clone());
        registry.register(
            "route_snapshot_age_seconds",
            "Seconds since the route snapshot was last written (-1: never)",
            m.snapshot_age.clone(),
        );
        registry.register(
            "ready",
            "1 when serving routes (as /readyz answers 200), 0 while waiting for brokers or shutting down",
            m.ready.clone(),
        );
        Metrics { registry, ..m }
    }
}

impl Metrics {
    pub fn request(&self, code: i32, result: i32, took: Duration) {
        let code = code_label(code);
        self.requests
            .get_or_create(&RequestLabels { code, result })
            .inc();
        self.latency
            .get_or_create(&CodeLabel { code })
            .observe(took.as_secs_f64());
    }

    pub fn connection_opened(&self) {
        self.connections.inc();
    }

    pub fn connection_closed(&self) {
        self.connections.dec();
    }

    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    pub fn registered(&self, repeat: bool) {
        self.registrations.inc();
        if repeat {
            self.repeat_registrations.inc();
        }
    }

    pub fn unregistered(&self, count: usize) {
        self.unregistrations.inc_by(count as u64);
    }

    pub fn expired(&self, count: usize) {
        self.expirations.inc_by(count as u64);
    }

    pub fn kv_written(&self) {
        self.kv_writes.inc();
    }

    pub fn snapshot_saved(&self) {
        self.snapshot_saved_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Renders the exposition text, after setting the gauges read from the registry.
    pub fn render(
        &self,
        alive_per_cluster: Vec<(String, usize)>,
        topics: usize,
        ready: bool,
    ) -> String {
        self.ready.set(i64::from(ready));
        self.brokers_alive.clear();
        for (cluster, count) in alive_per_cluster {
            self.brokers_alive
                .get_or_create(&ClusterLabel {
                    cluster: Escaped(cluster),
                })
                .set(count as i64);
        }
        self.topics.set(topics as i64);
        let saved = self.snapshot_saved_ms.load(Ordering::Relaxed);
        self.snapshot_age.set(if saved == 0 {
            -1
        } else {
            (now_ms() - saved) / 1000
        });
        let mut out = String::new();
        encode(&mut out, &self.registry).expect("writing to a String cannot fail");
        out
    }
}
