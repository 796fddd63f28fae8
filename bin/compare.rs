//! compare: a baseline CSV against candidates (see `fabricbench::compare`).
//! Exit status: 0 no regression, 1 a regression beyond the thresholds, 2 bad input.

use anyhow::Context;
use clap::Parser;
use fabricbench::args::parse_one_line;
use fabricbench::compare::{compare, Thresholds};
use fabricbench::plot::{file_labels, limits_in, render, RunData};
use fabricbench::report::csv::read_rows;
use std::path::PathBuf;
use std::process::ExitCode;

/// Matches rows on collective, datatype, op, placement, size and nranks and
/// prints the busbw and p99 deltas of each candidate against the baseline.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// The reference run
    #[arg(value_name = "BASELINE_CSV")]
    baseline: PathBuf,
    /// Runs to judge against it
    #[arg(required = true, value_name = "CANDIDATE_CSV")]
    candidates: Vec<PathBuf>,
    /// Exit 1 when a matched row's busbw drops, or its p99 rises, by more than PCT percent
    #[arg(long = "threshold", value_name = "PCT", value_parser = percent)]
    threshold: Option<f64>,
    /// A separate bound for the p99 rise (tail latency is noisier than busbw)
    #[arg(long = "p99-threshold", value_name = "PCT", value_parser = percent)]
    p99_threshold: Option<f64>,
    /// Also draw the runs overlaid (PNG and SVG) in DIR
    #[arg(long = "plot", value_name = "DIR")]
    plot: Option<PathBuf>,
}

fn percent(text: &str) -> Result<f64, String> {
    match text.trim_end_matches('%').parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(format!("'{text}' is not a percentage >= 0 (e.g. 5)")),
    }
}

fn main() -> ExitCode {
    let args: Args = match parse_one_line(std::env::args_os()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("compare: error: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(regressions) if regressions > 0 => ExitCode::from(1),
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("compare: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: &Args) -> anyhow::Result<usize> {
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
    let mut regressions = 0;
    let mut matched = 0;
    for (rows, label) in files.iter().zip(&labels).skip(1) {
        let c = compare(&files[0], rows, thresholds)
            .with_context(|| format!("{label} against {}", labels[0]))?;
        print!("{}", c.render(&labels[0], label));
        regressions += c.regressions();
        matched += c.deltas.len();
    }
    if let Some(dir) = &args.plot {
        let runs: Vec<RunData> = files
            .into_iter()
            .zip(&labels)
            .map(|(rows, label)| RunData {
                label: label.clone(),
                rows,
                ..RunData::default()
            })
            .collect();
        let written = render(&runs, &limits_in(&runs), None, dir)
            .with_context(|| format!("--plot {}", dir.display()))?;
        println!("# {} plots in {}", written.len(), dir.display());
    }
    let judged = match (thresholds.busbw_drop_pct, thresholds.p99_rise_pct) {
        (None, None) => "no --threshold given: nothing judged".to_string(),
        (b, p) => format!(
            "{regressions} regressed beyond {}",
            [
                b.map(|t| format!("busbw -{t}%")),
                p.map(|t| format!("p99 +{t}%"))
            ]
            .into_iter()
            .flatten()
            .collect::<Vec<_>>()
            .join(" or ")
        ),
    };
    println!("# {matched} matched rows; {judged}");
    Ok(regressions)
}
