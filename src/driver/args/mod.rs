//! The collective binaries' flags, spelled, defaulted and meant as in nccl-tests,
//! and their validation into a `Plan`. Every problem is one line naming the flag
//! and the fix.

use crate::backend::nccl::options::{NcclFlags, NcclOptions};
use crate::backend::BackendKind;
use crate::cli::{parse_with, real, size_arg, whole, AllPairsArgs, CountersArgs, CsvArgs, Rule};
use crate::collective::Collective;
use crate::datatype::{datatype_values, op_values, DataType, RedOp, ALL_VALUE};
use crate::limits::{parse_limit, Limit};
use crate::output::{check_file, check_folder, csv_flag, Outputs, COUNTERS_FLAG};
use crate::sizes::Step;
use clap::builder::PossibleValuesParser;
use clap::{CommandFactory, Parser};
use serde::Serialize;
use std::path::PathBuf;

use crate::job::usage;
pub use crate::job::UsageError;
pub use crate::report::facts::{Average, Launch};

pub mod env;
pub mod reporting;
pub mod rounds;
use env::TestsEnv;
use reporting::{ReportArgs, Reporting};
pub use rounds::{Rounds, RoundsArgs, RoundsPlan};

/// -g: more GPUs than any node holds is a typo (and would overflow rank counts).
const MAX_GPUS_PER_PROCESS: usize = 1024;

/// -u: the padding (8 bytes an element of misalignment) stays far below any buffer.
const MAX_UNALIGN: usize = 1 << 20;
/// --model-latency: 0 (bandwidth alone) to a second a message, beyond which no
/// fabric is being described.
const MODEL_LATENCY: Rule = Rule {
    least: 0.0,
    above: false,
    most: 1e6,
    what: "a latency in microseconds",
    example: "5",
};

#[derive(Parser, Debug, Clone, Serialize)]
// -V is nccl-tests' --device_cta_count: --version keeps its long name only.
#[command(version = crate::job::provenance::version(), about, disable_help_flag = false, disable_version_flag = true)]
pub struct CollArgs {
    /// Print version
    #[arg(long = "version", action = clap::ArgAction::Version)]
    #[serde(skip)]
    pub version: (),
    /// Smallest message size in bytes (K, M, G suffixes: 1K = 1024)
    #[arg(short = 'b', long = "minbytes", default_value = "32M", value_parser = size_arg, allow_hyphen_values = true)]
    pub minbytes: u64,
    /// Largest message size in bytes
    #[arg(short = 'e', long = "maxbytes", default_value = "32M", value_parser = size_arg, allow_hyphen_values = true)]
    pub maxbytes: u64,
    /// Multiply the size by this factor at each step (an integer > 1)
    #[arg(short = 'f', long = "stepfactor", value_parser = whole::<u64>(2), allow_hyphen_values = true)]
    pub stepfactor: Option<u64>,
    /// Add this many bytes at each step (used when -f is not given)
    #[arg(short = 'i', long = "stepbytes", value_parser = size_arg, allow_hyphen_values = true)]
    pub stepbytes: Option<u64>,
    /// Timed iterations per size
    #[arg(short = 'n', long = "iters", default_value_t = 20, value_parser = whole::<usize>(1), allow_hyphen_values = true)]
    pub iters: usize,
    /// Untimed warm-up iterations per size
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 1, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub warmup_iters: usize,
    /// Validate results this many times per size (0 = no check)
    #[arg(short = 'c', long = "check", default_value_t = 1, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub check: usize,
    /// Reduction operation of the reducing collectives
    #[arg(short = 'o', long = "op", default_value = "sum", value_parser = PossibleValuesParser::new(op_values()))]
    pub op: String,
    /// Element type
    #[arg(short = 'd', long = "datatype", default_value = "float", value_parser = PossibleValuesParser::new(datatype_values()))]
    pub datatype: String,
    /// Root rank of rooted collectives (-1 = every rank in turn)
    #[arg(
        short = 'r',
        long = "root",
        default_value_t = 0,
        value_parser = whole::<i64>(-1),
        allow_hyphen_values = true
    )]
    pub root: i64,
    /// Time reported across ranks: 0 = rank 0, 1 = average, 2 = minimum, 3 = maximum
    #[arg(short = 'a', long = "average", default_value_t = 1, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub average: u8,
    /// Run the whole sweep this many times (0 = until interrupted)
    #[arg(short = 'N', long = "run_cycles", default_value_t = 1, value_parser = whole::<u64>(0), allow_hyphen_values = true)]
    pub run_cycles: u64,
    /// Abort when one call, or one exchange of the setup, has not finished after this many seconds (0 = never)
    #[arg(short = 'T', long = "timeout", default_value_t = 600, value_parser = whole::<u64>(0), allow_hyphen_values = true)]
    pub timeout: u64,
    /// Where the collectives run: mpi (host memory), nccl (GPU memory) or auto
    #[arg(long = "backend", value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    #[command(flatten)]
    #[serde(flatten)]
    pub output: CsvArgs,
    #[command(flatten)]
    #[serde(flatten)]
    pub counters: CountersArgs,
    /// Link limit busbw is compared with (repeatable): a name (nvlink4, pcie5x16,
    /// ib-ndr, 400g, ...; see README) or a per-direction number, 50GB/s or 400Gb/s.
    /// Without it, limits are detected from sysfs
    #[arg(long = "limit", value_name = "NAME|NUMBER[GB/s|Gb/s]", value_parser = parse_limit, allow_hyphen_values = true)]
    pub limit: Vec<Limit>,
    /// The table's expected busbw and percent-of-expected columns, the model's
    /// header line, and a line explaining each large size short of expected
    /// (docs/model.md); the CSV and JSON carry the figures without it
    #[arg(long = "expected")]
    pub expected: bool,
    /// The performance model's per-message latency in microseconds; without
    /// it, calibrated from the run's latency-bound sizes
    #[arg(long = "model-latency", value_name = "US", value_parser = real(MODEL_LATENCY), allow_hyphen_values = true)]
    pub model_latency: Option<f64>,
    /// Root of the sysfs tree that limit detection reads (a copy, or a test fixture)
    #[arg(long = "sysfs-root", value_name = "DIR", default_value = "/")]
    pub sysfs_root: PathBuf,
    /// After the run, write busbw, latency and latency-distribution plots (PNG and SVG) to DIR/<run_id>/
    #[arg(long = "plot", value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Write each size's per-iteration latency histogram (.hgrm, microseconds) to DIR/<run_id>/
    #[arg(long = "hist", value_name = "DIR")]
    pub hist: Option<PathBuf>,
    /// GPUs each process drives through grouped calls (nccl backend)
    #[arg(short = 'g', long = "ngpus", default_value_t = 1, value_parser = whole::<usize>(1), allow_hyphen_values = true)]
    pub ngpus: usize,
    /// How the timed calls are issued: 0 back to back; 1 each call completed on every
    /// rank, then a barrier; 2 each call completed before the next, no barrier; 3 each
    /// iteration completed and timed on its own, with a barrier between iterations
    /// outside the timed time
    #[arg(short = 'z', long = "blocking", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub blocking: u8,
    /// Calls per timed iteration, issued as one group (nccl-tests' -m)
    #[arg(short = 'm', long = "agg_iters", default_value_t = 1, value_parser = whole::<usize>(1), allow_hyphen_values = true)]
    pub agg_iters: usize,
    /// Capture the timed calls in a CUDA graph and launch it this many times (0 = no graph; nccl backend)
    #[arg(short = 'G', long = "cudagraph", default_value_t = 0, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub cudagraph: usize,
    /// 1: report the CPU time to issue each call in the time column instead of its completion time
    #[arg(short = 'C', long = "report_cputime", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub report_cputime: u8,
    /// libnccl.so.2 to load (the file, or its directory); searched for when not given
    #[arg(long = "nccl-lib", env = "FABRICBENCH_NCCL_LIB", value_name = "PATH")]
    #[serde(skip)] // a per-node path that may differ between ranks
    pub nccl_lib: Option<PathBuf>,
    /// Misalign the send and receive buffers by this many elements (nccl-tests' -u)
    #[arg(short = 'u', long = "unalign", default_value_t = 0, value_parser = whole::<usize>(0), allow_hyphen_values = true)]
    pub unalign: usize,
    /// 1: report the memory the run used (GPU memory on nccl, host memory on mpi)
    #[arg(short = 'M', long = "memory", default_value_t = 0, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub memory: u8,
    // nccl-tests' GPU-only flags: -t -p -y -R -x -D -V.
    #[command(flatten)]
    #[serde(flatten)]
    pub gpu: NcclFlags,
    // --all-pairs: sendrecv_perf only.
    #[command(flatten)]
    #[serde(flatten)]
    pub pairs: AllPairsArgs,
    /// With --all-pairs: one netdev a rail (eth1,eth2): rank i of each node measures rail i's pairs over TCP on that netdev, one matrix a rail
    #[arg(long = "rails", value_name = "NETDEV,...", value_delimiter = ',', value_parser = netdev_name, requires = "all_pairs")]
    pub rails: Vec<String>,
    /// With --all-pairs: pair every rank with every rank (by default a job on several nodes pairs the first rank of each node)
    #[arg(long = "rank-pairs", requires = "all_pairs", conflicts_with = "rails")]
    pub rank_pairs: bool,
    // -J, -I, -K, -S.
    #[command(flatten)]
    #[serde(flatten)]
    pub report: ReportArgs,
    // --rounds, --rounds-tolerance, --max-rounds, --rounds-time, --min-busbw.
    #[command(flatten)]
    #[serde(flatten)]
    pub rounds: RoundsArgs,
}

/// `--backend`: a backend, or `auto` (nccl when every rank can run it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendChoice {
    Mpi,
    Nccl,
    Auto,
}

impl BackendChoice {
    /// The backend asked for; None for `auto`.
    pub fn kind(self) -> Option<BackendKind> {
        match self {
            BackendChoice::Mpi => Some(BackendKind::Mpi),
            BackendChoice::Nccl => Some(BackendKind::Nccl),
            BackendChoice::Auto => None,
        }
    }
}

/// Which roots to run (`-r`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Roots {
    One(usize),
    Every,
}

/// How `-d` or `-o` chose: one named, which a backend that lacks it refuses, or
/// `all`, of which the backend's run is left with the ones every rank supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NamedOrAll {
    Named,
    All,
}

impl NamedOrAll {
    fn of(value: &str) -> NamedOrAll {
        match value {
            ALL_VALUE => NamedOrAll::All,
            _ => NamedOrAll::Named,
        }
    }
}

/// The validated command line.
#[derive(Clone, Debug)]
pub struct Plan {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub step: Step,
    pub iters: usize,
    pub warmup_iters: usize,
    pub check: usize,
    pub datatypes: Vec<DataType>,
    /// -d: one named, or `all`.
    pub datatype_selection: NamedOrAll,
    pub ops: Vec<RedOp>,
    /// -o: one named, or `all`.
    pub op_selection: NamedOrAll,
    pub roots: Roots,
    pub average: Average,
    pub run_cycles: u64,
    pub timeout_s: u64,
    /// -g: ranks (GPUs) per process.
    pub gpus_per_process: usize,
    /// -z, -G: how the timed calls are issued.
    pub launch: Launch,
    /// -m: calls per timed iteration, issued as one group.
    pub agg_iters: usize,
    /// -C 1: the time column shows the CPU time to issue a call.
    pub report_cputime: bool,
    /// -J, -I, -K, -S.
    pub reporting: Reporting,
    /// NCCL_TESTS_MIN_BW, NCCL_TESTS_SPLIT(_MASK).
    pub tests_env: TestsEnv,
    /// -u: elements the buffers are misaligned by.
    pub unalign: usize,
    /// -M 1: report the memory the run used.
    pub memory_report: bool,
    /// -t -p -y -R -x -D -V.
    pub gpu: NcclOptions,
    /// --rounds and --min-busbw.
    pub rounds: RoundsPlan,
}

impl CollArgs {
    /// Checks everything that does not depend on the job (rank count, memory).
    pub fn plan(&self) -> Result<Plan, UsageError> {
        if self.minbytes == 0 {
            return Err(usage(
                "-b/--minbytes 0: sizes must be at least 1 byte; use e.g. -b 8",
            ));
        }
        if self.maxbytes == 0 {
            return Err(usage(
                "-e/--maxbytes 0: sizes must be at least 1 byte; use e.g. -e 128M",
            ));
        }
        if self.minbytes > self.maxbytes {
            return Err(usage(format!(
                "-b/--minbytes {} is larger than -e/--maxbytes {}: give -b <= -e",
                self.minbytes, self.maxbytes
            )));
        }
        let step = match (self.stepfactor, self.stepbytes) {
            (Some(_), Some(_)) => {
                return Err(usage("-f/--stepfactor and -i/--stepbytes both given: use one of them"))
            }
            (Some(f), None) if f > 1 => Step::Factor(f),
            (Some(f), None) => {
                return Err(usage(format!(
                    "-f/--stepfactor {f}: must be an integer > 1 (e.g. -f 2); for a linear sweep use -i/--stepbytes"
                )))
            }
            (None, Some(0)) => return Err(usage("-i/--stepbytes 0: must be at least 1 byte")),
            (None, Some(b)) => Step::Bytes(b),
            (None, None) => Step::Bytes(1 << 20),
        };
        if self.iters == 0 {
            return Err(usage(
                "-n/--iters 0: at least one timed iteration is needed; use e.g. -n 20",
            ));
        }
        if self.agg_iters == 0 {
            return Err(usage(
                "-m/--agg_iters 0: each timed iteration makes at least one call; use e.g. -m 1",
            ));
        }
        let (datatype_selection, op_selection) =
            (NamedOrAll::of(&self.datatype), NamedOrAll::of(&self.op));
        let datatypes = match datatype_selection {
            NamedOrAll::All => DataType::ALL.to_vec(),
            NamedOrAll::Named => vec![self
                .datatype
                .parse()
                .map_err(|e| usage(format!("-d/--datatype: {e}")))?],
        };
        let ops = match op_selection {
            NamedOrAll::All => RedOp::ALL.to_vec(),
            NamedOrAll::Named => vec![self
                .op
                .parse()
                .map_err(|e| usage(format!("-o/--op: {e}")))?],
        };
        let roots = match self.root {
            -1 => Roots::Every,
            r if r >= 0 => Roots::One(r as usize),
            r => {
                return Err(usage(format!(
                    "-r/--root {r}: use a rank number, or -1 for every rank in turn"
                )))
            }
        };
        let average = match self.average {
            0 => Average::Rank0,
            1 => Average::Mean,
            2 => Average::Min,
            3 => Average::Max,
            a => {
                return Err(usage(format!(
                    "-a/--average {a}: use 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)"
                )))
            }
        };
        if self.ngpus == 0 {
            return Err(usage(
                "-g/--ngpus 0: each process drives at least one GPU; use e.g. -g 1",
            ));
        }
        let flag01 = |name: &str, v: u8| match v {
            0 | 1 => Ok(v == 1),
            _ => Err(usage(format!("{name} {v}: use 0 or 1"))),
        };
        let report_cputime = flag01("-C/--report_cputime", self.report_cputime)?;
        let launch = match (self.blocking, self.cudagraph) {
            (0, 0) => Launch::Stream,
            (0, n) => Launch::Graph(n),
            (z @ 1..=3, n) if n > 0 => return Err(usage(format!(
                "-z/--blocking {z} and -G/--cudagraph: a captured graph cannot wait between calls; use one of them",
            ))),
            (1, _) => Launch::Blocking,
            (2, _) => Launch::Synced,
            (3, _) => Launch::BarrierOutside,
            (z, _) => return Err(usage(format!(
                "-z/--blocking {z}: use 0 (back to back), 1 (sync and barrier after each call), 2 (sync after each call) or 3 (sync each iteration, barrier outside the timed time)"
            ))),
        };
        self.check_outputs()?;
        if self.ngpus > MAX_GPUS_PER_PROCESS {
            return Err(usage(format!(
                "-g/--ngpus {}: a process drives at most {MAX_GPUS_PER_PROCESS} GPUs; use e.g. -g 8",
                self.ngpus
            )));
        }
        if self
            .iters
            .checked_mul(self.cudagraph.max(1))
            .and_then(|calls| calls.checked_mul(self.agg_iters))
            .is_none()
        {
            // Name only the factors the user set: -G counts when it is on.
            let graph = match self.cudagraph {
                0 => String::new(),
                g => format!("-G/--cudagraph {g} x "),
            };
            return Err(usage(format!(
                "{graph}-n/--iters {} x -m/--agg_iters {}: more timed calls than can be counted; lower one of them",
                self.iters, self.agg_iters
            )));
        }
        let reporting = self.report.plan(self.iters, launch, self.hist.is_some())?;
        let rounds = self.rounds.plan(self.run_cycles, self.pairs.all_pairs)?;
        let tests_env = TestsEnv::from_env()?;
        let memory_report = flag01("-M/--memory", self.memory)?;
        if self.unalign > MAX_UNALIGN {
            return Err(usage(format!(
                "-u/--unalign {}: misalign by at most {MAX_UNALIGN} elements; use e.g. -u 1",
                self.unalign
            )));
        }
        let gpu = self.gpu.options()?;
        if gpu.stream_null && self.cudagraph > 0 {
            return Err(usage(
                "-y/--stream_null 1 and -G/--cudagraph: CUDA cannot capture the NULL stream; use one of them",
            ));
        }
        Ok(Plan {
            min_bytes: self.minbytes,
            max_bytes: self.maxbytes,
            step,
            iters: self.iters,
            warmup_iters: self.warmup_iters,
            check: self.check,
            datatypes,
            datatype_selection,
            ops,
            op_selection,
            roots,
            average,
            run_cycles: self.run_cycles,
            timeout_s: self.timeout,
            gpus_per_process: self.ngpus,
            launch,
            agg_iters: self.agg_iters,
            report_cputime,
            reporting,
            tests_env,
            unalign: self.unalign,
            memory_report,
            gpu,
            rounds,
        })
    }
}

impl CollArgs {
    /// Where each output goes, and that no two of them are one file (-J's own
    /// rules are the reporting plan's).
    fn check_outputs(&self) -> Result<(), UsageError> {
        let csv = self.output.csv.as_deref();
        let counters = self.counters.counters.as_deref();
        check_file(&csv_flag(self.output.append), csv)?;
        check_file(&COUNTERS_FLAG, counters)?;
        check_folder("--plot", self.plot.as_deref(), "pictures")?;
        check_folder("--hist", self.hist.as_deref(), "histograms")?;
        let heatmap = csv
            .filter(|_| self.pairs.all_pairs)
            .map(crate::output::heatmap_of);
        Outputs::new()
            .file("--csv", csv)
            .file("--counters", counters)
            .file("-J/--output_file", self.report.output_file.as_deref())
            .file("the --all-pairs heatmap", heatmap.as_deref())
            .folder("--plot", self.plot.as_deref())
            .folder("--hist", self.hist.as_deref())
            .distinct()
    }
}

impl Plan {
    /// The roots to run on a job of `nranks`, or the `-r` error.
    pub fn root_list(&self, nranks: usize, rooted: bool) -> Result<Vec<usize>, UsageError> {
        match self.roots {
            _ if !rooted => Ok(vec![0]),
            Roots::Every => Ok((0..nranks).collect()),
            Roots::One(r) if r < nranks => Ok(vec![r]),
            Roots::One(r) => Err(usage(format!(
                "-r/--root {r}: out of range for {nranks} ranks; use 0..{} or -1 for every rank",
                nranks - 1
            ))),
        }
    }
}

/// The command line of `coll`'s binary: the shared flags, less those it would
/// ignore (-o without a reduction, -r without a root) or refuse (--all-pairs
/// but on sendrecv_perf), which it still accepts, as nccl-tests does, but does
/// not offer.
pub fn command(coll: &dyn Collective) -> clap::Command {
    let name = format!("{}_perf", coll.id().as_str());
    let about = format!(
        "{} bandwidth and latency, as nccl-tests' {name} measures them: on the mpi backend \
         (host memory, MPI's collectives) or the nccl backend (GPU memory, NCCL)",
        coll.name()
    );
    let pairs = coll.pairs();
    let hidden = [
        ("op", !coll.reduces()),
        ("root", !coll.rooted()),
        ("all_pairs", !pairs),
        ("slow_fraction", !pairs),
        ("slow_latency", !pairs),
        ("rails", !pairs),
        ("rank_pairs", !pairs),
    ];
    hidden
        .into_iter()
        .filter(|(_, hide)| *hide)
        .fold(CollArgs::command(), |cmd, (id, _)| {
            cmd.mut_arg(id, |a| a.hide(true))
        })
        .name(name.clone())
        .bin_name(name)
        .about(about)
}

/// A network interface's name as Linux allows it (1 to 15 bytes, no '/',
/// blank or ':'), for --rails.
fn netdev_name(text: &str) -> Result<String, String> {
    let allowed = |c: char| c.is_ascii_graphic() && !matches!(c, '/' | ':');
    match text.len() {
        1..=15 if text.chars().all(allowed) && text != "." && text != ".." => Ok(text.to_string()),
        _ => Err(format!(
            "'{text}' is not a network interface name (1 to 15 characters, no '/', ':' or blank): give the rails' netdevs, e.g. --rails eth1,eth2"
        )),
    }
}

/// Parses `coll`'s command line, turning clap's multi-line errors into one
/// line. `--help` and `--version` print and exit 0 as usual.
pub fn parse_args<I, T>(coll: &dyn Collective, argv: I) -> Result<CollArgs, UsageError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: CollArgs = parse_with(command(coll), argv)?;
    if let Some(twice) = args
        .rails
        .iter()
        .enumerate()
        .find_map(|(i, r)| args.rails[..i].contains(r).then_some(r))
    {
        return Err(usage(format!(
            "--rails {}: {twice} is given twice; give each rail's netdev once, rail 1 first",
            args.rails.join(",")
        )));
    }
    if args.pairs.all_pairs && !coll.pairs() {
        return Err(usage(format!(
            "--all-pairs: {}_perf has no pair mode; use sendrecv_perf --all-pairs (or ib_write_bw/ib_write_lat)",
            coll.id().as_str()
        )));
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::AllReduce;

    fn plan(args: &[&str]) -> Result<Plan, UsageError> {
        let mut argv = vec!["all_reduce_perf"];
        argv.extend_from_slice(args);
        parse_args(&AllReduce, argv)?.plan()
    }

    fn err(args: &[&str]) -> String {
        plan(args).unwrap_err().0
    }

    #[test]
    fn defaults_are_nccl_tests_defaults() {
        let p = plan(&[]).unwrap();
        assert_eq!((p.min_bytes, p.max_bytes), (32 << 20, 32 << 20));
        assert_eq!((p.iters, p.warmup_iters, p.check), (20, 1, 1));
        assert_eq!(p.datatypes, vec![DataType::Float]);
        assert_eq!(p.ops, vec![RedOp::Sum]);
        assert_eq!(p.average, Average::Mean);
        assert_eq!(p.roots, Roots::One(0));
        assert_eq!(p.step, Step::Bytes(1 << 20));
        assert_eq!(p.gpus_per_process, 1);
        assert!(p.launch == Launch::Stream && !p.report_cputime);
        assert_eq!(p.launch.graph_launches(), 0);
    }

    #[test]
    fn gpu_flags_as_nccl_tests_spells_them() {
        let p = plan(&["-g", "4", "-G", "10", "-C", "1"]).unwrap();
        assert_eq!((p.gpus_per_process, p.launch), (4, Launch::Graph(10)));
        assert!(p.report_cputime && p.launch != Launch::Blocking);
        assert_eq!(plan(&["--blocking", "1"]).unwrap().launch, Launch::Blocking);
        let args = parse_args(&AllReduce, ["x", "--nccl-lib", "/opt/nccl/lib"]).unwrap();
        assert_eq!(
            args.nccl_lib.as_deref(),
            Some(std::path::Path::new("/opt/nccl/lib"))
        );
        // Not part of the arguments ranks must agree on: the path may differ per node.
        assert!(!serde_json::to_string(&args).unwrap().contains("nccl"));
    }

    #[test]
    fn long_and_short_flags() {
        let p = plan(&[
            "-b",
            "8",
            "--maxbytes",
            "1M",
            "-f",
            "2",
            "-d",
            "all",
            "-o",
            "all",
            "-r",
            "-1",
            "-a",
            "3",
        ])
        .unwrap();
        assert_eq!(
            (p.min_bytes, p.max_bytes, p.step),
            (8, 1 << 20, Step::Factor(2))
        );
        assert_eq!(p.datatypes.len(), 12);
        assert_eq!(p.ops.len(), 6);
        assert_eq!(p.roots, Roots::Every);
        assert_eq!(p.average, Average::Max);
    }

    #[test]
    fn bad_input_names_the_flag() {
        assert!(err(&["-b", "1M", "-e", "1K"])
            .starts_with("-b/--minbytes 1048576 is larger than -e/--maxbytes 1024"));
        assert!(err(&["-b", "0"]).starts_with("-b/--minbytes 0"));
        assert!(err(&["-b", "12Q"]).contains("--minbytes"));
        assert!(err(&["-f", "1"]).starts_with("-f/--stepfactor 1: must be an integer > 1"));
        assert!(err(&["-f", "1.5"]).starts_with("-f/--stepfactor"));
        assert_eq!(
            err(&["-d", "int7"]),
            "-d/--datatype int7: use int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2 or all"
        );
        assert_eq!(
            err(&["-o", "xor"]),
            "-o/--op xor: use sum, prod, max, min, avg, mulsum or all"
        );
        assert_eq!(
            plan(&["-d", "bf16"]).unwrap().datatypes,
            [DataType::Bfloat16]
        );
        assert!(err(&["-a", "7"]).starts_with("-a/--average 7"));
        assert!(err(&["-n", "0"]).starts_with("-n/--iters 0"));
        assert!(err(&["--backend", "tcp"]).starts_with("--backend tcp"));
        assert!(err(&["--bogus"]).contains("--bogus"));
        assert!(err(&["--limit", "nvlink9"]).contains("--limit"));
        assert!(err(&["--limit", "400gb/s"]).contains("Gb/s (bits)"));
        assert!(err(&["--plot", "Cargo.toml"]).starts_with(
            "--plot Cargo.toml: is a file, not a folder; give a folder for the pictures"
        ));
        assert!(err(&["-g", "0"]).starts_with("-g/--ngpus 0"));
        assert!(err(&["-z", "4"]).starts_with("-z/--blocking 4: use 0 (back to back)"));
        assert_eq!(plan(&["-z", "2"]).unwrap().launch, Launch::Synced);
        assert_eq!(plan(&["-z", "3"]).unwrap().launch, Launch::BarrierOutside);
        assert!(err(&["-z", "3", "-G", "2"]).starts_with("-z/--blocking 3 and -G/--cudagraph"));
        assert_eq!(plan(&["-m", "4"]).unwrap().agg_iters, 4);
        assert!(err(&["-m", "0"]).starts_with("-m/--agg_iters 0"));
        assert!(err(&["-C", "7"]).starts_with("-C/--report_cputime 7"));
        assert!(err(&["-z", "1", "-G", "5"]).starts_with("-z/--blocking 1 and -G/--cudagraph"));
        assert!(!err(&["--bogus"]).contains('\n'));
    }

    #[test]
    fn negative_and_fractional_numbers_name_their_flag() {
        for (args, expected) in [
            (&["-n", "-1"][..], "-n/--iters -1: use a whole number >= 1"),
            (&["-n", "0"], "-n/--iters 0: at least one timed iteration is needed"),
            (&["-n", "x"], "-n/--iters: 'x' is not a number; use a whole number >= 1"),
            (&["-w", "-1"], "-w/--warmup_iters -1: use a whole number >= 0"),
            (&["-c", "-1"], "-c/--check -1: use a whole number >= 0"),
            (&["-T", "-1"], "-T/--timeout -1: use a whole number >= 0"),
            (&["-N", "-1"], "-N/--run_cycles -1: use a whole number >= 0"),
            (&["-g", "-2"], "-g/--ngpus -2: use a whole number >= 1"),
            (&["-a", "300"], "-a/--average 300: too large; use a whole number from 0 to 255"),
            (&["-n", "99999999999999999999"], "-n/--iters 99999999999999999999: too large; use a whole number from 1 to 18446744073709551615"),
            (&["-n", "1e300"], "-n/--iters 1e300: too large; use a whole number from 1 to 18446744073709551615"),
            (&["-f", "1e23"], "-f/--stepfactor 1e23: too large; use a whole number from 2 to 18446744073709551615"),
            (&["-f", "-2"], "-f/--stepfactor -2: use a whole number >= 2"),
            (&["-r", "1.5"], "-r/--root 1.5: not a whole number; use a whole number >= -1"),
            (&["-w", "-inf"], "-w/--warmup_iters: '-inf' is not a number; use a whole number >= 0"),
            (&["-b", "-8"], "-b/--minbytes: '-8' is negative: a size is a whole number of bytes, e.g. 8 or 1K"),
            (&["-b", "1.9"], "-b/--minbytes: '1.9' is not a whole number of bytes (1.9 B); use e.g. 2"),
            (&["-e", "12Q"], "-e/--maxbytes: '12Q' is not a size: use a number with an optional K, M or G suffix"),
            (&["-i", "-1K"], "-i/--stepbytes: '-1K' is negative"),
        ] {
            let e = err(args);
            assert!(e.starts_with(expected), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        assert_eq!(plan(&["-b", "1.5K", "-e", "1.5K"]).unwrap().min_bytes, 1536);
        assert_eq!(plan(&["-r", "-1"]).unwrap().roots, Roots::Every);
    }

    #[test]
    fn all_pairs_is_sendrecv_perfs_alone() {
        let refused = parse_args(&AllReduce, ["all_reduce_perf", "--all-pairs"]).unwrap_err();
        assert!(refused
            .0
            .starts_with("--all-pairs: all_reduce_perf has no pair mode; use sendrecv_perf"));
        let pairs = parse_args(
            &crate::collective::SendRecv,
            ["sendrecv_perf", "--all-pairs"],
        );
        assert!(pairs.unwrap().pairs.all_pairs);
        // Not offered where ignored, but still taken: nccl-tests' scripts pass them.
        let gather = &crate::collective::AllGather;
        let hidden = |id: &str| {
            let cmd = command(gather);
            let arg = cmd.get_arguments().find(|a| a.get_id() == id).unwrap();
            arg.is_hide_set()
        };
        assert!(hidden("op") && hidden("root") && !hidden("datatype"));
        assert!(parse_args(gather, ["all_gather_perf", "-o", "max", "-r", "1"]).is_ok());
    }

    #[test]
    fn limits_repeat() {
        let args = parse_args(
            &AllReduce,
            ["all_reduce_perf", "--limit", "ib-ndr", "--limit", "25 GB/s"],
        )
        .unwrap();
        let gbs: Vec<f64> = args.limit.iter().map(|l| l.gbs).collect();
        assert_eq!(gbs, [50.0, 25.0]);
        assert!(parse_args(&AllReduce, ["all_reduce_perf"])
            .unwrap()
            .limit
            .is_empty());
    }

    #[test]
    fn root_checked_against_ranks() {
        let p = plan(&["-r", "3"]).unwrap();
        assert_eq!(p.root_list(4, true).unwrap(), vec![3]);
        assert!(p
            .root_list(3, true)
            .unwrap_err()
            .0
            .starts_with("-r/--root 3: out of range for 3 ranks"));
        assert_eq!(p.root_list(3, false).unwrap(), vec![0]);
        assert_eq!(
            plan(&["-r", "-1"]).unwrap().root_list(3, true).unwrap(),
            vec![0, 1, 2]
        );
    }

    #[test]
    fn average_modes() {
        let t = [4.0, 1.0, 7.0];
        assert_eq!(Average::Rank0.combine(&t), 4.0);
        assert_eq!(Average::Mean.combine(&t), 4.0);
        assert_eq!(Average::Min.combine(&t), 1.0);
        assert_eq!(Average::Max.combine(&t), 7.0);
    }
}
