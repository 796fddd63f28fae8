//! perftest's flags, spelled, defaulted and meant as in perftest, and their
//! validation into a `Plan`. Every problem is one line naming the flag and the fix.

pub mod benchmark;
pub mod cm;
pub mod duration;
pub mod offered;
pub mod parity;
pub mod path;
pub mod post;
pub mod report;

use crate::allpairs::Thresholds;
use crate::cli::parse_with;
use crate::cli::{size_arg, whole, AllPairsArgs, CsvArgs};
use crate::job::usage;
use crate::job::UsageError;
use crate::output::{check_file, csv_flag, Outputs};
use crate::verbs::flags::benchmark::{Benchmark, Test, Verb};
use crate::verbs::flags::cm::{CmArgs, CmPlan};
use crate::verbs::flags::duration::{Context, DurationArgs, Timing};
use crate::verbs::flags::parity::{atomic_sizes, Connection, Options, ParityArgs};
use crate::verbs::flags::path::{PathArgs, PathPlan};
use crate::verbs::flags::post::{PostArgs, PostPlan};
use crate::verbs::flags::report::{ReportArgs, ReportPlan};
use crate::verbs::measure::counters::{CounterArgs, CounterPlan};
use clap::{CommandFactory, Parser};
use std::path::PathBuf;
use std::time::Duration;

/// perftest's defaults (perftest_parameters.h).
pub const DEFAULT_TCP_PORT: u16 = 18515;
const DEFAULT_QP_TIMEOUT: u8 = 14;
const DEFAULT_ITERS_WRITE_BW: u64 = 5000;
const DEFAULT_ITERS: u64 = 1000;
const MIN_ITERS: u64 = 5;
/// -D and --timeout: longer than a year is a typo (and past what a clock adds).
const MAX_SECONDS: u64 = 365 * 24 * 3600;
const DEFAULT_SIZE_BW: u64 = 65536;
const DEFAULT_SIZE_LAT: u64 = 2;
const DEFAULT_TX_DEPTH_BW: u32 = 128;
const MAX_TX_DEPTH: u32 = 15000;
const DEFAULT_RX_DEPTH_SEND: u32 = 512;
/// perftest's UC_MAX_RX: the most receives a UC or UD receiver posts up front.
const UNRELIABLE_MAX_RX: u64 = 16000;
const MAX_RX_DEPTH: u32 = 16384;
const DEFAULT_CQ_MOD: u32 = 100;
const MAX_CQ_MOD: u32 = 1024;
const MAX_QPS: u32 = 16384;
const MAX_INLINE: u32 = 1024;
/// Above this size perftest signals every work request unless -Q is given.
const CQ_MOD_SIZE_LIMIT: u64 = 8192;
/// `-a`: 2 B to 8 MiB, as perftest.
const ALL_SIZES_MAX_EXP: u32 = 23;
/// perftest's default inline sizes of the latency tests (RC).
const DEFAULT_INLINE_WRITE_LAT: u32 = 220;
const DEFAULT_INLINE_SEND_LAT: u32 = 236;

#[derive(Parser, Debug, Clone)]
// Each binary's name, description and the flags it offers: `command`.
#[command(
    version = crate::job::provenance::version(),
    // The shared flag groups, as verbs means them.
    mut_arg("all_pairs", |a| a.help(
        "ib_write_bw/ib_write_lat under mpirun: measure every pair of ranks in rounds of disjoint pairs; \
         --csv gets the N x N matrices and a heatmap"
    )),
    mut_arg("csv", |a| a.help("Append one row per size (and per pair) to this CSV (never overwritten)"))
)]
pub struct VerbsArgs {
    /// RDMA device (default: the first one); under mpirun a comma list is taken
    /// by node-local rank (rxe1,rxe2: local rank 0 uses rxe1, 1 uses rxe2)
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<String>,
    /// Port of the device
    #[arg(short = 'i', long = "ib-port", default_value_t = 1, value_parser = whole::<u8>(1), allow_hyphen_values = true)]
    pub ib_port: u8,
    /// GID index (default: InfiniBand none; Ethernet the RoCE v2 GID of the port's IPv4 address)
    #[arg(short = 'x', long = "gid-index", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub gid_index: Option<u32>,
    /// Message size in bytes (K, M suffixes: 1K = 1024)
    #[arg(short = 's', long = "size", value_parser = size_arg, allow_hyphen_values = true)]
    pub size: Option<u64>,
    /// Run every size from 2 B to 8 MiB
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,
    /// Messages per QP per size (bw: 5000 for write, 1000 otherwise; lat: 1000)
    #[arg(short = 'n', long = "iters", value_parser = whole::<u64>(MIN_ITERS), allow_hyphen_values = true)]
    pub iters: Option<u64>,
    /// Run each test for this many seconds instead of -n messages
    #[arg(short = 'D', long = "duration", conflicts_with_all = ["iters", "all"], value_parser = whole::<u64>(1), allow_hyphen_values = true)]
    pub duration: Option<u64>,
    /// Queue pairs per side (bandwidth tests)
    #[arg(short = 'q', long = "qp", default_value_t = 1, value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub qps: u32,
    /// Send queue depth: work requests in flight per QP (bw: 128, lat: 1)
    #[arg(short = 't', long = "tx-depth", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub tx_depth: Option<u32>,
    /// Receives posted per QP (send tests; default 512)
    #[arg(short = 'r', long = "rx-depth", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub rx_depth: Option<u32>,
    /// Ask for a completion every this many work requests (bw; default 100, 1 above 8 KiB)
    #[arg(short = 'Q', long = "cq-mod", value_parser = whole::<u32>(1), allow_hyphen_values = true)]
    pub cq_mod: Option<u32>,
    /// Path MTU in bytes: 256, 512, 1024, 2048 or 4096 (default: the smaller active MTU of the two ports)
    #[arg(short = 'm', long = "mtu", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub mtu: Option<u32>,
    /// QP ACK timeout exponent: 4.096 us * 2^N (0 = wait for ever; Soft-RoCE VMs need 18 or more)
    #[arg(short = 'u', long = "qp-timeout", default_value_t = DEFAULT_QP_TIMEOUT, value_parser = whole::<u8>(0), allow_hyphen_values = true)]
    pub qp_timeout: u8,
    /// Largest message sent inline (write/send; lat default 220/236, bw default 0)
    #[arg(short = 'I', long = "inline_size", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub inline_size: Option<u32>,
    /// Measure both directions at once (bandwidth tests)
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// Do not compute the BW peak column (printed as 0.00, as perftest)
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// Do not warn when the CPU frequency governor is not 'performance'
    #[arg(short = 'F', long = "CPU-freq")]
    pub no_cpu_freq_warning: bool,
    /// Report bandwidth in Gb/s (1e9 bits) instead of MiB/s
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// TCP port of the server/client handshake
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_TCP_PORT, value_parser = whole::<u16>(1), allow_hyphen_values = true)]
    pub port: u16,
    /// Use memory of this CUDA GPU for the buffers
    #[arg(long = "use_cuda", value_name = "GPU", value_parser = whole::<u32>(0), allow_hyphen_values = true)]
    pub use_cuda: Option<u32>,
    /// With --use_cuda: register the GPU memory through dma-buf
    #[arg(long = "use_cuda_dmabuf", requires = "use_cuda")]
    pub use_cuda_dmabuf: bool,
    #[command(flatten)]
    pub csv: CsvArgs,
    #[command(flatten)]
    pub counters: CounterArgs,
    /// Longest wait, in seconds, for the peer to connect or answer and for any completion
    #[arg(long = "timeout", default_value_t = 120, value_parser = whole::<u64>(1), allow_hyphen_values = true)]
    pub timeout: u64,
    #[command(flatten)]
    pub pairs: AllPairsArgs,
    #[command(flatten)]
    pub parity: ParityArgs,
    #[command(flatten)]
    pub path: PathArgs,
    #[command(flatten)]
    pub timed: DurationArgs,
    #[command(flatten)]
    pub cm: CmArgs,
    #[command(flatten)]
    pub post: PostArgs,
    #[command(flatten)]
    pub report: ReportArgs,
    /// Measure every size in this many rounds, interleaved (round 1 of every size, then
    /// round 2, ...); the table shows each size's median and its spread, the CSV one row
    /// per round. Both sides must give the same count
    #[arg(long = "rounds", value_name = "R", default_value_t = 1, value_parser = crate::verbs::measure::rounds::rounds_arg, allow_hyphen_values = true)]
    pub rounds: u32,
    /// Server to connect to (client side); without it this side is the server
    pub host: Option<String>,
}

/// How long each size runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Length {
    /// Messages per QP.
    Iters(u64),
    Duration(Duration),
}

/// Where the buffers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Memory {
    Host,
    Cuda { gpu: u32, dmabuf: bool },
}

/// The validated command line.
#[derive(Clone, Debug)]
pub struct Plan {
    pub bench: Benchmark,
    pub sizes: Vec<u64>,
    pub length: Length,
    pub qps: u32,
    /// Work requests in flight per QP (already capped at the message count).
    pub tx_depth: u32,
    /// Receives kept posted per QP (send tests).
    pub rx_depth: u32,
    /// Signal one work request in this many (bw).
    pub cq_mod: u32,
    pub mtu: Option<u32>,
    pub qp_timeout: u8,
    pub inline_size: u32,
    /// -I was not given: `inline_size` is the test's default.
    pub inline_default: bool,
    pub bidirectional: bool,
    pub peak: bool,
    pub report_gbits: bool,
    pub cpu_freq_warning: bool,
    pub tcp_port: u16,
    pub memory: Memory,
    pub csv: Option<PathBuf>,
    pub append: bool,
    pub timeout: Duration,
    pub host: Option<String>,
    pub devices: Vec<String>,
    pub ib_port: u8,
    pub gid_index: Option<u32>,
    /// --all-pairs and when a pair counts as slow.
    pub all_pairs: Option<Thresholds>,
    /// -W and --counters.
    pub counters: CounterPlan,
    /// -A, -o, -c.
    pub options: Options,
    /// -S -T --tclass --flow_label -L --pkey_index --ipv6 --bind_source_ip, NUMA.
    pub path: PathPlan,
    /// -f, --run_infinitely, --write_with_imm.
    pub timing: Timing,
    /// -R, -z, --retry_count.
    pub cm: CmPlan,
    /// -l, --recv_post_list, -e, --cqe_poll, --use_old_post_send.
    pub post: PostPlan,
    /// -H, -U, --report-both, --cpu_util, --out_json.
    pub report: ReportPlan,
    /// --rounds: every size measured this many times, interleaved (1: once).
    pub rounds: u32,
}

/// The command line of `bench`'s binary.
pub fn command(bench: Benchmark) -> clap::Command {
    crate::verbs::flags::offered::apply(bench, VerbsArgs::command())
}

/// Parses the command line of `bench` (argv[0] included).
pub fn parse<I, T>(bench: Benchmark, argv: I) -> Result<Plan, UsageError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    parse_with::<VerbsArgs, _, _>(command(bench), argv)?.plan(bench)
}

impl VerbsArgs {
    pub fn plan(&self, bench: Benchmark) -> Result<Plan, UsageError> {
        let lat = bench.test == Test::Lat;
        let options = self
            .parity
            .options(bench, self.use_cuda.is_some(), self.report_gbits)?;
        let sizes = self.sizes(bench)?;
        let length = self.length(bench)?;
        self.check_qps(lat)?;
        let (tx_depth, rx_depth) = self.depths(bench, length, &options)?;
        let cq_mod = self.cq_mod(lat, &sizes, tx_depth)?;
        let (post, cq_mod) = self.post.plan(&post::Context {
            bench,
            iters: match length {
                Length::Iters(n) => Some(n),
                Length::Duration(_) => None,
            },
            tx_depth,
            rx_depth,
            cq_mod,
            cq_mod_given: self.cq_mod.is_some(),
            qps: self.qps,
            bidirectional: self.bidirectional,
            size: sizes.iter().copied().max().unwrap_or(1),
            validate: options.validate,
            infinite: self.timed.run_infinitely,
        })?;
        self.check_path_mtu_and_timeout()?;
        let inline_size = self.inline_size(bench)?;
        self.check_ports_and_timeout()?;
        let devices = self.devices()?;
        let (csv, append) = (&self.csv.csv, self.csv.append);
        check_file(&csv_flag(append), csv.as_deref())?;
        let all_pairs = self.all_pairs(bench, append)?;
        let timing = self.timed.timing(&Context {
            bench,
            duration: self.duration,
            gpu: self.use_cuda,
            bidirectional: self.bidirectional,
            all_pairs: all_pairs.is_some(),
            validate: options.validate,
            warm_up: options.warm_up,
        })?;
        let plan = Plan {
            bench,
            sizes,
            length,
            qps: self.qps,
            tx_depth,
            rx_depth,
            cq_mod,
            mtu: self.mtu,
            qp_timeout: self.qp_timeout,
            inline_size,
            inline_default: self.inline_size.is_none(),
            bidirectional: self.bidirectional,
            peak: !self.no_peak,
            report_gbits: self.report_gbits,
            cpu_freq_warning: !self.no_cpu_freq_warning,
            tcp_port: self.port,
            memory: match self.use_cuda {
                Some(gpu) => Memory::Cuda {
                    gpu,
                    dmabuf: self.use_cuda_dmabuf,
                },
                None => Memory::Host,
            },
            csv: csv.clone(),
            append,
            timeout: Duration::from_secs(self.timeout),
            host: self.host.clone(),
            devices,
            ib_port: self.ib_port,
            gid_index: self.gid_index,
            all_pairs,
            counters: self.counters.plan()?,
            cm: self.cm.plan(options.connection, self.pairs.all_pairs)?,
            options,
            path: self.path.plan()?,
            timing,
            post,
            report: self.report.plan(
                bench,
                self.bidirectional,
                self.duration.is_some(),
                self.pairs.all_pairs,
            )?,
            rounds: crate::verbs::measure::rounds::check(
                self.rounds,
                &timing,
                all_pairs.is_some(),
            )?,
        };
        plan.distinct_outputs()?;
        Ok(plan)
    }

    /// The message sizes: -s, -a's powers of two, or the atomics' 8 bytes.
    fn sizes(&self, bench: Benchmark) -> Result<Vec<u64>, UsageError> {
        let lat = bench.test == Test::Lat;
        Ok(if bench.verb == Verb::Atomic {
            atomic_sizes(self.size, self.all, bench.program())?
        } else if self.all {
            (1..=ALL_SIZES_MAX_EXP).map(|e| 1u64 << e).collect()
        } else {
            let size = self.size.unwrap_or(if lat {
                DEFAULT_SIZE_LAT
            } else {
                DEFAULT_SIZE_BW
            });
            if size == 0 {
                return Err(usage("-s/--size 0: messages must be at least 1 byte"));
            }
            if size > u32::MAX as u64 {
                return Err(usage(format!(
                    "-s/--size {size}: verbs messages are at most 4 GiB - 1 (2^32-1 bytes)"
                )));
            }
            vec![size]
        })
    }

    /// How long each size runs: -n iterations or -D seconds.
    fn length(&self, bench: Benchmark) -> Result<Length, UsageError> {
        let lat = bench.test == Test::Lat;
        Ok(match (self.duration, self.iters) {
            (Some(0), _) => return Err(usage("-D/--duration 0: give at least 1 second")),
            (Some(s), _) if s > MAX_SECONDS => {
                return Err(usage(format!(
                    "-D/--duration {s}: at most {MAX_SECONDS} s (a year)"
                )))
            }
            (Some(s), _) => Length::Duration(Duration::from_secs(s)),
            (None, Some(n)) if n < MIN_ITERS => {
                return Err(usage(format!(
                "-n/--iters {n}: at least {MIN_ITERS} iterations are needed (perftest's minimum)"
            )))
            }
            (None, Some(n)) => Length::Iters(n),
            (None, None) if bench.verb == Verb::Write && !lat => {
                Length::Iters(DEFAULT_ITERS_WRITE_BW)
            }
            (None, None) => Length::Iters(DEFAULT_ITERS),
        })
    }

    /// -q and -b against the test.
    fn check_qps(&self, lat: bool) -> Result<(), UsageError> {
        if self.qps == 0 || self.qps > MAX_QPS {
            return Err(usage(format!(
                "-q/--qp {}: use 1 to {MAX_QPS} queue pairs",
                self.qps
            )));
        }
        if lat && self.qps > 1 {
            return Err(usage(format!(
                "-q/--qp {}: latency tests run one QP; drop -q",
                self.qps
            )));
        }
        if lat && self.bidirectional {
            return Err(usage(
                "-b/--bidirectional: latency tests are ping-pongs already; drop -b",
            ));
        }
        Ok(())
    }

    /// The send and receive queue depths (-t, -r), as perftest sizes them.
    fn depths(
        &self,
        bench: Benchmark,
        length: Length,
        options: &Options,
    ) -> Result<(u32, u32), UsageError> {
        let lat = bench.test == Test::Lat;
        let messages = match length {
            Length::Iters(n) => n,
            Length::Duration(_) => u64::MAX,
        };
        let tx_depth = match self.tx_depth {
            Some(t) if t == 0 || t > MAX_TX_DEPTH => {
                return Err(usage(format!("-t/--tx-depth {t}: use 1 to {MAX_TX_DEPTH}")))
            }
            Some(t) if lat && t != 1 => {
                return Err(usage(format!(
                    "-t/--tx-depth {t}: latency tests keep one message in flight; drop -t"
                )))
            }
            Some(t) => t,
            None if lat => 1,
            None => DEFAULT_TX_DEPTH_BW,
        };
        let tx_depth = (tx_depth as u64).min(messages) as u32;
        let rx_depth = match self.rx_depth {
            Some(r) if bench.verb != Verb::Send && !self.timed.write_with_imm => {
                return Err(usage(format!(
                    "-r/--rx-depth {r}: only send tests post receives; drop -r"
                )))
            }
            Some(r) if r == 0 || r > MAX_RX_DEPTH => {
                return Err(usage(format!("-r/--rx-depth {r}: use 1 to {MAX_RX_DEPTH}")))
            }
            Some(r) => r,
            None => DEFAULT_RX_DEPTH_SEND,
        };
        // perftest (force_dependecies): at the default depth a UC or UD receiver
        // posts a receive for every message up front, up to UC_MAX_RX, so its
        // timed loop never posts one. Not with --data_validation, whose receive
        // slots are a message each (perftest validates only RC writes and reads).
        let unreliable = matches!(options.connection, Connection::Uc | Connection::Ud);
        let rx_depth = match length {
            Length::Iters(n)
                if unreliable
                    && rx_depth == DEFAULT_RX_DEPTH_SEND
                    && !self.timed.run_infinitely
                    && !options.validate =>
            {
                n.min(UNRELIABLE_MAX_RX) as u32
            }
            _ => rx_depth,
        };
        // A receiver needs room for every message in flight, and for the
        // zero-length message that ends a -D run.
        let rx_depth = match length {
            Length::Iters(n) => (rx_depth as u64).min(n) as u32,
            Length::Duration(_) => rx_depth.max(tx_depth + 1),
        };
        Ok((tx_depth, rx_depth))
    }

    /// Completions asked for every -Q sends, as perftest defaults it.
    fn cq_mod(&self, lat: bool, sizes: &[u64], tx_depth: u32) -> Result<u32, UsageError> {
        Ok(match self.cq_mod {
            Some(q) if q == 0 || q > MAX_CQ_MOD => {
                return Err(usage(format!("-Q/--cq-mod {q}: use 1 to {MAX_CQ_MOD}")))
            }
            Some(_) if lat => {
                return Err(usage(
                    "-Q/--cq-mod: latency tests wait for every completion; drop -Q",
                ))
            }
            Some(q) => q,
            None if lat => 1,
            // perftest: large messages get a completion each, unless -a runs
            // every size with one setting.
            None if !self.all && sizes[0] > CQ_MOD_SIZE_LIMIT && !self.post.events => 1,
            None => DEFAULT_CQ_MOD,
        }
        .min(tx_depth))
    }

    /// -m and -u.
    fn check_path_mtu_and_timeout(&self) -> Result<(), UsageError> {
        if let Some(m) = self.mtu {
            if !matches!(m, 256 | 512 | 1024 | 2048 | 4096) {
                return Err(usage(format!(
                    "-m/--mtu {m}: RDMA path MTUs are 256, 512, 1024, 2048 or 4096"
                )));
            }
        }
        if self.qp_timeout > 31 {
            return Err(usage(format!(
                "-u/--qp-timeout {}: the exponent is 0 to 31 (14 = 67 ms, 18 = 1.07 s)",
                self.qp_timeout
            )));
        }
        Ok(())
    }

    /// -I, or the test's default inline size.
    fn inline_size(&self, bench: Benchmark) -> Result<u32, UsageError> {
        Ok(match self.inline_size {
            Some(i) if i > MAX_INLINE => {
                return Err(usage(format!(
                    "-I/--inline_size {i}: at most {MAX_INLINE} bytes"
                )))
            }
            Some(i) if i > 0 && bench.verb.fetches() => {
                return Err(usage(format!(
                    "-I/--inline_size {i}: RDMA {} carry no inline data; drop -I",
                    if bench.verb == Verb::Read {
                        "reads"
                    } else {
                        "atomics"
                    }
                )))
            }
            Some(i) => i,
            None => match (bench.test, bench.verb) {
                (Test::Lat, Verb::Write) => DEFAULT_INLINE_WRITE_LAT,
                (Test::Lat, Verb::Send) => DEFAULT_INLINE_SEND_LAT,
                _ => 0,
            },
        })
    }

    /// -i, --timeout and -p.
    fn check_ports_and_timeout(&self) -> Result<(), UsageError> {
        if self.ib_port == 0 {
            return Err(usage("-i/--ib-port 0: ports are numbered from 1"));
        }
        if self.timeout == 0 {
            return Err(usage(
                "--timeout 0: give the longest wait in seconds, e.g. --timeout 120",
            ));
        }
        if self.port == 0 {
            return Err(usage(
                "-p/--port 0: give the TCP port of the handshake, e.g. -p 18515",
            ));
        }
        if self.timeout > MAX_SECONDS {
            return Err(usage(format!(
                "--timeout {}: at most {MAX_SECONDS} s (a year), e.g. --timeout 120",
                self.timeout
            )));
        }
        Ok(())
    }

    /// -d's device names (none: the first device).
    fn devices(&self) -> Result<Vec<String>, UsageError> {
        Ok(match &self.ib_dev {
            Some(list) => {
                let names: Vec<String> = list.split(',').map(|d| d.trim().to_string()).collect();
                if names.iter().any(String::is_empty) {
                    return Err(usage(format!(
                        "-d/--ib-dev '{list}': give a device name (e.g. mlx5_0) or a comma list without empty entries"
                    )));
                }
                names
            }
            None => Vec::new(),
        })
    }

    /// --all-pairs and its thresholds.
    fn all_pairs(&self, bench: Benchmark, append: bool) -> Result<Option<Thresholds>, UsageError> {
        Ok(if self.pairs.all_pairs {
            if bench.verb != Verb::Write {
                return Err(usage(format!(
                    "--all-pairs: {} has no pair mode; use ib_write_bw or ib_write_lat --all-pairs",
                    bench.program()
                )));
            }
            if self.host.is_some() {
                return Err(usage(
                    "--all-pairs: the pairs find each other through MPI; drop HOST and start under mpirun",
                ));
            }
            Some(Thresholds::from_args(&self.pairs, append)?)
        } else {
            None
        })
    }
}

impl Plan {
    /// No two outputs on one file (each flag's plan checked its own path).
    fn distinct_outputs(&self) -> Result<(), UsageError> {
        let csv = self.csv.as_deref();
        let heatmap = csv
            .filter(|_| self.all_pairs.is_some())
            .map(crate::output::heatmap_of);
        Outputs::new()
            .file("--csv", csv)
            .file("--counters", self.counters.file.as_deref())
            .file("--out_json_file", self.report.json.as_deref())
            .file("the --all-pairs heatmap", heatmap.as_deref())
            .distinct()
    }

    /// The plan on a software RDMA device (Soft-RoCE, siw): no inline data
    /// unless -I asks for it, as perftest, which does not know these devices.
    pub fn on_device(&self, software: bool) -> Plan {
        let mut plan = self.clone();
        if software && plan.inline_default {
            plan.inline_size = 0;
        }
        plan
    }

    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(1)
    }

    /// The settings both sides of a pair must share, as (flag, value) pairs.
    pub fn symmetric_settings(&self) -> Vec<(String, String)> {
        let length = match self.length {
            Length::Iters(n) => ("-n/--iters".to_string(), n.to_string()),
            Length::Duration(d) => ("-D/--duration".to_string(), d.as_secs().to_string()),
        };
        let sizes = match self.sizes.as_slice() {
            [one] => one.to_string(),
            _ => "all (-a)".to_string(),
        };
        let mut settings = vec![
            ("-s/--size".into(), sizes),
            length,
            ("-q/--qp".into(), self.qps.to_string()),
            ("-b/--bidirectional".into(), self.bidirectional.to_string()),
            (
                "-m/--mtu".into(),
                self.mtu.map_or("port's".into(), |m| m.to_string()),
            ),
        ];
        settings.extend(self.options.settings(self.bench));
        settings.extend(self.timing.settings());
        settings.extend(self.cm.settings());
        // Both sides run the same schedule of (round, size): the counts must match.
        settings.push(("--rounds".into(), self.rounds.to_string()));
        settings
    }
}

/// The receiver of this plan counts receive completions: sends, and writes
/// with immediate.
pub fn takes_receives(plan: &Plan) -> bool {
    plan.bench.verb == Verb::Send || plan.timing.write_imm
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE_BW: Benchmark = Benchmark::new(Verb::Write, Test::Bw);
    const READ_BW: Benchmark = Benchmark::new(Verb::Read, Test::Bw);
    const SEND_BW: Benchmark = Benchmark::new(Verb::Send, Test::Bw);
    const WRITE_LAT: Benchmark = Benchmark::new(Verb::Write, Test::Lat);
    const SEND_LAT: Benchmark = Benchmark::new(Verb::Send, Test::Lat);
    const READ_LAT: Benchmark = Benchmark::new(Verb::Read, Test::Lat);

    fn plan(bench: Benchmark, args: &[&str]) -> Result<Plan, UsageError> {
        let mut argv = vec![bench.program()];
        argv.extend_from_slice(args);
        parse(bench, argv)
    }

    fn err(bench: Benchmark, args: &[&str]) -> String {
        plan(bench, args).unwrap_err().0
    }

    #[test]
    fn all_pairs_is_for_write_tests_under_mpirun() {
        let p = plan(WRITE_BW, &["--all-pairs", "--slow-fraction", "0.8"]).unwrap();
        assert_eq!(p.all_pairs, Some(Thresholds::new(0.8, 2.0).unwrap()));
        assert_eq!(plan(WRITE_BW, &[]).unwrap().all_pairs, None);
        assert!(err(READ_BW, &["--all-pairs"]).contains("ib_read_bw has no pair mode"));
        assert!(err(WRITE_BW, &["--all-pairs", "10.0.0.1"]).contains("drop HOST"));
        assert!(err(WRITE_BW, &["--all-pairs", "--slow-latency", "0.5"])
            .starts_with("--slow-latency 0.5"));
        assert!(err(WRITE_BW, &["--slow-fraction", "0.5"]).contains("--all-pairs"));
    }

    #[test]
    fn perftest_defaults() {
        let p = plan(WRITE_BW, &[]).unwrap();
        assert_eq!(p.sizes, vec![65536]);
        assert_eq!(p.length, Length::Iters(5000));
        assert_eq!(
            (p.tx_depth, p.qps, p.qp_timeout, p.inline_size),
            (128, 1, 14, 0)
        );
        // 64 KiB > 8 KiB: every work request signalled, as perftest.
        assert_eq!(p.cq_mod, 1);
        assert_eq!(p.tcp_port, 18515);
        assert!(p.peak && p.host.is_none() && p.devices.is_empty());

        let p = plan(READ_BW, &["-s", "4096"]).unwrap();
        assert_eq!(p.length, Length::Iters(1000));
        assert_eq!(p.cq_mod, 100);

        let p = plan(WRITE_LAT, &[]).unwrap();
        assert_eq!(p.sizes, vec![2]);
        assert_eq!((p.tx_depth, p.cq_mod, p.inline_size), (1, 1, 220));
        assert_eq!(plan(SEND_LAT, &[]).unwrap().inline_size, 236);
        assert_eq!(plan(READ_LAT, &[]).unwrap().inline_size, 0);
        // Software devices: off by default, -I still counts.
        assert_eq!(p.on_device(true).inline_size, 0);
        assert_eq!(p.on_device(false).inline_size, 220);
        let given = plan(WRITE_LAT, &["-I", "64"]).unwrap();
        assert_eq!(given.on_device(true).inline_size, 64);
    }

    #[test]
    fn all_sizes_and_host() {
        let p = plan(SEND_BW, &["-a", "-n", "20", "-u", "18", "10.0.0.2"]).unwrap();
        assert_eq!(p.sizes.len(), 23);
        assert_eq!((p.sizes[0], p.sizes[22]), (2, 8 << 20));
        assert_eq!(p.host.as_deref(), Some("10.0.0.2"));
        // -a keeps CQ moderation for every size; capped by tx depth (capped by -n).
        assert_eq!((p.tx_depth, p.cq_mod, p.rx_depth), (20, 20, 20));
        assert_eq!(p.qp_timeout, 18);
    }

    #[test]
    fn cuda_and_devices() {
        let p = plan(
            WRITE_BW,
            &["--use_cuda=1", "--use_cuda_dmabuf", "-d", "rxe1,rxe2"],
        )
        .unwrap();
        assert_eq!(
            p.memory,
            Memory::Cuda {
                gpu: 1,
                dmabuf: true
            }
        );
        assert_eq!(p.devices, vec!["rxe1", "rxe2"]);
        assert!(err(WRITE_BW, &["--use_cuda_dmabuf"]).contains("--use_cuda"));
        assert!(err(WRITE_LAT, &["--use_cuda=0"])
            .starts_with("--use_cuda=0: ib_write_lat polls its buffer from the CPU"));
        assert!(err(WRITE_BW, &["-d", "rxe1,"]).contains("-d/--ib-dev"));
    }

    #[test]
    fn unreliable_receivers_post_every_message_up_front() {
        // perftest: UC and UD at the default depth post -n receives (at most
        // 16000) before the timed loop; RC keeps 512 and reposts.
        let depth = |bench, args: &[&str]| plan(bench, args).unwrap().rx_depth;
        assert_eq!(depth(SEND_LAT, &["-c", "UC", "-n", "3000"]), 3000);
        assert_eq!(depth(SEND_LAT, &["-c", "UD", "-n", "3000"]), 3000);
        assert_eq!(depth(SEND_BW, &["-c", "UD", "-n", "40000"]), 16000);
        assert_eq!(depth(SEND_LAT, &["-n", "3000"]), 512);
        // -r 512 is perftest's default as given: the same rule; any other -r stands.
        assert_eq!(
            depth(SEND_LAT, &["-c", "UC", "-n", "3000", "-r", "512"]),
            3000
        );
        assert_eq!(depth(SEND_LAT, &["-c", "UC", "-n", "3000", "-r", "64"]), 64);
        // --data_validation keeps a slot per receive: the default depth stays.
        assert_eq!(
            depth(SEND_LAT, &["-c", "UC", "-n", "3000", "--data_validation"]),
            512
        );
    }

    #[test]
    fn duration_runs() {
        let p = plan(SEND_BW, &["-D", "3", "-t", "600"]).unwrap();
        assert_eq!(p.length, Length::Duration(Duration::from_secs(3)));
        // Room for every message in flight plus the end marker.
        assert_eq!(p.rx_depth, 601);
        assert!(err(WRITE_BW, &["-D", "3", "-a"]).contains("--all"));
        assert!(err(WRITE_BW, &["-D", "0"]).contains("-D/--duration 0"));
    }

    #[test]
    fn mistakes_name_the_flag() {
        for (bench, args, flag) in [
            (WRITE_BW, vec!["-s", "0"], "-s/--size 0"),
            (WRITE_BW, vec!["-s", "5G"], "-s/--size"),
            (WRITE_BW, vec!["-n", "4"], "-n/--iters 4"),
            (WRITE_BW, vec!["-q", "0"], "-q/--qp 0"),
            (WRITE_LAT, vec!["-q", "2"], "-q/--qp 2"),
            (WRITE_LAT, vec!["-b"], "-b/--bidirectional"),
            (WRITE_LAT, vec!["-t", "4"], "-t/--tx-depth 4"),
            (WRITE_BW, vec!["-t", "0"], "-t/--tx-depth 0"),
            (WRITE_BW, vec!["-r", "8"], "-r/--rx-depth 8"),
            (WRITE_BW, vec!["-Q", "0"], "-Q/--cq-mod 0"),
            (WRITE_BW, vec!["-m", "1500"], "-m/--mtu 1500"),
            (WRITE_BW, vec!["-u", "32"], "-u/--qp-timeout 32"),
            (READ_BW, vec!["-I", "64"], "-I/--inline_size 64"),
            (WRITE_BW, vec!["-I", "2048"], "-I/--inline_size 2048"),
            (WRITE_BW, vec!["-i", "0"], "-i/--ib-port 0"),
            (WRITE_BW, vec!["--timeout", "0"], "--timeout 0"),
            (WRITE_BW, vec!["-a", "-s", "8"], "--all"),
            (WRITE_BW, vec!["--bogus"], "--bogus"),
            (
                WRITE_BW,
                vec!["-n", "-1"],
                "-n/--iters -1: use a whole number >= 5",
            ),
            (WRITE_BW, vec!["-s", "-8"], "-s/--size: '-8' is negative"),
            (
                WRITE_BW,
                vec!["-s", "1.9"],
                "-s/--size: '1.9' is not a whole number of bytes",
            ),
            (
                WRITE_BW,
                vec!["-D", "-1"],
                "-D/--duration -1: use a whole number >= 1",
            ),
            (
                WRITE_BW,
                vec!["-D", "99999999999"],
                "-D/--duration 99999999999: at most 31536000 s",
            ),
            (
                WRITE_BW,
                vec!["-q", "-1"],
                "-q/--qp -1: use a whole number from 1 to 4294967295",
            ),
            (
                WRITE_BW,
                vec!["-t", "-1"],
                "-t/--tx-depth -1: use a whole number from 1",
            ),
            (
                WRITE_BW,
                vec!["-p", "70000"],
                "-p/--port 70000: too large; use a whole number from 1 to 65535",
            ),
            (
                WRITE_BW,
                vec!["-u", "-1"],
                "-u/--qp-timeout -1: use a whole number from 0 to 255",
            ),
            (
                WRITE_BW,
                vec!["--timeout", "-5"],
                "--timeout -5: use a whole number >= 1",
            ),
            (
                WRITE_BW,
                vec!["--use_cuda=-1"],
                "--use_cuda -1: use a whole number from 0",
            ),
        ] {
            let e = err(bench, &args);
            assert!(e.contains(flag), "{args:?}: {e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn symmetric_settings_differ_when_flags_do() {
        let a = plan(WRITE_BW, &["-s", "8"]).unwrap().symmetric_settings();
        let b = plan(WRITE_BW, &["-s", "16"]).unwrap().symmetric_settings();
        let c = plan(WRITE_BW, &["-s", "8", "-t", "4", "10.0.0.1"])
            .unwrap()
            .symmetric_settings();
        assert_ne!(a, b);
        // Sender-side and address flags need not match.
        assert_eq!(a, c);
    }
}
