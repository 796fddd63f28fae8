//! Judging one matched row: each figure a threshold asks about is ok,
//! regressed, or not judged (missing on either side: not measured is not
//! worse, and not better); wrong data in the candidate fails the row whatever
//! the thresholds. The row's verdict follows from the figures that were judged.

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

    /// Whether a change of `pct` percent crosses `threshold`: busbw worse when
    /// it drops, p99 when it rises.
    fn regressed(self, pct: f64, threshold: f64) -> bool {
        match self {
            Figure::Busbw => pct < -threshold,
            Figure::P99 => pct > threshold,
        }
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

/// What a threshold said of one figure of a row.
#[derive(Clone, Debug, PartialEq)]
pub enum Judgement {
    Ok,
    Regressed,
    /// No change could be taken: "p99 not measured in candidate".
    NotJudged(String),
}

/// The change of a figure in percent of the baseline (None where the baseline
/// is 0 or either value is no number), and its judgement when `threshold` asks.
pub fn judge(
    figure: Figure,
    base: f64,
    candidate: f64,
    threshold: Option<f64>,
) -> (Option<f64>, Option<Judgement>) {
    let pct = Some((candidate - base) / base * 100.0).filter(|p| base != 0.0 && p.is_finite());
    let judgement = threshold.map(|t| match pct {
        Some(p) if figure.regressed(p, t) => Judgement::Regressed,
        Some(_) => Judgement::Ok,
        None => Judgement::NotJudged(why_not(figure, base, candidate)),
    });
    (pct, judgement)
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

/// A matched row's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowVerdict {
    /// Every figure judged was within its threshold, and the data was right.
    Ok,
    /// A threshold crossed, or wrong data.
    Regressed,
    /// Thresholds asked, and no figure could be judged.
    NotJudged,
    /// No threshold given: the deltas are shown, not judged.
    NoThreshold,
}

/// The verdict cell: "ok", "REGRESSED (busbw)", "ok on busbw; not judged: p99
/// not measured in candidate", "not judged: busbw NaN in baseline".
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

    #[test]
    fn figures_missing_on_either_side_are_not_judged() {
        let t = Some(5.0);
        assert_eq!(
            judge(Figure::Busbw, 10.0, 9.0, t),
            (Some(-10.0), Some(Judgement::Regressed))
        );
        assert_eq!(judge(Figure::Busbw, 10.0, 19.7, t).1, Some(Judgement::Ok));
        assert_eq!(
            judge(Figure::P99, 10.0, 10.6, t).1,
            Some(Judgement::Regressed)
        );
        // Without a threshold the change is taken and nothing is judged.
        assert_eq!(judge(Figure::P99, 10.0, 12.5, None), (Some(25.0), None));
        let not = |f, b, c| match judge(f, b, c, t) {
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
