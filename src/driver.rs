//! The one driver behind every collective binary, shaped like nccl-tests' common
//! code: agree on arguments, allocate once, then for every datatype, op and root
//! warm up, sweep the sizes, time out-of-place and in-place loops, validate, and
//! hand each size's results to the exporters.

use crate::args::{parse_args, CollArgs, Plan, UsageError};
use crate::backend::mpi::MpiBackend;
use crate::backend::nccl;
use crate::backend::{Backend, BackendInfo, BufRef, OpArgs, Slot};
use crate::collective::{Collective, Counts, Layout};
use crate::datatype::{count_wrong_within, fill, DataType, RedOp};
use crate::job::world::World;
use crate::limits::{self, Detection};
use crate::pattern::Pattern;
use crate::plot::export::PlotExport;
use crate::report::csv::CsvExport;
use crate::report::hist::HistExport;
use crate::report::progress::Progress;
use crate::report::run::{new_run_id, now_utc, relevant_env};
use crate::report::table::Table;
use crate::report::{Exporter, Measurement, Placement, RunInfo, SizeResult, Summary};
use crate::sizes::{human_bytes, sweep, Step};
use crate::stats::{histogram, max_over_ranks, mean_per_rank, slowest, IterStats};
use crate::watchdog::Watchdog;
use mpi::topology::Communicator;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

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
pub(crate) enum Failure {
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
pub(crate) fn agree(world: &World, program: &str, mine: Result<(), String>) -> Result<(), Failure> {
    let failed = world.max_u64(mine.is_err() as u64);
    if let Err(msg) = &mine {
        // One write: lines of ranks sharing mpirun's stderr then never interleave.
        let line = format!(
            "{program}: rank {} ({}): error: {msg}\n",
            world.rank, world.hosts[world.rank]
        );
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
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

/// Picks and opens the backend on every rank alike (`--backend auto` takes nccl only
/// when every rank has CUDA, NCCL and a GPU); returns it with the reason it was chosen.
fn open_backend(
    world: &World,
    program: &str,
    args: &CollArgs,
    plan: &Plan,
    watchdog: &Watchdog,
) -> Result<(Box<dyn Backend>, String), Failure> {
    let nccl_lib = args.nccl_lib.as_deref();
    let (use_nccl, choice) = match args.backend.as_str() {
        "mpi" => (false, "--backend mpi".to_string()),
        "nccl" => (true, "--backend nccl".to_string()),
        _ => {
            let mine = nccl::probe(nccl_lib).err().unwrap_or_default();
            let reasons = world.all_gather_bytes(mine.as_bytes());
            match reasons.iter().position(|r| !r.is_empty()) {
                None => (
                    true,
                    "--backend auto: CUDA, NCCL and a GPU on every rank".into(),
                ),
                Some(r) => (
                    false,
                    format!(
                        "--backend auto: rank {r} ({}) cannot run NCCL: {}",
                        world.hosts[r],
                        String::from_utf8_lossy(&reasons[r])
                    ),
                ),
            }
        }
    };
    if !use_nccl {
        if world.is_root() && args.backend == "auto" && crate::gpu::driver().is_ok() {
            eprintln!("{program}: WARNING: GPUs are present but the mpi backend runs ({choice})");
        }
        let needs_nccl = if plan.gpus_per_process > 1 {
            Some(format!("-g/--ngpus {}", plan.gpus_per_process))
        } else if plan.graph_launches > 0 {
            Some(format!("-G/--cudagraph {}", plan.graph_launches))
        } else {
            None
        };
        if let Some(flag) = needs_nccl {
            return Err(Failure::Usage(format!(
                "{flag}: needs the nccl backend, but the mpi backend runs ({choice})"
            )));
        }
        return Ok((Box::new(MpiBackend::new(world)?), choice));
    }
    let prepared = nccl::prepare(world, nccl_lib, plan.gpus_per_process)
        .map_err(|e| format!("--backend nccl: {e:#}; use --backend mpi for host memory"));
    let prepared = match prepared {
        Ok(p) => {
            agree(world, program, Ok(()))?;
            p
        }
        Err(e) => {
            return Err(agree(world, program, Err(e))
                .err()
                .unwrap_or(Failure::Local(EXIT_FAILED)))
        }
    };
    watchdog.begin("NCCL communicator initialisation".into());
    watchdog.enter_call();
    let connected = nccl::connect(prepared, world);
    watchdog.end();
    match connected {
        Ok(backend) => {
            agree(world, program, Ok(()))?;
            Ok((Box::new(backend), choice))
        }
        Err(e) => Err(agree(world, program, Err(format!("--backend nccl: {e:#}")))
            .err()
            .unwrap_or(Failure::Local(EXIT_FAILED))),
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

fn run(world: &World, coll: &dyn Collective, program: &str) -> Result<u8, Failure> {
    let parsed = parse_args(std::env::args_os());
    agree_on_arguments(world, &parsed)?;
    let args = parsed?;
    let plan = args.plan()?;
    if args.all_pairs {
        return crate::allpairs::mpi::run(world, coll, &args, &plan, program);
    }
    // Before the backend opens: the nccl backend sets NCCL_DEBUG* for its log.
    let env = relevant_env();
    let nranks = world.size * plan.gpus_per_process;
    let roots = plan.root_list(nranks, coll.rooted())?;
    // Started before the backend: NCCL's initialisation is a collective that can hang.
    let watchdog = Watchdog::start(world, program, plan.timeout_s)?;
    let (mut backend, backend_choice) = open_backend(world, program, &args, &plan, &watchdog)?;
    let info = backend.info();

    // Memory: checked before allocating, against what each rank may use.
    let (send_bytes, recv_bytes) = buffer_bytes(&plan, coll, nranks);
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
    // The mpi backend's buffers are host memory too: they share the budget.
    let need = if info.name == "mpi" {
        buffers + staging
    } else {
        buffers
    };
    let memory = match backend.memory_available() {
        Some(budget) if need > budget.bytes => Err(format!(
            "-e/--maxbytes {}: each rank needs {} (buffers {}, host staging {}) but only {} is available to it ({}); \
             lower -e/--maxbytes",
            plan.max_bytes,
            human_bytes(need),
            human_bytes(buffers),
            human_bytes(staging),
            human_bytes(budget.bytes),
            budget.what
        )),
        _ => Ok(()),
    };
    agree(world, program, memory)?;
    let alloc = backend
        .alloc(send_bytes, recv_bytes)
        .map_err(|e| format!("{e:#}"));
    agree(world, program, alloc)?;

    let mut run_info = describe_run(world, program, &plan, &info, backend_choice, env);
    find_limits(world, &args, &mut run_info);
    run_info.planned_results = planned_results(&plan, coll, roots.len());
    if world.is_root() {
        for warning in &run_info.notes {
            eprintln!("{program}: WARNING: {warning}");
        }
    }
    let mut exporters: Vec<Box<dyn Exporter>> = Vec::new();
    if world.is_root() {
        match Progress::on_terminal(run_info.planned_results) {
            Some(bar) => {
                exporters.push(Box::new(Table::new(bar.stdout())));
                exporters.push(Box::new(bar));
            }
            None => exporters.push(Box::new(Table::new(std::io::stdout()))),
        }
    }
    let csv = match (&args.csv, world.is_root()) {
        (Some(path), true) => {
            CsvExport::open(path, args.append).map(|c| exporters.push(Box::new(c)))
        }
        _ => Ok(()),
    };
    agree(world, program, csv.map_err(|e| format!("{e:#}")))?;
    let views = match world.is_root() {
        true => view_exporters(&args).map(|v| exporters.extend(v)),
        false => Ok(()),
    };
    agree(world, program, views.map_err(|e| format!("{e:#}")))?;
    for e in exporters.iter_mut() {
        e.start(&run_info)?;
    }

    let mut bench = Bench {
        world,
        coll,
        local_ranks: backend.devices(),
        nranks,
        checks_in_place: backend.checks_in_place(coll.id()),
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
                        for e in exporters.iter_mut() {
                            e.begin_size(size);
                        }
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

/// What one process tells the others for the header.
#[derive(Serialize, Deserialize)]
struct ProcessFacts {
    pid: u32,
    info: BackendInfo,
}

/// Distinct values in order of first appearance.
fn distinct<T: PartialEq + Clone>(items: impl IntoIterator<Item = T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn describe_run(
    world: &World,
    program: &str,
    plan: &Plan,
    info: &BackendInfo,
    backend_choice: String,
    env: Vec<String>,
) -> RunInfo {
    let step = match plan.step {
        Step::Factor(f) => format!("{f}(factor)"),
        Step::Bytes(b) => format!("{b}(bytes)"),
    };
    let settings_line = format!(
        "nThread 1 nGpus {} minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: {}",
        plan.gpus_per_process,
        plan.min_bytes,
        plan.max_bytes,
        plan.warmup_iters,
        plan.iters,
        plan.check,
        plan.graph_launches
    );
    let mine = ProcessFacts {
        pid: std::process::id(),
        info: info.clone(),
    };
    let all: Vec<ProcessFacts> = world
        .all_gather_bytes(&serde_json::to_vec(&mine).unwrap_or_default())
        .iter()
        .map(|b| {
            serde_json::from_slice(b).unwrap_or_else(|_| ProcessFacts {
                pid: 0,
                info: BackendInfo::default(),
            })
        })
        .collect();
    let mut rank_lines = Vec::new();
    let mut devices = Vec::new();
    for (process, facts) in all.iter().enumerate() {
        for (j, d) in facts.info.devices.iter().enumerate() {
            let rank = process * facts.info.devices.len() + j;
            rank_lines.push(format!(
                "#  Rank {rank:>2} Group  0 Pid {:>6} on {:>10} device {:>2} [{}] {}",
                facts.pid, world.hosts[process], d.ordinal, d.location, d.name
            ));
            devices.push((
                rank,
                if d.location == "host" {
                    "host".to_string()
                } else {
                    format!("{} {}", d.name, d.location)
                },
            ));
        }
    }
    let device = match distinct(devices.iter().map(|(_, d)| d.clone())).as_slice() {
        [one] => one.clone(),
        _ => devices
            .iter()
            .map(|(r, d)| format!("r{r}={d}"))
            .collect::<Vec<_>>()
            .join(";"),
    };
    let transport = distinct(all.iter().map(|f| f.info.transport.clone())).join(" | ");
    let stamp = chrono::Utc::now();
    let mut notes = Vec::new();
    if let Some(warning) = world.launcher_mismatch() {
        notes.push(warning);
    }
    notes.extend(distinct(all.iter().flat_map(|f| f.info.warnings.clone())));
    let launch = if plan.graph_launches > 0 {
        format!("graph x{}", plan.graph_launches)
    } else if plan.blocking {
        "blocking".to_string()
    } else {
        "stream".to_string()
    };
    let mut details = info.notes.clone();
    details.push(match launch.as_str() {
        "stream" => "Launch: calls issued back to back, completion awaited once per loop".to_string(),
        "blocking" => "Launch: -z 1, each call completed on every rank before the next".to_string(),
        _ => format!(
            "Launch: -G {}, the timed calls captured in a CUDA graph launched {} times; validation runs uncaptured",
            plan.graph_launches, plan.graph_launches
        ),
    });
    RunInfo {
        program: program.to_string(),
        run_id: new_run_id(stamp),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        backend: info.name.clone(),
        transport,
        library_version: info.library_version.clone(),
        device,
        hosts: world.nodes(),
        nranks: devices.len(),
        settings_line,
        rank_lines,
        env,
        iters: plan.iters,
        warmup_iters: plan.warmup_iters,
        average: plan.average.name().to_string(),
        checked: plan.check > 0,
        notes,
        backend_choice,
        details,
        launch,
        report_cputime: plan.report_cputime,
        ..RunInfo::default()
    }
}

/// The --hist and --plot exporters (rank 0).
fn view_exporters(args: &CollArgs) -> anyhow::Result<Vec<Box<dyn Exporter>>> {
    let mut views: Vec<Box<dyn Exporter>> = Vec::new();
    if let Some(dir) = &args.hist {
        views.push(Box::new(HistExport::new(dir)?));
    }
    if let Some(dir) = &args.plot {
        views.push(Box::new(PlotExport::new(dir)?));
    }
    Ok(views)
}

/// The run's limits: --limit, else what the nodes' sysfs tells (read by one
/// rank per node, so that a downgraded link on any node is reported).
fn find_limits(world: &World, args: &CollArgs, run: &mut RunInfo) {
    let mine = if world.local_rank == 0 {
        limits::detect(&args.sysfs_root)
    } else {
        Detection::default()
    };
    let encoded = serde_json::to_vec(&mine).expect("a detection serialises");
    let per_host: Vec<(String, Detection)> = world
        .all_gather_bytes(&encoded)
        .iter()
        .zip(&world.hosts)
        .filter_map(|(bytes, host)| Some((host.clone(), serde_json::from_slice(bytes).ok()?)))
        .filter(|(_, d)| *d != Detection::default())
        .collect();
    let detected = limits::merge(&per_host);
    run.limits = limits::choose(&args.limit, &detected);
    run.limits_lines = vec![limits::describe(&run.limits, !args.limit.is_empty())];
    run.limits_lines.extend(detected.found);
    run.notes.extend(detected.warnings);
}

/// Size results the sweep will hand the exporters; None when -N 0 runs until interrupted.
fn planned_results(plan: &Plan, coll: &dyn Collective, roots: usize) -> Option<u64> {
    let ops = if coll.reduces() { plan.ops.len() } else { 1 };
    let sizes = sweep(plan.min_bytes, plan.max_bytes, plan.step).len();
    (plan.run_cycles > 0)
        .then(|| (plan.datatypes.len() * ops * roots * sizes) as u64 * plan.run_cycles)
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
    /// Ranks this process drives (-g) and ranks in the job.
    local_ranks: usize,
    nranks: usize,
    /// Whether -c checks the in-place form on this backend.
    checks_in_place: bool,
    /// Reused for every loop: nothing is allocated around the timed calls.
    per_iteration: Vec<f64>,
}

impl Bench<'_> {
    /// One layout per rank this process drives.
    fn layouts(&self, size: u64, dtype: DataType, op: Option<RedOp>, root: usize) -> Vec<Layout> {
        let counts = self.coll.counts(
            (size / dtype.size() as u64) as usize,
            dtype.size(),
            self.nranks,
        );
        (0..self.local_ranks)
            .map(|local| Layout {
                rank: self.world.rank * self.local_ranks + local,
                nranks: self.nranks,
                root,
                counts,
                pattern: Pattern::new(dtype, op.unwrap_or(RedOp::Sum), self.nranks),
            })
            .collect()
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
        let device = rank % self.local_ranks;
        let at = |slot, offset| BufRef {
            device,
            slot,
            offset,
        };
        let (send, recv) = match placement {
            Placement::OutOfPlace => (at(Slot::Send, 0), at(Slot::Recv, 0)),
            Placement::InPlace => (
                at(Slot::Recv, rank * counts.send_inplace_offset * elt),
                at(Slot::Recv, rank * counts.recv_inplace_offset * elt),
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

    /// One collective over this process's ranks: grouped when it drives several.
    fn launch(&mut self, args: &[OpArgs]) -> anyhow::Result<()> {
        if let [one] = args {
            return self.coll.launch(self.backend, one);
        }
        self.backend.group_start()?;
        for a in args {
            self.coll.launch(self.backend, a)?;
        }
        self.backend.group_end()
    }

    fn write_inputs(&mut self, layouts: &[Layout], args: &[OpArgs]) -> anyhow::Result<()> {
        for (layout, a) in layouts.iter().zip(args) {
            let mut bytes = vec![0u8; layout.counts.send * a.dtype.size()];
            fill(a.dtype, &mut bytes, |i| {
                layout.pattern.input(layout.rank, i)
            });
            self.backend.write(a.send, &bytes)?;
        }
        Ok(())
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
            let layouts = self.layouts(size, dtype, op, root);
            let args: Vec<OpArgs> = layouts
                .iter()
                .map(|l| self.op_args(l, Placement::OutOfPlace))
                .collect();
            for _ in 0..self.plan.warmup_iters {
                self.watchdog.enter_call();
                self.launch(&args)?;
            }
        }
        self.backend.synchronize()?;
        self.watchdog.end();
        Ok(())
    }

    /// The timed loop of one placement: seconds per call (from the backend's clock),
    /// CPU seconds to issue one call, and per-iteration times in `per_iteration`.
    fn time_loop(&mut self, args: &[OpArgs]) -> anyhow::Result<(f64, f64)> {
        let iters = self.plan.iters;
        let graph = self.plan.graph_launches;
        if graph > 0 {
            self.backend.begin_capture()?;
        }
        self.backend.timer_start(iters)?;
        let mut issued = Instant::now();
        for _ in 0..iters {
            self.watchdog.enter_call();
            self.launch(args)?;
            self.backend.mark();
            if self.plan.blocking {
                self.backend.synchronize()?;
                self.world.barrier();
            }
        }
        let mut calls = iters;
        if graph > 0 {
            self.backend.end_capture()?;
            // As nccl-tests: every rank has its graph before any replay starts.
            self.world.barrier();
            issued = Instant::now();
            self.backend.replay(graph)?;
            calls = iters * graph;
        }
        let cpu = issued.elapsed().as_secs_f64() / calls as f64;
        self.backend.synchronize()?;
        let total = self.backend.timer_read(&mut self.per_iteration)?;
        Ok((total / calls as f64, cpu))
    }

    fn measure_size(
        &mut self,
        size: u64,
        dtype: DataType,
        op: Option<RedOp>,
        root: usize,
        cycle: u64,
    ) -> Result<SizeResult, Failure> {
        let layouts = self.layouts(size, dtype, op, root);
        let layout = layouts[0];
        let n = self.nranks;
        let mut measurements = Vec::new();
        for placement in Placement::BOTH {
            let args: Vec<OpArgs> = layouts.iter().map(|l| self.op_args(l, placement)).collect();
            self.write_inputs(&layouts, &args)?;
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
            let (seconds_per_call, cpu_per_call) = self.time_loop(&args)?;
            self.watchdog.end();

            let wrong = match placement {
                _ if self.plan.check == 0 => None,
                Placement::InPlace if !self.checks_in_place => None,
                _ => Some(self.validate(&layouts, &args, placement)?),
            };

            let iters = self.plan.iters;
            let mut mine = Vec::with_capacity(iters + 2);
            mine.push(seconds_per_call);
            mine.push(cpu_per_call);
            mine.extend_from_slice(&self.per_iteration);
            let gathered = self.world.gather_f64s(&mine);
            if let Some(all) = gathered {
                let per_process = all.chunks_exact(iters + 2);
                let per_rank_time: Vec<f64> = per_process.clone().map(|c| c[0]).collect();
                let per_rank_cpu: Vec<f64> = per_process.clone().map(|c| c[1]).collect();
                let per_iter: Vec<f64> = per_process.flat_map(|c| c[2..].to_vec()).collect();
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
                    cpu_us: Some(self.plan.average.combine(&per_rank_cpu) * 1e6),
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
        layouts: &[Layout],
        args: &[OpArgs],
        placement: Placement,
    ) -> Result<u64, Failure> {
        let layout = layouts[0];
        let elt = layout.pattern.dtype.size();
        let Counts { recv, .. } = layout.counts;
        let tolerance =
            self.backend
                .tolerance(layout.pattern.dtype, layout.pattern.op, self.nranks);
        let mut wrong = 0;
        for _ in 0..self.plan.check {
            if placement == Placement::OutOfPlace {
                // 0xFF bytes: NaN or -1 or a large unsigned value, never an expected one
                // at these rank counts, so a call that wrote nothing cannot pass.
                for a in args {
                    self.backend.write(a.recv, &vec![0xFF; recv * elt])?;
                }
            }
            self.write_inputs(layouts, args)?;
            self.watchdog
                .begin(self.label(&layout, placement, "(validation)"));
            self.watchdog.enter_call();
            self.launch(args)?;
            self.backend.synchronize()?;
            self.watchdog.end();
            let mut mine = 0;
            for (l, a) in layouts.iter().zip(args) {
                let mut result = vec![0u8; recv * elt];
                self.backend.read(a.recv, &mut result)?;
                if let Some((rank, index)) = self.corrupt {
                    if rank == l.rank && index < recv {
                        let bad = self.coll.expected(l, index).unwrap_or(0.0) + 1.0;
                        fill(a.dtype, &mut result[index * elt..(index + 1) * elt], |_| {
                            bad
                        });
                    }
                }
                mine += count_wrong_defined(self.coll, l, a.dtype, &result, tolerance);
            }
            self.watchdog
                .begin(self.label(&layout, placement, "(validation sum)"));
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
    tolerance: f64,
) -> u64 {
    if result.is_empty() {
        return 0;
    }
    match coll.expected(layout, 0) {
        None => 0,
        Some(_) => count_wrong_within(dtype, result, tolerance, |i| {
            coll.expected(layout, i).unwrap_or(f64::NAN)
        }),
    }
}
