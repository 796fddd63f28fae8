//! The `fabricbench-stats` binary: the verdicts' statistics for figures any
//! program measured (OSU, perftest, a bare loop): the median of a list of
//! figures, the ratio of the medians of two lists, or the geometric mean over
//! several pairs of lists, with its 95% interval, and where it lies against a band. The benchmark
//! scripts judge with it, so that one definition exists (`stats::interval`).

use crate::cli::{parse_one_line, shown};
use crate::input::read_text;
use crate::job::{self, ExitStatus, Failure, UsageError};
use crate::stats::interval::{Estimate, Side, MIN_SAMPLES};
use anyhow::{anyhow, ensure};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Prints the ratio median(NUMERATOR) / median(DENOMINATOR) (or one file's
/// median), its 95% bootstrap interval and where the interval lies against
/// --band, on one line: `VALUE LO HI VERDICT ROUNDS RESOLVE`. VERDICT is
/// inside, below or above (the whole interval is), unresolved (it lies across
/// an end; RESOLVE is about how many figures a side would tell, or -),
/// not-judged (fewer than 3 figures a side: LO and HI are NaN), or - (no
/// --band). Several pairs of files are pooled: the geometric mean of their
/// ratios. Exit status: 0 inside or no --band, 1 below or above, 4 unresolved
/// or not judged, 2 bad input.
#[derive(Parser, Debug)]
#[command(name = "fabricbench-stats", version = crate::job::provenance::version_without_mpi())]
pub struct StatsArgs {
    /// NUMERATOR DENOMINATOR: files of figures (numbers separated by white
    /// space, each positive and finite); more pairs are pooled; one file: its median
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// The acceptable ratios, LO:HI; an end left empty is unbounded (0.95:1.05,
    /// 0.98:, :1.05)
    #[arg(long = "band", value_name = "LO:HI", value_parser = band, allow_hyphen_values = true)]
    pub band: Option<Band>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Band {
    pub lo: f64,
    pub hi: f64,
}

fn band(text: &str) -> anyhow::Result<Band> {
    let fix = "give LO:HI, two ratios with LO at most HI and either end empty for no bound, e.g. 0.95:1.05 or 0.98:";
    let end = |s: &str, unbounded: f64| -> anyhow::Result<f64> {
        match s.trim() {
            "" => Ok(unbounded),
            t => t
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| anyhow!(fix)),
        }
    };
    let (lo, hi) = text.split_once(':').ok_or_else(|| anyhow!(fix))?;
    let b = Band {
        lo: end(lo, 0.0)?,
        hi: end(hi, f64::INFINITY)?,
    };
    ensure!(b.lo <= b.hi, fix);
    Ok(b)
}

/// The figures of one file, or the line that says what is wrong with it.
fn figures(path: &Path) -> Result<Vec<f64>, UsageError> {
    const MAX_BYTES: u64 = 16 << 20;
    let name = path.display();
    let text = read_text(path, MAX_BYTES).map_err(|e| UsageError(format!("{name}: {e}")))?;
    let values = text
        .split_whitespace()
        .map(|token| {
            token
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v > 0.0)
                .ok_or_else(|| {
                    UsageError(format!(
                        "{name}: '{token}' is not a figure; give positive finite numbers separated by white space"
                    ))
                })
        })
        .collect::<Result<Vec<f64>, _>>()?;
    if values.is_empty() {
        return Err(UsageError(format!(
            "{name}: no figures; give positive finite numbers separated by white space"
        )));
    }
    Ok(values)
}

/// The estimate as the one line prints it, judged against `band` when there
/// is one, and its exit status.
pub fn verdict(e: &Estimate, band: Option<Band>) -> (String, ExitStatus) {
    let (lo, hi) = e.interval.map_or((f64::NAN, f64::NAN), |i| (i.lo, i.hi));
    let (value, lo, hi) = (number(e.value), number(lo), number(hi));
    let Some(band) = band else {
        return (
            format!("{value} {lo} {hi} - {} -", e.rounds),
            ExitStatus::Ok,
        );
    };
    let (word, resolve, status) = match (e.interval, e.against(band.lo, band.hi)) {
        (None, _) => ("not-judged", None, ExitStatus::Inconclusive),
        (_, Side::Inside) => ("inside", None, ExitStatus::Ok),
        (_, Side::Below) => ("below", None, ExitStatus::Failed),
        (_, Side::Above) => ("above", None, ExitStatus::Failed),
        (Some(i), Side::Straddles) => {
            // The end the interval crosses; the nearer one when it spans the band.
            let distance = |edge: f64| (e.value / edge).ln().abs();
            let edge = [band.lo, band.hi]
                .into_iter()
                .filter(|&x| i.lo <= x && x <= i.hi)
                .min_by(|&a, &b| distance(a).total_cmp(&distance(b)));
            let resolve = edge.and_then(|x| e.rounds_to_clear(x));
            ("unresolved", resolve, ExitStatus::Inconclusive)
        }
    };
    let resolve = resolve.map_or("-".to_string(), |n| n.to_string());
    let line = format!("{value} {lo} {hi} {word} {} {resolve}", e.rounds);
    (line, status)
}

/// Six decimals, or six significant digits in exponent form where six decimals
/// would hide the figure (a ratio of 1e-7 is not 0.000000).
fn number(v: f64) -> String {
    if v.is_finite() && v != 0.0 && !(1e-3..1e9).contains(&v.abs()) {
        format!("{v:.5e}")
    } else {
        format!("{v:.6}")
    }
}

pub fn main() -> ExitCode {
    job::tool_main("fabricbench-stats", || {
        let args: StatsArgs = parse_one_line(std::env::args_os())?;
        if args.files.len() > 1 && args.files.len() % 2 != 0 {
            return Err(Failure::Usage(format!(
                "{} files: give one (its median) or pairs, NUMERATOR DENOMINATOR (each pair one row of the pool)",
                args.files.len()
            )));
        }
        let lists = args
            .files
            .iter()
            .map(|p| figures(p))
            .collect::<Result<Vec<_>, _>>()?;
        let pairs: Vec<(&[f64], &[f64])> = lists
            .chunks_exact(2)
            .map(|p| (&p[0][..], &p[1][..]))
            .collect();
        let e = match &lists[..] {
            [one] => Estimate::median_of(one),
            _ => Estimate::pooled_ratio(&pairs),
        };
        let (line, status) = verdict(&e, args.band);
        println!("{line}");
        if let (None, Some(b)) = (e.interval, args.band) {
            eprintln!(
                "fabricbench-stats: {} figure(s) on a side: at least {MIN_SAMPLES} a side estimate the noise; not judged against {}:{}",
                e.rounds,
                shown(b.lo),
                shown(b.hi)
            );
        }
        Ok(status)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `band` with its message as the user reads it.
    fn band(text: &str) -> Result<Band, String> {
        super::band(text).map_err(|e| format!("{e:#}"))
    }
    use crate::stats::interval::Interval;

    fn estimate(value: f64, lo: f64, hi: f64) -> Estimate {
        Estimate {
            value,
            interval: Some(Interval { lo, hi }),
            rounds: 5,
        }
    }

    #[test]
    fn bands_parse_with_open_ends_and_refuse_the_rest() {
        assert_eq!(band("0.95:1.05"), Ok(Band { lo: 0.95, hi: 1.05 }));
        assert_eq!(band("0.98:").unwrap().hi, f64::INFINITY);
        assert_eq!(band(":1.05").unwrap().lo, 0.0);
        for bad in ["", "1.05", "1.1:0.9", "nan:1", "-1:1", "a:b", "0:inf"] {
            assert!(band(bad).unwrap_err().contains("LO:HI"), "{bad}");
        }
    }

    #[test]
    fn the_line_and_status_follow_the_interval() {
        let b = Some(Band { lo: 0.95, hi: 1.05 });
        let (line, s) = verdict(&estimate(1.0, 0.98, 1.02), b);
        assert_eq!(
            (line.as_str(), s),
            ("1.000000 0.980000 1.020000 inside 5 -", ExitStatus::Ok)
        );
        assert_eq!(verdict(&estimate(0.8, 0.75, 0.85), b).1, ExitStatus::Failed);
        assert!(verdict(&estimate(1.2, 1.1, 1.3), b).0.contains(" above "));
        let (line, s) = verdict(&estimate(0.96, 0.93, 0.99), b);
        assert_eq!(s, ExitStatus::Inconclusive);
        let resolve: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(resolve > 5, "{line}");
        let none = Estimate {
            value: 1.0,
            interval: None,
            rounds: 2,
        };
        assert_eq!(
            verdict(&none, b),
            (
                "1.000000 NaN NaN not-judged 2 -".to_string(),
                ExitStatus::Inconclusive
            )
        );
        let tiny = verdict(&estimate(1e-7, 5e-8, 2e-7), b).0;
        assert!(
            tiny.starts_with("1.00000e-7 5.00000e-8 2.00000e-7 below "),
            "{tiny}"
        );
        assert_eq!(
            verdict(&estimate(0.8, 0.75, 0.85), None),
            (
                "0.800000 0.750000 0.850000 - 5 -".to_string(),
                ExitStatus::Ok
            )
        );
    }
}
