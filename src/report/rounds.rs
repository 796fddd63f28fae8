//! Lines measured in several rounds (`--rounds`): every round's result of each
//! line, kept on rank 0 as measured; each line's median over its rounds with the
//! spread of its busbw, as the table shows it; which lines `--rounds auto` has
//! yet to settle; and the `--min-busbw` verdict on the run's average busbw.

use super::{Measurement, Placement, SizeResult};
use crate::cli::shown;
use crate::stats::interval::{median, Estimate, Side, MIN_SAMPLES};
use std::collections::BTreeMap;

/// Every round's result of each line of the table, in the order of round 1.
#[derive(Debug, Default)]
pub struct Ledger {
    lines: Vec<Vec<SizeResult>>,
}

impl Ledger {
    /// `result`, measured in some round, of the `line`th line of the sweep.
    pub fn add(&mut self, line: usize, result: &SizeResult) {
        if self.lines.len() <= line {
            self.lines.resize_with(line + 1, Vec::new);
        }
        self.lines[line].push(result.clone());
    }

    /// Lines whose busbw medians are not yet within `tolerance` (a fraction),
    /// one flag per line: true, measure it again.
    pub fn unsettled(&self, tolerance: f64) -> Vec<bool> {
        self.lines
            .iter()
            .map(|rounds| !settled(&spreads(rounds), tolerance))
            .collect()
    }

    /// Each line's median over its rounds; `tolerance`: --rounds auto's, for
    /// each line's settled flag.
    pub fn medians(&self, tolerance: Option<f64>) -> Vec<MedianLine> {
        self.lines
            .iter()
            .filter(|rounds| !rounds.is_empty())
            .map(|rounds| {
                let spread = spreads(rounds);
                MedianLine {
                    result: median_result(rounds),
                    rounds: rounds.len(),
                    settled: tolerance.map(|t| settled(&spread, t)),
                    spread,
                }
            })
            .collect()
    }

    /// The run's average busbw in each round that measured every line (all of
    /// them with a fixed count; with `auto`, the rounds before lines settled):
    /// each an average over the same lines, as nccl-tests' "Avg bus bandwidth".
    pub fn round_averages(&self) -> Vec<f64> {
        let common = self.lines.iter().map(Vec::len).min().unwrap_or(0);
        (0..common)
            .map(|round| {
                let busbw: Vec<f64> = self
                    .lines
                    .iter()
                    .flat_map(|rounds| rounds[round].measurements.iter().map(|m| m.busbw_gbs))
                    .collect();
                busbw.iter().sum::<f64>() / busbw.len().max(1) as f64
            })
            .collect()
    }
}

/// A line's busbw interval half-width per placement, as a fraction of its
/// median; None with fewer than `MIN_SAMPLES` rounds.
fn spreads(rounds: &[SizeResult]) -> Vec<(Placement, Option<f64>)> {
    Placement::BOTH
        .into_iter()
        .filter_map(|p| {
            let busbw: Vec<f64> = rounds
                .iter()
                .filter_map(|r| r.measurements.iter().find(|m| m.placement == p))
                .map(|m| m.busbw_gbs)
                .collect();
            (!busbw.is_empty()).then(|| {
                let e = Estimate::median_of(&busbw);
                (p, e.interval.map(|i| i.half_width_of(e.value)))
            })
        })
        .collect()
}

/// Every placement's interval within `tolerance` (a NaN spread, from a zero
/// median, never is).
fn settled(spread: &[(Placement, Option<f64>)], tolerance: f64) -> bool {
    !spread.is_empty()
        && spread
            .iter()
            .all(|(_, s)| s.is_some_and(|s| s <= tolerance))
}

/// One line over its rounds, as the table shows it.
#[derive(Clone, Debug)]
pub struct MedianLine {
    /// Each placement's time, algbw, busbw, cpu time and percentiles the median
    /// over rounds; wrong elements summed over rounds.
    pub result: SizeResult,
    pub rounds: usize,
    /// busbw's 95% interval half-width as a fraction of its median, per
    /// placement; None: fewer than 3 rounds.
    pub spread: Vec<(Placement, Option<f64>)>,
    /// --rounds auto: whether the line settled within the tolerance.
    pub settled: Option<bool>,
}

/// The line's first round with every figure replaced by its median over rounds.
fn median_result(rounds: &[SizeResult]) -> SizeResult {
    let mut line = rounds[0].clone();
    for m in line.measurements.iter_mut() {
        let same: Vec<&Measurement> = rounds
            .iter()
            .filter_map(|r| r.measurements.iter().find(|o| o.placement == m.placement))
            .collect();
        let of =
            |f: fn(&Measurement) -> f64| median(&same.iter().map(|m| f(m)).collect::<Vec<_>>());
        m.time_us = of(|m| m.time_us);
        m.algbw_gbs = of(|m| m.algbw_gbs);
        m.busbw_gbs = of(|m| m.busbw_gbs);
        m.latency.min_us = of(|m| m.latency.min_us);
        m.latency.p50_us = of(|m| m.latency.p50_us);
        m.latency.p99_us = of(|m| m.latency.p99_us);
        m.latency.p999_us = of(|m| m.latency.p999_us);
        m.latency.max_us = of(|m| m.latency.max_us);
        m.cpu_us = m.cpu_us.map(|_| of(|m| m.cpu_us.unwrap_or(f64::NAN)));
        m.wrong = m.wrong.map(|_| same.iter().filter_map(|m| m.wrong).sum());
        let mut by_rank: BTreeMap<usize, u64> = BTreeMap::new();
        for (rank, n) in same.iter().flat_map(|m| m.wrong_ranks.iter()) {
            *by_rank.entry(*rank).or_default() += n;
        }
        m.wrong_ranks = by_rank.into_iter().collect();
    }
    line
}

/// The closing figures of a run of several rounds.
#[derive(Clone, Debug)]
pub struct RoundsSummary {
    pub lines: Vec<MedianLine>,
    /// --rounds auto: its tolerance (a fraction), and what ended the rounds
    /// while lines were unsettled ("the 20-round cap", "the 60 s budget").
    pub auto: Option<(f64, Option<String>)>,
}

/// --min-busbw's three verdicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MinBusbwVerdict {
    Pass,
    Fail,
    Inconclusive,
}

/// --min-busbw judged: the median over rounds of the run's average busbw.
#[derive(Clone, Debug, PartialEq)]
pub struct MinBusbw {
    pub min_gbs: f64,
    pub estimate: Estimate,
}

impl MinBusbw {
    pub fn judge(min_gbs: f64, round_averages: &[f64]) -> MinBusbw {
        MinBusbw {
            min_gbs,
            estimate: Estimate::median_of(round_averages),
        }
    }

    /// PASS when the whole interval is at or above the minimum, FAIL when it
    /// is wholly below; anything else (across it, no interval, no number)
    /// cannot tell.
    pub fn verdict(&self) -> MinBusbwVerdict {
        match (self.estimate.interval, self.estimate.value.is_finite()) {
            (Some(_), true) => match self.estimate.against(self.min_gbs, f64::INFINITY) {
                Side::Inside | Side::Above => MinBusbwVerdict::Pass,
                Side::Below => MinBusbwVerdict::Fail,
                Side::Straddles => MinBusbwVerdict::Inconclusive,
            },
            _ => MinBusbwVerdict::Inconclusive,
        }
    }

    /// The figure and its verdict in one line: "average busbw 4.2 GB/s (median
    /// of 5 rounds, 95% interval 4.1-4.3) is below --min-busbw 10 GB/s: FAIL".
    pub fn sentence(&self) -> String {
        let e = &self.estimate;
        let s = if e.rounds == 1 { "" } else { "s" };
        let figure = match e.interval {
            Some(i) => format!(
                "average busbw {} GB/s (median of {} rounds, 95% interval {}-{})",
                g(e.value),
                e.rounds,
                g(i.lo),
                g(i.hi)
            ),
            None => format!(
                "average busbw {} GB/s (median of {} round{s}, no interval)",
                g(e.value),
                e.rounds
            ),
        };
        let min = shown(self.min_gbs);
        match self.verdict() {
            MinBusbwVerdict::Pass => format!("{figure} is at least --min-busbw {min} GB/s: PASS"),
            MinBusbwVerdict::Fail => format!("{figure} is below --min-busbw {min} GB/s: FAIL"),
            MinBusbwVerdict::Inconclusive if e.interval.is_none() || !e.value.is_finite() => format!(
                "{figure} against --min-busbw {min} GB/s: INCONCLUSIVE: noise not estimated: use --rounds {MIN_SAMPLES} or more"
            ),
            MinBusbwVerdict::Inconclusive => {
                let more = match e.rounds_to_clear(self.min_gbs) {
                    Some(n) => format!("about {n} rounds would resolve it"),
                    None => "the median is on the minimum itself: no number of rounds would resolve it".into(),
                };
                format!("{figure} straddles --min-busbw {min} GB/s: INCONCLUSIVE: {more}")
            }
        }
    }
}

/// Three significant figures, as a person reads a bandwidth.
fn g(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return v.to_string();
    }
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    ((v * scale).round() / scale).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{histogram, IterStats};

    fn result(size: u64, busbw: [f64; 2]) -> SizeResult {
        let h = histogram(&[1e-6]);
        let m = |placement, busbw: f64| Measurement {
            placement,
            time_us: 10.0 / busbw,
            algbw_gbs: busbw,
            busbw_gbs: busbw,
            wrong: Some(0),
            latency: IterStats::from_seconds(&[1e-6], &h),
            histogram: h.clone(),
            slowest_rank: 0,
            timestamp: String::new(),
            cpu_us: None,
            wrong_ranks: vec![],
            per_iter: None,
        };
        SizeResult::all_reduce_row(
            size,
            vec![
                m(Placement::OutOfPlace, busbw[0]),
                m(Placement::InPlace, busbw[1]),
            ],
        )
    }

    #[test]
    fn medians_spreads_and_settling() {
        let mut ledger = Ledger::default();
        for (round, bw) in [10.0, 30.0, 11.0, 12.0].into_iter().enumerate() {
            ledger.add(0, &result(8, [bw, bw]));
            // The second line is steady: settled from its third round on.
            if round < 3 {
                ledger.add(1, &result(16, [5.0, 5.0]));
            }
        }
        let lines = ledger.medians(Some(0.02));
        assert_eq!((lines[0].rounds, lines[1].rounds), (4, 3));
        assert_eq!(lines[0].result.measurements[0].busbw_gbs, 11.5);
        assert_eq!(lines[0].settled, Some(false));
        assert_eq!(lines[1].settled, Some(true));
        assert_eq!(lines[1].spread[0], (Placement::OutOfPlace, Some(0.0)));
        assert_eq!(ledger.unsettled(0.02), vec![true, false]);
        // Rounds 1..3 measured both lines: their averages only.
        assert_eq!(ledger.round_averages(), vec![7.5, 17.5, 8.0]);
        let mut two = Ledger::default();
        two.add(0, &result(8, [1.0, 1.0]));
        two.add(0, &result(8, [1.0, 1.0]));
        assert_eq!(two.medians(None)[0].spread[0].1, None);
        assert_eq!(two.unsettled(0.5), vec![true]);
    }

    #[test]
    fn figures_in_three_significant_digits() {
        assert_eq!(g(0.0046321), "0.00463");
        assert_eq!(g(123456.0), "123000");
        assert_eq!(g(12.345), "12.3");
        assert_eq!(g(f64::NAN), "NaN");
    }

    #[test]
    fn min_busbw_verdicts() {
        let steady = [10.0, 10.1, 9.9, 10.0, 10.05];
        assert_eq!(
            MinBusbw::judge(5.0, &steady).verdict(),
            MinBusbwVerdict::Pass
        );
        assert_eq!(
            MinBusbw::judge(50.0, &steady).verdict(),
            MinBusbwVerdict::Fail
        );
        let across = MinBusbw::judge(10.0, &steady);
        assert_eq!(across.verdict(), MinBusbwVerdict::Inconclusive);
        assert!(
            across.sentence().contains("straddles"),
            "{}",
            across.sentence()
        );
        let one = MinBusbw::judge(0.001, &[10.0]);
        assert_eq!(one.verdict(), MinBusbwVerdict::Inconclusive);
        assert!(one.sentence().contains("use --rounds 3 or more"));
        let fail = MinBusbw::judge(50.0, &steady).sentence();
        assert!(
            fail.ends_with("is below --min-busbw 50 GB/s: FAIL"),
            "{fail}"
        );
        let nan = MinBusbw::judge(1.0, &[f64::NAN; 3]);
        assert_eq!(nan.verdict(), MinBusbwVerdict::Inconclusive);
    }
}
