//! Statistics: per-iteration latency (the distribution of one size's timed
//! calls, here) and, in `interval`, how sure a figure from repeated rounds is.

pub mod interval;

use hdrhistogram::Histogram;

/// Summary of per-iteration times, in microseconds. min and max are exact; the
/// percentiles come from an HdrHistogram at 3 significant digits.
#[derive(Clone, Debug, PartialEq)]
pub struct IterStats {
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

/// An empty histogram of nanoseconds: 1 ns to one hour at 3 significant
/// digits, a fixed size with no resizing.
pub fn empty_histogram() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid histogram bounds")
}

/// Histogram of per-iteration times in nanoseconds.
pub fn histogram(seconds: &[f64]) -> Histogram<u64> {
    let mut h = empty_histogram();
    for &s in seconds {
        h.saturating_record(((s * 1e9).round() as u64).max(1));
    }
    h
}

impl IterStats {
    /// A loop timed whole (`--percentiles 0`): no iteration's time, so every figure
    /// is NaN, which the CSV writes as `NaN` and the table as `N/A`.
    pub fn not_measured() -> IterStats {
        IterStats {
            min_us: f64::NAN,
            p50_us: f64::NAN,
            p99_us: f64::NAN,
            p999_us: f64::NAN,
            max_us: f64::NAN,
        }
    }

    /// No times (a loop timed whole) give `not_measured`.
    pub fn from_seconds(seconds: &[f64], h: &Histogram<u64>) -> IterStats {
        if seconds.is_empty() {
            return IterStats::not_measured();
        }
        let min_us = seconds.iter().copied().fold(f64::INFINITY, f64::min) * 1e6;
        let max_us = seconds.iter().copied().fold(0.0, f64::max) * 1e6;
        // A histogram bucket's top can overshoot the exact extremes by its 0.1% width.
        let at = |q: f64| (h.value_at_quantile(q) as f64 / 1e3).clamp(min_us, max_us);
        IterStats {
            min_us,
            p50_us: at(0.5),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us,
        }
    }
}

/// Elementwise maximum over ranks of `per_rank` (rank-major: nranks x iters): the
/// time of iteration i is when its last rank finished, as nccl-tests -I reports it.
pub fn max_over_ranks(per_rank: &[f64], iters: usize) -> Vec<f64> {
    let mut out = vec![0.0f64; iters];
    for rank_times in per_rank.chunks_exact(iters) {
        for (o, &t) in out.iter_mut().zip(rank_times) {
            *o = o.max(t);
        }
    }
    out
}

/// Mean per-iteration time of each rank (rank-major input).
pub fn mean_per_rank(per_rank: &[f64], iters: usize) -> Vec<f64> {
    per_rank
        .chunks_exact(iters)
        .map(|r| r.iter().sum::<f64>() / iters as f64)
        .collect()
}

/// The rank with the largest mean time.
pub fn slowest(means: &[f64]) -> usize {
    means
        .iter()
        .enumerate()
        .fold(
            (0, f64::MIN),
            |best, (r, &m)| if m > best.1 { (r, m) } else { best },
        )
        .0
}

/// nccl-tests' -I summary of per-iteration times (its `computeIterStats`), in
/// seconds: exact order statistics, p95/p99 by the nearest rank, population stdev.
#[derive(Clone, Debug, PartialEq)]
pub struct SpreadStats {
    pub min: f64,
    pub max: f64,
    pub avg: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub stdev: f64,
}

impl SpreadStats {
    /// None for no samples.
    pub fn of(times: &[f64]) -> Option<SpreadStats> {
        let n = times.len();
        if n == 0 {
            return None;
        }
        let mut sorted = times.to_vec();
        sorted.sort_by(f64::total_cmp);
        // nccl-tests' percentileIndex: min(n - 1, ceil(n * p / 100) - 1).
        let nearest = |p: usize| sorted[((n * p).div_ceil(100)).saturating_sub(1).min(n - 1)];
        let avg = sorted.iter().sum::<f64>() / n as f64;
        let var = sorted.iter().map(|t| (t - avg) * (t - avg)).sum::<f64>() / n as f64;
        Some(SpreadStats {
            min: sorted[0],
            max: sorted[n - 1],
            avg,
            p50: sorted[n / 2],
            p95: nearest(95),
            p99: nearest(99),
            stdev: var.sqrt(),
        })
    }

    /// The coefficient of variation in percent (0 when the mean is 0), as i_cv%.
    pub fn cv_pct(&self) -> f64 {
        if self.avg > 0.0 {
            self.stdev / self.avg * 100.0
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        // 1..=1000 us: p50 = 500, p99 = 990, p99.9 = 999, max = 1000.
        let secs: Vec<f64> = (1..=1000).map(|us| us as f64 * 1e-6).collect();
        let h = histogram(&secs);
        let s = IterStats::from_seconds(&secs, &h);
        assert!((s.p50_us - 500.0).abs() <= 0.5, "{s:?}");
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.p999_us - 999.0).abs() <= 1.0, "{s:?}");
        assert_eq!(s.max_us, 1000.0);
        assert_eq!(s.min_us, 1.0);
    }

    #[test]
    fn combines_ranks() {
        let per_rank = [1.0, 5.0, 3.0, /* rank 1 */ 2.0, 2.0, 9.0];
        assert_eq!(max_over_ranks(&per_rank, 3), vec![2.0, 5.0, 9.0]);
        let means = mean_per_rank(&per_rank, 3);
        assert_eq!(means, vec![3.0, 13.0 / 3.0]);
        assert_eq!(slowest(&means), 1);
    }

    #[test]
    fn spread_as_nccl_tests_computes_it() {
        // 1..=10: p50 = sorted[5] = 6, p95 = p99 = sorted[9] (nearest rank).
        let t: Vec<f64> = (1..=10).map(f64::from).collect();
        let s = SpreadStats::of(&t).unwrap();
        assert_eq!(
            (s.min, s.max, s.avg, s.p50, s.p95, s.p99),
            (1.0, 10.0, 5.5, 6.0, 10.0, 10.0)
        );
        assert!((s.stdev - 8.25f64.sqrt()).abs() < 1e-12);
        assert!((s.cv_pct() - 8.25f64.sqrt() / 5.5 * 100.0).abs() < 1e-9);
        // 200 samples: p99 is the 198th smallest (index 197).
        let t: Vec<f64> = (0..200).map(f64::from).collect();
        assert_eq!(SpreadStats::of(&t).unwrap().p99, 197.0);
        assert_eq!(SpreadStats::of(&[]), None);
    }
}
