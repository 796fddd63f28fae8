//! How sure a figure is: the median of repeated rounds with a 95% percentile
//! bootstrap interval, the ratio of two such medians, and where an interval lies
//! against a band of acceptable values. One definition, used by every verdict
//! (compare, rack_check, all-pairs, `--rounds auto`) and by the scripts through
//! the binaries.
//!
//! The bootstrap is seeded from the figures themselves (their sorted values), so
//! the same figures always give the same interval, in any order they were
//! measured; and swapping the two sides of a ratio gives exactly the reciprocal
//! interval, so a verdict mirrors when baseline and candidate trade places.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The interval's confidence.
pub const CONFIDENCE: f64 = 0.95;
/// Resamples of each bootstrap: the interval's ends move by well under 1% of
/// its width from one seed to another at this count.
const RESAMPLES: usize = 2000;
/// Fewer figures than this give no interval: with one or two the noise is not
/// estimated, and a verdict must say so.
pub const MIN_SAMPLES: usize = 3;

/// The median of `figures` (NaN when there are none). Non-finite figures are
/// the caller's to leave out.
pub fn median(figures: &[f64]) -> f64 {
    let mut sorted = figures.to_vec();
    sorted.sort_by(f64::total_cmp);
    median_of_sorted(&sorted)
}

fn median_of_sorted(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// A closed interval of plausible values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    /// Half the width, as a fraction of `around` (0.02 is ±2%).
    pub fn half_width_of(&self, around: f64) -> f64 {
        (self.hi - self.lo) / 2.0 / around.abs()
    }
}

/// A figure from repeated rounds: its median and, from `MIN_SAMPLES` rounds
/// on, a 95% interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    /// None: too few rounds to estimate the noise.
    pub interval: Option<Interval>,
    /// Rounds behind it (the fewer side's, for a ratio).
    pub rounds: usize,
}

impl Estimate {
    /// The median of `figures` with its bootstrap interval.
    pub fn median_of(figures: &[f64]) -> Estimate {
        let sample = Sample::new(figures);
        let interval = (figures.len() >= MIN_SAMPLES).then(|| {
            let mut rng = sample.rng();
            let mut medians: Vec<f64> = (0..RESAMPLES)
                .map(|_| sample.resampled_median(&mut rng))
                .collect();
            percentile_interval(&mut medians)
        });
        Estimate {
            value: median_of_sorted(&sample.sorted),
            interval,
            rounds: figures.len(),
        }
    }

    /// median(numerator) / median(denominator), with the interval of that ratio
    /// when both sides have `MIN_SAMPLES` rounds (each side resampled on its
    /// own: they are independent runs).
    pub fn ratio_of_medians(numerator: &[f64], denominator: &[f64]) -> Estimate {
        Estimate::pooled_ratio(&[(numerator, denominator)])
    }

    /// The geometric mean over `pairs` of each pair's ratio of medians
    /// (numerator / denominator), with its interval when every side has
    /// `MIN_SAMPLES` rounds: each side of each pair resampled on its own. Rows
    /// too noisy to settle one by one can settle together; one pair is
    /// `ratio_of_medians`.
    pub fn pooled_ratio(pairs: &[(&[f64], &[f64])]) -> Estimate {
        let sides: Vec<(Sample, Sample)> = pairs
            .iter()
            .map(|(n, d)| (Sample::new(n), Sample::new(d)))
            .collect();
        let rounds = pairs
            .iter()
            .map(|(n, d)| n.len().min(d.len()))
            .min()
            .unwrap_or(0);
        // In logs, so that swapping the sides negates every resample exactly.
        let mean_log = |ratios: &mut dyn Iterator<Item = f64>| {
            let logs: Vec<f64> = ratios.map(f64::ln).collect();
            logs.iter().sum::<f64>() / logs.len() as f64
        };
        let ratios: Vec<f64> = sides
            .iter()
            .map(|(n, d)| median_of_sorted(&n.sorted) / median_of_sorted(&d.sorted))
            .collect();
        // One pair's ratio as it is, not through a logarithm and back.
        let value = match ratios[..] {
            [one] => one,
            _ => mean_log(&mut ratios.iter().copied()).exp(),
        };
        let interval = (rounds >= MIN_SAMPLES).then(|| {
            let mut rngs: Vec<(ChaCha8Rng, ChaCha8Rng)> =
                sides.iter().map(|(n, d)| (n.rng(), d.rng())).collect();
            let mut logs: Vec<f64> =
                (0..RESAMPLES)
                    .map(|_| {
                        mean_log(&mut sides.iter().zip(rngs.iter_mut()).map(
                            |((n, d), (rn, rd))| n.resampled_median(rn) / d.resampled_median(rd),
                        ))
                    })
                    .collect();
            let log = percentile_interval(&mut logs);
            Interval {
                lo: log.lo.exp(),
                hi: log.hi.exp(),
            }
        });
        Estimate {
            value,
            interval,
            rounds,
        }
    }

    /// Where the estimate lies against the band [lo, hi] of acceptable values
    /// (either end may be infinite); the median alone when there is no interval.
    pub fn against(&self, lo: f64, hi: f64) -> Side {
        let Interval { lo: a, hi: b } = self.interval.unwrap_or(Interval {
            lo: self.value,
            hi: self.value,
        });
        if b < lo {
            Side::Below
        } else if a > hi {
            Side::Above
        } else if a >= lo && b <= hi {
            Side::Inside
        } else {
            Side::Straddles
        }
    }

    /// About how many rounds would make the interval clear of `edge` (assuming
    /// it narrows as one over the square root of the rounds and its median stays
    /// put); None with no interval, or a median on the edge itself, which no
    /// number of rounds resolves.
    pub fn rounds_to_clear(&self, edge: f64) -> Option<usize> {
        let interval = self.interval?;
        // In logs: ratios and bandwidths are judged as fractions of the edge.
        let half = ((interval.hi / interval.lo).ln() / 2.0).abs();
        let distance = (self.value / edge).ln().abs();
        if !(distance > 0.0) || !half.is_finite() {
            return None;
        }
        let needed = self.rounds as f64 * (half / distance).powi(2);
        (needed.is_finite() && needed < 1e9).then(|| (needed.ceil() as usize).max(self.rounds + 1))
    }
}

/// Where an interval lies against a band.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Wholly below the band.
    Below,
    /// Wholly inside it.
    Inside,
    /// Wholly above it.
    Above,
    /// Across one of its edges (or both): cannot tell.
    Straddles,
}

/// Figures sorted once, and the seed they give.
struct Sample {
    sorted: Vec<f64>,
}

impl Sample {
    fn new(figures: &[f64]) -> Sample {
        let mut sorted = figures.to_vec();
        sorted.sort_by(f64::total_cmp);
        Sample { sorted }
    }

    /// A generator seeded from the figures (FNV-1a over their bits): the same
    /// figures, the same resamples, whatever their order.
    fn rng(&self) -> ChaCha8Rng {
        let mut seed: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in self.sorted.iter().flat_map(|f| f.to_bits().to_le_bytes()) {
            seed = (seed ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        ChaCha8Rng::seed_from_u64(seed)
    }

    fn resampled_median(&self, rng: &mut ChaCha8Rng) -> f64 {
        let n = self.sorted.len();
        let mut draw: Vec<f64> = (0..n)
            .map(|_| self.sorted[rng.random_range(0..n)])
            .collect();
        draw.sort_by(f64::total_cmp);
        median_of_sorted(&draw)
    }
}

/// The central `CONFIDENCE` of `values`, by ranks symmetric about the middle
/// (so that negated values give the negated interval).
fn percentile_interval(values: &mut [f64]) -> Interval {
    values.sort_by(f64::total_cmp);
    let last = values.len() - 1;
    let k = ((1.0 - CONFIDENCE) / 2.0 * last as f64).round() as usize;
    Interval {
        lo: values[k],
        hi: values[last - k],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand_distr::{Distribution, Normal};

    fn normal(mean: f64, sd: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = Normal::new(mean, sd).unwrap();
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    #[test]
    fn medians_of_odd_even_and_no_figures() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn too_few_rounds_give_no_interval() {
        let e = Estimate::median_of(&[10.0, 12.0]);
        assert_eq!((e.value, e.interval, e.rounds), (11.0, None, 2));
        assert_eq!(e.against(10.5, f64::INFINITY), Side::Inside);
        assert_eq!(e.rounds_to_clear(10.0), None);
        assert_eq!(
            Estimate::ratio_of_medians(&[1.0; 5], &[1.0, 2.0]).interval,
            None
        );
    }

    #[test]
    fn the_interval_covers_a_known_median_and_is_reproducible() {
        // N(100, 5): the median's standard error over 30 rounds is about
        // 1.2533 * 5 / sqrt(30) = 1.14, so the 95% interval is about ±2.2.
        let x = normal(100.0, 5.0, 30, 7);
        let e = Estimate::median_of(&x);
        let i = e.interval.unwrap();
        assert!(i.lo < 100.0 && 100.0 < i.hi, "{e:?}");
        let half = (i.hi - i.lo) / 2.0;
        assert!((1.2..4.0).contains(&half), "{e:?}");
        let mut shuffled = x.clone();
        shuffled.reverse();
        assert_eq!(
            Estimate::median_of(&shuffled),
            e,
            "the order of the rounds does not matter"
        );
    }

    #[test]
    fn a_quarter_slower_is_told_apart_and_identical_runs_are_not() {
        let base = normal(10.0, 0.8, 10, 1);
        let slow = normal(7.5, 0.6, 10, 2);
        let same = normal(10.0, 0.8, 10, 3);
        let band = (1.0 / 1.05, 1.05);
        assert_eq!(
            Estimate::ratio_of_medians(&slow, &base).against(band.0, band.1),
            Side::Below
        );
        assert_ne!(
            Estimate::ratio_of_medians(&same, &base).against(band.0, band.1),
            Side::Below
        );
    }

    #[test]
    fn pooled_rows_settle_what_one_row_cannot() {
        // Four rows, each 10% slower and noisy (sd 8%), 5 rounds a side: one
        // row's interval crosses ±5%; the four pooled lie below it.
        let rows: Vec<(Vec<f64>, Vec<f64>)> = (0..4)
            .map(|k| (normal(9.0, 0.72, 5, 20 + k), normal(10.0, 0.8, 5, 40 + k)))
            .collect();
        let pairs: Vec<(&[f64], &[f64])> = rows.iter().map(|(a, b)| (&a[..], &b[..])).collect();
        let band = (0.95, 1.0 / 0.95);
        let pooled = Estimate::pooled_ratio(&pairs);
        assert_eq!(pooled.against(band.0, band.1), Side::Below, "{pooled:?}");
        assert!((0.85..0.95).contains(&pooled.value), "{pooled:?}");
        let widths = |e: Estimate| e.interval.map(|i| i.hi / i.lo).unwrap();
        let one = Estimate::pooled_ratio(&pairs[..1]);
        assert_eq!(one, Estimate::ratio_of_medians(pairs[0].0, pairs[0].1));
        assert!(widths(pooled) < widths(one), "{pooled:?} {one:?}");
        // Swapped sides: the reciprocal, exactly as for one row.
        let swapped: Vec<(&[f64], &[f64])> = pairs.iter().map(|&(a, b)| (b, a)).collect();
        let back = Estimate::pooled_ratio(&swapped);
        let (i, j) = (pooled.interval.unwrap(), back.interval.unwrap());
        assert!((i.lo * j.hi - 1.0).abs() < 1e-9 && (pooled.value * back.value - 1.0).abs() < 1e-9);
    }

    #[test]
    fn rounds_to_clear_grow_as_the_edge_nears() {
        let x = normal(100.0, 5.0, 10, 11);
        let e = Estimate::median_of(&x);
        let far = e.rounds_to_clear(90.0).unwrap();
        let near = e.rounds_to_clear(98.0).unwrap();
        assert!(far < near, "{far} {near}");
        assert!(far > 10 || e.against(90.0, f64::INFINITY) == Side::Inside);
        assert_eq!(e.rounds_to_clear(e.value), None);
    }

    fn positive_figures() -> impl Strategy<Value = Vec<f64>> {
        proptest::collection::vec(0.5f64..2.0, 3..15)
    }

    proptest! {
        // Each case is a few bootstraps of 2000 resamples: 64 cases keep it to seconds.
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn swapping_the_sides_mirrors_the_interval(a in positive_figures(), b in positive_figures()) {
            let ab = Estimate::ratio_of_medians(&a, &b);
            let ba = Estimate::ratio_of_medians(&b, &a);
            let (i, j) = (ab.interval.unwrap(), ba.interval.unwrap());
            prop_assert!((i.lo * j.hi - 1.0).abs() < 1e-9 && (i.hi * j.lo - 1.0).abs() < 1e-9);
            let (lo, hi) = (1.0 / 1.05, 1.05);
            let mirrored = match ab.against(lo, hi) {
                Side::Below => Side::Above,
                Side::Above => Side::Below,
                same => same,
            };
            prop_assert_eq!(ba.against(lo, hi), mirrored);
        }

        #[test]
        fn a_wider_band_never_turns_inside_into_outside(a in positive_figures(), b in positive_figures(), t in 0.0f64..0.5, more in 0.0f64..0.5) {
            let r = Estimate::ratio_of_medians(&a, &b);
            let narrow = r.against(1.0 - t, f64::INFINITY);
            let wide = r.against(1.0 - t - more, f64::INFINITY);
            if narrow == Side::Inside {
                prop_assert_eq!(wide, Side::Inside);
            }
            if wide == Side::Below {
                prop_assert_eq!(narrow, Side::Below);
            }
        }

        #[test]
        fn the_interval_holds_the_median(a in positive_figures()) {
            let e = Estimate::median_of(&a);
            let i = e.interval.unwrap();
            prop_assert!(i.lo <= e.value && e.value <= i.hi, "{:?}", e);
        }
    }

    #[test]
    fn more_identical_rounds_never_widen_the_interval_on_average() {
        // The same distribution, 40 seeds each: the mean width at 20 rounds is
        // below the mean width at 5.
        let mean_width = |n: usize| {
            (0..40u64)
                .map(|seed| {
                    let i = Estimate::median_of(&normal(50.0, 4.0, n, 1000 + seed))
                        .interval
                        .unwrap();
                    i.hi - i.lo
                })
                .sum::<f64>()
                / 40.0
        };
        let (few, many) = (mean_width(5), mean_width(20));
        assert!(many < few, "5 rounds {few}, 20 rounds {many}");
    }
}
