//! When a pair is slow: bandwidth below a fraction of the median pair's at the
//! largest size, latency above a multiple of the lowest at the smallest; and the
//! node all of whose pairs are slow while others are not (the suspect).

use super::matrix::PairResults;
use crate::cli::{shown, AllPairsArgs, SLOW_FRACTION, SLOW_LATENCY};
use crate::job::UsageError;
use crate::sizes::human_bytes;
use crate::stats::interval::median;
use anyhow::Context;

/// Bandwidth is judged at the largest size when it is at least this, latency at the
/// smallest when it is at most this.
pub const JUDGE_SIZE: u64 = 64 << 10;

/// When a pair counts as slow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// Bandwidth below this fraction of the median pair's (at the largest size).
    pub bw_fraction: f64,
    /// Median latency above this multiple of the fastest pair's (at the smallest size).
    pub latency_factor: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            bw_fraction: 0.9,
            latency_factor: 2.0,
        }
    }
}

impl Thresholds {
    /// Checks the values of --slow-fraction and --slow-latency (or a spec's).
    pub fn new(bw_fraction: f64, latency_factor: f64) -> anyhow::Result<Thresholds> {
        SLOW_FRACTION
            .check(bw_fraction)
            .with_context(|| format!("--slow-fraction {}", shown(bw_fraction)))?;
        SLOW_LATENCY
            .check(latency_factor)
            .with_context(|| format!("--slow-latency {}", shown(latency_factor)))?;
        Ok(Thresholds {
            bw_fraction,
            latency_factor,
        })
    }

    /// The thresholds of a binary started with --all-pairs, whichever family it is:
    /// its --csv gets one matrix file of its own, so `append` (--append) is refused.
    pub fn from_args(args: &AllPairsArgs, append: bool) -> Result<Thresholds, UsageError> {
        if append {
            return Err(UsageError(
                "--append: an all-pairs run writes one matrix file of its own; drop --append"
                    .into(),
            ));
        }
        Ok(Thresholds::new(args.slow_fraction, args.slow_latency)?)
    }
}

/// A pair that crossed a threshold, with its value and the limit it crossed.
#[derive(Clone, Debug, PartialEq)]
pub struct SlowPair {
    pub a: usize,
    pub b: usize,
    pub value: f64,
    pub limit: f64,
}

/// What the matrices say.
#[derive(Clone, Debug, PartialEq)]
pub struct PairsVerdict {
    /// Bandwidth was judged (at `bw_size`): a size of at least [`JUDGE_SIZE`] was measured.
    pub bw_judged: bool,
    pub bw_size: u64,
    pub median_gbs: f64,
    pub slow_bw: Vec<SlowPair>,
    /// Latency was judged (at `latency_size`): a size of at most [`JUDGE_SIZE`] was measured.
    pub latency_judged: bool,
    pub latency_size: u64,
    pub min_us: f64,
    pub slow_latency: Vec<SlowPair>,
    /// Pairs with no figure at a size they are judged at (a, b, size): not
    /// measured, so never a pass.
    pub unmeasured: Vec<(usize, usize, u64)>,
    /// Pairs that received wrong data, with the byte count.
    pub wrong: Vec<(usize, usize, u64)>,
    /// Participants every one of whose pairs is slow while some other pair is not.
    pub suspects: Vec<usize>,
}

/// A bandwidth with three decimals, or three significant digits below 0.1 GB/s,
/// so that a slowed link's 0.0006 is not printed as the 0.001 of its limit.
pub fn gbs(v: f64) -> String {
    if v.is_finite() && v > 0.0 && v < 0.1 {
        three_significant(v)
    } else {
        format!("{v:.3}")
    }
}

/// A figure with three significant digits (no decimals from 100 up): short
/// enough for a heatmap cell, and a slow pair's 0.0062 is not 0.01.
pub fn three_significant(v: f64) -> String {
    let decimals = match v.abs() {
        a if a.is_finite() && a > 0.0 => (2 - a.log10().floor() as i64).max(0) as usize,
        _ => 2,
    };
    format!("{v:.decimals$}")
}

/// The pairs whose value `crosses` the limit, and those whose value is NaN or inf:
/// not a measurement, so never a pass.
fn beyond(
    pairs: &[(usize, usize, f64)],
    limit: f64,
    crosses: impl Fn(f64, f64) -> bool,
) -> Vec<SlowPair> {
    pairs
        .iter()
        .filter(|p| !p.2.is_finite() || crosses(p.2, limit))
        .map(|&(a, b, value)| SlowPair { a, b, value, limit })
        .collect()
}

/// Participants all of whose pairs are `slow` while some measured pair without
/// them is not: were every pair slow, nothing would single out one node.
pub fn suspects(
    n: usize,
    slow: impl Fn(usize, usize) -> bool,
    measured: impl Fn(usize, usize) -> bool,
) -> Vec<usize> {
    (0..n)
        .filter(|&i| {
            let others = (0..n).filter(|&j| j != i);
            others.clone().all(|j| slow(i, j))
                && others.clone().any(|a| {
                    others
                        .clone()
                        .any(|b| a < b && measured(a, b) && !slow(a, b))
                })
        })
        .collect()
}

impl PairResults {
    /// Bandwidth is judged at the largest size, latency at the smallest.
    pub fn judge(&self, t: &Thresholds) -> PairsVerdict {
        let (Some(small), Some(large)) = (
            self.sizes.iter().min_by_key(|s| s.size_bytes),
            self.sizes.iter().max_by_key(|s| s.size_bytes),
        ) else {
            return PairsVerdict {
                bw_judged: false,
                bw_size: 0,
                median_gbs: f64::NAN,
                slow_bw: Vec::new(),
                latency_judged: false,
                latency_size: 0,
                min_us: f64::NAN,
                slow_latency: Vec::new(),
                unmeasured: Vec::new(),
                wrong: Vec::new(),
                suspects: Vec::new(),
            };
        };
        // Bandwidth is judged where messages are large enough to be bandwidth-bound,
        // latency where they are small: a 2-byte ib_write_lat run is judged on
        // latency alone, a 1 GiB sendrecv sweep on bandwidth alone.
        let bw_judged = large.size_bytes >= JUDGE_SIZE;
        let latency_judged = small.size_bytes <= JUDGE_SIZE;
        let bw = if bw_judged {
            large.algbw_gbs.pairs()
        } else {
            Vec::new()
        };
        let median_gbs = median(
            &bw.iter()
                .map(|p| p.2)
                .filter(|v| v.is_finite())
                .collect::<Vec<_>>(),
        );
        let slow_bw = beyond(&bw, t.bw_fraction * median_gbs, |v, limit| v < limit);
        let lat = if latency_judged {
            small.p50_us.pairs()
        } else {
            Vec::new()
        };
        let min_us = lat
            .iter()
            .map(|p| p.2)
            .filter(|v| v.is_finite())
            .fold(f64::INFINITY, f64::min);
        let slow_latency = beyond(&lat, t.latency_factor * min_us, |v, limit| v > limit);
        let wrong: Vec<(usize, usize, u64)> = self
            .sizes
            .iter()
            .filter_map(|s| s.wrong_bytes.as_ref())
            .flat_map(|w| w.pairs())
            .filter(|p| p.2 > 0.0)
            .map(|(a, b, w)| (a, b, w as u64))
            .collect();
        let n = self.labels.len();
        let judged = [
            (bw_judged, &large.algbw_gbs, large.size_bytes),
            (latency_judged, &small.p50_us, small.size_bytes),
        ];
        let mut unmeasured: Vec<(usize, usize, u64)> = Vec::new();
        for (_, matrix, size) in judged.into_iter().filter(|j| j.0) {
            let missing: Vec<_> = (0..n)
                .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
                .filter(|&(a, b)| matrix.get(a, b).is_none())
                .map(|(a, b)| (a, b, size))
                .filter(|m| !unmeasured.contains(m))
                .collect();
            unmeasured.extend(missing);
        }
        let mut verdict = PairsVerdict {
            bw_judged,
            bw_size: large.size_bytes,
            median_gbs,
            slow_bw,
            latency_judged,
            latency_size: small.size_bytes,
            min_us,
            slow_latency,
            unmeasured,
            wrong,
            suspects: Vec::new(),
        };
        verdict.find_suspects(self);
        verdict
    }
}

impl PairsVerdict {
    /// The suspect nodes of `results` from the slow pairs (again after some
    /// were cleared by measuring them alone).
    pub fn find_suspects(&mut self, results: &PairResults) {
        let slow = |a: usize, b: usize| {
            self.slow_bw
                .iter()
                .chain(&self.slow_latency)
                .any(|p| (p.a, p.b) == (a.min(b), a.max(b)))
        };
        let large = results.at(self.bw_size);
        self.suspects = suspects(results.labels.len(), slow, |a, b| {
            large.is_some_and(|l| l.algbw_gbs.get(a, b).is_some())
        });
    }

    /// Something was judged, and nothing failed or went unmeasured.
    pub fn passed(&self) -> bool {
        (self.bw_judged || self.latency_judged)
            && self.slow_bw.is_empty()
            && self.slow_latency.is_empty()
            && self.unmeasured.is_empty()
            && self.wrong.is_empty()
    }

    /// "median algbw 45.000 GB/s at 1 MiB", or why bandwidth was not judged;
    /// `size` writes a size.
    pub fn bandwidth(&self, size: fn(u64) -> String) -> String {
        if self.bw_judged && !self.median_gbs.is_finite() {
            format!(
                "bandwidth not judged (no pair measured at {}: the median is {})",
                size(self.bw_size),
                self.median_gbs
            )
        } else if self.bw_judged {
            format!(
                "median algbw {} GB/s at {}",
                gbs(self.median_gbs),
                size(self.bw_size)
            )
        } else {
            format!(
                "bandwidth not judged (no size of {} or more)",
                human_bytes(JUDGE_SIZE)
            )
        }
    }

    /// "lowest median time 5.00 us at 8 B", or why latency was not judged.
    pub fn latency(&self, size: fn(u64) -> String) -> String {
        if self.latency_judged && !self.min_us.is_finite() {
            format!(
                "latency not judged (no pair measured at {}: the lowest time is {})",
                size(self.latency_size),
                self.min_us
            )
        } else if self.latency_judged {
            format!(
                "lowest median time {:.2} us at {}",
                self.min_us,
                size(self.latency_size)
            )
        } else {
            format!(
                "latency not judged (no size of {} or less)",
                human_bytes(JUDGE_SIZE)
            )
        }
    }

    /// One line per finding, naming the nodes: for the table and the rack
    /// report; at most `LINES_EACH` of each kind, then one counting the rest.
    pub fn lines(&self, labels: &[String], t: &Thresholds) -> Vec<String> {
        let pair = |a: usize, b: usize| format!("{} <-> {}", labels[a], labels[b]);
        let mut lines = capped(&self.slow_bw, "slow pairs by bandwidth", |p| {
            format!(
                "slow pair {}: algbw {} GB/s at {} < {} ({} x median {})",
                pair(p.a, p.b),
                gbs(p.value),
                human_bytes(self.bw_size),
                gbs(p.limit),
                shown(t.bw_fraction),
                gbs(self.median_gbs)
            )
        });
        lines.extend(capped(&self.slow_latency, "slow pairs by latency", |p| {
            format!(
                "slow pair {}: median time {:.2} us at {} > {:.2} ({} x lowest {:.2})",
                pair(p.a, p.b),
                p.value,
                human_bytes(self.latency_size),
                p.limit,
                shown(t.latency_factor),
                self.min_us
            )
        }));
        lines.extend(capped(
            &self.unmeasured,
            "pairs not measured",
            |&(a, b, size)| {
                format!(
                    "pair {}: not measured at {}: not judged",
                    pair(a, b),
                    human_bytes(size)
                )
            },
        ));
        if !(self.bw_judged || self.latency_judged) {
            lines.push("no size measured: nothing judged".into());
        }
        lines.extend(capped(
            &self.wrong,
            "pairs with wrong data",
            |&(a, b, w)| {
                format!(
                    "wrong data between {} and {}: {w} bytes",
                    labels[a], labels[b]
                )
            },
        ));
        for &s in &self.suspects {
            lines.push(format!(
                "suspect node {}: all {} of its pairs are slow",
                labels[s],
                labels.len() - 1
            ));
        }
        lines
    }
}

/// Lines of one kind of pair finding shown at most: a fabric with a slow
/// switch can have thousands of slow pairs, and the console and the rack
/// report stay readable (every pair's figures are in the matrix CSV).
pub const LINES_EACH: usize = 20;

/// A line for each of the first `LINES_EACH` of `items`, then one saying how
/// many more `what` there are.
pub fn capped<T>(items: &[T], what: &str, line: impl Fn(&T) -> String) -> Vec<String> {
    let mut lines: Vec<String> = items.iter().take(LINES_EACH).map(line).collect();
    if items.len() > LINES_EACH {
        lines.push(format!(
            "... and {} more {what} (every pair's figures are in the matrix CSV)",
            items.len() - LINES_EACH
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::super::matrix::tests::results;
    use super::super::matrix::Matrix;
    use super::*;

    #[test]
    fn a_size_with_no_pair_measured_is_not_judged() {
        let v = results(3, None, f64::NAN, f64::NAN).judge(&Thresholds::default());
        let bw = v.bandwidth(human_bytes);
        assert!(
            bw.starts_with("bandwidth not judged (no pair measured at 1 MiB"),
            "{bw}"
        );
        assert!(!v.passed(), "nothing measured never passes: {v:?}");
    }

    #[test]
    fn small_bandwidths_keep_three_digits() {
        assert_eq!(gbs(45.0), "45.000");
        assert_eq!(gbs(0.0123), "0.0123");
        assert_eq!(gbs(0.000614), "0.000614");
        assert_eq!(gbs(0.0), "0.000");
        let three: Vec<String> = [0.0062, 0.195, 1.234, 41.25, 398.4, 1234.0, 0.0]
            .map(three_significant)
            .to_vec();
        assert_eq!(
            three,
            ["0.00620", "0.195", "1.23", "41.2", "398", "1234", "0.00"]
        );
    }

    #[test]
    fn a_healthy_rack_has_no_slow_pair() {
        let v = results(8, None, 45.0, 0.0).judge(&Thresholds::default());
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.median_gbs, 45.0);
        assert_eq!(v.min_us, 5.0);
        assert_eq!((v.bw_size, v.latency_size), (1 << 20, 8));
    }

    #[test]
    fn the_slow_node_is_named() {
        let r = results(8, Some(5), 45.0, 20.0);
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len(), 7);
        assert_eq!(v.slow_latency.len(), 7);
        assert_eq!(v.suspects, vec![5]);
        let lines = v.lines(&r.labels, &Thresholds::default());
        assert!(
            lines.contains(&"suspect node node5: all 7 of its pairs are slow".to_string()),
            "{lines:?}"
        );
        assert_eq!(
            lines[0],
            "slow pair node0 <-> node5: algbw 20.000 GB/s at 1 MiB < 40.500 (0.9 x median 45.000)"
        );
        assert_eq!(
            lines[7],
            "slow pair node0 <-> node5: median time 50.00 us at 8 B > 10.00 (2 x lowest 5.00)"
        );
        assert_eq!(lines.len(), 7 + 7 + 1);
    }

    #[test]
    fn one_slow_link_names_no_node() {
        let mut r = results(6, None, 45.0, 0.0);
        r.sizes[1].algbw_gbs.set(1, 4, 30.0);
        let v = r.judge(&Thresholds::default());
        assert_eq!(
            v.slow_bw,
            vec![SlowPair {
                a: 1,
                b: 4,
                value: 30.0,
                limit: 40.5
            }]
        );
        assert!(v.slow_latency.is_empty() && v.suspects.is_empty());
        // Just above the threshold passes.
        r.sizes[1].algbw_gbs.set(1, 4, 40.6);
        assert!(r.judge(&Thresholds::default()).passed());
    }

    #[test]
    fn no_suspect_without_a_healthy_pair_to_compare() {
        let v = results(2, Some(1), 45.0, 1.0).judge(&Thresholds::default());
        assert!(v.suspects.is_empty());
        // Every pair slow by one measure or the other (as noise on a shared host
        // does): nothing singles out a node.
        let mut r = results(4, None, 45.0, 0.0);
        for (a, b) in [(0, 3), (1, 2), (1, 3)] {
            r.sizes[1].algbw_gbs.set(a, b, 10.0);
        }
        for (a, b) in [(0, 1), (0, 2), (2, 3)] {
            r.sizes[0].p50_us.set(a, b, 50.0);
        }
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len() + v.slow_latency.len(), 6);
        assert!(v.suspects.is_empty(), "{v:?}");
        // With pair (0, 2) healthy again, nodes 1 and 3, all of whose pairs are
        // still slow, stand out.
        r.sizes[0].p50_us.set(0, 2, 5.0);
        assert_eq!(r.judge(&Thresholds::default()).suspects, vec![1, 3]);
    }

    #[test]
    fn each_criterion_is_judged_only_at_its_sizes() {
        // Only small messages (an ib_write_lat run): their algbw says nothing.
        let mut r = results(4, Some(2), 45.0, 1.0);
        r.sizes[1].size_bytes = 8;
        let v = r.judge(&Thresholds::default());
        assert!(v.slow_bw.is_empty(), "{:?}", v.slow_bw);
        assert_eq!(v.slow_latency.len(), 3);
        // Only large messages: their time is bandwidth, not latency.
        let mut r = results(4, Some(2), 45.0, 1.0);
        r.sizes[0].size_bytes = 1 << 20;
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.slow_bw.len(), 3);
        assert!(v.slow_latency.is_empty(), "{:?}", v.slow_latency);
    }

    #[test]
    fn a_pair_figure_that_is_nan_or_inf_is_never_a_pass() {
        let slow = beyond(
            &[(0, 1, f64::NAN), (0, 2, 10.0), (1, 2, f64::INFINITY)],
            5.0,
            |v, limit| v < limit,
        );
        assert_eq!(
            slow.iter().map(|p| (p.a, p.b)).collect::<Vec<_>>(),
            vec![(0, 1), (1, 2)]
        );
        assert!(Thresholds::new(0.9, f64::INFINITY).is_err());
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&[4.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        // Four pairs at 10, 20, 30, 40 GB/s: median 25, so 0.9 x 25 = 22.5 flags two.
        let mut r = results(4, None, 45.0, 0.0);
        r.sizes[1] = super::super::matrix::SizeMatrices::empty(1 << 20, 4, false);
        for (v, (a, b)) in [
            (10.0, (0, 1)),
            (20.0, (0, 2)),
            (30.0, (1, 2)),
            (40.0, (2, 3)),
        ] {
            r.sizes[1].algbw_gbs.set(a, b, v);
        }
        let v = r.judge(&Thresholds::default());
        assert_eq!(v.median_gbs, 25.0);
        let slow: Vec<(usize, usize)> = v.slow_bw.iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(slow, vec![(0, 1), (0, 2)]);
    }

    #[test]
    fn wrong_data_fails_and_is_named() {
        let mut r = results(3, None, 45.0, 0.0);
        let mut w = Matrix::empty(3);
        w.set(0, 1, 0.0);
        w.set(1, 2, 12.0);
        r.sizes[1].wrong_bytes = Some(w);
        let v = r.judge(&Thresholds::default());
        assert!(!v.passed());
        assert_eq!(v.wrong, vec![(1, 2, 12)]);
        assert_eq!(
            v.lines(&r.labels, &Thresholds::default()),
            vec!["wrong data between node1 and node2: 12 bytes"]
        );
    }

    #[test]
    fn nothing_measured_judges_nothing() {
        let r = super::super::matrix::PairResults {
            labels: vec!["a".into(), "b".into()],
            sizes: Vec::new(),
            counters: Vec::new(),
        };
        let v = r.judge(&Thresholds::default());
        assert!(!v.passed() && v.median_gbs.is_nan() && v.bw_size == 0);
        assert_eq!(
            v.lines(&r.labels, &Thresholds::default()),
            ["no size measured: nothing judged"]
        );
        assert_eq!(
            v.bandwidth(|s| s.to_string()),
            "bandwidth not judged (no size of 64 KiB or more)"
        );
        assert_eq!(
            v.latency(|s| s.to_string()),
            "latency not judged (no size of 64 KiB or less)"
        );
    }

    /// A pair with no figure at a size it is judged at was not measured: the
    /// verdict says so and fails; a figure of a criterion not judged is no verdict.
    #[test]
    fn a_pair_not_measured_is_not_a_pass() {
        let mut r = results(3, None, 45.0, 0.0);
        r.sizes[1].algbw_gbs.clear(0, 2);
        let v = r.judge(&Thresholds::default());
        assert!(!v.passed());
        assert_eq!(v.unmeasured, [(0, 2, 1 << 20)]);
        assert_eq!(
            v.lines(&r.labels, &Thresholds::default()),
            ["pair node0 <-> node2: not measured at 1 MiB: not judged"]
        );
        // Only large sizes: latency is not judged, and says so instead of "inf us".
        let mut r = results(3, None, 45.0, 0.0);
        r.sizes[0].size_bytes = 1 << 20;
        let v = r.judge(&Thresholds::default());
        assert!(v.passed(), "{v:?}");
        assert_eq!(
            v.latency(human_bytes),
            "latency not judged (no size of 64 KiB or less)"
        );
        assert_eq!(
            v.bandwidth(human_bytes),
            "median algbw 45.000 GB/s at 1 MiB"
        );
    }

    /// Why `Thresholds::new` refuses the values, as the user reads it.
    fn refusal(bw_fraction: f64, latency_factor: f64) -> String {
        format!(
            "{:#}",
            Thresholds::new(bw_fraction, latency_factor).unwrap_err()
        )
    }

    #[test]
    fn thresholds_are_checked() {
        assert!(refusal(0.0, 2.0).starts_with("--slow-fraction 0"));
        assert!(Thresholds::new(1.5, 2.0).is_err());
        assert!(refusal(0.9, 0.5).starts_with("--slow-latency 0.5"));
        assert!(Thresholds::new(0.9, f64::NAN).is_err());
        assert_eq!(Thresholds::new(0.9, 2.0).unwrap(), Thresholds::default());
    }

    #[test]
    fn thresholds_from_the_flags() {
        let args = |slow_fraction, slow_latency| AllPairsArgs {
            all_pairs: true,
            slow_fraction,
            slow_latency,
        };
        assert_eq!(
            Thresholds::from_args(&args(0.8, 3.0), false).unwrap(),
            Thresholds {
                bw_fraction: 0.8,
                latency_factor: 3.0
            }
        );
        assert_eq!(
            Thresholds::from_args(&args(1.5, 2.0), false).unwrap_err().0,
            "--slow-fraction 1.5: too large; give a fraction of the median, more than 0 and at most 1, e.g. 0.9"
        );
        assert_eq!(
            refusal(0.9, 1e300),
            "--slow-latency 1e300: too large; give a multiple of the lowest latency, from 1 to 1000000, e.g. 2"
        );
        // --append is refused before the values are looked at.
        assert_eq!(
            Thresholds::from_args(&args(1.5, 2.0), true).unwrap_err().0,
            "--append: an all-pairs run writes one matrix file of its own; drop --append"
        );
    }
}
