//! The `compare` binary: a baseline CSV against candidates. Exit status: 0 no
//! regression, 1 a regression beyond the thresholds or a row that fails
//! whatever they are (wrong data, NaN or inf), 2 bad input.

use super::{compare, Counts, Thresholds};
use crate::cli::{parse_one_line, real, shown, Rule};
use crate::job::{self, ExitStatus, Failure, Start};
use crate::output::check_folder;
use crate::plot::{file_labels, limits_in, render, RunData};
use crate::report::csv::read_rows;
use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Matches rows on collective, datatype, op, placement, size and nranks and
/// prints the busbw and p99 deltas of each candidate against the baseline.
#[derive(Parser, Debug)]
#[command(name = "compare", version)]
pub struct CompareArgs {
    /// The reference run
    #[arg(value_name = "BASELINE_CSV")]
    pub baseline: PathBuf,
    /// Runs to judge against it
    #[arg(required = true, value_name = "CANDIDATE_CSV")]
    pub candidates: Vec<PathBuf>,
    /// Exit 1 when a matched row's busbw drops, or its p99 rises, by more than PCT percent
    #[arg(long = "threshold", value_name = "PCT", value_parser = real(PERCENT), allow_hyphen_values = true)]
    pub threshold: Option<f64>,
    /// A separate bound for the p99 rise (tail latency is noisier than busbw)
    #[arg(long = "p99-threshold", value_name = "PCT", value_parser = real(PERCENT), allow_hyphen_values = true)]
    pub p99_threshold: Option<f64>,
    /// Also draw the runs overlaid (PNG and SVG) in DIR
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,
}

/// --threshold and --p99-threshold.
const PERCENT: Rule = Rule {
    least: 0.0,
    above: false,
    most: f64::INFINITY,
    what: "a percentage",
    example: "5",
};

pub fn main() -> ExitCode {
    job::main(Start::Alone, "compare", |_job, _program| {
        let args: CompareArgs = parse_one_line(std::env::args_os())?;
        // Files that cannot be read or matched are bad input, as a bad flag is.
        let regressions = run(&args).map_err(|e| Failure::Usage(format!("{e:#}")))?;
        Ok(if regressions > 0 {
            ExitStatus::Failed
        } else {
            ExitStatus::Ok
        })
    })
}

/// Prints each candidate's deltas (and draws them with --plot); returns how
/// many rows count against the candidates (beyond the thresholds, wrong data,
/// figures that are not numbers).
pub fn run(args: &CompareArgs) -> anyhow::Result<usize> {
    check_folder("--plot", args.plot.as_deref(), "pictures")?;
    let paths: Vec<PathBuf> = std::iter::once(args.baseline.clone())
        .chain(args.candidates.iter().cloned())
        .collect();
    let labels = file_labels(&paths);
    let files: Vec<_> = paths
        .iter()
        .map(|p| read_rows(p))
        .collect::<anyhow::Result<_>>()?;
    let thresholds = Thresholds {
        busbw_drop_pct: args.threshold,
        p99_rise_pct: args.p99_threshold.or(args.threshold),
    };
    let mut counts = Counts::default();
    let mut matched = 0;
    for (rows, label) in files.iter().zip(&labels).skip(1) {
        let c = compare(&files[0], rows, thresholds)
            .with_context(|| format!("{label} against {}", labels[0]))?;
        print!("{}", c.render(&labels[0], label));
        counts += c.counts();
        matched += c.deltas.len();
    }
    if let Some(dir) = &args.plot {
        let runs: Vec<RunData> = files
            .into_iter()
            .zip(&labels)
            .map(|(rows, label)| RunData::from_rows(label, rows))
            .collect();
        let written = render(&runs, &limits_in(&runs), None, dir)
            .with_context(|| format!("--plot {}", dir.display()))?;
        if let Some(line) = &written.left_out {
            eprintln!("compare: warning: --plot: {line}");
        }
        println!("# {} plots in {}", written.files.len(), dir.display());
    }
    println!("# {matched} matched rows; {}", verdict(thresholds, counts));
    Ok(counts.rows)
}

/// "3 regressed beyond busbw -5% or p99 +20%", or that nothing was judged;
/// then the rows that fail whatever the thresholds, if any.
fn verdict(thresholds: Thresholds, counts: Counts) -> String {
    let judged = match (thresholds.busbw_drop_pct, thresholds.p99_rise_pct) {
        (None, None) if counts.failed == 0 => "no --threshold given: nothing judged".to_string(),
        (None, None) => "no --threshold given: deltas not judged".to_string(),
        (b, p) => format!(
            "{} regressed beyond {}",
            counts.regressed,
            [
                b.map(|t| format!("busbw -{}%", shown(t))),
                p.map(|t| format!("p99 +{}%", shown(t)))
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" or ")
        ),
    };
    match counts.failed {
        0 => judged,
        n => format!(
            "{judged}; {n} failed whatever the threshold (wrong data, or a figure that is NaN or inf)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_and_verdicts() {
        let percent = real(PERCENT);
        assert_eq!(percent("5"), Ok(5.0));
        assert_eq!(percent("2.5%"), Ok(2.5));
        assert!(percent("-1")
            .unwrap_err()
            .starts_with("too small; give a percentage"));
        let counts = |regressed, failed| Counts {
            regressed,
            failed,
            rows: regressed + failed,
        };
        assert_eq!(
            verdict(Thresholds::default(), counts(0, 0)),
            "no --threshold given: nothing judged"
        );
        let both = Thresholds {
            busbw_drop_pct: Some(5.0),
            p99_rise_pct: Some(20.0),
        };
        assert_eq!(
            verdict(both, counts(3, 0)),
            "3 regressed beyond busbw -5% or p99 +20%"
        );
        assert_eq!(
            verdict(Thresholds::default(), counts(0, 2)),
            "no --threshold given: deltas not judged; 2 failed whatever the threshold \
             (wrong data, or a figure that is NaN or inf)"
        );
    }
}
