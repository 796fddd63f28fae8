//! What a spec check concluded: its verdict, the figure it measured against its
//! threshold, and, for a figure judged on rounds, its median and interval.

use super::check::Check;
use crate::stats::interval::Estimate;
use serde::Serialize;

/// A check's verdict: PASS and FAIL are facts; INCONCLUSIVE is a figure whose
/// interval lies across its threshold (or too few rounds to tell).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "INCONCLUSIVE",
        }
    }

    pub fn of(passed: bool) -> Verdict {
        if passed {
            Verdict::Pass
        } else {
            Verdict::Fail
        }
    }
}

/// A figure judged on rounds: its median and 95% interval (`crate::stats`),
/// against the threshold nearest to it.
#[derive(Clone, Debug, PartialEq)]
pub struct Rounds {
    pub estimate: Estimate,
    pub unit: &'static str,
    /// The threshold judged against: where "rounds to resolve" measures from.
    pub edge: f64,
    /// Of the estimate's rounds, how many were re-measures.
    pub remeasured: usize,
}

impl Rounds {
    /// "41.000 GB/s, 95% interval 40.100 to 42.000, 5 rounds (2 re-measured)".
    pub fn text(&self) -> String {
        let e = &self.estimate;
        let interval = match e.interval {
            Some(i) => format!("95% interval {} to {}", figure(i.lo), figure(i.hi)),
            None => "no interval".to_string(),
        };
        let again = match self.remeasured {
            0 => String::new(),
            n => format!(" ({n} re-measured)"),
        };
        format!(
            "{} {}, {interval}, {} rounds{again}",
            figure(e.value),
            self.unit,
            e.rounds
        )
    }

    /// About how many rounds would resolve an inconclusive figure.
    pub fn to_resolve(&self) -> Option<usize> {
        self.estimate.rounds_to_clear(self.edge)
    }
}

/// A figure with 3 decimals, or 4 significant digits when smaller than 1: a
/// 0.0003 GB/s link reads as itself, not as 0.000.
fn figure(v: f64) -> String {
    let digits = match v.abs() {
        a if a > 0.0 && a < 1.0 => (3 - a.log10().floor() as i32).clamp(3, 12) as usize,
        _ => 3,
    };
    format!("{v:.digits$}")
}

#[derive(Clone, Debug, PartialEq)]
pub struct CheckResult {
    pub label: String,
    pub measured: String,
    pub threshold: String,
    pub verdict: Verdict,
    /// Why it failed, naming nodes, ranks or pairs; notes on a pass.
    pub details: Vec<String>,
    /// The rounds it was judged on; None for a check judged on one run (counters,
    /// all pairs) or not judged at all.
    pub rounds: Option<Rounds>,
    /// The nodes its failure is laid on (pair labels), with why: a node its
    /// evidence singles out.
    pub suspects: Vec<(String, String)>,
}

impl CheckResult {
    pub(super) fn failed(check: &Check, threshold: String, why: String) -> CheckResult {
        CheckResult {
            label: check.label.clone(),
            measured: "-".into(),
            threshold,
            verdict: Verdict::Fail,
            details: vec![why],
            rounds: None,
            suspects: Vec::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_figures_keep_their_digits() {
        assert_eq!(figure(41.0), "41.000");
        assert_eq!(figure(0.018437), "0.01844");
        assert_eq!(figure(0.000305123), "0.0003051");
        assert_eq!(figure(0.0), "0.000");
        assert_eq!(figure(f64::NAN), "NaN");
    }
}
