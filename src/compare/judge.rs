//! Judging one matched key: each figure a threshold asks about is ok,
//! regressed, inconclusive (its 95% interval lies across the threshold), or
//! not judged (missing on either side: not measured is not worse, and not
//! better); wrong data in the candidate fails the key whatever the thresholds.
//! The key's verdict follows from the figures that were judged.

use crate::stats::interval::{median, Estimate, Side};

/// A figure of a row that a threshold may judge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Figure {
    Busbw,
    P99,
}

impl Figure {
    pub fn name(self) -> &'static str {
        match self {
            Figure::Busbw => "busbw",
            Figure::P99 => "p99",
        }
    }

    /// The band of candidate/baseline ratios within `threshold` percent: busbw
    /// is worse when it drops, p99 when it rises.
    fn band(self, threshold: f64) -> (f64, f64) {
        match self {
            Figure::Busbw => (1.0 - threshold / 100.0, f64::INFINITY),
            Figure::P99 => (0.0, 1.0 + threshold / 100.0),
        }
    }

    /// The side of the band that is worse.
    fn worse(self) -> Side {
        match self {
            Figure::Busbw => Side::Below,
            Figure::P99 => Side::Above,
        }
    }

    /// The figures of one side that count: a p99 that is NaN (a loop timed
    /// whole, `--percentiles 0`) appended to timed rows leaves theirs standing.
    fn counted(self, samples: &[f64]) -> Vec<f64> {
        match self {
            Figure::Busbw => samples.to_vec(),
            Figure::P99 => samples.iter().copied().filter(|v| !v.is_nan()).collect(),
        }
    }

    /// What one side shows: the median of its figures, or the figure that is no
    /// number (NaN before inf), which spreads; NaN when there is none.
    pub fn shown(self, samples: &[f64]) -> f64 {
        let counted = self.counted(samples);
        counted
            .iter()
            .copied()
            .filter(|v| !v.is_finite())
            .min_by_key(|v| !v.is_nan())
            .unwrap_or_else(|| median(&counted))
    }

    /// "not measured" for a p99 that is NaN (a loop timed whole,
    /// `--percentiles 0`), the value for any other figure that is no number.
    fn missing(self, value: f64) -> Option<String> {
        match (self, value) {
            (_, v) if v.is_finite() => None,
            (Figure::P99, v) if v.is_nan() => Some("not measured".into()),
            (_, v) => Some(v.to_string()),
        }
    }
}

/// What a threshold said of one figure of a key.
#[derive(Clone, Debug, PartialEq)]
pub enum Judgement {
    Ok,
    Regressed,
    /// The interval lies across the threshold; about this many rounds a side
    /// would resolve it (None: the median sits on the threshold itself).
    Inconclusive(Option<usize>),
    /// No change could be taken: "p99 not measured in candidate".
    NotJudged(String),
}

/// The ratio candidate/baseline of the medians of a figure's samples, with
/// its 95% interval (None where the baseline is 0 or either side is no
/// number), and its judgement when `threshold` (percent) asks.
pub fn judge(
    figure: Figure,
    base: &[f64],
    candidate: &[f64],
    threshold: Option<f64>,
) -> (Option<Estimate>, Option<Judgement>) {
    let (b, c) = (figure.shown(base), figure.shown(candidate));
    let ratio = (b.is_finite() && c.is_finite() && b != 0.0)
        .then(|| Estimate::ratio_of_medians(&figure.counted(candidate), &figure.counted(base)));
    let judgement = threshold.map(|t| match ratio {
        Some(r) => on_interval(figure, &r, t),
        None => Judgement::NotJudged(why_not(figure, b, c)),
    });
    (ratio, judgement)
}

/// REGRESSED only when the whole interval lies on the worse side of the
/// threshold, ok when it lies wholly within; inconclusive otherwise. Without
/// an interval (fewer than 3 samples a side) the median alone decides.
pub fn on_interval(figure: Figure, ratio: &Estimate, threshold: f64) -> Judgement {
    let (lo, hi) = figure.band(threshold);
    match ratio.against(lo, hi) {
        Side::Straddles => {
            let edge = if figure.worse() == Side::Below {
                lo
            } else {
                hi
            };
            Judgement::Inconclusive(ratio.rounds_to_clear(edge))
        }
        side if side == figure.worse() => Judgement::Regressed,
        _ => Judgement::Ok,
    }
}

/// Why no change was taken: "busbw NaN in baseline", "p99 not measured in
/// candidate", "busbw 0 in baseline".
fn why_not(figure: Figure, base: f64, candidate: f64) -> String {
    let name = figure.name();
    match (figure.missing(base), figure.missing(candidate)) {
        (Some(b), Some(c)) if b == c => format!("{name} {b} in either file"),
        (Some(b), Some(c)) => format!("{name} {b} in baseline, {c} in candidate"),
        (Some(b), None) => format!("{name} {b} in baseline"),
        (None, Some(c)) => format!("{name} {c} in candidate"),
        (None, None) => format!("{name} 0 in baseline: no change to take"),
    }
}

/// A matched key's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowVerdict {
    /// Every figure judged was within its threshold, and the data was right.
    Ok,
    /// A threshold crossed, or wrong data.
    Regressed,
    /// No threshold crossed, but an interval lies across one: cannot tell.
    Inconclusive,
    /// Thresholds asked, and no figure could be judged.
    NotJudged,
    /// No threshold given: the deltas are shown, not judged.
    NoThreshold,
}

/// The verdict cell: "ok", "REGRESSED (busbw)", "INCONCLUSIVE (busbw: about 12
/// rounds a side would resolve it)", "ok on busbw; not judged: p99 not
/// measured in candidate", "not judged: busbw NaN in baseline".
pub fn verdict_text(figures: &[(Figure, Judgement)], wrong: u64) -> (RowVerdict, String) {
    let named = |want: &Judgement| -> Vec<String> {
        figures
            .iter()
            .filter(|(_, j)| j == want)
            .map(|(f, _)| f.name().to_string())
            .collect()
    };
    let mut regressed = named(&Judgement::Regressed);
    if wrong > 0 {
        regressed.push(format!("wrong data: {wrong} elements"));
    }
    let ok = named(&Judgement::Ok);
    let inconclusive: Vec<String> = figures
        .iter()
        .filter_map(|(f, j)| match j {
            Judgement::Inconclusive(Some(n)) => Some(format!(
                "{}: about {n} rounds a side would resolve it",
                f.name()
            )),
            Judgement::Inconclusive(None) => Some(format!(
                "{}: median on the threshold, more rounds would not resolve it",
                f.name()
            )),
            _ => None,
        })
        .collect();
    let unjudged: Vec<&str> = figures
        .iter()
        .filter_map(|(_, j)| match j {
            Judgement::NotJudged(why) => Some(why.as_str()),
            _ => None,
        })
        .collect();
    let not_judged = format!("not judged: {}", unjudged.join("; "));
    let (verdict, head) = if !regressed.is_empty() {
        (
            RowVerdict::Regressed,
            format!("REGRESSED ({})", regressed.join(", ")),
        )
    } else if !inconclusive.is_empty() {
        (
            RowVerdict::Inconclusive,
            format!("INCONCLUSIVE ({})", inconclusive.join("; ")),
        )
    } else if !ok.is_empty() && unjudged.is_empty() {
        return (RowVerdict::Ok, "ok".into());
    } else if !ok.is_empty() {
        (RowVerdict::Ok, format!("ok on {}", ok.join(", ")))
    } else if !unjudged.is_empty() {
        return (RowVerdict::NotJudged, not_judged);
    } else {
        return (RowVerdict::NoThreshold, "not judged: no --threshold".into());
    };
    if unjudged.is_empty() {
        (verdict, head)
    } else {
        (verdict, format!("{head}; {not_judged}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use rand_distr::{Distribution, Normal};

    /// One figure a side: the ratio of the two, judged on the median alone.
    fn one(f: Figure, b: f64, c: f64, t: Option<f64>) -> (Option<f64>, Option<Judgement>) {
        let (r, j) = judge(f, &[b], &[c], t);
        (r.map(|r| (r.value - 1.0) * 100.0), j)
    }

    #[test]
    fn figures_missing_on_either_side_are_not_judged() {
        let t = Some(5.0);
        let (pct, j) = one(Figure::Busbw, 10.0, 9.0, t);
        assert!((pct.unwrap() + 10.0).abs() < 1e-9);
        assert_eq!(j, Some(Judgement::Regressed));
        assert_eq!(one(Figure::Busbw, 10.0, 19.7, t).1, Some(Judgement::Ok));
        assert_eq!(
            one(Figure::P99, 10.0, 10.6, t).1,
            Some(Judgement::Regressed)
        );
        // Without a threshold the change is taken and nothing is judged.
        let (pct, j) = one(Figure::P99, 10.0, 12.5, None);
        assert!((pct.unwrap() - 25.0).abs() < 1e-9 && j.is_none());
        let not = |f, b, c| match one(f, b, c, t) {
            (None, Some(Judgement::NotJudged(why))) => why,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            not(Figure::P99, 10.0, f64::NAN),
            "p99 not measured in candidate"
        );
        assert_eq!(
            not(Figure::P99, f64::NAN, f64::NAN),
            "p99 not measured in either file"
        );
        assert_eq!(
            not(Figure::P99, f64::INFINITY, f64::NAN),
            "p99 inf in baseline, not measured in candidate"
        );
        assert_eq!(not(Figure::Busbw, f64::NAN, 1.0), "busbw NaN in baseline");
        assert_eq!(
            not(Figure::Busbw, 0.0, 1.0),
            "busbw 0 in baseline: no change to take"
        );
        // One NaN among a side's samples spreads (but a p99 not measured does not).
        assert!(Figure::Busbw
            .shown(&[1.0, f64::NAN, f64::INFINITY])
            .is_nan());
        assert_eq!(Figure::P99.shown(&[1.0, f64::NAN, 3.0]), 2.0);
        assert_eq!(Figure::P99.shown(&[1.0, f64::INFINITY]), f64::INFINITY);
    }

    fn normal(mean: f64, sd: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let d = Normal::new(mean, sd).unwrap();
        (0..n).map(|_| d.sample(&mut rng)).collect()
    }

    /// 10 rounds a side around 10 GB/s against 10 around 7 (30% slower), and
    /// against 10 more around 10; two rounds a side judge on the medians.
    #[test]
    fn the_three_verdicts_on_known_distributions() {
        let t = Some(5.0);
        let base = normal(10.0, 0.3, 10, 1);
        let busbw = |c: &[f64]| judge(Figure::Busbw, &base, c, t).1.unwrap();
        assert_eq!(busbw(&normal(7.0, 0.3, 10, 2)), Judgement::Regressed);
        assert_eq!(busbw(&normal(10.0, 0.3, 10, 3)), Judgement::Ok);
        // 5% slower, noisy: across the threshold, and more rounds are named.
        match busbw(&normal(9.5, 1.0, 10, 4)) {
            Judgement::Inconclusive(Some(n)) => assert!(n > 10, "{n}"),
            other => panic!("{other:?}"),
        }
        let (r, j) = judge(Figure::Busbw, &[10.0, 10.4], &[9.0, 10.6], t);
        assert_eq!((r.unwrap().interval, j), (None, Some(Judgement::Ok)));
    }

    fn figures() -> impl Strategy<Value = Vec<f64>> {
        proptest::collection::vec(0.5f64..2.0, 1..12)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// A regression of B against A is no regression of A against B: busbw
        /// regressed one way is ok the other; p99 likewise.
        #[test]
        fn swapping_the_sides_mirrors_the_verdict(a in figures(), b in figures(), t in 0.0f64..40.0) {
            for f in [Figure::Busbw, Figure::P99] {
                let ab = judge(f, &a, &b, Some(t)).1.unwrap();
                let ba = judge(f, &b, &a, Some(t)).1.unwrap();
                if ab == Judgement::Regressed {
                    prop_assert_eq!(ba, Judgement::Ok);
                }
            }
        }

        /// A looser threshold never turns ok into REGRESSED (nor ok into
        /// inconclusive, nor inconclusive into REGRESSED).
        #[test]
        fn widening_the_threshold_never_turns_ok_into_regressed(a in figures(), b in figures(), t in 0.0f64..40.0, more in 0.0f64..40.0) {
            for f in [Figure::Busbw, Figure::P99] {
                let narrow = judge(f, &a, &b, Some(t)).1.unwrap();
                let wide = judge(f, &a, &b, Some(t + more)).1.unwrap();
                match narrow {
                    Judgement::Ok => prop_assert_eq!(wide, Judgement::Ok),
                    Judgement::Inconclusive(_) => prop_assert!(wide != Judgement::Regressed),
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn a_row_follows_the_figures_that_were_judged() {
        let nj = |why: &str| Judgement::NotJudged(why.into());
        let text = |figures: &[(Figure, Judgement)], wrong| verdict_text(figures, wrong);
        assert_eq!(
            text(
                &[(Figure::Busbw, Judgement::Ok), (Figure::P99, Judgement::Ok)],
                0
            ),
            (RowVerdict::Ok, "ok".into())
        );
        assert_eq!(
            text(
                &[
                    (Figure::Busbw, Judgement::Ok),
                    (Figure::P99, nj("p99 not measured in candidate"))
                ],
                0
            ),
            (
                RowVerdict::Ok,
                "ok on busbw; not judged: p99 not measured in candidate".into()
            )
        );
        assert_eq!(
            text(
                &[
                    (Figure::Busbw, Judgement::Regressed),
                    (Figure::P99, nj("p99 not measured in candidate"))
                ],
                0
            ),
            (
                RowVerdict::Regressed,
                "REGRESSED (busbw); not judged: p99 not measured in candidate".into()
            )
        );
        assert_eq!(
            text(
                &[
                    (Figure::Busbw, nj("busbw NaN in baseline")),
                    (Figure::P99, nj("p99 not measured in either file"))
                ],
                0
            ),
            (
                RowVerdict::NotJudged,
                "not judged: busbw NaN in baseline; p99 not measured in either file".into()
            )
        );
        assert_eq!(
            text(&[(Figure::Busbw, nj("busbw NaN in candidate"))], 7),
            (
                RowVerdict::Regressed,
                "REGRESSED (wrong data: 7 elements); not judged: busbw NaN in candidate".into()
            )
        );
        assert_eq!(
            text(&[], 0),
            (RowVerdict::NoThreshold, "not judged: no --threshold".into())
        );
        assert_eq!(text(&[], 3).0, RowVerdict::Regressed);
    }
}
