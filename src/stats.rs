//! Per-iteration latency: the distribution of one size's timed calls.

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
    pub fn from_seconds(seconds: &[f64], h: &Histogram<u64>) -> IterStats {
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
}
