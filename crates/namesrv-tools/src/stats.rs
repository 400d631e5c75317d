//! Latency histograms and the summaries the results carry.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Microsecond latencies from 1 µs to 10 min at three significant digits.
#[derive(Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Self {
        Latency(Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds"))
    }
}

impl Latency {
    pub fn record(&mut self, elapsed: Duration) {
        self.0.saturating_record(elapsed.as_micros().max(1) as u64);
    }

    pub fn add(&mut self, other: &Latency) {
        // Both histograms share the same bounds, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    pub fn summary(&self) -> LatencySummary {
        let ms = |us: u64| us as f64 / 1000.0;
        LatencySummary {
            count: self.0.len(),
            mean_ms: self.0.mean() / 1000.0,
            p50_ms: ms(self.0.value_at_quantile(0.50)),
            p90_ms: ms(self.0.value_at_quantile(0.90)),
            p99_ms: ms(self.0.value_at_quantile(0.99)),
            p999_ms: ms(self.0.value_at_quantile(0.999)),
            max_ms: ms(self.0.max()),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// The median, averaging the middle pair; `None` for no values.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[mid - 1] + v[mid]) / 2.0
    } else {
        v[mid]
    })
}

/// Failures counted with the first few messages kept, so that a report can say what went wrong.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Failures {
    pub count: u64,
    pub samples: Vec<String>,
}

const KEPT_SAMPLES: usize = 5;

impl Failures {
    pub fn add(&mut self, count: u64, message: impl Into<String>) {
        self.count += count;
        let message = message.into();
        if self.samples.len() < KEPT_SAMPLES && !self.samples.contains(&message) {
            self.samples.push(message);
        }
    }

    pub fn merge(&mut self, other: &Failures) {
        self.count += other.count;
        for s in &other.samples {
            if self.samples.len() < KEPT_SAMPLES && !self.samples.contains(s) {
                self.samples.push(s.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median([]), None);
    }

    #[test]
    fn failures_keep_distinct_samples() {
        let mut f = Failures::default();
        f.add(2, "timeout");
        f.add(1, "timeout");
        f.add(1, "closed");
        assert_eq!(f.count, 4);
        assert_eq!(f.samples, vec!["timeout", "closed"]);
    }
}
