//! What a run reports, and the exporters that write it: the nccl-tests table on
//! stdout (`table`), the long-form CSV (`csv`), per-size latency histograms
//! (`hist`), the plots (`plot`) and a progress bar (`progress`). Each exporter is
//! one file behind the `Exporter` trait; the driver hands every exporter the same
//! results.

pub mod csv;
pub mod hist;
pub mod perftest;
pub mod plot;
pub mod progress;
pub mod run;
pub mod table;
pub mod verbs;

use crate::limits::{self, Limit};
use crate::stats::IterStats;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Version of the CSV columns below; bumped whenever a column changes meaning or
/// goes away (new columns at the end keep the version).
pub const SCHEMA_VERSION: u32 = 1;

/// Facts about the whole run, shared by every row.
#[derive(Clone, Debug, Default)]
pub struct RunInfo {
    /// Binary name: "all_reduce_perf".
    pub program: String,
    pub run_id: String,
    pub tool_version: String,
    pub backend: String,
    pub transport: String,
    pub library_version: String,
    pub device: String,
    /// Distinct host names, in order of first rank.
    pub hosts: Vec<String>,
    pub nranks: usize,
    /// nccl-tests' header line: "nThread 1 nGpus 1 minBytes ...".
    pub settings_line: String,
    /// One "#  Rank ..." line per rank.
    pub rank_lines: Vec<String>,
    /// Environment that shapes the result (NCCL_*, OMPI_MCA_*, UCX_*), as K=V.
    pub env: Vec<String>,
    pub iters: usize,
    pub warmup_iters: usize,
    /// -a: how per-rank times were combined.
    pub average: String,
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
    /// How calls were issued: "stream", "blocking" (-z 1) or "graph x N" (-G N).
    pub launch: String,
    /// -C 1: the table's time column shows the CPU time to issue a call.
    pub report_cputime: bool,
}

/// out-of-place or in-place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
    pub measurements: Vec<Measurement>,
}

/// Closing figures of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub wrong_total: u64,
    /// Mean busbw over every measurement, as nccl-tests' "Avg bus bandwidth".
    pub avg_busbw_gbs: f64,
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

/// A family's result as CSV rows: implemented in `report` for each result type,
/// so every `Row` is built here and the CSV exporter serves every family.
pub trait ToRows {
    fn rows(&self, run: &RunInfo) -> Vec<Row>;
}

impl ToRows for SizeResult {
    fn rows(&self, run: &RunInfo) -> Vec<Row> {
        self.measurements
            .iter()
            .map(|m| Row::new(run, self, m))
            .collect()
    }
}

/// One CSV row: one measurement with its run facts. The README documents each
/// column; pandas reads the file with a plain `pd.read_csv(path)`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Row {
    pub schema_version: u32,
    pub run_id: String,
    pub timestamp: String,
    pub tool_version: String,
    pub backend: String,
    pub transport: String,
    pub library_version: String,
    pub device: String,
    pub hosts: String,
    pub nranks: usize,
    pub nnodes: usize,
    pub collective: String,
    pub datatype: String,
    pub redop: String,
    pub root: i64,
    pub placement: String,
    pub size_bytes: u64,
    pub count: u64,
    pub iters: usize,
    pub warmup_iters: usize,
    pub avg_mode: String,
    pub cycle: u64,
    pub time_us: f64,
    pub algbw_gbs: f64,
    pub busbw_gbs: f64,
    pub busbw_factor: f64,
    pub min_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub wrong: Option<u64>,
    pub slowest_rank: usize,
    /// The lowest limit of the run (the one busbw cannot pass); empty: no limit.
    pub limit_name: Option<String>,
    /// That limit per direction, GB/s.
    pub limit_gbs: Option<f64>,
    /// busbw / limit_gbs in percent (100 = the link's data rate).
    pub pct_of_limit: Option<f64>,
    pub env: String,
    pub cpu_us: Option<f64>,
    pub launch: Option<String>,
    /// Verbs bandwidth rows: perftest's BW peak, GB/s.
    pub peak_gbs: Option<f64>,
    /// Verbs bandwidth rows: perftest's MsgRate, million messages per second.
    pub msg_rate_mpps: Option<f64>,
    /// Verbs latency rows: perftest's t_stdev, us.
    pub stdev_us: Option<f64>,
    /// Verbs rows: the pair ("0", "1", ...) or "sum"/"all" over every pair.
    pub pair: Option<String>,
}

impl Row {
    pub fn new(run: &RunInfo, result: &SizeResult, m: &Measurement) -> Row {
        let mut row = Row {
            schema_version: SCHEMA_VERSION,
            run_id: run.run_id.clone(),
            timestamp: m.timestamp.clone(),
            tool_version: run.tool_version.clone(),
            backend: run.backend.clone(),
            transport: run.transport.clone(),
            library_version: run.library_version.clone(),
            device: run.device.clone(),
            hosts: run.hosts.join(";"),
            nranks: run.nranks,
            nnodes: run.hosts.len(),
            collective: result.collective.clone(),
            datatype: result.datatype.clone(),
            redop: result.redop.clone(),
            root: result.root,
            placement: m.placement.name().to_string(),
            size_bytes: result.size_bytes,
            count: result.count,
            iters: run.iters,
            warmup_iters: run.warmup_iters,
            avg_mode: run.average.clone(),
            cycle: result.cycle,
            time_us: m.time_us,
            algbw_gbs: m.algbw_gbs,
            busbw_gbs: m.busbw_gbs,
            busbw_factor: result.busbw_factor,
            min_us: m.latency.min_us,
            p50_us: m.latency.p50_us,
            p99_us: m.latency.p99_us,
            p999_us: m.latency.p999_us,
            max_us: m.latency.max_us,
            wrong: m.wrong,
            slowest_rank: m.slowest_rank,
            limit_name: None,
            limit_gbs: None,
            pct_of_limit: None,
            env: run.env.join(";"),
            cpu_us: m.cpu_us,
            launch: Some(run.launch.clone()),
            peak_gbs: None,
            msg_rate_mpps: None,
            stdev_us: None,
            pair: None,
        };
        row.set_limit(limits::binding(&run.limits));
        row
    }

    /// Fills limit_name, limit_gbs and pct_of_limit: busbw against `limit`, or
    /// all three empty without one.
    pub fn set_limit(&mut self, limit: Option<&Limit>) {
        self.limit_name = limit.map(|l| l.name.clone());
        self.limit_gbs = limit.map(|l| l.gbs);
        self.pct_of_limit = limit.map(|l| limits::percent_of(self.busbw_gbs, l));
    }
}
