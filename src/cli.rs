//! Command-line pieces that several families share: the size parser and the flag
//! groups that clap `flatten`s into each binary's arguments.

use crate::job::UsageError;
use crate::sizes::parse_size;
use clap::Parser;
use serde::Serialize;
use std::path::PathBuf;

/// A size flag's value: bytes, with binary K, M, G suffixes (1K = 1024).
pub fn size_arg(text: &str) -> Result<u64, String> {
    parse_size(text)
}

/// `--csv PATH` and `--append`: where rows go; a file is never overwritten.
#[derive(clap::Args, Debug, Clone, Default, Serialize)]
pub struct CsvArgs {
    /// Append one row per measured size to this CSV (never overwritten)
    #[arg(long = "csv")]
    pub csv: Option<PathBuf>,
    /// With --csv: add rows to an existing file of the same schema
    #[arg(long = "append", requires = "csv")]
    pub append: bool,
}

/// `--all-pairs` and how a slow pair is judged.
#[derive(clap::Args, Debug, Clone, Serialize)]
pub struct AllPairsArgs {
    /// Measure every pair of ranks in rounds of disjoint pairs; --csv gets the N x N matrices and a heatmap
    #[arg(long = "all-pairs")]
    pub all_pairs: bool,
    /// With --all-pairs: a pair whose bandwidth is below this fraction of the median is slow
    #[arg(long = "slow-fraction", default_value_t = 0.9)]
    pub slow_fraction: f64,
    /// With --all-pairs: a pair whose latency is above this multiple of the lowest is slow
    #[arg(long = "slow-latency", default_value_t = 2.0)]
    pub slow_latency: f64,
}

/// `--csv PATH`: refused when the file exists without `--append` (runs are never overwritten).
pub fn check_csv_target(csv: Option<&std::path::Path>, append: bool) -> Result<(), UsageError> {
    match csv {
        Some(path) if path.exists() && !append => Err(UsageError(format!(
            "--csv {}: the file exists and runs are never overwritten; choose a new path or add --append",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Parses a command line, turning clap's multi-line errors into one line.
/// `--help` and `--version` print and exit 0 as usual.
pub fn parse_one_line<P, I, T>(argv: I) -> Result<P, UsageError>
where
    P: Parser,
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    P::try_parse_from(argv).map_err(|e| match e.kind() {
        clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => e.exit(),
        _ => UsageError(invalid_choice(&e).unwrap_or_else(|| one_line(&e))),
    })
}

/// clap's message up to its usage block, on one line (a missing argument is named
/// on the line after the first).
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let message: Vec<&str> = text
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    format!(
        "{} (see --help)",
        message.join(" ").trim_start_matches("error: ")
    )
}

/// A value outside a flag's fixed choices, in the house style: "--backend tcp: use
/// mpi, nccl or auto" (clap's own message spans lines and lists them in brackets).
fn invalid_choice(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let (
        Some(ContextValue::String(arg)),
        Some(ContextValue::String(value)),
        Some(ContextValue::Strings(valid)),
    ) = (
        e.get(ContextKind::InvalidArg),
        e.get(ContextKind::InvalidValue),
        e.get(ContextKind::ValidValue),
    )
    else {
        return None;
    };
    let flag = arg.split_whitespace().next().unwrap_or(arg);
    let choices = match valid.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => return None,
    };
    Some(format!("{flag} {value}: use {choices}"))
}
