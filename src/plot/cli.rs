//! The `plot` binary: the charts of one or more fabricbench CSVs. Exit status 0,
//! or 2 for bad input (arguments or files).

use super::{apply_limits, limits_in, load_runs, render};
use crate::cli::parse_one_line;
use crate::cli::size_arg;
use crate::job::{self, ExitStatus, Failure};
use crate::limits::{parse_limit, Limit};
use crate::output::check_folder;
use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::process::ExitCode;

/// Draws, per collective, busbw vs size, p50/p99/p99.9 vs size and the latency
/// distribution at one size, as PNG and SVG.
#[derive(Parser, Debug)]
#[command(name = "plot", version = crate::job::provenance::version_without_mpi())]
pub struct PlotArgs {
    /// CSV files written by the benchmarks' --csv
    #[arg(required = true, value_name = "CSV")]
    pub csv: Vec<PathBuf>,
    /// Directory to write the pictures to
    #[arg(short = 'o', long = "out", value_name = "DIR", default_value = "plots")]
    pub out: PathBuf,
    /// A directory given to the benchmarks' --hist: full latency distributions
    /// for the distribution chart (repeatable)
    #[arg(long = "hist", value_name = "DIR")]
    pub hist: Vec<PathBuf>,
    /// Message size of the distribution chart (default: the largest measured)
    #[arg(long = "size", value_name = "BYTES", value_parser = size_arg, allow_hyphen_values = true)]
    pub size: Option<u64>,
    /// Limits to draw and take % of limit against, instead of those in the CSVs (repeatable)
    #[arg(long = "limit", value_name = "NAME|NUMBER[GB/s|Gb/s]", value_parser = parse_limit, allow_hyphen_values = true)]
    pub limit: Vec<Limit>,
}

pub fn main() -> ExitCode {
    job::tool_main("plot", || {
        let args: PlotArgs = parse_one_line(std::env::args_os())?;
        // A file that cannot be drawn is bad input, as a bad flag is.
        run(&args).map_err(|e| Failure::Usage(format!("{e:#}")))?;
        Ok(ExitStatus::Ok)
    })
}

/// Draws the charts and prints the path of each picture written.
pub fn run(args: &PlotArgs) -> anyhow::Result<()> {
    check_folder("-o", Some(&args.out), "pictures")?;
    let mut runs = load_runs(&args.csv)?;
    for dir in &args.hist {
        if !dir.is_dir() {
            anyhow::bail!("--hist {}: not a directory", dir.display());
        }
        let mut found = 0;
        for run in &mut runs {
            found += run.load_histograms(dir)?;
        }
        if found == 0 {
            eprintln!(
                "plot: warning: --hist {}: no .hgrm file of these runs (looked for <run_id>/<name>.hgrm)",
                dir.display()
            );
        }
    }
    let limits = if args.limit.is_empty() {
        limits_in(&runs)
    } else {
        apply_limits(&mut runs, &args.limit);
        args.limit.clone()
    };
    let written = render(&runs, &limits, args.size, &args.out)
        .with_context(|| format!("-o {}", args.out.display()))?;
    if let Some(line) = &written.left_out {
        eprintln!("plot: warning: {line}");
    }
    for path in written.files {
        println!("{}", path.display());
    }
    Ok(())
}
