//! The checks of a spec: which CSV column a check reads, its thresholds (a
//! number, a percentage of a link limit of `crate::limits`, or of the busbw
//! the performance model expects), and what it judges (rows at one size and
//! placement, or an all-pairs matrix).

use crate::allpairs::Thresholds;
use crate::cli::shown;
use crate::limits::parse_limit;
use crate::report::{Placement, Row};
use anyhow::{anyhow, bail, Context};
use serde::Deserialize;

/// A threshold: a number (GB/s or us, the metric's unit) or "P% of LIMIT [x N]".
#[derive(Clone, Debug, Deserialize)]
#[serde(untagged)]
pub enum Bound {
    Number(f64),
    Text(String),
}

/// A CSV column a check reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowMetric {
    Busbw,
    Algbw,
    Time,
    P50,
    P99,
    P999,
    Max,
    /// busbw as a percentage of the model's expected busbw ("80% of expected").
    PctOfExpected,
}

impl RowMetric {
    pub const ALL: [(&'static str, RowMetric); 8] = [
        ("busbw", RowMetric::Busbw),
        ("algbw", RowMetric::Algbw),
        ("time", RowMetric::Time),
        ("p50", RowMetric::P50),
        ("p99", RowMetric::P99),
        ("p999", RowMetric::P999),
        ("max", RowMetric::Max),
        ("pct_of_expected", RowMetric::PctOfExpected),
    ];

    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, m)| *m == self)
            .map_or("?", |(n, _)| n)
    }

    pub fn is_bandwidth(self) -> bool {
        matches!(self, RowMetric::Busbw | RowMetric::Algbw)
    }

    pub fn unit(self) -> &'static str {
        match self {
            _ if self.is_bandwidth() => "GB/s",
            RowMetric::PctOfExpected => "%",
            _ => "us",
        }
    }

    pub fn value(self, row: &Row) -> f64 {
        match self {
            RowMetric::Busbw => row.busbw_gbs,
            RowMetric::Algbw => row.algbw_gbs,
            RowMetric::Time => row.time_us,
            RowMetric::P50 => row.p50_us,
            RowMetric::P99 => row.p99_us,
            RowMetric::P999 => row.p999_us,
            RowMetric::Max => row.max_us,
            // No model for the row: no figure to judge.
            RowMetric::PctOfExpected => row.pct_of_expected.unwrap_or(f64::NAN),
        }
    }
}

/// A resolved threshold: the number and how it was arrived at.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub value: f64,
    /// "340.000 GB/s (85% of ib-ndr x 8: InfiniBand NDR 4X, 400 Gb/s = 50 GB/s)".
    pub text: String,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CheckKind {
    /// A value of the test's CSV rows at one size and placement.
    Row {
        metric: RowMetric,
        size: u64,
        placement: Placement,
        min: Option<Threshold>,
        max: Option<Threshold>,
    },
    /// The test's all-pairs matrices have no slow pair and no wrong data.
    AllPairs(Thresholds),
    /// The fabric counters' deltas by class, summed over the test's sizes
    /// (or one size), at most these (`metric = "counters"`, see `spec`).
    Counters {
        size: Option<u64>,
        max: Vec<(crate::sysfs::counters::Class, u64)>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// "all_reduce busbw at 1 GiB (out-of-place)".
    pub label: String,
    pub test: String,
    pub kind: CheckKind,
    /// A test with --rails: the rail (0-based) whose matrices it judges.
    pub rail: Option<usize>,
}

impl Check {
    /// The file this check reads of a launch that wrote `csv`: a rail's own.
    pub fn results_of(&self, csv: &std::path::Path) -> std::path::PathBuf {
        match self.rail {
            Some(rail) => crate::allpairs::rails::of_rail(csv, rail),
            None => csv.to_path_buf(),
        }
    }
}

/// Which end of a check a threshold is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Min,
    Max,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Min => "min",
            Side::Max => "max",
        }
    }

    /// The most a threshold may be of a limit: a minimum above 100% can never
    /// be met, and a maximum beyond 10 times the link is no check at all.
    fn most_percent(self) -> f64 {
        match self {
            Side::Min => 100.0,
            Side::Max => 1000.0,
        }
    }
}

impl Bound {
    /// "P% of expected": the percentage P, as text.
    pub fn of_expected(&self) -> Option<&str> {
        match self {
            Bound::Text(t) => t.trim().strip_suffix("% of expected").map(str::trim),
            Bound::Number(_) => None,
        }
    }
}

/// A busbw check whose bounds are "P% of expected" reads pct_of_expected
/// (judged with the same intervals); a bound of another kind beside one is
/// refused, since the two would judge different figures.
pub fn metric_of(
    metric: RowMetric,
    min: Option<&Bound>,
    max: Option<&Bound>,
) -> anyhow::Result<RowMetric> {
    let given: Vec<&Bound> = [min, max].into_iter().flatten().collect();
    let relative = given.iter().filter(|b| b.of_expected().is_some()).count();
    match relative {
        0 => Ok(metric),
        n if n == given.len() && metric == RowMetric::Busbw => Ok(RowMetric::PctOfExpected),
        _ if metric != RowMetric::Busbw => Err(anyhow!(
            "\"P% of expected\" judges busbw against the model's expected busbw; metric {} has no expected figure",
            metric.name()
        )),
        _ => Err(anyhow!("min and max judge one figure: give both as \"P% of expected\", or neither")),
    }
}

/// The largest plain-number threshold, in GB/s or us: no link carries 1e9
/// GB/s and no iteration of a benchmark lasts 1e9 us (17 minutes); a larger
/// one is a typo, and would be written back as it is into every report.
const MAX_THRESHOLD: f64 = 1e9;

/// "85% of ib-ndr x 8" (or a plain number) for a check's min or max. Every
/// threshold is a finite number above 0: NaN would pass every value, and 0 or
/// a negative minimum passes every measurement (or a maximum none).
pub fn parse_bound(bound: &Bound, metric: RowMetric, side: Side) -> anyhow::Result<Threshold> {
    let field = side.name();
    let unit = metric.unit();
    let (text, number) = match bound {
        Bound::Number(v) => (shown(*v), Some(*v)),
        Bound::Text(t) => (t.trim().to_string(), t.trim().parse::<f64>().ok()),
    };
    if let (Some(pct), RowMetric::PctOfExpected) = (bound.of_expected(), metric) {
        let most = side.most_percent();
        return match pct.parse::<f64>() {
            Ok(value) if value > 0.0 && value <= most => Ok(Threshold {
                value,
                text: format!("{} % ({text}: the model's busbw at the size)", shown(value)),
            }),
            _ => Err(anyhow!(
                "{field} '{text}': give a percentage above 0 and at most {most}% of expected"
            )),
        };
    }
    if let Some(value) = number {
        if !(value.is_finite() && value > 0.0 && value <= MAX_THRESHOLD) {
            bail!(
                "{field} {text}: a threshold is a number of {unit} above 0 and at most {}, e.g. {field} = 40",
                shown(MAX_THRESHOLD)
            );
        }
        return Ok(Threshold {
            value,
            text: format!("{} {unit}", shown(value)),
        });
    }
    let usage = || {
        anyhow!(
            "{field} '{text}': give a number in {unit}, or \"P% of LIMIT\" or \"P% of LIMIT x N\" \
             with LIMIT a link name of --limit (ib-ndr, nvlink4, pcie5x16, ...) or a bandwidth (400Gb/s)"
        )
    };
    let (pct, rest) = text.split_once("% of ").ok_or_else(usage)?;
    let pct: f64 = pct.trim().parse().map_err(|_| usage())?;
    let (name, count) = match rest.split_once(" x ") {
        Some((n, c)) => (n.trim(), c.trim().parse::<u32>().map_err(|_| usage())?),
        None => (rest.trim(), 1),
    };
    let limit = parse_limit(name).with_context(|| format!("{field} '{text}'"))?;
    if !metric.is_bandwidth() {
        bail!(
            "{field} '{text}': a % of a named limit applies to busbw and algbw; metric {} takes microseconds",
            metric.name()
        );
    }
    let most = side.most_percent();
    if !(pct > 0.0 && pct <= most) {
        bail!("{field} '{text}': give a percentage above 0 and at most {most}% of the limit");
    }
    if count == 0 {
        bail!("{field} '{text}': x N counts links: give N of at least 1, or leave \" x N\" out");
    }
    let value = pct / 100.0 * limit.gbs * count as f64;
    if !value.is_finite() {
        bail!("{field} '{text}': {} GB/s is no bandwidth", shown(value));
    }
    Ok(Threshold {
        value,
        text: format!(
            "{value:.3} GB/s ({text}: {}{})",
            limit.label(),
            if count > 1 {
                format!(", x {count}")
            } else {
                String::new()
            }
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_numbers_in_text() {
        let t = parse_bound(&Bound::Text("12.5".into()), RowMetric::Busbw, Side::Min).unwrap();
        assert_eq!((t.value, t.text.as_str()), (12.5, "12.5 GB/s"));
        let t = parse_bound(
            &Bound::Text("50% of 400g".into()),
            RowMetric::Algbw,
            Side::Min,
        )
        .unwrap();
        assert_eq!(t.value, 25.0);
        let t = parse_bound(
            &Bound::Text("50% of 800Gb/s x 2".into()),
            RowMetric::Busbw,
            Side::Min,
        )
        .unwrap();
        assert_eq!(t.value, 100.0);
    }
}
