//! Statistics of latency samples, through HDR histograms.
//!
//! Samples are nanoseconds (`u64`); summaries are microseconds (`f64`). The
//! histogram keeps three significant digits over any range, so a median of
//! 123.456 µs reads back within 0.1%.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Significant decimal digits the histograms keep (relative error ≤ 0.1%).
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// The summary of a set of latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min_us: f64,
    /// 50th percentile.
    pub median_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest sample (exact).
    pub max_us: f64,
    /// Arithmetic mean (exact, not from the histogram).
    pub mean_us: f64,
}

/// An HDR histogram of latencies recorded in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// Creates an empty histogram that grows to fit any sample.
    pub fn new() -> Self {
        let histogram = Histogram::new(SIGNIFICANT_DIGITS)
            .expect("three significant digits is within hdrhistogram's range");
        LatencyHistogram {
            histogram,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Builds a histogram from samples in nanoseconds.
    pub fn from_samples(samples_ns: &[u64]) -> Self {
        let mut histogram = Self::new();
        for &sample in samples_ns {
            histogram.record(sample);
        }
        histogram
    }

    /// Records one sample in nanoseconds. A zero sample counts as 1 ns
    /// (the histogram's lowest value).
    pub fn record(&mut self, sample_ns: u64) {
        let sample_ns = sample_ns.max(1);
        // The histogram auto-resizes to fit the sample; should growing ever
        // fail, the sample is kept at the largest trackable value rather
        // than lost.
        if self.histogram.record(sample_ns).is_err() {
            self.histogram.saturating_record(sample_ns);
        }
        self.sum_ns += u128::from(sample_ns);
        self.min_ns = self.min_ns.min(sample_ns);
        self.max_ns = self.max_ns.max(sample_ns);
    }

    /// Number of samples recorded.
    pub fn count(&self) -> u64 {
        self.histogram.len()
    }

    /// The value (in µs) at `quantile` (0.0 ..= 1.0), or `None` when empty.
    pub fn quantile_us(&self, quantile: f64) -> Option<f64> {
        if self.count() == 0 {
            return None;
        }
        // hdrhistogram reports the highest value equivalent to the bucket;
        // use the median-equivalent so values read back near what was
        // recorded rather than at the top of their bucket.
        let raw = self.histogram.value_at_quantile(quantile);
        Some(self.histogram.median_equivalent(raw) as f64 / 1000.0)
    }

    /// Summarizes the samples, or `None` when there are none.
    pub fn summary(&self) -> Option<Summary> {
        let count = self.count();
        if count == 0 {
            return None;
        }
        Some(Summary {
            count,
            min_us: self.min_ns as f64 / 1000.0,
            median_us: self.quantile_us(0.5)?,
            p90_us: self.quantile_us(0.9)?,
            p99_us: self.quantile_us(0.99)?,
            max_us: self.max_ns as f64 / 1000.0,
            mean_us: self.sum_ns as f64 / count as f64 / 1000.0,
        })
    }

    /// The underlying HDR histogram, for callers that want its iterators.
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.histogram
    }
}

/// Summarizes samples given in nanoseconds; `None` when `samples_ns` is empty.
pub fn summarize(samples_ns: &[u64]) -> Option<Summary> {
    LatencyHistogram::from_samples(samples_ns).summary()
}
