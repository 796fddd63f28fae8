//! What a run reports, and the exporters that write it: the CSV row every family
//! writes and its constructors (`row`, `copy`), the nccl-tests table on stdout
//! (`table`), copy_bw's table (`copy_table`), the long-form CSV and reading it
//! back (`csv`), per-size latency histograms (`hist`) and a progress bar
//! (`progress`); the run's id, time and environment (`run`). Each exporter is one
//! file behind the `Exporter` trait; a family hands every exporter the same results.

pub mod copy;
pub mod copy_table;
pub mod counters;
pub mod csv;
pub mod expected;
pub mod facts;
pub mod hist;
pub mod json;
pub mod json_file;
pub mod perftest;
pub mod perftest_extra;
pub mod perftest_hist;
pub mod perftest_json;
pub mod progress;
pub mod rounds;
pub mod row;
pub mod run;
pub mod table;
pub mod verbs;

pub use row::{Row, ToRows, SCHEMA_VERSION};

use facts::{Average, Devices, Launch, RunBackend};

use crate::limits::Limit;
use crate::stats::{IterStats, SpreadStats};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Facts about the whole run, shared by every row.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    /// Binary name: "all_reduce_perf".
    pub program: String,
    pub run_id: String,
    pub tool_version: String,
    /// What ran the calls; None: the family names none.
    pub backend: Option<RunBackend>,
    pub transport: String,
    pub library_version: String,
    pub device: Devices,
    /// Distinct host names, in order of first rank.
    pub hosts: Vec<String>,
    pub nranks: usize,
    /// Environment that shapes the result (`run::shapes_results`), as K=V.
    pub env: Vec<String>,
    pub iters: usize,
    pub warmup_iters: usize,
    /// -a: how per-rank times were combined; None: they are not (each side of a
    /// verbs test reports its own).
    pub average: Option<Average>,
    /// Whether -c validation ran (the #wrong columns say N/A otherwise).
    pub checked: bool,
    /// Extra header lines of this run (warnings, e.g. a launcher mismatch).
    pub notes: Vec<String>,
    /// Limits busbw is compared with, lowest first; empty: no limit.
    pub limits: Vec<Limit>,
    /// Which limits apply and where they came from ("no limit (...)" when
    /// none), then what detection found, one line per finding.
    pub limits_lines: Vec<String>,
    /// Size results the sweep will produce; None with -N 0 (until interrupted).
    pub planned_results: Option<u64>,
    /// Why this backend runs: "--backend auto: libcuda.so.1 not found on rank 0 ...".
    pub backend_choice: String,
    /// Facts about how the calls were made, one header line each.
    pub details: Vec<String>,
    /// How calls were issued (-z, -G); None: the family does not say.
    pub launch: Option<Launch>,
    /// -C 1: the table's time column shows the CPU time to issue a call.
    pub report_cputime: bool,
    /// -I 1: the table's per-placement i_* columns (nccl-tests' -I layout).
    pub per_iter_timing: bool,
    /// --percentiles 0: each loop timed whole, so no per-iteration figure exists.
    pub timed_whole: bool,
    /// -S 1: the local time at the end of each table line.
    pub report_timestamps: bool,
    /// NCCL_TESTS_MIN_BW: the average busbw (GB/s) the run must reach.
    pub min_busbw_gbs: Option<f64>,
    /// NCCL_TESTS_SPLIT(_MASK): each group's ranks, by group number; empty: one group.
    pub groups: Vec<(usize, Vec<usize>)>,
    /// -M 1: nccl-tests' memory line ("GPU memory usage : Initialization ..."), rank 0.
    pub memory_usage: Option<String>,
    /// Where the fabric counters are read and what they are judged against.
    pub fabric: counters::FabricPlan,
    /// --rounds above 1 or auto: the table prints each line's median once its
    /// rounds are in, not each round's result.
    pub rounds_many: bool,
    /// The run's performance model (`model`); None: no model (`model_line` says why).
    pub model: Option<crate::model::Model>,
    /// The model's header line, or why there is none.
    pub model_line: String,
    /// --expected: the table's expected columns, the model's header line and
    /// the lines explaining large sizes short of expected.
    pub expected_column: bool,
}

impl RunInfo {
    /// The CSV `backend` column: "mpi", "nccl", "verbs", "cuda"; empty if unnamed.
    pub fn backend_name(&self) -> &'static str {
        self.backend.map_or("", RunBackend::name)
    }

    /// The CSV `avg_mode` column: `-a`'s name, or "none".
    pub fn average_name(&self) -> &'static str {
        self.average.map_or("none", Average::name)
    }

    /// The CSV `launch` column: "stream", "graph x3", ...; empty if unsaid.
    pub fn launch_name(&self) -> String {
        self.launch.map_or_else(String::new, Launch::name)
    }
}

/// out-of-place or in-place: where a collective writes its result, as the CSV's
/// `placement` column and a rack spec's `placement` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", try_from = "String")]
pub enum Placement {
    OutOfPlace,
    InPlace,
}

impl Placement {
    pub const BOTH: [Placement; 2] = [Placement::OutOfPlace, Placement::InPlace];
    pub fn name(self) -> &'static str {
        match self {
            Placement::OutOfPlace => "out-of-place",
            Placement::InPlace => "in-place",
        }
    }
}

impl TryFrom<String> for Placement {
    type Error = anyhow::Error;

    fn try_from(name: String) -> anyhow::Result<Placement> {
        Placement::BOTH
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| anyhow::anyhow!("placement '{name}': use out-of-place or in-place"))
    }
}

/// One placement of one size: what was measured.
#[derive(Clone, Debug)]
pub struct Measurement {
    pub placement: Placement,
    /// Combined per-call time (-a), microseconds.
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    /// Wrong elements over all ranks; None when -c 0.
    pub wrong: Option<u64>,
    /// Per-iteration times (max over ranks of each iteration).
    pub latency: IterStats,
    pub histogram: Histogram<u64>,
    /// Rank with the largest mean per-iteration time.
    pub slowest_rank: usize,
    /// UTC time the measurement finished.
    pub timestamp: String,
    /// CPU time to issue one call (nccl-tests' -C figure), microseconds.
    pub cpu_us: Option<f64>,
    /// -c: the ranks whose result held wrong elements, with how many (rank order).
    pub wrong_ranks: Vec<(usize, u64)>,
    /// -I 1: the per-iteration figures nccl-tests reports.
    pub per_iter: Option<PerIteration>,
}

/// One placement's per-iteration times under -I, as nccl-tests reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct PerIteration {
    /// -K: leading iterations left out of `stats`.
    pub skipped: usize,
    /// Of `times` after the skipped ones, seconds.
    pub stats: SpreadStats,
    /// Each iteration's seconds: the max over processes.
    pub times: Vec<f64>,
    /// Each process's seconds per iteration (the max over its GPUs), process order.
    pub per_process: Vec<Vec<f64>>,
}

/// One line of the table: a size of one collective, datatype, op and root.
#[derive(Clone, Debug)]
pub struct SizeResult {
    /// CSV name: "all_reduce".
    pub collective: String,
    pub datatype: String,
    /// "none" where the collective does not reduce.
    pub redop: String,
    /// -1 where the collective has no root.
    pub root: i64,
    pub size_bytes: u64,
    pub count: u64,
    pub busbw_factor: f64,
    /// Which pass of -N this is (0-based).
    pub cycle: u64,
    /// Which round of --rounds measured it (from 1).
    pub round: u32,
    pub measurements: Vec<Measurement>,
    /// NCCL's algorithm and protocol for the timed calls (from its TUNING log); None on mpi.
    pub nccl_algo: Option<String>,
    pub nccl_proto: Option<String>,
    /// Every node's fabric counter deltas over this size (rank 0).
    pub counters: Option<counters::SizeCounters>,
    /// What the performance model expects of this size; None: no model.
    pub expected: Option<crate::model::Expected>,
}

#[cfg(test)]
impl SizeResult {
    /// A float-sum all_reduce row of `size` bytes, round 1, nothing else known.
    pub(crate) fn all_reduce_row(size: u64, measurements: Vec<Measurement>) -> SizeResult {
        SizeResult {
            collective: "all_reduce".into(),
            datatype: "float".into(),
            redop: "sum".into(),
            root: -1,
            size_bytes: size,
            count: size / 4,
            busbw_factor: 1.0,
            cycle: 0,
            round: 1,
            measurements,
            nccl_algo: None,
            nccl_proto: None,
            counters: None,
            expected: None,
        }
    }
}

/// Closing figures of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub wrong_total: u64,
    /// Mean busbw over every measurement, as nccl-tests' "Avg bus bandwidth"
    /// (with --rounds, over each line's median).
    pub avg_busbw_gbs: f64,
    /// --rounds above 1 or auto: each line's median over its rounds.
    pub rounds: Option<rounds::RoundsSummary>,
    /// --min-busbw, judged.
    pub min_busbw: Option<rounds::MinBusbw>,
}

/// NCCL_TESTS_MIN_BW: as nccl-tests, a run fails when its average busbw is
/// below 90% of the minimum; and when the average is no number (a row's busbw
/// NaN or inf), which compares false with any minimum but shows none was met.
pub fn below_min_busbw(avg_gbs: f64, min_gbs: f64) -> bool {
    !(avg_gbs.is_finite() && avg_gbs >= min_gbs * 0.9)
}

/// An output format for one family's results `R` (a collective's `SizeResult` by
/// default). Each is told the run once, every result as it is measured (so a
/// crash keeps the finished ones), and the summary at the end. A family's own
/// header facts are given to its table exporter when it is made.
pub trait Exporter<R: ?Sized = SizeResult> {
    fn start(&mut self, run: &RunInfo) -> anyhow::Result<()>;
    fn record(&mut self, run: &RunInfo, result: &R) -> anyhow::Result<()>;
    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> anyhow::Result<()>;
    /// A size is about to be measured (for the progress bar).
    fn begin_size(&mut self, _size_bytes: u64) {}
}
