//! Latencies shared by the benchmarks: a histogram per thread, merged, nearest-rank
//! percentiles in bounded memory; rates.

use std::time::Duration;

/// Sub-buckets per power of two: a recorded value is reported at most 1/128 (0.8 %) above
/// itself, never below.
const SUB_BUCKETS: usize = 128;
/// `log2(SUB_BUCKETS)`.
const SUB_BITS: u32 = SUB_BUCKETS.trailing_zeros();

/// Latencies in nanoseconds, counted in log-linear buckets (as `HdrHistogram` does): every
/// operation is counted, however many there are, in memory that grows only with the largest
/// value (about 21 KiB for latencies up to 0.1 s, 29 KiB up to 10 s). Values below 128 ns
/// are exact; above, each power of two is split into 128 buckets of equal width, so a
/// percentile is the smallest recorded value's bucket top, at most 0.8 % high. Min and max
/// are exact.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Count per bucket (see `bucket_of`), as long as the largest bucket used.
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
}

/// The bucket of `ns`: `ns` itself below `SUB_BUCKETS`, then `SUB_BUCKETS` buckets per power
/// of two, each as wide as `2^shift`.
fn bucket_of(ns: u64) -> usize {
    if ns < SUB_BUCKETS as u64 {
        return usize::try_from(ns).expect("below 128");
    }
    let shift = ns.ilog2() - SUB_BITS;
    let sub = usize::try_from(ns >> shift).expect("below 256") - SUB_BUCKETS;
    debug_assert!(sub < SUB_BUCKETS);
    (shift as usize + 1) * SUB_BUCKETS + sub
}

/// The largest value that falls in `bucket` (the inverse of `bucket_of`).
fn bucket_top(bucket: usize) -> u64 {
    if bucket < SUB_BUCKETS {
        return bucket as u64;
    }
    let shift = bucket / SUB_BUCKETS - 1;
    let sub = (bucket % SUB_BUCKETS + SUB_BUCKETS) as u64;
    // The bucket holds [sub << shift, (sub + 1) << shift), which may end at 2^64.
    u64::try_from((u128::from(sub + 1) << shift) - 1).unwrap_or(u64::MAX)
}

impl Histogram {
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Counts one latency of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        let bucket = bucket_of(ns);
        if bucket >= self.counts.len() {
            self.counts.resize(bucket + 1, 0);
        }
        self.counts[bucket] += 1;
        self.min = if self.total == 0 {
            ns
        } else {
            self.min.min(ns)
        };
        self.max = self.max.max(ns);
        self.total += 1;
    }

    /// Counts every latency `other` counted.
    pub fn add(&mut self, other: &Histogram) {
        if other.total == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine += theirs;
        }
        self.min = if self.total == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.total += other.total;
    }

    /// One histogram of all of `parts` (one per thread, say).
    pub fn merged<'a>(parts: impl IntoIterator<Item = &'a Histogram>) -> Histogram {
        let mut all = Histogram::new();
        for part in parts {
            all.add(part);
        }
        all
    }

    /// Latencies counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `p`th percentile in microseconds, nearest rank (the smallest latency with at least
    /// p% of all at or below it), as the top of its bucket (at most 0.8 % high) but never
    /// above the largest latency counted: the first rank (p = 0) is the exact minimum, p = 100
    /// the exact maximum. 0 when empty.
    #[expect(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "ranks and latencies are far below 2^52"
    )]
    pub fn percentile_us(&self, p: f64) -> f64 {
        assert!((0.0..=100.0).contains(&p), "percentile {p} out of range");
        if self.total == 0 {
            return 0.0;
        }
        let rank = (((p / 100.0) * self.total as f64).ceil() as u64).clamp(1, self.total);
        if rank == 1 {
            return self.min as f64 / 1000.0;
        }
        let mut seen = 0;
        for (bucket, &n) in self.counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let ns = bucket_top(bucket).clamp(self.min, self.max);
                return ns as f64 / 1000.0;
            }
        }
        unreachable!("{rank} is at most the {} latencies counted", self.total)
    }
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

/// Rounds to two decimals, for JSON.
pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Rounds to three decimals, for JSON (ratios).
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
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

    /// Nearest rank over sorted values, in ns: what the histogram approximates.
    fn exact_ns(sorted: &[u64], p: f64) -> u64 {
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss
        )]
        let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
        sorted[rank.clamp(1, sorted.len()) - 1]
    }

    #[test]
    fn buckets_cover_every_value_in_order() {
        let mut last = None;
        for ns in (0..5000).chain([u64::MAX / 3, u64::MAX - 1, u64::MAX]) {
            let b = bucket_of(ns);
            assert!(bucket_top(b) >= ns, "{ns} above its bucket's top");
            if b > 0 {
                assert!(bucket_top(b - 1) < ns, "{ns} belongs to an earlier bucket");
            }
            if let Some(prev) = last {
                assert!(b >= prev, "buckets out of order at {ns}");
            }
            last = Some(b);
        }
        assert_eq!(bucket_top(bucket_of(u64::MAX)), u64::MAX);
    }

    #[test]
    #[expect(clippy::cast_precision_loss, reason = "latencies below 2^52")]
    fn percentiles_are_nearest_rank_at_most_one_bucket_high() {
        // Latencies from 1 us to about 50 ms, spread over powers of two.
        let mut x = 0x9E37_79B9_7F4A_7C15_u64;
        let mut values = Vec::new();
        let mut parts = vec![Histogram::new(); 4];
        for i in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let ns = 1000 + (x % 1000) * (1 << (x % 16));
            values.push(ns);
            parts[i % 4].record(ns);
        }
        values.sort_unstable();
        let h = Histogram::merged(&parts);
        assert_eq!(h.count(), 100_000);
        for p in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
            let exact = exact_ns(&values, p);
            #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let got = (h.percentile_us(p) * 1000.0).round() as u64;
            assert!(got >= exact, "p{p}: {got} ns below the exact {exact} ns");
            assert!(
                got - exact <= exact / 128,
                "p{p}: {got} ns is more than 0.8 % above {exact}"
            );
        }
        assert!((h.percentile_us(100.0) * 1000.0 - values[values.len() - 1] as f64).abs() < 0.5);
        assert!((h.percentile_us(0.0) * 1000.0 - values[0] as f64).abs() < 0.5);
    }

    #[test]
    fn percentiles_of_small_values_are_exact() {
        let mut h = Histogram::new();
        for i in 1..=100 {
            h.record(i);
        }
        assert!((h.percentile_us(50.0) - 0.050).abs() < 1e-9);
        assert!((h.percentile_us(99.0) - 0.099).abs() < 1e-9);
        assert!((h.percentile_us(100.0) - 0.100).abs() < 1e-9);
        let mut one = Histogram::new();
        one.record(7000);
        assert!((one.percentile_us(99.0) - 7.0).abs() < 1e-9);
        assert!(Histogram::new().percentile_us(50.0).abs() < 1e-9);
        assert!(Histogram::merged(&[Histogram::new(), one.clone()]).count() == 1);
    }

    #[test]
    fn memory_grows_with_the_largest_value_not_the_count() {
        let mut h = Histogram::new();
        for i in 0..1_000_000u64 {
            h.record(1_000 + i % 100_000_000);
        }
        assert_eq!(h.count(), 1_000_000);
        assert!(h.counts.len() <= bucket_of(100_001_000) + 1);
        assert!(h.counts.len() * 8 < 24 * 1024, "{} buckets", h.counts.len());
    }

    #[test]
    fn rates_over_no_time_are_zero() {
        assert!(per_sec(5, Duration::ZERO).abs() < 1e-9);
        assert!((per_sec(5, Duration::from_millis(500)) - 10.0).abs() < 1e-9);
    }
}
