//! Command-line pieces that several families share: the size parser and the flag
//! groups that clap `flatten`s into each binary's arguments.

use crate::sizes::parse_size;
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
