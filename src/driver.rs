//! The one driver behind every collective binary, shaped like nccl-tests' common
//! code: agree on arguments, allocate once, then for every datatype, op and root
//! warm up, sweep the sizes, time out-of-place and in-place loops, validate, and
//! hand each size's results to the exporters.

use crate::args::{parse_args, CollArgs, Plan, UsageError};
use crate::backend::mpi::MpiBackend;
use crate::backend::{Backend, BufRef, OpArgs, Slot};
use crate::collective::{Collective, Counts, Layout};
use crate::datatype::{count_wrong, fill, DataType, RedOp};
use crate::pattern::Pattern;
use crate::report::csv::CsvExport;
use crate::report::table::Table;
use crate::report::{Exporter, Measurement, Placement, RunInfo, SizeResult, Summary};
use crate::sizes::{human_bytes, sweep, Step};
use crate::stats::{histogram, max_over_ranks, mean_per_rank, slowest, IterStats};
use crate::watchdog::Watchdog;
use crate::world::World;
use mpi::topology::Communicator;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// Exit statuses: 1 a failed run or wrong data, 2 a usage error.
const EXIT_FAILED: u8 = 1;
const EXIT_USAGE: u8 = 2;

/// Environment variable (read only by validation) that corrupts one received
/// element, "RANK:INDEX", to prove that `#wrong` counts it.
pub const FAULT_CORRUPT_ENV: &str = "FABRICBENCH_FAULT_CORRUPT";
/// Environment variable "RANK[:SIZE]" that makes a rank sleep before its timed
/// loop at SIZE bytes (default: the first size), to prove that `-T` names it.
pub const FAULT_STALL_ENV: &str = "FABRICBENCH_FAULT_STALL_RANK";

/// Entry point of each collective binary.
pub fn collective_main(collective: &dyn Collective) -> ExitCode {
    let program = std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| format!("{}_perf", collective.id()));
    let world = match World::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("{program}: error: {e:#}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    abort_job_on_panic();
    let code = match run(&world, collective, &program) {
        Ok(code) => code,
        Err(Failure::Usage(msg)) => {
            if world.is_root() {
                eprintln!("{program}: error: {msg}");
            }
            EXIT_USAGE
        }
        Err(Failure::Local(code)) => code,
        Err(Failure::Fatal(e)) => {
            // Other ranks may be inside a collective: end the whole job.
            eprintln!("{program}: rank {}: error: {e:#}", world.rank);
            world.comm.abort(EXIT_FAILED as i32);
        }
    };
    drop(world);
    ExitCode::from(code)
}

/// A panic on one rank would leave the others waiting in a collective for ever:
/// after the usual message, end the whole job.
fn abort_job_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        // SAFETY: MPI is initialised (the hook is set after World::init).
        unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, EXIT_FAILED as i32) };
    }));
}

/// How a run ends early.
enum Failure {
    /// The same mistake on every rank: rank 0 prints it.
    Usage(String),
    /// A problem some ranks found and printed; all ranks agreed to stop.
    Local(u8),
    /// A failure in the middle of the run: print and abort the job.
    Fatal(anyhow::Error),
}

impl From<UsageError> for Failure {
    fn from(e: UsageError) -> Self {
        Failure::Usage(e.0)
    }
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Fatal(e)
    }
}

/// Stops every rank when any rank hit a problem (printed by that rank).
fn agree(world: &World, program: &str, mine: Result<(), String>) -> Result<(), Failure> {
    let failed = world.max_u64(mine.is_err() as u64);
    if let Err(msg) = &mine {
        eprintln!(
            "{program}: rank {} ({}): error: {msg}",
            world.rank, world.hosts[world.rank]
        );
    }
    if failed > 0 {
        Err(Failure::Local(EXIT_FAILED))
    } else {
        Ok(())
    }
}

/// Checks that every rank parsed the same arguments before any collective that
/// depends on them: mismatched counts are undefined behaviour in MPI and NCCL.
fn agree_on_arguments(world: &World, parsed: &Result<CollArgs, UsageError>) -> Result<(), Failure> {
    let canonical = match parsed {
        Ok(args) => serde_json::to_string(args).unwrap_or_default(),
        Err(e) => format!("{{\"error\":{}}}", serde_json::Value::String(e.0.clone())),
    };
    let all = world.all_gather_bytes(canonical.as_bytes());
    let Some(odd) = all.iter().position(|a| *a != all[0]) else {
        return Ok(());
    };
    let decode = |b: &[u8]| -> BTreeMap<String, serde_json::Value> {
        serde_json::from_slice(b).unwrap_or_default()
    };
    let (first, other) = (decode(&all[0]), decode(&all[odd]));
    let differences: Vec<String> = first
        .keys()
        .chain(other.keys())
        .filter(|k| first.get(*k) != other.get(*k))
        .map(|k| {
            let show = |m: &BTreeMap<String, serde_json::Value>| {
                m.get(k).map_or("(none)".into(), |v| v.to_string())
            };
            format!(
                "--{k} is {} on rank {odd} but {} on rank 0",
                show(&other),
                show(&first)
            )
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    Err(Failure::Usage(format!(
        "ranks were started with different arguments ({}); start every rank with the same flags",
        differences.join("; ")
    )))
}

fn open_backend(world: &World, choice: &str) -> Result<Box<dyn Backend>, Failure> {
    match choice {
        "mpi" | "auto" => Ok(Box::new(MpiBackend::new(world)?)),
        other => Err(Failure::Usage(format!(
            "--backend {other}: this build has no NCCL backend yet; use --backend mpi"
        ))),
    }
}

/// Bytes of the send and receive buffers at the largest size, over every datatype
/// of the plan. In place, the receive buffer also holds the send data.
fn buffer_bytes(plan: &Plan, coll: &dyn Collective, nranks: usize) -> (usize, usize) {
    plan.datatypes.iter().fold((0, 0), |(s, r), &t| {
        let c = coll.counts(
            (plan.max_bytes / t.size() as u64) as usize,
            t.size(),
            nranks,
        );
        (
            s.max(c.send * t.size()),
            r.max(c.recv.max(c.send) * t.size()),
        )
    })
}

/// Environment that shapes results (NCCL_*, OMPI_MCA_*, UCX_*, FI_*), as sorted K=V.
pub fn relevant_env() -> Vec<String> {
    let mut vars: Vec<String> = std::env::vars()
        .filter(|(k, _)| {
            ["NCCL_", "OMPI_MCA_", "UCX_", "FI_"]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    vars.sort();
    vars
}

pub fn now_utc() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn run(world: &World, coll: &dyn Collective, program: &str) -> Result<u8, Failure> {
    let parsed = parse_args(std::env::args_os());
    agree_on_arguments(world, &parsed)?;
    let args = parsed?;
    let plan = args.plan()?;
    let roots = plan.root_list(world.size, coll.rooted())?;
    let mut backend = open_backend(world, &args.backend)?;
    let info = backend.info();

    // Memory: checked before allocating, against what this node has per rank.
    let (send_bytes, recv_bytes) = buffer_bytes(&plan, coll, world.size);
    if info.name == "mpi" {
        let max_elements = plan
            .datatypes
            .iter()
            .map(|t| plan.max_bytes / t.size() as u64)
            .max()
            .unwrap_or(0);
        if max_elements > i32::MAX as u64 {
            return Err(Failure::Usage(format!(
                "-e/--maxbytes {}: {max_elements} elements exceed MPI's int count limit (2^31-1); lower -e or use a wider -d",
                plan.max_bytes
            )));
        }
    }
    // Host staging: the input pattern is built in a host buffer, and -c reads the
    // result back into another.
    let staging = (send_bytes + if plan.check > 0 { recv_bytes } else { 0 }) as u64;
    let buffers = (send_bytes + recv_bytes) as u64;
    let need = if info.device == "host" {
        buffers + staging
    } else {
        buffers
    };
    let memory = match backend.memory_available() {
        Some(avail) if need.saturating_mul(world.local_size as u64) > avail => Err(format!(
            "-e/--maxbytes {}: each rank needs {} (buffers {}, host staging {}) and {} ranks share this node, \
             but only {} is available; lower -e/--maxbytes",
            plan.max_bytes,
            human_bytes(need),
            human_bytes(buffers),
            human_bytes(staging),
            world.local_size,
            human_bytes(avail)
        )),
        _ => Ok(()),
    };
    agree(world, program, memory)?;
    let alloc = backend
        .alloc(send_bytes, recv_bytes)
        .map_err(|e| format!("{e:#}"));
    agree(world, program, alloc)?;

    let run_info = describe_run(world, program, &plan, &info);
    let mut exporters: Vec<Box<dyn Exporter>> = Vec::new();
    if world.is_root() {
        exporters.push(Box::new(Table::new(std::io::stdout())));
    }
    let csv = match (&args.csv, world.is_root()) {
        (Some(path), true) => {
            CsvExport::open(path, args.append).map(|c| exporters.push(Box::new(c)))
        }
        _ => Ok(()),
    };
    agree(world, program, csv.map_err(|e| format!("{e:#}")))?;
    let watchdog = Watchdog::start(world, program, plan.timeout_s)?;
    for e in exporters.iter_mut() {
        e.start(&run_info)?;
    }

    let mut bench = Bench {
        world,
        coll,
        backend: &mut *backend,
        plan: &plan,
        watchdog: &watchdog,
        stall: std::env::var(FAULT_STALL_ENV).ok().and_then(|v| {
            let (rank, size) = v.split_once(':').unwrap_or((&v, "0"));
            Some((rank.parse().ok()?, size.parse().ok()?))
        }),
        corrupt: std::env::var(FAULT_CORRUPT_ENV).ok().and_then(|v| {
            let (r, i) = v.split_once(':')?;
            Some((r.parse().ok()?, i.parse().ok()?))
        }),
        per_iteration: vec![0.0; plan.iters],
    };
    let mut summary = Summary::default();
    let mut busbw_sum = 0.0;
    let mut measured = 0usize;
    let ops: Vec<Option<RedOp>> = if coll.reduces() {
        plan.ops.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    for &dtype in &plan.datatypes {
        for &op in &ops {
            for &root in &roots {
                bench.warm_up(dtype, op, root)?;
                let mut cycle = 0;
                while plan.run_cycles == 0 || cycle < plan.run_cycles {
                    for size in sweep(plan.min_bytes, plan.max_bytes, plan.step) {
                        let result = bench.measure_size(size, dtype, op, root, cycle)?;
                        for m in &result.measurements {
                            summary.wrong_total += m.wrong.unwrap_or(0);
                            busbw_sum += m.busbw_gbs;
                            measured += 1;
                        }
                        for e in exporters.iter_mut() {
                            e.record(&run_info, &result)?;
                        }
                    }
                    cycle += 1;
                }
            }
        }
    }
    summary.avg_busbw_gbs = if measured > 0 {
        busbw_sum / measured as f64
    } else {
        0.0
    };
    for e in exporters.iter_mut() {
        e.finish(&run_info, &summary)?;
    }
    Ok(if summary.wrong_total > 0 {
        EXIT_FAILED
    } else {
        0
    })
}

/// A run's id: its UTC start time and this process's id.
pub fn new_run_id(stamp: chrono::DateTime<chrono::Utc>) -> String {
    format!(
        "{}-{:05}",
        stamp.format("%Y%m%dT%H%M%SZ"),
        std::process::id() % 100_000
    )
}

fn describe_run(
    world: &World,
    program: &str,
    plan: &Plan,
    info: &crate::backend::BackendInfo,
) -> RunInfo {
    let step = match plan.step {
        Step::Factor(f) => format!("{f}(factor)"),
        Step::Bytes(b) => format!("{b}(bytes)"),
    };
    let settings_line = format!(
        "nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0",
        plan.min_bytes, plan.max_bytes, plan.warmup_iters, plan.iters, plan.check
    );
    let mine = format!(
        "#  Rank {:>2} Group  0 Pid {:>6} on {:>10} device {:>2} [{}] {}",
        world.rank,
        std::process::id(),
        world.hosts[world.rank],
        world.local_rank,
        info.device,
        info.library_version
    );
    let rank_lines = world
        .all_gather_bytes(mine.as_bytes())
        .into_iter()
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .collect();
    let stamp = chrono::Utc::now();
    let mut notes = Vec::new();
    if let Some(warning) = world.launcher_mismatch() {
        notes.push(warning);
    }
    RunInfo {
        program: program.to_string(),
        run_id: new_run_id(stamp),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: info.name.clone(),
        transport: info.transport.clone(),
        library_version: info.library_version.clone(),
        device: info.device.clone(),
        hosts: world.nodes(),
        nranks: world.size,
        settings_line,
        rank_lines,
        env: relevant_env(),
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        average: plan.average.name().to_string(),
        checked: plan.check > 0,
        notes,
    }
}

/// The state of one run's measurements.
struct Bench<'a> {
    world: &'a World,
    coll: &'a dyn Collective,
    backend: &'a mut dyn Backend,
    plan: &'a Plan,
    watchdog: &'a Watchdog,
    stall: Option<(usize, u64)>,
    corrupt: Option<(usize, usize)>,
    /// Reused for every loop: nothing is allocated around the timed calls.
    per_iteration: Vec<f64>,
}

impl Bench<'_> {
    fn layout(&self, size: u64, dtype: DataType, op: Option<RedOp>, root: usize) -> Layout {
        let counts = self.coll.counts(
            (size / dtype.size() as u64) as usize,
            dtype.size(),
            self.world.size,
        );
        Layout {
            rank: self.world.rank,
            nranks: self.world.size,
            root,
            counts,
            pattern: Pattern::new(dtype, op.unwrap_or(RedOp::Sum), self.world.size),
        }
    }

    /// Where the send data and the result live, as nccl-tests lays them out.
    fn op_args(&self, layout: &Layout, placement: Placement) -> OpArgs {
        let Layout {
            rank,
            counts,
            pattern,
            root,
            ..
        } = *layout;
        let elt = pattern.dtype.size();
        let (send, recv) = match placement {
            Placement::OutOfPlace => (
                BufRef {
                    slot: Slot::Send,
                    offset: 0,
                },
                BufRef {
                    slot: Slot::Recv,
                    offset: 0,
                },
            ),
            Placement::InPlace => (
                BufRef {
                    slot: Slot::Recv,
                    offset: rank * counts.send_inplace_offset * elt,
                },
                BufRef {
                    slot: Slot::Recv,
                    offset: rank * counts.recv_inplace_offset * elt,
                },
            ),
        };
        OpArgs {
            send,
            recv,
            count: counts.param,
            dtype: pattern.dtype,
            op: pattern.op,
            root,
            in_place: placement == Placement::InPlace,
        }
    }

    fn write_inputs(&mut self, layout: &Layout, args: &OpArgs) -> anyhow::Result<()> {
        let mut bytes = vec![0u8; layout.counts.send * args.dtype.size()];
        fill(args.dtype, &mut bytes, |i| {
            layout.pattern.input(layout.rank, i)
        });
        self.backend.write(args.send, &bytes)
    }

    fn label(&self, layout: &Layout, placement: Placement, what: &str) -> String {
        format!(
            "{} {} {} {} root {} {} B {what}",
            self.coll.name(),
            layout.pattern.dtype,
            if self.coll.reduces() {
                layout.pattern.op.name()
            } else {
                "none"
            },
            placement.name(),
            layout.root,
            layout.counts.size_bytes(layout.pattern.dtype.size())
        )
    }

    /// nccl-tests' warm-up: every size from min to max by factor 2, -w calls each.
    fn warm_up(&mut self, dtype: DataType, op: Option<RedOp>, root: usize) -> Result<(), Failure> {
        self.watchdog
            .begin(format!("{} {dtype} warm-up", self.coll.name()));
        self.world.barrier();
        for size in sweep(self.plan.min_bytes, self.plan.max_bytes, Step::Factor(2)) {
            let layout = self.layout(size, dtype, op, root);
            let args = self.op_args(&layout, Placement::OutOfPlace);
            for _ in 0..self.plan.warmup_iters {
                self.watchdog.enter_call();
                self.coll.launch(self.backend, &args)?;
            }
        }
        self.backend.synchronize()?;
        self.watchdog.end();
        Ok(())
    }

    fn measure_size(
        &mut self,
        size: u64,
        dtype: DataType,
        op: Option<RedOp>,
        root: usize,
        cycle: u64,
    ) -> Result<SizeResult, Failure> {
        let layout = self.layout(size, dtype, op, root);
        let n = self.world.size;
        let mut measurements = Vec::new();
        for placement in Placement::BOTH {
            let args = self.op_args(&layout, placement);
            self.write_inputs(&layout, &args)?;
            if self
                .stall
                .is_some_and(|(rank, at)| rank == self.world.rank && size >= at)
            {
                // Fault injection for the -T test: this rank never arrives.
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
            self.watchdog
                .begin(self.label(&layout, placement, "(barrier before timing)"));
            self.watchdog.enter_call();
            self.world.barrier();
            self.watchdog
                .begin(self.label(&layout, placement, "(timed loop)"));
            let iters = self.plan.iters;
            self.backend.timer_start(iters)?;
            for _ in 0..iters {
                self.watchdog.enter_call();
                self.coll.launch(self.backend, &args)?;
                self.backend.mark();
            }
            self.backend.synchronize()?;
            self.watchdog.end();
            let total = self.backend.timer_read(&mut self.per_iteration)?;

            let wrong = if self.plan.check > 0 {
                Some(self.validate(&layout, &args, placement)?)
            } else {
                None
            };

            let mut mine = Vec::with_capacity(iters + 1);
            mine.push(total / iters as f64);
            mine.extend_from_slice(&self.per_iteration);
            let gathered = self.world.gather_f64s(&mine);
            if let Some(all) = gathered {
                let per_rank_time: Vec<f64> = all.chunks_exact(iters + 1).map(|c| c[0]).collect();
                let per_iter: Vec<f64> = all
                    .chunks_exact(iters + 1)
                    .flat_map(|c| c[1..].to_vec())
                    .collect();
                let seconds = self.plan.average.combine(&per_rank_time);
                let algbw = layout.counts.size_bytes(dtype.size()) as f64 / 1e9 / seconds;
                let worst = max_over_ranks(&per_iter, iters);
                let h = histogram(&worst);
                measurements.push(Measurement {
                    placement,
                    time_us: seconds * 1e6,
                    algbw_gbs: algbw,
                    busbw_gbs: algbw * self.coll.busbw_factor(n),
                    wrong,
                    latency: IterStats::from_seconds(&worst, &h),
                    histogram: h,
                    slowest_rank: slowest(&mean_per_rank(&per_iter, iters)),
                    timestamp: now_utc(),
                });
            }
        }
        Ok(SizeResult {
            collective: self.coll.id().to_string(),
            datatype: dtype.name().to_string(),
            redop: op.map_or("none".to_string(), |o| o.name().to_string()),
            root: if self.coll.rooted() { root as i64 } else { -1 },
            size_bytes: layout.counts.size_bytes(dtype.size()),
            count: layout.counts.param as u64,
            busbw_factor: self.coll.busbw_factor(n),
            cycle,
            measurements,
        })
    }

    /// -c: fresh inputs, a poisoned result region, one call, and every element
    /// compared with its exact value; returns wrong elements summed over ranks.
    fn validate(
        &mut self,
        layout: &Layout,
        args: &OpArgs,
        placement: Placement,
    ) -> Result<u64, Failure> {
        let elt = args.dtype.size();
        let Counts { recv, .. } = layout.counts;
        let mut wrong = 0;
        for _ in 0..self.plan.check {
            if placement == Placement::OutOfPlace {
                // 0xFF bytes: NaN or -1 or a large unsigned value, never an expected one
                // at these rank counts, so a call that wrote nothing cannot pass.
                self.backend.write(args.recv, &vec![0xFF; recv * elt])?;
            }
            self.write_inputs(layout, args)?;
            self.watchdog
                .begin(self.label(layout, placement, "(validation)"));
            self.watchdog.enter_call();
            self.coll.launch(self.backend, args)?;
            self.backend.synchronize()?;
            self.watchdog.end();
            let mut result = vec![0u8; recv * elt];
            self.backend.read(args.recv, &mut result)?;
            if let Some((rank, index)) = self.corrupt {
                if rank == layout.rank && index < recv {
                    let bad = self.coll.expected(layout, index).unwrap_or(0.0) + 1.0;
                    fill(
                        args.dtype,
                        &mut result[index * elt..(index + 1) * elt],
                        |_| bad,
                    );
                }
            }
            let mine = count_wrong_defined(self.coll, layout, args.dtype, &result);
            self.watchdog
                .begin(self.label(layout, placement, "(validation sum)"));
            self.watchdog.enter_call();
            wrong += self.world.sum_u64(mine);
            self.watchdog.end();
        }
        Ok(wrong)
    }
}

/// Wrong elements among those the collective defines on this rank (none on the
/// non-root ranks of Reduce and Gather).
fn count_wrong_defined(
    coll: &dyn Collective,
    layout: &Layout,
    dtype: DataType,
    result: &[u8],
) -> u64 {
    if result.is_empty() {
        return 0;
    }
    match coll.expected(layout, 0) {
        None => 0,
        Some(_) => count_wrong(dtype, result, |i| {
            coll.expected(layout, i).unwrap_or(f64::NAN)
        }),
    }
}
