//! Statistics on known samples.

use progeny_bench::stats::{summarize, LatencyHistogram};
use progeny_bench::table::least_squares_slope;

fn close(actual: f64, expected: f64, relative: f64) -> bool {
    (actual - expected).abs() <= expected.abs() * relative
}

#[test]
fn uniform_samples_have_known_percentiles() {
    // 1 µs, 2 µs, ..., 1000 µs.
    let samples: Vec<u64> = (1..=1000).map(|us| us * 1000).collect();
    let summary = summarize(&samples).expect("samples were given");
    assert_eq!(summary.count, 1000);
    assert_eq!(summary.min_us, 1.0);
    assert_eq!(summary.max_us, 1000.0);
    assert!(close(summary.mean_us, 500.5, 1e-12), "{summary:?}");
    // Three significant digits: within 0.1% of the exact rank statistics.
    assert!(close(summary.median_us, 500.0, 0.002), "{summary:?}");
    assert!(close(summary.p90_us, 900.0, 0.002), "{summary:?}");
    assert!(close(summary.p99_us, 990.0, 0.002), "{summary:?}");
}

#[test]
fn order_of_samples_does_not_matter() {
    let mut samples: Vec<u64> = (1..=999).map(|i| (i * 7919 % 1000 + 1) * 1000).collect();
    let forward = summarize(&samples).unwrap();
    samples.reverse();
    assert_eq!(summarize(&samples).unwrap(), forward);
}

#[test]
fn skewed_samples_put_the_tail_in_p99() {
    // 98 fast spawns of 100 µs and 2 slow ones of 50 ms: the median stays
    // fast, the p99 lands on the slow ones, the mean is pulled up.
    let mut samples = vec![100_000u64; 98];
    samples.extend([50_000_000, 50_000_000]);
    let summary = summarize(&samples).unwrap();
    assert!(close(summary.median_us, 100.0, 0.001), "{summary:?}");
    assert!(close(summary.p99_us, 50_000.0, 0.001), "{summary:?}");
    assert!(close(
        summary.mean_us,
        (98.0 * 100.0 + 2.0 * 50_000.0) / 100.0,
        1e-9
    ));
}

#[test]
fn a_single_sample_is_every_percentile() {
    let summary = summarize(&[123_456]).unwrap();
    for value in [
        summary.median_us,
        summary.p99_us,
        summary.min_us,
        summary.max_us,
    ] {
        assert!(close(value, 123.456, 0.001), "{summary:?}");
    }
}

#[test]
fn no_samples_no_summary() {
    assert!(summarize(&[]).is_none());
    let histogram = LatencyHistogram::new();
    assert_eq!(histogram.count(), 0);
    assert!(histogram.quantile_us(0.5).is_none());
}

#[test]
fn values_across_decades_keep_three_digits() {
    // A histogram that has to grow from nanoseconds to seconds.
    for value in [1u64, 999, 12_345, 6_789_012, 2_000_000_000] {
        let summary = summarize(&[value]).unwrap();
        let expected = value as f64 / 1000.0;
        assert!(
            close(summary.median_us, expected, 0.001),
            "{value}: {summary:?}"
        );
    }
}

#[test]
fn slope_of_a_known_line() {
    let points = [(0.0, 2.0), (0.25, 2.75), (1.0, 5.0), (4.0, 14.0)];
    let slope = least_squares_slope(&points).unwrap();
    assert!(close(slope, 3.0, 1e-12), "{slope}");
    assert!(least_squares_slope(&[(1.0, 1.0)]).is_none());
    assert!(least_squares_slope(&[(1.0, 1.0), (1.0, 5.0)]).is_none());
}
