//! The `compare` binary: a baseline against candidates, each key judged on
//! the 95% interval of the ratio of medians. Exit status: 0 no regression, 1
//! a regression beyond the thresholds or wrong data, 2 bad input, 4 no
//! regression but an interval across a threshold (inconclusive), or a row the
//! thresholds could judge on no figure (NaN or inf, or p99 not measured).

use super::{compare, tally_row, Counts, Tally, Thresholds};
use crate::cli::{parse_one_line, real, shown, Rule};
use crate::job::{self, ExitStatus, Failure};
use crate::output::check_folder;
use crate::plot::{file_labels, limits_in, render, RunData};
use crate::report::csv::{for_each_row, read_rows};
use anyhow::{bail, Context};
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Matches rows on collective, datatype, op, placement, size and nranks and
/// judges each candidate against the baseline on the ratio of the medians of
/// busbw and p99, with its 95% interval. Every row of a key is one sample:
/// rounds, -N cycles, runs appended to one file, several files a side (--vs).
#[derive(Parser, Debug)]
#[command(name = "compare", version = crate::job::provenance::version_without_mpi())]
pub struct CompareArgs {
    /// The baseline, then the candidates each judged against it; with --vs,
    /// the baseline's files, pooled
    #[arg(required = true, value_name = "CSV")]
    pub files: Vec<PathBuf>,
    /// A candidate's file; repeat it for several files of one candidate, pooled,
    /// judged against all the CSV files pooled as the baseline
    #[arg(long = "vs", value_name = "CANDIDATE_CSV")]
    pub vs: Vec<PathBuf>,
    /// Exit 1 when a matched row's busbw drops, or its p99 rises, by more than PCT percent
    /// across its whole 95% interval; exit 4 when the interval lies across PCT
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
        } else if counts.not_judged > 0 || counts.inconclusive > 0 {
            ExitStatus::Inconclusive
        } else {
            ExitStatus::Ok
        })
    })
}

/// The files of each side, by index into the labels: the baseline first.
fn sides(args: &CompareArgs) -> anyhow::Result<Vec<Vec<usize>>> {
    let n = args.files.len();
    Ok(if !args.vs.is_empty() {
        vec![(0..n).collect(), (n..n + args.vs.len()).collect()]
    } else if n >= 2 {
        (0..n).map(|i| vec![i]).collect()
    } else {
        bail!(
            "a baseline alone: nothing to compare it with; give \
             `compare BASELINE.csv CANDIDATE.csv`, or `compare BASE1.csv BASE2.csv... --vs CAND1.csv --vs CAND2.csv...`"
        )
    })
}

/// The samples of every key over a side's files, read row by row.
fn tally(paths: &[&PathBuf]) -> anyhow::Result<Tally> {
    let mut tally = Tally::new();
    for path in paths {
        for_each_row(path, |row| {
            tally_row(&mut tally, &row);
            Ok(())
        })?;
    }
    Ok(tally)
}

/// Prints each candidate's table (and draws the runs with --plot); returns
/// how many rows count against the candidates (beyond the thresholds, wrong
/// data) and what could not be told or judged.
pub fn run(args: &CompareArgs) -> anyhow::Result<Counts> {
    check_folder("--plot", args.plot.as_deref(), "pictures")?;
    let sides = sides(args)?;
    let paths: Vec<PathBuf> = args.files.iter().chain(&args.vs).cloned().collect();
    let labels = file_labels(&paths);
    let side_label = |side: &[usize]| {
        side.iter()
            .map(|&i| labels[i].as_str())
            .collect::<Vec<_>>()
            .join("+")
    };
    let tallies: Vec<Tally> = sides
        .iter()
        .map(|side| tally(&side.iter().map(|&i| &paths[i]).collect::<Vec<_>>()))
        .collect::<anyhow::Result<_>>()?;
    let thresholds = Thresholds {
        busbw_drop_pct: args.threshold,
        p99_rise_pct: args.p99_threshold.or(args.threshold),
    };
    let base_label = side_label(&sides[0]);
    let mut counts = Counts::default();
    let mut matched = 0;
    for (t, side) in tallies.iter().zip(&sides).skip(1) {
        let label = side_label(side);
        let c = compare(&tallies[0], t, thresholds)
            .with_context(|| format!("{label} against {base_label}"))?;
        print!("{}", c.render(&base_label, &label));
        counts += c.counts();
        matched += c.deltas.len();
    }
    if let Some(dir) = &args.plot {
        let runs: Vec<RunData> = paths
            .iter()
            .zip(&labels)
            .map(|(p, label)| Ok(RunData::from_rows(label, read_rows(p)?)))
            .collect::<anyhow::Result<_>>()?;
        let written = render(&runs, &limits_in(&runs), None, dir)
            .with_context(|| format!("--plot {}", dir.display()))?;
        if let Some(line) = &written.left_out {
            eprintln!("compare: warning: --plot: {line}");
        }
        println!("# {} plots in {}", written.files.len(), dir.display());
    }
    if let Some(line) = noise_not_estimated(&counts) {
        println!("# {line}");
    }
    println!("# {matched} matched rows; {}", verdict(thresholds, &counts));
    Ok(counts)
}

/// Said once: rows judged on medians alone, with no interval.
fn noise_not_estimated(counts: &Counts) -> Option<String> {
    let advice = "(use --rounds 3 or several runs per side)";
    match (counts.unestimated, counts.unestimated_most) {
        (0, _) => None,
        (_, 1) => Some(format!(
            "noise not estimated: one run per side {advice}; judged on the medians alone"
        )),
        (n, _) => Some(format!(
            "noise not estimated for {n} {}: fewer than 3 samples a side {advice}; \
             judged on the medians alone",
            rows(n)
        )),
    }
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
    if counts.inconclusive > 0 {
        parts.push(format!(
            "{} inconclusive (an interval across the threshold: could not tell)",
            counts.inconclusive
        ));
    }
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
        let parse = real(PERCENT);
        let percent = |text: &str| parse(text).map_err(|e| format!("{e:#}"));
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
