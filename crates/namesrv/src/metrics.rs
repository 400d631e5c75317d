//! Prometheus metrics: traffic counted as it happens, registry sizes and the route journal's
//! counts read at scrape time.
//! Besides, for the status page, the request rate and p99 latency of the last 15 minutes,
//! sampled every 10 s by the server itself.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::fmt::Write as _;

use prometheus_client::encoding::{
    text::encode, EncodeLabelSet, EncodeLabelValue, LabelValueEncoder,
};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::{Metric, Registry};
use rocketmq_http::Escaped;
use tokio_util::sync::CancellationToken;

use crate::journal::Journal;
use crate::state::State;
use rocketmq_wire::clock::now_ms;

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

pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    latency: Family<CodeLabel, Histogram>,
    connections: Gauge,
    connections_refused: Counter,
    registrations: Counter,
    repeat_registrations: Counter,
    unregistrations: Counter,
    stale_unregistrations: Counter,
    expirations: Counter,
    kv_writes: Counter,
    brokers_alive: Family<ClusterLabel, Gauge>,
    topics: Gauge,
    snapshot_age: Gauge,
    /// How long the last route snapshot took to save, capture to fsync.
    snapshot_save_seconds: Gauge<f64, AtomicU64>,
    ready: Gauge,
    snapshot_saved_ms: AtomicI64,
    /// Requests of the sampling interval under way, by duration.
    window: [AtomicU64; LATENCY_BUCKETS],
    series: parking_lot::Mutex<Series>,
}

/// How often the request rate and latency are sampled.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// Samples kept: 15 minutes.
pub const SAMPLES_KEPT: usize = 90;

/// Duration buckets: below 256 ns, then four per doubling (each at most a quarter wider than
/// it starts) up to 2^36 ns, about a minute; the last also holds anything longer.
const LATENCY_BUCKETS: usize = 1 + 4 * 28;

fn bucket_of(nanos: u64) -> usize {
    if nanos < 256 {
        return 0;
    }
    let octave = 63 - nanos.leading_zeros() as usize;
    let quarter = ((nanos >> (octave - 2)) & 3) as usize;
    ((octave - 8) * 4 + quarter + 1).min(LATENCY_BUCKETS - 1)
}

/// The upper bound of a bucket, in nanoseconds.
fn bucket_upper(bucket: usize) -> u64 {
    if bucket == 0 {
        return 256;
    }
    let octave = (bucket - 1) / 4 + 8;
    let quarter = ((bucket - 1) % 4) as u64;
    (5 + quarter) << (octave - 2)
}

/// The 99th percentile of the durations counted in `counts`, as its bucket's upper bound, in
/// microseconds; `None` without requests.
fn p99_us(counts: &[u64]) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    // The rank of the 99th percentile, rounded up: of 150 requests, the 149th fastest.
    let rank = total - total / 100;
    let mut seen = 0;
    for (bucket, count) in counts.iter().enumerate() {
        seen += count;
        if seen >= rank && total > 0 {
            return Some(bucket_upper(bucket) as f64 / 1000.0);
        }
    }
    None
}

/// One sampling interval's requests.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Sample {
    /// When the interval ended (or, for the one under way, now).
    pub at_ms: i64,
    /// How long it was.
    pub secs: f64,
    pub requests: u64,
    pub p99_us: Option<f64>,
}

struct Series {
    since: Instant,
    samples: VecDeque<Sample>,
}

impl Default for Series {
    fn default() -> Self {
        Series {
            since: Instant::now(),
            samples: VecDeque::with_capacity(SAMPLES_KEPT),
        }
    }
}

/// A new `M`, registered in `registry` as `name` with `help`.
fn metric<M: Metric + Clone + Default>(registry: &mut Registry, name: &str, help: &str) -> M {
    let metric = M::default();
    registry.register(name, help, metric.clone());
    metric
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("namesrv");
        let r = &mut registry;
        let requests = metric(r, "requests", "Requests by request code and response code");
        let latency = Family::<CodeLabel, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_01, 4.0, 10))
        });
        r.register(
            "request_duration_seconds",
            "Time to serve a request, by request code",
            latency.clone(),
        );
        Metrics {
            requests,
            latency,
            connections: metric(r, "connections", "Open connections"),
            connections_refused: metric(
                r,
                "connections_refused",
                "Connections closed at once for being over a connection cap",
            ),
            registrations: metric(
                r,
                "broker_registrations",
                "REGISTER_BROKER requests applied",
            ),
            repeat_registrations: metric(
                r,
                "broker_repeat_registrations",
                "REGISTER_BROKER requests identical to the broker's previous one, applied without decoding",
            ),
            unregistrations: metric(
                r,
                "broker_unregistrations",
                "Broker addresses removed (unregistration, expiry or connection loss)",
            ),
            stale_unregistrations: metric(
                r,
                "broker_stale_unregistrations_ignored",
                "Broker removals (unregistration, expiry or connection loss) left unapplied because the broker registered again after they were decided",
            ),
            expirations: metric(r, "broker_expirations", "Brokers expired for silence"),
            kv_writes: metric(r, "kv_writes", "KV store changes persisted"),
            brokers_alive: metric(r, "brokers_alive", "Live broker addresses per cluster"),
            topics: metric(r, "topics", "Topics with at least one queue"),
            snapshot_age: metric(
                r,
                "route_snapshot_age_seconds",
                "Seconds since the route snapshot was last written (-1: never)",
            ),
            snapshot_save_seconds: metric(
                r,
                "route_snapshot_save_seconds",
                "How long the last route snapshot took to write, from reading the table to fsync",
            ),
            ready: metric(
                r,
                "ready",
                "1 when serving routes (as /readyz answers 200), 0 while waiting for brokers or shutting down",
            ),
            snapshot_saved_ms: AtomicI64::new(0),
            window: std::array::from_fn(|_| AtomicU64::new(0)),
            series: Default::default(),
            registry,
        }
    }
}

impl Metrics {
    /// The registry the embedded controller, the KV group and the route exchange add their
    /// figures to (`lib.rs`), for every scrape.
    pub fn registry(&mut self) -> &mut Registry {
        &mut self.registry
    }

    /// Adds the route journal's counts by cause and its size to every scrape.
    pub fn watch_journal(&mut self, journal: Arc<Journal>) {
        self.registry
            .register_collector(Box::new(JournalCollector(journal)));
    }

    /// Counts a request; `served` says whether the server serves its code.
    pub fn request(&self, code: i32, served: bool, result: i32, took: Duration) {
        let code = Code(served.then_some(code));
        self.requests
            .get_or_create(&RequestLabels { code, result })
            .inc();
        self.latency
            .get_or_create(&CodeLabel { code })
            .observe(took.as_secs_f64());
        // The one addition the status page's charts cost a request: its count is the sum of
        // the buckets.
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.window[bucket_of(nanos)].fetch_add(1, Ordering::Relaxed);
    }

    /// Ends the sampling interval under way and keeps it, dropping samples older than the
    /// last [`SAMPLES_KEPT`].
    pub fn sample(&self) {
        let mut series = self.series.lock();
        let counts: Vec<u64> = self
            .window
            .iter()
            .map(|b| b.swap(0, Ordering::Relaxed))
            .collect();
        let now = Instant::now();
        let sample = Sample {
            at_ms: now_ms(),
            secs: now.duration_since(series.since).as_secs_f64(),
            requests: counts.iter().sum(),
            p99_us: p99_us(&counts),
        };
        series.since = now;
        if series.samples.len() == SAMPLES_KEPT {
            series.samples.pop_front();
        }
        series.samples.push_back(sample);
    }

    /// The kept samples, oldest first, then the interval under way so far.
    pub fn recent(&self) -> Vec<Sample> {
        let series = self.series.lock();
        let counts: Vec<u64> = self
            .window
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let mut out: Vec<Sample> = series.samples.iter().copied().collect();
        out.push(Sample {
            at_ms: now_ms(),
            secs: series.since.elapsed().as_secs_f64(),
            requests: counts.iter().sum(),
            p99_us: p99_us(&counts),
        });
        out
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

    pub fn stale_unregistrations_ignored(&self, count: usize) {
        self.stale_unregistrations.inc_by(count as u64);
    }

    pub fn expired(&self, count: usize) {
        self.expirations.inc_by(count as u64);
    }

    pub fn kv_written(&self) {
        self.kv_writes.inc();
    }

    pub fn snapshot_saved(&self, took: Duration) {
        self.snapshot_saved_ms.store(now_ms(), Ordering::Relaxed);
        self.snapshot_save_seconds.set(took.as_secs_f64());
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

/// The route journal's series: what left the routes, by cause, and the journal's size.
struct JournalCollector(Arc<Journal>);

impl std::fmt::Debug for JournalCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JournalCollector")
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: &'static str,
}

impl prometheus_client::collector::Collector for JournalCollector {
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> std::fmt::Result {
        use prometheus_client::encoding::EncodeMetric;
        use prometheus_client::metrics::counter::ConstCounter;
        use prometheus_client::metrics::gauge::ConstGauge;
        let journal = &self.0;
        // Every cause, those that never happened at 0: a series that first appears at 1 is an
        // increase `increase()` does not see, and an alert on a burst would miss the first.
        // Counted whether or not the journal keeps files.
        for (name, help, counts) in [
            (
                "route_removals",
                "Topics removed from a broker group's route, by cause (a group's last address \
                 gone, an admin's delete, a registration without the topic), since start",
                journal.removals(),
            ),
            (
                "broker_departures",
                "Broker addresses that left their group, by cause (unregistered, \
                 connection-closed, expired, left-at-peer, unbacked), since start",
                journal.departures(),
            ),
        ] {
            let mut family = encoder.encode_descriptor(
                name,
                help,
                None,
                ConstCounter::new(0u64).metric_type(),
            )?;
            for (cause, n) in counts {
                ConstCounter::new(n)
                    .encode(family.encode_family(&CauseLabel { cause: cause.key() })?)?;
            }
        }
        if !journal.is_enabled() {
            return Ok(());
        }
        let stats = journal.stats();
        for (name, help, value) in [
            (
                "route_journal_bytes",
                "Bytes of the route journal's files",
                stats.bytes,
            ),
            (
                "route_journal_lines",
                "Entries (lines) in the route journal's files",
                stats.lines,
            ),
        ] {
            let g = ConstGauge::new(value as i64);
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        let dropped = ConstCounter::new(stats.dropped);
        dropped.encode(encoder.encode_descriptor(
            "route_journal_dropped",
            "Route journal entries not written: the writer fell too far behind, or the disk failed",
            None,
            dropped.metric_type(),
        )?)
    }
}

/// Samples the request rate and latency every [`SAMPLE_EVERY`] until shutdown.
pub async fn sample_requests(state: Arc<State>, shutdown: CancellationToken) {
    let mut every =
        tokio::time::interval_at(tokio::time::Instant::now() + SAMPLE_EVERY, SAMPLE_EVERY);
    // After a stall, one late sample covering the whole gap rather than a burst of empty ones.
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = every.tick() => state.metrics.sample(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_duration_falls_in_the_bucket_that_bounds_it() {
        let mut previous_upper = 0;
        for bucket in 0..LATENCY_BUCKETS - 1 {
            let upper = bucket_upper(bucket);
            assert!(upper > previous_upper, "bucket {bucket}");
            assert_eq!(bucket_of(upper - 1), bucket, "just below {upper}");
            assert_eq!(bucket_of(upper), bucket + 1, "at {upper}");
            previous_upper = upper;
        }
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(u64::MAX), LATENCY_BUCKETS - 1);
    }

    #[test]
    fn the_p99_is_the_bucket_of_the_slowest_percent() {
        assert_eq!(p99_us(&[0; LATENCY_BUCKETS]), None);
        let m = Metrics::default();
        for _ in 0..990 {
            m.request(105, true, 0, Duration::from_micros(3));
        }
        for _ in 0..10 {
            m.request(105, true, 0, Duration::from_millis(40));
        }
        let now = m.recent();
        let current = now.last().unwrap();
        assert_eq!(current.requests, 1000);
        let p99 = current.p99_us.unwrap();
        assert!((3.0..3.6).contains(&p99), "{p99}");
        m.request(105, true, 0, Duration::from_millis(40));
        let p99 = m.recent().last().unwrap().p99_us.unwrap();
        assert!((40_000.0..48_000.0).contains(&p99), "{p99}");
    }

    #[test]
    fn removals_and_departures_are_scraped_by_cause_every_cause_from_zero() {
        use crate::journal::{Cause, Entry, Move};
        let journal = Arc::new(Journal::disabled());
        let mut m = Metrics::default();
        m.watch_journal(journal.clone());
        let scrape = m.render(vec![], 0, true);
        for family in ["route_removals", "broker_departures"] {
            let samples = format!("namesrv_{family}_total{{");
            assert_eq!(
                scrape.matches(&samples).count(),
                Cause::ALL.len(),
                "{scrape}"
            );
            let expired = format!("namesrv_{family}_total{{cause=\"expired\"}} 0\n");
            assert!(scrape.contains(&expired), "{scrape}");
        }
        assert!(
            !scrape.contains("route_journal_bytes"),
            "a journal that keeps no files has no size: {scrape}"
        );

        let mut gone = Entry::new(Cause::Expired).broker("c", "b", "10.0.0.1:10911", 0);
        gone.topics = ["T1", "T2"]
            .map(|t| Move {
                topic: t.into(),
                broker: "b".into(),
                was: Some([4, 4, 6]),
                now: None,
            })
            .into();
        journal.record(vec![gone]);
        let scrape = m.render(vec![], 0, true);
        assert!(
            scrape.contains("namesrv_route_removals_total{cause=\"expired\"} 2\n"),
            "{scrape}"
        );
        assert!(
            scrape.contains("namesrv_broker_departures_total{cause=\"expired\"} 1\n"),
            "{scrape}"
        );
        assert!(scrape.contains("namesrv_broker_departures_total{cause=\"connection-closed\"} 0\n"));
    }

    #[test]
    fn samples_start_each_interval_afresh_and_keep_fifteen_minutes() {
        let m = Metrics::default();
        m.request(105, true, 0, Duration::from_micros(5));
        m.sample();
        m.sample();
        let recent = m.recent();
        assert_eq!(recent.len(), 3);
        assert_eq!(recent[0].requests, 1);
        assert_eq!((recent[1].requests, recent[1].p99_us), (0, None));
        for _ in 0..SAMPLES_KEPT + 5 {
            m.sample();
        }
        assert_eq!(m.recent().len(), SAMPLES_KEPT + 1);
    }
}
