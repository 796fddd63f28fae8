//! The `compare` binary: a baseline CSV against candidates. Exit status: 0 no
//! regression, 1 a regression beyond the thresholds or wrong data, 2 bad
//! input, 4 no regression but a row the thresholds could judge on no figure
//! (NaN or inf, or p99 not measured, in either file).

use super::{compare, Counts, Thresholds};
use crate::cli::{parse_one_line, real, shown, Rule};
use crate::job::{self, ExitStatus, Failure};
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
#[command(name = "compare", version = crate::job::provenance::version_without_mpi())]
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
    job::tool_main("compare", || {
        let args: CompareArgs = parse_one_line(std::env::args_os())?;
        // Files that cannot be read or matched are bad input, as a bad flag is.
        let counts = run(&args).map_err(|e| Failure::Usage(format!("{e:#}")))?;
        Ok(if counts.rows > 0 {
            ExitStatus::Failed
        } else if counts.not_judged > 0 {
            ExitStatus::Inconclusive
        } else {
            ExitStatus::Ok
        })
    })
}

/// Prints each candidate's deltas (and draws them with --plot); returns how
/// many rows count against the candidates (beyond the thresholds, wrong data)
/// and what could not be judged.
pub fn run(args: &CompareArgs) -> anyhow::Result<Counts> {
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
    println!("# {matched} matched rows; {}", verdict(thresholds, &counts));
    Ok(counts)
}

/// "3 regressed beyond busbw -5% or p99 +20%", or that nothing was judged;
/// then the rows that fail whatever the thresholds, the figures that could
/// not be judged and the rows judged on no figure, if any.
fn verdict(thresholds: Thresholds, counts: &Counts) -> String {
    let mut parts = vec![match (thresholds.busbw_drop_pct, thresholds.p99_rise_pct) {
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
    }];
    if counts.failed > 0 {
        parts.push(format!(
            "{} failed whatever the threshold (wrong data)",
            counts.failed
        ));
    }
    if !counts.unjudged_figures.is_empty() {
        let figures: Vec<String> = counts
            .unjudged_figures
            .iter()
            .map(|(why, n)| format!("{why} ({n} {})", rows(*n)))
            .collect();
        parts.push(format!("not judged: {}", figures.join(", ")));
    }
    if counts.not_judged > 0 {
        parts.push(format!(
            "{} {} judged on no figure: no verdict",
            counts.not_judged,
            rows(counts.not_judged)
        ));
    }
    parts.join("; ")
}

fn rows(n: usize) -> &'static str {
    if n == 1 {
        "row"
    } else {
        "rows"
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
            ..Counts::default()
        };
        assert_eq!(
            verdict(Thresholds::default(), &counts(0, 0)),
            "no --threshold given: nothing judged"
        );
        let both = Thresholds {
            busbw_drop_pct: Some(5.0),
            p99_rise_pct: Some(20.0),
        };
        assert_eq!(
            verdict(both, &counts(3, 0)),
            "3 regressed beyond busbw -5% or p99 +20%"
        );
        assert_eq!(
            verdict(Thresholds::default(), &counts(0, 2)),
            "no --threshold given: deltas not judged; 2 failed whatever the threshold (wrong data)"
        );
        let mut unjudged = counts(0, 0);
        unjudged.not_judged = 1;
        unjudged.unjudged_figures = [
            ("p99 not measured in candidate".to_string(), 18),
            ("busbw NaN in baseline".to_string(), 1),
        ]
        .into();
        assert_eq!(
            verdict(both, &unjudged),
            "0 regressed beyond busbw -5% or p99 +20%; not judged: busbw NaN in baseline (1 row), \
             p99 not measured in candidate (18 rows); 1 row judged on no figure: no verdict"
        );
    }
}
