//! Latency samples shared by the benchmarks: merging per-thread sorted samples, nearest-rank
//! percentiles, rates.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// Merges sorted runs of samples (one per thread) into one sorted vector, in O(n log k).
pub fn merge_sorted<R: AsRef<[u64]>>(runs: &[R]) -> Vec<u64> {
    let runs: Vec<&[u64]> = runs.iter().map(AsRef::as_ref).collect();
    let total: usize = runs.iter().map(|r| r.len()).sum();
    for run in &runs {
        debug_assert!(run.is_sorted(), "unsorted run");
    }
    let mut merged = Vec::with_capacity(total);
    // (next sample, run index, position in run), smallest sample first.
    let mut heads: BinaryHeap<Reverse<(u64, usize, usize)>> = runs
        .iter()
        .enumerate()
        .filter_map(|(r, run)| run.first().map(|&x| Reverse((x, r, 0))))
        .collect();
    while let Some(Reverse((x, r, i))) = heads.pop() {
        merged.push(x);
        if let Some(&next) = runs[r].get(i + 1) {
            heads.push(Reverse((next, r, i + 1)));
        }
    }
    assert_eq!(merged.len(), total, "merge lost samples");
    debug_assert!(merged.is_sorted());
    merged
}

/// The `p`th percentile of sorted nanosecond samples, in microseconds (nearest rank: the
/// smallest sample with at least p% of all samples at or below it). 0 when there are none.
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "ranks and latencies are far below 2^52"
)]
pub fn percentile_us(sorted_ns: &[u64], p: f64) -> f64 {
    assert!((0.0..=100.0).contains(&p), "percentile {p} out of range");
    if sorted_ns.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted_ns.len() as f64).ceil() as usize;
    sorted_ns[rank.clamp(1, sorted_ns.len()) - 1] as f64 / 1000.0
}

/// Events per second; 0 over no time.
#[expect(
    clippy::cast_precision_loss,
    reason = "rates are reported with a few digits"
)]
pub fn per_sec(count: u64, elapsed: Duration) -> f64 {
    if elapsed.is_zero() {
        0.0
    } else {
        count as f64 / elapsed.as_secs_f64()
    }
}

/// Rounds to one decimal, for JSON.
pub fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Microseconds for a table: whole above 10, one decimal below (`lazy` commits take < 1 us).
pub fn micros(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_runs_of_any_length() {
        let runs = vec![vec![1, 4, 9], vec![], vec![2, 3, 10, 11], vec![4]];
        assert_eq!(merge_sorted(&runs), vec![1, 2, 3, 4, 4, 9, 10, 11]);
        assert!(merge_sorted::<Vec<u64>>(&[]).is_empty());
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let ns: Vec<u64> = (1..=100).map(|i| i * 1000).collect();
        assert!((percentile_us(&ns, 50.0) - 50.0).abs() < 1e-9);
        assert!((percentile_us(&ns, 99.0) - 99.0).abs() < 1e-9);
        assert!((percentile_us(&ns, 100.0) - 100.0).abs() < 1e-9);
        assert!((percentile_us(&[7000], 99.0) - 7.0).abs() < 1e-9);
        assert!(percentile_us(&[], 50.0).abs() < 1e-9);
    }

    #[test]
    fn rates_over_no_time_are_zero() {
        assert!(per_sec(5, Duration::ZERO).abs() < 1e-9);
        assert!((per_sec(5, Duration::from_millis(500)) - 10.0).abs() < 1e-9);
    }
}
